"""What the agent's parts share: the host they act on, and how they fail.

The agent (:mod:`nova_rdt.host.agent`) is made of parts with one job
each: a domain's events (:mod:`~nova_rdt.host.lifecycle`), libvirt's
group of a domain (:mod:`~nova_rdt.host.domaingroup`), class groups
(:mod:`~nova_rdt.host.classes`), the PMD COS (:mod:`~nova_rdt.host.pmdcos`)
and reconcile (:mod:`~nova_rdt.host.reconcile`).  They act on one host,
given here once, and read resctrl the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
import dataclasses
import logging
import os

from nova_rdt import exception
from nova_rdt import naming
from nova_rdt.allocation import rdtclass
from nova_rdt.host import records as records_mod
from nova_rdt.host.settings import HookSettings
from nova_rdt.resctrl import errors
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.schemata import Schemata

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


def collect(fs: Resctrl):
    """One walk of resctrl's groups (a HostView) for planning: no
    ``tasks`` file is read (the root's lists every thread on the host,
    and no plan counts them)."""
    from nova_rdt.resctrl.hostview import HostView
    return HostView.collect(fs, tasks=False)


class Snapshot:
    """resctrl's control groups as one event read them, once, under the
    lock, with the capabilities known per mount.  What the event writes
    is laid over it (the schemata the kernel kept), so each later step
    reads what is there without walking resctrl again."""

    def __init__(self, fs: Resctrl):
        self.caps = fs.capabilities()
        self.schemata: dict[str, Schemata] = {}
        self.tasks: dict[str, frozenset[int]] = {}
        self.cpus: dict[str, tuple[int, ...]] = {}
        self._owner = fs.owner_of_name
        pmd = naming.pmd_group(fs.prefix)
        for g in fs.groups(with_mon=False):
            if g.kind != "ctrl":
                continue
            name = "/" if g.is_root else g.name
            try:
                schemata = g.schemata()
                tasks = frozenset() if g.is_root else frozenset(g.tasks())
                cpus = tuple(sorted(g.cpus())) if g.name == pmd else ()
            except errors.ResctrlError:
                continue          # removed meanwhile by libvirt
            self.schemata[name], self.tasks[name] = schemata, tasks
            self.cpus[name] = cpus

    def holding(self, tids: Iterable[int]) -> str | None:
        """The control group (other than root) holding any of ``tids``."""
        wanted = set(tids)
        return next((n for n, t in sorted(self.tasks.items())
                     if n != "/" and wanted & t), None)

    def taken(self, skip: set[str]) -> dict[str, dict[int, int]]:
        """Per cache resource and id, the union of the masks of every
        control group (the root's, foreign ones' included) but
        ``skip``."""
        out: dict[str, dict[int, int]] = {}
        for name, s in self.schemata.items():
            if name in skip:
                continue
            for res in s.resources():
                if res not in self.caps.cache:
                    continue
                per = out.setdefault(res, {})
                for cid, mask in s.domains(res).items():
                    per[cid] = per.get(cid, 0) | mask
        return out

    def used(self, skip: str | None = None
             ) -> dict[tuple[str, int], int]:
        """Per (resource, cache id), the ways of every group but
        ``skip``."""
        used: dict[tuple[str, int], int] = {}
        for name, s in self.schemata.items():
            if name == skip:
                continue
            for res in s.resources():
                for cid, mask in s.domains(res).items():
                    used[res, cid] = used.get((res, cid), 0) | mask
        return used

    def kept(self, name: str, schemata: Schemata) -> None:
        """``name`` now holds ``schemata`` (what a write returned, or a
        group just made)."""
        self.schemata[name] = schemata
        self.tasks.setdefault(name, frozenset())
        self.cpus.setdefault(name, ())

    def view(self):
        """This snapshot as a HostView (the placement planner's input)."""
        from nova_rdt.resctrl.hostview import GroupState
        from nova_rdt.resctrl.hostview import HostView
        return HostView(self.caps, [
            GroupState(name, "ctrl",
                       "root" if name == "/" else self._owner(name), None,
                       None, {r: dict(s.domains(r)) for r in s.resources()},
                       self.cpus.get(name, ()),
                       len(self.tasks.get(name, ())))
            for name, s in sorted(self.schemata.items())])


def threads(pid: int) -> list[int]:
    """The thread ids of process ``pid``; none once it is gone."""
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return []
