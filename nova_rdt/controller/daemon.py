"""The controller's loop: observe, decide, write, record.

Only nova-rdt's class groups (``<prefix>class-<name>``) are ever written,
through :class:`nova_rdt.resctrl.groups.Resctrl` under its flock, and
only with schemata inside their static values
(:mod:`~nova_rdt.controller.layout`).  Protected instances' groups and
every other group are read (MBM), never written.  The static values are
in the state file (:mod:`~nova_rdt.controller.state`) before the first
change, so a stop, a crash or a kill can always be undone.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys
import threading
import time

from nova_rdt import naming
from nova_rdt.controller import governor as gov_mod
from nova_rdt.controller import layout
from nova_rdt.controller import model as m
from nova_rdt.controller import notify
from nova_rdt.controller import state as state_mod
from nova_rdt.host import procinfo
from nova_rdt.resctrl import errors
from nova_rdt.resctrl import monitoring
from nova_rdt.resctrl.groups import Group
from nova_rdt.resctrl.schemata import CACHE_RESOURCES
from nova_rdt.resctrl.schemata import Schemata

LOG = logging.getLogger(__name__)
MIB = 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Protected:
    """A protected instance: its name, and an SLO source if it has one."""

    name: str
    source: object | None = None
    target: float | None = None


def mb_units(caps) -> m.MbUnits | None:
    bw = caps.bandwidth.get("MB")
    if bw is None:
        return None
    if caps.mba_mbps:
        return m.MbUnits(m.MBPS, max(bw.min_bandwidth, 1), 1, None)
    return m.MbUnits(m.PERCENT, max(bw.min_bandwidth, 1),
                     max(bw.bandwidth_gran, 1), bw.unthrottled)


def cache_rules(caps) -> dict[str, layout.CacheRules]:
    return {n: layout.CacheRules(r.cbm_len, r.min_cbm_bits, r.sparse_masks)
            for n, r in caps.cache.items()}


class Controller:
    def __init__(self, fs, policy, bounds: m.Bounds, state_path: str, *,
                 classes=(), protected=(), records=None, dry_run=False,
                 min_interval=0.0, raise_hold=1, metrics=None,
                 notifier=None, host="", clock=time.monotonic):
        self.fs = fs
        self.policy = policy
        self.state_path = state_path
        self.only = set(classes)
        self.protected = list(protected)
        # Protected names already said to be ambiguous (said once).
        self._warned: set[str] = set()
        self.records = records
        self.dry_run = dry_run
        self.metrics = metrics
        self.notifier = notifier
        self.host = host
        self.clock = clock
        self.caps = fs.capabilities()
        self.units = mb_units(self.caps)
        self.rules = cache_rules(self.caps)
        min_bits = max((r.min_cbm_bits for r in self.caps.cache.values()),
                       default=1)
        self.governor = gov_mod.Governor(
            bounds, self.units, min_cbm_bits=min_bits,
            min_interval=min_interval, raise_hold=raise_hold)
        self.rates = monitoring.RateTracker()
        self.mon_events = tuple(
            e for mon in self.caps.monitoring.values()
            for e in mon.features if e in monitoring.EVENTS)
        previous = state_mod.load(state_path)
        if previous is not None and previous.owner_alive() and \
                previous.pid != os.getpid():
            raise RuntimeError(
                f"{state_path}: controller pid {previous.pid} is running; "
                f"one controller per host")
        self.state = state_mod.State(os.getpid(),
                                     procinfo.proc_start_time(os.getpid()),
                                     True)
        self._previous = previous
        self.statics: dict[str, Schemata] = {}
        # Ways of a class's static masks other groups already held when
        # it was adopted: sharing them again is no new sharing.
        self.shared: dict[str, dict[str, Schemata]] = {}

    # -- discovery -------------------------------------------------------

    def class_groups(self) -> dict[str, Group]:
        out = {}
        for g in self.fs.groups(with_mon=False):
            cls = naming.class_of_group(self.fs.prefix, g.name)
            if cls is None or g.owner != "nova-rdt":
                continue
            if self.only and cls not in self.only:
                continue
            out[g.name] = g
        return out

    def _adopt(self, name: str, current: Schemata
               ) -> tuple[Schemata, dict[str, Schemata]]:
        """The static values of a class seen for the first time, and the
        other groups' schemata then: the state file's if the group still
        sits inside them (we changed it, then died), else what it holds
        now (as the agent made it) and the others now."""
        own = current.restricted(tuple(self.caps.cache) + ("MB",))
        prev = self._previous.groups.get(name) if self._previous else None
        if prev is not None:
            static = Schemata(prev.static)
            if _inside(own, static):
                return static, {o: Schemata(s)
                                for o, s in prev.shared.items()}
        return own, self.others(name)

    def protected_groups(self) -> dict[str, str | None]:
        """Protected instance -> the resctrl group holding its vCPUs.

        Besides the configured ones, an instance whose flavor has
        ``rdt:slo`` (the driver's metadata, recorded by the hook) is
        protected too.
        """
        listed = {p.name for p in self.protected}
        recs = []
        if self.records is not None:
            recs = [r for r in self.records.all()[0]
                    # a class member is best effort
                    if not r.rdt_class]
            for r in recs:
                if r.slo and not \
                        listed & {r.name, r.uuid, r.instance_name}:
                    self.protected.append(Protected(r.name))
                    listed.add(r.name)
        names = {g.name for g in self.fs.groups(with_mon=False)}
        out = {}
        for p in self.protected:
            group, ambiguous = instance_group(p.name, recs)
            if ambiguous and p.name not in self._warned:
                self._warned.add(p.name)
                LOG.warning(
                    "protected instance %r: %d instances on this host have "
                    "that display name (%s); name it by its uuid or its "
                    "domain name.  It is not watched until then.", p.name,
                    len(ambiguous), ", ".join(sorted(ambiguous)))
            if group is None and not ambiguous and p.name in names:
                group = p.name
            out[p.name] = group
        return out

    # -- one period ------------------------------------------------------

    def _rates(self, key: str, group_path: str, now: float):
        total = local = occ = None
        for rd in monitoring.read_mon_data(group_path,
                                           events=self.mon_events):
            for event, attr in (("mbm_total_bytes", "t"),
                                ("mbm_local_bytes", "l")):
                v = getattr(rd, event)
                rate = self.rates.observe((key, rd.resource, rd.domain,
                                           event), v, now)
                if rate is not None:
                    if attr == "t":
                        total = (total or 0.0) + rate
                    else:
                        local = (local or 0.0) + rate
            if rd.llc_occupancy is not None:
                occ = (occ or 0) + rd.llc_occupancy
        return total, local, occ

    def step(self) -> list[gov_mod.Action]:
        now = self.clock()
        groups = self.class_groups()
        current: dict[str, Schemata] = {}
        classes = []
        new = False
        for name, g in sorted(groups.items()):
            s = g.schemata()
            if name not in self.statics:
                self.statics[name], self.shared[name] = self._adopt(name, s)
                new = True
            current[name] = s
            bw, local, occ = self._rates(name, g.path, now)
            c = layout.observe(name, self.statics[name], s, bw, local, occ)
            if c.ways is not None and c.static_ways is not None \
                    and c.ways < c.static_ways:
                # The policy may only ask for ways no one took meanwhile.
                c = dataclasses.replace(c, static_ways=self._ways_cap(
                    name, c.ways, c.static_ways, s))
            classes.append(c)
        for name in [n for n in self.statics if n not in groups]:
            # The agent removed an empty class: nothing to give back.
            del self.statics[name]
            self.shared.pop(name, None)
            self.state.groups.pop(name, None)
            new = True
            if self.metrics:
                self.metrics.drop_class(name)
        if new:
            self._record(current)
        prot = []
        pgroups = self.protected_groups()
        for p in self.protected:
            gname = pgroups.get(p.name)
            bw = occ = None
            if gname:
                try:
                    path = self.fs.group(gname).path
                    bw, _l, occ = self._rates("p:" + gname, path, now)
                except errors.ResctrlError:
                    pass
            slo = p.source.read() if p.source is not None else None
            prot.append(m.ProtectedState(p.name, bw, occ, slo, p.target))
            if self.metrics:
                if bw is not None:
                    self.metrics.protected_bandwidth[p.name] = bw
                if p.target is not None and slo is not None:
                    self.metrics.slo[p.name] = (slo, p.target)
        obs = m.Observation(now, tuple(classes), tuple(prot))
        LOG.debug("observed: %s; protected: %s", ", ".join(
            f"{c.name} mb={c.mb} ways={c.ways} bw={_fmt_bw(c.bandwidth)}"
            for c in classes) or "no class", ", ".join(
            f"{p.name} bw={_fmt_bw(p.bandwidth)} slo={p.slo}"
            for p in prot) or "none")
        decisions = self.policy.decide(obs, self.governor.bounds,
                                       self.units or m.MbUnits(m.PERCENT, 1))
        actions = self.governor.filter(obs, decisions)
        by_name = {c.name: c for c in classes}
        changed = False
        for a in actions:
            c = by_name[a.cls]
            outcome = self._apply(a, c, groups[a.cls], current)
            changed |= outcome == "applied"
            if self.metrics:
                self.metrics.count(a.cls, a.held or a.reason, outcome)
            if self.notifier is not None and outcome != "held":
                self.notifier.send(notify.payload(
                    host=self.host, policy=self.policy.name, group=a.cls,
                    rdt_class=naming.class_of_group(self.fs.prefix, a.cls),
                    reason=a.reason, outcome=outcome,
                    dry_run=self.dry_run, mb=a.mb, previous_mb=c.mb,
                    l3_ways=a.ways, previous_l3_ways=c.ways,
                    bandwidth_bytes=c.bandwidth))
        if changed:
            self._record(current)
        if self.metrics:
            for name, s in current.items():
                c = layout.observe(name, self.statics[name], s)
                self.metrics.set_class(name, c.mb, c.static_mb, c.ways,
                                       c.static_ways,
                                       by_name[name].bandwidth)
            self.metrics.periods += 1
        return actions

    def _ways_cap(self, name: str, ways: int, static_ways: int,
                  current: Schemata) -> int:
        taken = layout.new_sharing(self.others(name),
                                   self.shared.get(name, {}))
        cap = ways
        for w in range(ways + 1, static_ways + 1):
            try:
                t = layout.target(self.statics[name], None, w, self.rules)
            except ValueError:
                break
            if layout.regains_taken_ways(t, current, taken):
                break
            cap = w
        return cap

    def _apply(self, a, c: m.ClassState, g, current) -> str:
        what = f"mb {c.mb}->{a.mb}, ways {c.ways}->{a.ways}"
        why = f"{a.reason} (bandwidth {_fmt_bw(c.bandwidth)})"
        if not a.applied:
            LOG.info("class %s: held %s: %s, because %s", a.cls, what,
                     a.held, why)
            return "held"
        try:
            target = layout.target(self.statics[a.cls], a.mb, a.ways,
                                   self.rules)
        except ValueError as e:
            LOG.error("class %s: no valid schemata for %s: %s", a.cls,
                      what, e)
            return "refused"
        others = layout.new_sharing(self.others(a.cls),
                                    self.shared.get(a.cls, {}))
        if layout.regains_taken_ways(target, current[a.cls], others):
            # Another group got some of the ways this class gave up:
            # growing back would share them.  MB only; the ways wait.
            LOG.warning("class %s: ways %s->%s held: some are now another "
                        "group's", a.cls, c.ways, a.ways)
            target = layout.keep_caches(target, current[a.cls])
        if self.dry_run:
            LOG.info("class %s: would set %s (dry run), because %s",
                     a.cls, what, why)
            return "dry_run"
        try:
            current[a.cls] = self.fs.write_schemata(g, target)
        except errors.ResctrlError as e:
            LOG.error("class %s: the kernel refused %s: %s", a.cls,
                      target.format().strip(), e)
            return "refused"
        LOG.info("class %s: set %s, because %s", a.cls, what, why)
        return "applied"

    def others(self, name: str) -> dict[str, Schemata]:
        """Every other control group's schemata (not the root's: the
        HOST domain's ways are below every class's by construction)."""
        out = {}
        for g in self.fs.groups(with_mon=False):
            if g.is_root or g.name == name:
                continue
            try:
                out[g.name] = g.schemata()
            except (errors.ResctrlError, ValueError):
                continue       # went away meanwhile
        return out

    def _record(self, current: dict[str, Schemata]) -> None:
        for name, static in self.statics.items():
            cur = current.get(name, static).restricted(static.resources())
            self.state.groups[name] = state_mod.ClassRecord(
                {r: dict(d) for r, d in static.lines.items()},
                {r: dict(d) for r, d in cur.lines.items()},
                {o: {r: dict(d) for r, d in s.lines.items()
                     if r in CACHE_RESOURCES}
                 for o, s in self.shared.get(name, {}).items()})
        state_mod.save(self.state_path, self.state)

    # -- lifetime --------------------------------------------------------

    def restore(self) -> list[str]:
        """Every class back to its static values; the file says so."""
        self.state.running = False
        if not os.path.exists(self.state_path):
            return []
        return state_mod.restore(self.fs, self.state_path, force=True)

    def run(self, period: float, stop: threading.Event,
            guardian: bool = True) -> None:
        guard = start_guardian(self.fs, self.state_path) if guardian \
            else None
        try:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    self.step()
                except (errors.ResctrlError, OSError, ValueError) as e:
                    # A group that vanished mid-read, a full disk for the
                    # state file: log it, keep the loop; the next period
                    # sees the host afresh.
                    LOG.error("period failed: %s", e)
                    if self.metrics:
                        self.metrics.errors += 1
                stop.wait(max(0.0, period - (time.monotonic() - started)))
        finally:
            restored = self.restore()
            LOG.info("stopped; restored static values of %s",
                     ", ".join(restored) or "no class")
            if guard is not None and guard.stdin is not None:
                guard.stdin.close()
                try:
                    guard.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    guard.kill()


def _inside(cur: Schemata, static: Schemata) -> bool:
    for r in static.resources():
        for d, sv in static.domains(r).items():
            cv = cur.get(r, d)
            if cv is None:
                return False
            if r in CACHE_RESOURCES and cv & ~sv:
                return False
            if r == "MB" and cv > sv:
                return False
    return set(cur.resources()) <= set(static.resources())


def _fmt_bw(bw: float | None) -> str:
    return "unknown" if bw is None else f"{bw / MIB:.0f} MiB/s"


def start_guardian(fs, state_path: str) -> subprocess.Popen:
    """A child that restores the static values when this process dies,
    however it dies (SIGKILL included): it waits for EOF on a pipe only
    this process holds."""
    return subprocess.Popen(
        [sys.executable, "-m", "nova_rdt.controller.guardian",
         "--state-file", state_path, "--resctrl-root", fs.root,
         "--sysfs-cpu-root", fs.sysfs_cpu, "--prefix", fs.prefix],
        stdin=subprocess.PIPE, start_new_session=True, close_fds=True)


def instance_group(key: str, records) -> tuple[str | None, list[str]]:
    """The group of the instance ``key`` names, and the uuids it could
    mean when it is ambiguous.

    A uuid or a libvirt domain name names one instance.  A display name
    is the tenant's, and two tenants' ``web-1`` can share a host: it
    names an instance only when exactly one record has it.
    """
    for r in records:
        if key in (r.uuid, r.name):
            return r.group, []
    same = [r for r in records if r.instance_name == key]
    if len(same) == 1:
        return same[0].group, []
    return None, [r.uuid for r in same] if len(same) > 1 else []
