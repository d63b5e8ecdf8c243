"""One snapshot of a host's resctrl, with each group's owner: the
exporter's only reads.

Per scrape it reads, for the root, each control group and each of the
root's monitor groups: ``schemata`` (control groups), ``tasks`` and
``mon_data``.  Monitor groups inside another control group are not read:
the kernel already adds their counts into that group's own ``mon_data``,
and they belong to the same owner.  Capabilities (``info/``) change only
with a remount or CPU hotplug: the filesystem's per-mount cache
(:mod:`nova_rdt.resctrl.capcache`) re-reads them exactly then, at the
first scrape after it, and after a scrape that failed to read.
"""

from __future__ import annotations

import dataclasses
import os
import time

from nova_rdt.exporter import identity as identity_mod
from nova_rdt.host import records as records_mod
from nova_rdt.host import recovery
from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import errors
from nova_rdt.resctrl import monitoring
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.schemata import Schemata


@dataclasses.dataclass(frozen=True)
class GroupSample:
    name: str                         # "/" for the root
    ctrl: bool                        # False: a monitor group of the root
    identity: identity_mod.Identity
    schemata: dict[str, dict[int, int]]
    tasks: int
    readings: tuple[monitoring.Reading, ...]


@dataclasses.dataclass(frozen=True)
class HostSample:
    caps: caps_mod.Capabilities | None
    groups: tuple[GroupSample, ...]
    taken_at: float                   # time.time()
    duration: float                   # seconds spent reading
    error: str | None = None          # why there is no RDT to show
    unavailable: int = 0              # "Unavailable"/"Error" readings
    read_errors: int = 0              # files that failed to read
    # recovery.REASONS that hold now (nova_rdt_degraded{reason}).
    degraded: frozenset[str] = frozenset()

    @property
    def available(self) -> bool:
        return self.caps is not None


class Sampler:
    def __init__(self, fs: Resctrl, state_path: str | None = None,
                 clock=time.monotonic):
        self.fs = fs
        self.records = (records_mod.Records(state_path) if state_path
                        else None)
        self.clock = clock
        #: Read info/ afresh at the next scrape (the last one failed).
        self._fresh = False

    def sample(self) -> HostSample:
        t0 = self.clock()
        try:
            caps = self.fs.capabilities(fresh=self._fresh)
            self._fresh = False
        except (errors.ResctrlError, OSError, ValueError) as e:
            self._fresh = True
            return HostSample(None, (), time.time(), self.clock() - t0,
                              error=str(e),
                              degraded=self._degraded(None, [], []))
        recs, bad = self.records.all() if self.records else ([], [])
        resolver = identity_mod.Resolver(self.fs.prefix, recs)
        events = tuple(ev for ev in monitoring.EVENTS
                       if any(ev in m.features
                              for m in caps.monitoring.values()))
        domains = _mon_domains(caps)
        state = _Reads()
        groups = []
        try:
            names = sorted(n for n in os.listdir(self.fs.root)
                           if n not in ("info", "mon_groups", "mon_data")
                           and os.path.isdir(os.path.join(self.fs.root, n)))
            root_mon = os.path.join(self.fs.root, "mon_groups")
            mon_names = (sorted(os.listdir(root_mon))
                         if os.path.isdir(root_mon) else [])
        except OSError as e:
            self._fresh = True
            return HostSample(None, (), time.time(), self.clock() - t0,
                              error=f"cannot list {self.fs.root}: {e}",
                              degraded=self._degraded(None, [], []))
        for name in [""] + names:
            g = self._group(state, resolver, events, domains, name,
                            os.path.join(self.fs.root, name) if name
                            else self.fs.root, ctrl=True)
            if g is not None:
                groups.append(g)
        for name in mon_names:
            g = self._group(state, resolver, events, domains, name,
                            os.path.join(root_mon, name), ctrl=False)
            if g is not None:
                groups.append(g)
        if state.errors:
            self._fresh = True
        return HostSample(caps, tuple(groups), time.time(),
                          self.clock() - t0, unavailable=state.unavailable,
                          read_errors=state.errors,
                          degraded=self._degraded(
                              [g.name for g in groups if g.ctrl], recs, bad))

    def _degraded(self, ctrl_names, recs, bad) -> frozenset[str]:
        """What reconcile could not repair, seen from here: resctrl gone
        (``ctrl_names`` None), the state path, records, lost groups."""
        out = set()
        if ctrl_names is None:
            out.add("resctrl_unavailable")
        if self.records is not None:
            d = recovery.probe_state_path(self.records.state_path)
            if d is not None:
                out.add(d.reason)
        if bad:
            out.add("records_unreadable")
        if ctrl_names is not None and recovery.lost_groups(
                recs, set(ctrl_names)):
            out.add("group_not_restored")
        return frozenset(out)

    def _group(self, state, resolver, events, domains, name, path, ctrl):
        read = monitoring.read_small
        try:
            schemata = {}
            if ctrl:
                schemata = {k: dict(v) for k, v in Schemata.parse(
                    read(os.path.join(path, "schemata"))).lines.items()}
            tasks = read(os.path.join(path, "tasks")).count("\n")
            readings = (tuple(monitoring.read_mon_data(path, domains, events))
                        if events else ())
        except FileNotFoundError:
            return None           # removed while we looked: not an error
        except (OSError, ValueError):
            state.errors += 1
            return None
        for r in readings:
            state.unavailable += sum(
                1 for ev in monitoring.EVENTS
                if ev in events and getattr(r, ev) is None)
        ident = (resolver.resolve(name) if ctrl
                 else resolver.resolve(name, parent=""))
        return GroupSample(name or "/", ctrl, ident, schemata, tasks,
                           readings)


def _mon_domains(caps) -> list[tuple[str, int]]:
    """(resource, id) of each monitoring domain: the ids of the cache the
    resource monitors (L3, or L3CODE under CDP), so no listing is needed."""
    out = []
    for m in caps.monitoring.values():
        ids = set()
        for name, res in caps.cache.items():
            if name == m.resource or name.startswith(m.resource + "C") \
                    or name.startswith(m.resource + "D"):
                ids |= set(res.domains)
        out += [(m.resource, d) for d in sorted(ids)]
    return out


@dataclasses.dataclass
class _Reads:
    unavailable: int = 0
    errors: int = 0
