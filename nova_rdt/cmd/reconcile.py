"""``nova-rdt reconcile``: clean up after dead domains, re-apply classes."""

from __future__ import annotations

import dataclasses
import json
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
    each one (``unreadable_records``) and everything else was done."""
    from nova_rdt.host.agent import Agent

    report = Agent(common.settings(args)).reconcile()
    json.dump(dataclasses.asdict(report), sys.stdout, indent=2,
              sort_keys=True)
    sys.stdout.write("\n")
    return 0
