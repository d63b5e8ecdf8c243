"""What the agent's parts share: the host they act on, and how they fail.

The agent (:mod:`nova_rdt.host.agent`) is made of parts with one job
each: a domain's events (:mod:`~nova_rdt.host.lifecycle`), libvirt's
group of a domain (:mod:`~nova_rdt.host.domaingroup`), class groups
(:mod:`~nova_rdt.host.classes`), the PMD COS (:mod:`~nova_rdt.host.pmdcos`)
and reconcile (:mod:`~nova_rdt.host.reconcile`).  They act on one host,
given here once, and read resctrl the same way.
"""

from __future__ import annotations

import dataclasses
import logging
import os

from nova_rdt import exception
from nova_rdt.allocation import rdtclass
from nova_rdt.host import records as records_mod
from nova_rdt.host.settings import HookSettings
from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import errors
from nova_rdt.resctrl.groups import Resctrl

# One logger for every part: its lines land in libvirtd's log through the
# hook, where the operator reads them as the hook's.
LOG = logging.getLogger("nova_rdt.hook")


class IsolationError(exception.NovaRdtError, RuntimeError):
    """Isolation could not be applied to a domain."""


@dataclasses.dataclass(frozen=True)
class HostContext:
    """The host an agent acts on: its settings, resctrl, the hook's
    records and the classes ``[rdt] classes`` defines."""

    settings: HookSettings
    fs: Resctrl
    records: records_mod.Records
    classes: dict[str, rdtclass.RdtClass]


def threads(pid: int) -> list[int]:
    """The thread ids of process ``pid``; none once it is gone."""
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return []


def taken(fs: Resctrl, caps: caps_mod.Capabilities, skip: set[str]
          ) -> dict[str, dict[int, int]]:
    """Per cache resource and id, the union of the masks of every control
    group (the root's, foreign ones' included) but ``skip``.  A group that
    cannot be read (removed meanwhile by libvirt) counts for nothing."""
    out: dict[str, dict[int, int]] = {}
    for g in fs.groups(with_mon=False):
        if g.kind != "ctrl" or g.name in skip:
            continue
        try:
            s = g.schemata()
        except errors.ResctrlError:
            continue
        for res in s.resources():
            if res not in caps.cache:
                continue
            per = out.setdefault(res, {})
            for cid, mask in s.domains(res).items():
                per[cid] = per.get(cid, 0) | mask
    return out
