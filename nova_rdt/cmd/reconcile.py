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


def reconcile(args) -> int:
    """Exit 0 even when some records were unusable: the report names
    each one (``unreadable_records``) and everything else was done.

    A controller that died without restoring its classes left them
    throttled: they go back to their static values first (nothing is
    done while it runs, or after it stopped cleanly).  Here and not in
    the agent, because the controller builds on the host side.
    """
    from nova_rdt.controller import state as controller_state
    from nova_rdt.host.agent import Agent

    settings = common.settings(args)
    agent = Agent(settings)
    state_file = os.path.join(settings.state_path, "controller.json")
    if args.config_file:
        conf = common.load_conf(args.config_file)
        state_file = conf.rdt_controller.state_file or state_file
    restored: list[str] = []
    unreadable: list[str] = []
    try:
        restored = controller_state.restore(agent.fs, state_file)
    except controller_state.StateError as e:
        unreadable.append(f"{state_file}: {e}")
    report = dataclasses.asdict(agent.reconcile())
    report["controller_restored"] = restored
    report["unreadable_records"] = report["unreadable_records"] + unreadable
    json.dump(report, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0
