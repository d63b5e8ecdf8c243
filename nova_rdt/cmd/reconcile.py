"""``nova-rdt reconcile``: clean up after dead domains, re-apply classes."""

from __future__ import annotations

import dataclasses
import json
import os
import sys

from nova_rdt.cmd import common


def register(sub) -> None:
    rec = sub.add_parser(
        "reconcile", help="remove groups of domains that are gone, re-add "
                          "running instances to their classes, resync the "
                          "PMD COS; never touches foreign groups")
    common.add_settings_args(rec)
    rec.set_defaults(func=reconcile)


# Exit status when something could not be repaired (the report's
# ``degraded`` says what); distinct from 2, a usage or configuration error.
EXIT_DEGRADED = 3


def reconcile(args) -> int:
    """Exit 0 when the host converged, even when some records were
    unusable: the report names each one (``unreadable_records``) and
    everything else was done.  Exit 3 when something else could not be
    repaired (resctrl unavailable, the state path full or read-only, a
    running instance's group not re-created): ``degraded`` names each,
    and each was logged once.

    A controller that died without restoring its classes left them
    throttled: they go back to their static values first (nothing is
    done while it runs, or after it stopped cleanly).  Here and not in
    the agent, because the controller builds on the host side.
    """
    from nova_rdt.controller import state as controller_state
    from nova_rdt.hook import adopt
    from nova_rdt.host import recovery
    from nova_rdt.host.agent import Agent
    from nova_rdt.host.agent import ReconcileReport

    settings = common.settings(args)
    agent = Agent(settings)
    state_file = os.path.join(settings.state_path, "controller.json")
    if args.config_file:
        conf = common.load_conf(args.config_file)
        state_file = conf.rdt_controller.state_file or state_file
    restored: list[str] = []
    unreadable: list[str] = []
    degraded: list[str] = []
    try:
        restored = controller_state.restore(agent.fs, state_file)
    except controller_state.StateError as e:
        unreadable.append(f"{state_file}: {e}")
        degraded.append(f"controller_state: {state_file}: {e}")
    except Exception as e:
        # resctrl gone: the agent's reconcile below says so, once.
        if not recovery.resctrl_lost(e):
            raise
    adopted = ReconcileReport()
    if recovery.probe_resctrl(agent.fs.root) is None:
        adopt.adopt(agent, adopted)
    result = agent.reconcile()
    result.adopted = adopted.adopted
    report = dataclasses.asdict(result)
    report["controller_restored"] = restored
    report["unreadable_records"] = report["unreadable_records"] + unreadable
    report["degraded"] = report["degraded"] + degraded
    json.dump(report, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    hard = [d for d in report["degraded"]
            if not d.startswith(("records_unreadable:",
                                 "controller_state:"))]
    return EXIT_DEGRADED if hard else 0
