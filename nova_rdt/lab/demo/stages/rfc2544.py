"""Stage 6, second half: a short RFC 2544 run (software generator)
between the lab's two traffic ports, across OVS-DPDK, through the
engine's public API; its report goes to ``<out>/rfc2544``."""

from __future__ import annotations

import os

from nova_rdt.rfc2544 import cli as rfc2544_cli
from nova_rdt.rfc2544 import engine
from nova_rdt.rfc2544 import report
from nova_rdt.rfc2544 import search
from nova_rdt.rfc2544.generators.software import SoftwareGenerator
from nova_rdt.rfc2544.generators.software import cpus_beside

# The seed's frame sizes (ONP app note, Table 3-2) and its 2000 flows.
SEED_FRAME_SIZES = (64, 256, 1024, 1512)
FLOWS = 2000


#: The ONP app note's goal in RFC 9971's terms: 0.1% loss, 1 s trials (a
#: software generator's trials; no shorter ones to explore with), the
#: result and one verification pass at full length.
GOAL = search.SearchGoal(loss_ratio=0.001, final_trial_duration=1.0,
                         duration_sum=2.0)


def config(short: bool) -> engine.RunConfig:
    return engine.RunConfig(
        frame_sizes=(64,) if short else SEED_FRAME_SIZES, label="lab",
        search=search.SearchConfig(loss_tolerance=0.001, resolution=0.02,
                                   trial_duration=1.0, probe_duration=0.5,
                                   max_trials=16 if short else 30),
        latency_duration=1.0, latency_load=0.9, goals=(GOAL,))


def progress_line(ev: dict) -> str | None:
    """The console's line for one engine event (None: not shown).

    The engine's own wording: a trial that sent less than offered, and a
    not-converged or generator-limited result, always carry their mark.
    """
    if ev["event"] not in ("trial", "result"):
        return None
    line = rfc2544_cli.progress_line(ev)
    return None if line is None else "  " + line


def run(lab, out_dir: str, short: bool, say) -> dict:
    """The run; returns its report document (report.to_dict)."""
    # Off the PMD cores: a sender sharing a PMD's core starves the
    # forwarder it measures.
    cpus = cpus_beside(lab.ovs.pmd_cpu_mask)
    gen = SoftwareGenerator(lab.traffic.pairs[0][1], lab.traffic.pairs[1][1],
                            netns=lab.traffic.name, flows=FLOWS,
                            bidirectional=True, cpus=cpus)

    def progress(ev):
        line = progress_line(ev)
        if line is not None:
            say(line)

    say(f"RFC 2544 (software generator, {FLOWS} flows both ways, on CPUs "
        f"{','.join(map(str, cpus)) if cpus else 'any'}) across OVS-DPDK:")
    result = engine.run(gen, config(short), progress)
    report.write(result, os.path.join(out_dir, "rfc2544"))
    return report.to_dict(result)
