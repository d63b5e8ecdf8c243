"""The stages of ``nova-rdt lab`` in order; the clean-up that always
runs (on failure, Ctrl-C and SIGTERM too) is :class:`~nova_rdt.lab.run.
LabRun`'s.

Importing this module imports Nova's test framework (through
:mod:`.stages.nova`): eventlet must be patched first.
"""

from __future__ import annotations

import dataclasses
import os

from nova_rdt.lab import scenarios as scen_mod
from nova_rdt.lab.demo import console
from nova_rdt.lab.demo import report
from nova_rdt.lab.demo.stages import exporter as exporter_stage
from nova_rdt.lab.demo.stages import host as host_stage
from nova_rdt.lab.demo.stages import libvirt as libvirt_stage
from nova_rdt.lab.demo.stages import nova as nova_stage
from nova_rdt.lab.demo.stages import rfc2544 as rfc2544_stage
from nova_rdt.lab.demo.stages import show as show_stage
from nova_rdt.lab.host import Lab
from nova_rdt.lab.run import LabRun


def run(scenario_name: str = "onp", profile: str | None = None,
        out_dir: str = "nova-rdt-lab-report", short: bool = False,
        resctrl: str = "emulated", say: console.Console | None = None,
        libvirt_cache_dir: str | None = None, kernel: str | None = None,
        logs: console.LogFile | None = None) -> dict:
    """Every stage; returns the summary (also in ``summary.json``).

    ``logs``: where the log records go (default: ``<out_dir>/lab.log``).
    """
    scenario = scen_mod.SCENARIOS[scenario_name]
    if profile:
        scenario = dataclasses.replace(scenario, profile=profile)
    with LabRun(scenario.name, out_dir, say, logs) as run:
        say, summary = run.say, run.summary
        run.say_summary = _say_summary
        lab = run.lab = Lab(
            profile=scenario.profile, resctrl=resctrl, kernel=kernel,
            hook={"pmd_cos": scenario.pmd_cos,
                  "reserved_host_ways": scenario.reserved_host_ways,
                  "pmd_shared_ways": scenario.pmd_shared_ways,
                  "classes": list(scenario.classes)},
            failure_log_dir=os.path.join(out_dir, "failure-logs"),
            libvirt_cache_dir=libvirt_cache_dir, log=say)
        exporter = exporter_stage.Exporter(lab,
                                           exporter_stage.log_path(out_dir))
        run.cleanup("stopping the exporter", exporter.stop)
        say(f"nova-rdt lab: {scenario.title}")
        host_stage.start(lab, scenario, say)
        try:
            nova = nova_stage.run(lab, scenario, say, out_dir, short)
        finally:
            # Nova's fixtures swap the root logger's handlers.
            run.logs.claim()
        summary.update(bad_spec=nova.bad_spec,
                       no_valid_host=nova.no_valid_host,
                       filter_reasons=nova.filter_reasons)
        libvirt_stage.show(lab, scenario, nova, say)
        shown = show_stage.run(lab, scenario, nova, out_dir, say)
        summary["relations"] = shown.relations

        say.stage(6, "Measure")
        url = exporter.start()
        metrics = exporter.metrics()
        say(f"exporter on {url} ({len(metrics.splitlines())} metric lines)")
        rfc = rfc2544_stage.run(lab, out_dir, short, say)
        summary["report"] = report.render(
            out_dir, scenario=scenario, emulated=lab.emulated,
            emulation_note=host_stage.EMULATION_NOTE,
            layout=exporter.layout(), way_map=shown.way_map,
            cos_table=shown.cos_table, seed_table=shown.seed_table,
            relations=shown.relations, bad_spec=nova.bad_spec,
            no_valid_host=nova.no_valid_host,
            filter_reasons=nova.filter_reasons, rfc=rfc, metrics=metrics,
            log_file=summary["log_file"])
        say(f"HTML report: {summary['report']}")
        summary["ok"] = all(ok for _t, ok in shown.relations)
    return run.summary


def _say_summary(say, summary: dict) -> None:
    relations = summary.get("relations") or []
    held = sum(1 for _t, ok in relations if ok)
    verdict = "OK" if summary.get("ok") else "FAILED"
    say(f"{verdict}: {held}/{len(relations)} relations hold")
    if summary.get("report"):
        say(f"report:  {summary['report']}")
    say(f"summary: {os.path.join(summary['out_dir'], 'summary.json')}")
    say(f"logs:    {summary['log_file']} (Nova, libraries, warnings); "
        f"the exporter's in "
        f"{exporter_stage.log_path(summary['out_dir'])}")
