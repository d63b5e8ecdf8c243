"""``nova-rdt lab`` options, and the order things must happen in: the
log file first (so that what Nova's start-up says lands there), then
eventlet's patching, then Nova's test framework, then the stages."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
import os
import sys

from nova_rdt.cmd import common
from nova_rdt.emulator import profiles
from nova_rdt.emulator import versions
from nova_rdt.lab import scenarios as scen_mod
from nova_rdt.lab.demo import console

LOG = logging.getLogger(__name__)

DESCRIPTION = ("the seed documents' scenarios end to end on this machine: "
               "Host lab, Nova, libvirt, OVS-DPDK, exporter, RFC 2544")

# The seed documents: the published experiments whose layouts and results
# the lab reproduces; doc/source/seeds.rst says what each one contributes.
EPILOG = ("Seed documents (doc/source/seeds.rst): onp is Intel's ONP "
          "application note on CAT for NFV (seed 004), its Table 3-1 "
          "layout; isolation is that note's experiment (its Tables 3-2/3-3 "
          "and Figures 3-2/3-3); mba is the MBA article's layout "
          "(2S Xeon Gold 6252); cat is the CAT article's (4S Xeon E7-8890 "
          "v4).  Exit status: 0 every stage ran and every relation held, "
          "1 a stage failed or a relation did not hold (the report says "
          "which), 2 a bad flag, 130 interrupted.")

# Experiments rather than layouts: each has its own runner, whose run()
# takes the options below (nova_rdt.lab.run.LabRun is its run).
EXPERIMENTS = {
    "isolation": "a forwarding VM beside a noisy neighbour, RFC 2544 "
                 "under four conditions",
    "faults": "every failpoint and fault, then recovery",
    "cloud": "an all-in-one cloud, every OpenStack service a real "
             "process, serving until Ctrl-C (--short: the user's tools "
             "and Tempest against it, then stop)",
}


@dataclasses.dataclass(frozen=True)
class Runner:
    module: str
    #: Runs Nova's functional framework in this process: eventlet must
    #: patch first, and Nova's fixtures take the root logger.
    nova_in_process: bool = True


RUNNERS = {
    "isolation": Runner("nova_rdt.lab.isolation.runner"),
    "faults": Runner("nova_rdt.lab.faults.runner"),
    "cloud": Runner("nova_rdt.lab.allinone.runner", nova_in_process=False),
}
#: The seed layouts (nova_rdt.lab.scenarios) share one runner.
LAYOUT_RUNNER = Runner("nova_rdt.lab.demo.runner")


def runner_for(scenario: str) -> Runner:
    return RUNNERS.get(scenario, LAYOUT_RUNNER)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="nova-rdt lab", description=DESCRIPTION,
                                 epilog=EPILOG)
    ap.add_argument("--scenario",
                    choices=sorted(scen_mod.SCENARIOS) + sorted(EXPERIMENTS),
                    default="onp",
                    help="a seed document's layout (onp, mba, cat; "
                         "default: %(default)s), or an "
                         "experiment: " + "; ".join(
                             f"{k}: {v}" for k, v in
                             sorted(EXPERIMENTS.items())))
    ap.add_argument("--profile", help="emulated host profile (default: the "
                                      "scenario's)")
    ap.add_argument("--out", default="nova-rdt-lab-report", type=common.path,
                    help="report directory, with the run's log "
                         "(default: %(default)s)")
    ap.add_argument("--short", action="store_true",
                    help="fewer boots and a one-frame-size RFC 2544")
    ap.add_argument("--resctrl", choices=["auto", "emulated", "real"],
                    default="emulated",
                    help="emulated (default), or the machine's own resctrl "
                         "(real, or auto: real when mounted); the lab then "
                         "shrinks its root group, as nova-compute would")
    ap.add_argument("--kernel",
                    help="the kernel release the emulated resctrl behaves "
                         "as, e.g. 6.1 (default: the emulator's)")
    ap.add_argument("--libvirt-cache-dir", type=common.path,
                    help="reuse QEMU's capability probe across runs")
    ap.add_argument("--computes", type=int, choices=[1, 2], default=1,
                    help="cloud only: 2 adds a second compute (its own "
                         "libvirtd, resctrl, hook and nova-compute) and, "
                         "with --short, moves RDT instances between them "
                         "(default: %(default)s)")
    return ap


def _check(ap: argparse.ArgumentParser, args) -> None:
    """Bad option values as usage errors that name the option."""
    if args.profile:
        try:
            profiles.get(args.profile)
        except ValueError as e:
            ap.error(f"--profile: {e}")
    if args.computes != 1 and args.scenario != "cloud":
        ap.error("--computes applies to --scenario cloud only")
    if args.kernel:
        if args.resctrl == "real":
            ap.error("--kernel applies to the emulated resctrl only, not "
                     "to --resctrl real")
        try:
            versions.parse(args.kernel)
        except ValueError as e:
            ap.error(f"--kernel: {e}")


def patch_eventlet() -> None:
    """Nova's eventlet patching: before anything imports oslo.messaging
    (idempotent, so a caller may have done it already)."""
    from nova import monkey_patch
    monkey_patch.patch()


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    _check(ap, args)
    os.makedirs(args.out, exist_ok=True)
    say = console.Console()
    spec = runner_for(args.scenario)
    with console.LogFile(os.path.join(args.out, console.LOG_FILE)) as logs:
        if spec.nova_in_process:
            patch_eventlet()
        # Imported only now: most import Nova's test framework, which
        # needs the patching above and sets up oslo.log on stdout (taken
        # back by claim()).
        runner = importlib.import_module(spec.module)
        logs.claim()
        extra = ({"computes": args.computes} if args.computes != 1
                 else {})
        try:
            summary = runner.run(
                args.scenario, args.profile, args.out, args.short,
                args.resctrl, say=say,
                libvirt_cache_dir=args.libvirt_cache_dir,
                kernel=args.kernel, logs=logs, **extra)
        except KeyboardInterrupt:
            print("interrupted; everything was stopped", file=sys.stderr)
            return 130
        except Exception as e:
            LOG.exception("nova-rdt lab failed")
            from nova_rdt.lab.run import describe
            print(f"nova-rdt lab failed: {describe(e)} (details in "
                  f"{logs.path})",
                  file=sys.stderr)
            return 1
    return 0 if summary.get("ok") else 1
