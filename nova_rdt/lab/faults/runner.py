"""``nova-rdt lab --scenario faults``: every failpoint and host fault the
lab can reach, each followed by recovery and a check that the resctrl
groups, the hook's records, the driver's claims and the running VMs
agree again, with nothing leaked and no foreign group touched.

Importing this module imports Nova's test framework (through
:mod:`.cloud`): eventlet must be patched first.
"""

from __future__ import annotations

import json
import os
import time

from nova_rdt import failpoints
from nova_rdt.lab.cloud import lab_cloud
from nova_rdt.lab.demo import console
from nova_rdt.lab.faults import cloud as cloud_mod
from nova_rdt.lab.faults import hostfaults
from nova_rdt.lab.faults import plan
from nova_rdt.lab.faults import steps
from nova_rdt.lab.faults import table
from nova_rdt.lab.host import Lab
from nova_rdt.lab.nova_paste import nova_api_paste_ini
from nova_rdt.lab.procs import LabError
from nova_rdt.lab.run import LabRun

PROFILE = "gold-6252"
RESERVED_HOST_WAYS = 3



def _cloud_config(lab, out_dir: str, profile) -> lab_cloud.CloudConfig:
    s = lab.hook_settings(host_view=True)
    return lab_cloud.CloudConfig(
        profile=profile.name, numa_nodes=profile.domains,
        resctrl_root=lab.resctrl_root,
        rdt_flags=dict(
            reserved_host_ways=RESERVED_HOST_WAYS, pmd_shared_ways=0,
            pmd_cos=True, classes=list(cloud_mod.CLASSES),
            state_path=s.state_path, ovsdb_connection=s.ovsdb_connection,
            ovs_vswitchd_pidfile=s.ovs_vswitchd_pidfile,
            ovs_vswitchd_target=s.ovs_vswitchd_target,
            libvirt_qemu_run_dir=s.libvirt_qemu_run_dir),
        no_resctrl_dir=os.path.join(out_dir, "no-resctrl"),
        api_paste_config=nova_api_paste_ini())


def run(scenario_name: str = "faults", profile: str | None = None,
        out_dir: str = "nova-rdt-lab-report", short: bool = False,
        resctrl: str = "emulated", say: console.Console | None = None,
        libvirt_cache_dir: str | None = None, kernel: str | None = None,
        logs: console.LogFile | None = None) -> dict:
    """Every run; returns the summary (``<out>/summary.json``, and the
    runs in ``<out>/faults/summary.json``)."""
    if resctrl != "emulated":
        raise LabError("the faults scenario loses and kills resctrl: it "
                       "runs on the emulated one only (--resctrl emulated)")
    fdir = os.path.join(out_dir, "faults")
    os.makedirs(fdir, exist_ok=True)
    runs = plan.runs(failpoints.REGISTRY, short=short)
    with LabRun(scenario_name, out_dir, say, logs) as run:
        say, summary = run.say, run.summary
        run.say_summary = _say_summary
        summary.update({"short": short, "runs": [], "totals": {},
                        "not_reached": plan.not_reached(
                            failpoints.REGISTRY)})
        run.finishers.append(lambda s: _write_runs(fdir, s))
        lab = run.lab = Lab(
            profile=profile or PROFILE, resctrl="emulated", kernel=kernel,
            hook={"pmd_cos": True, "reserved_host_ways": RESERVED_HOST_WAYS,
                  "pmd_shared_ways": 0, "classes": list(cloud_mod.CLASSES)},
            failure_log_dir=os.path.join(out_dir, "failure-logs"),
            libvirt_cache_dir=libvirt_cache_dir, log=say)
        state_fs = hostfaults.StateFs(lab.state_path)
        kept = os.path.join(fdir, "lab-logs")
        run.stop_note = f" (lab logs in {kept})"
        # Run last registered first: the logs, the state tmpfs, then a
        # dead emulator's mount, before the lab stops.
        run.cleanup("unmounting a dead emulator",
                    lambda: hostfaults.unmount_dead_emulator(lab))
        run.cleanup("unmounting the state tmpfs", state_fs.unmount)
        run.cleanup("keeping the lab's logs", lambda: lab.keep_logs(kept))
        say(f"nova-rdt lab: faults ({len(runs)} runs"
            f"{', short' if short else ''})")
        run.stage("Host")
        # Before the namespace: its copy of the mount shares the tmpfs.
        state_fs.mount()
        lab.start()
        say(f"libvirtd ({lab.libvirt.domain_type}), OVS-DPDK, emulated "
            f"{lab.profile.name}; state path {lab.state_path} on a "
            f"{hostfaults.STATE_FS_SIZE} tmpfs")
        try:
            summary["runs"] = cloud_mod.run_in_cloud(
                _cloud_config(lab, out_dir, lab.profile),
                lambda cloud: _in_cloud(cloud, lab, state_fs, runs, out_dir,
                                        run))
        finally:
            run.logs.claim()
        summary["totals"] = plan.totals(summary["runs"])
        t = summary["totals"]
        summary["ok"] = bool(summary["runs"]) and t["not_converged"] == 0 \
            and not t["foreign_touched"] and not t["pmd_mask_invalid"]
    return run.summary


def _write_runs(fdir: str, summary: dict) -> None:
    with open(os.path.join(fdir, "summary.json"), "w") as f:
        json.dump({"runs": summary["runs"], "totals": summary["totals"],
                   "not_reached": summary["not_reached"]},
                  f, indent=2, default=str)


def _in_cloud(cloud, lab, state_fs, runs, out_dir, run) -> list[dict]:
    say = run.say
    run.stage("Nova and the known state")
    cloud.start_lab_computes()
    servers = cloud_mod.Servers(cloud, lab,
                                lab.hook_settings(host_view=True).state_path,
                                out_dir)
    servers.create_flavors()
    harness = steps.Harness(lab, servers, state_fs, say)
    said = harness.baseline()
    say(f"one PMD-sharing VM and one class member: {said}; foreign "
        f"groups: {', '.join(sorted(harness.foreign_before))}")
    run.stage("Faults")
    results = []
    for i, r in enumerate(runs, 1):
        t0 = time.monotonic()
        res = harness.run(r)
        res["seconds_total"] = round(time.monotonic() - t0, 1)
        results.append(res)
        mark = "ok " if res["converged"] else "FAIL"
        took = (f"{res['seconds_to_converge']:.1f}s"
                if res["seconds_to_converge"] is not None else "-")
        say(f"  [{i:2}/{len(runs)}] {mark} {r.fault:17} {r.point:34} "
            f"{r.operation:12} converged in {took}"
            + ("" if res["converged"] else f": {res['why'][:200]}"))
    say("")
    say(table.render(results))
    return results


def _say_summary(say, summary: dict) -> None:
    t = summary.get("totals") or {}
    verdict = "OK" if summary.get("ok") else "FAILED"
    say(f"{verdict}: {t.get('converged', 0)}/{t.get('runs', 0)} runs "
        f"converged, {t.get('distinct_pairs', 0)} (fault, point) pairs, "
        f"{len(t.get('faults', []))} fault classes; leaked groups "
        f"{t.get('leaked_groups', 0)}, claims {t.get('leaked_claims', 0)}, "
        f"records {t.get('leaked_records', 0)}; foreign touched "
        f"{t.get('foreign_touched', 0)}; in {summary.get('seconds')}s")
    for point, why in sorted((summary.get("not_reached") or {}).items()):
        say(f"not reached: {point}: {why}")
    path = os.path.join(summary["out_dir"], "faults", "summary.json")
    say(f"summary: {path}")
    say(f"logs:    {summary['log_file']}")
