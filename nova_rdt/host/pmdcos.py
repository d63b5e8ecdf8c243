"""The PMD COS: the resctrl group of OVS-DPDK's PMD cores.

It holds the PMD *cores* (``cpus_list``), not their thread ids: OVS
replaces its PMD threads whenever ``pmd-cpu-mask`` changes, so tids would
go stale, while PMD cores are isolated and dedicated to those threads.  A
task in the default group runs with the CLOS of the CPU it is on, which
is exactly the PMD group on a PMD core.

Each sync reads the host under the resctrl ``flock`` libvirt's allocator
also takes, resolves the group's masks with the pure
:func:`nova_rdt.allocation.pmdplan.for_groups` (the driver's rule too),
and writes them in one step, so libvirt never sees a half-updated mask.
"""

from __future__ import annotations

from collections.abc import Collection
import dataclasses

from nova_rdt import exception
from nova_rdt import failpoints
from nova_rdt import naming
from nova_rdt.allocation import hostlayout
from nova_rdt.allocation import pmdplan
from nova_rdt.host import context
from nova_rdt.host import ovs
from nova_rdt.host import records as records_mod
from nova_rdt.host import rooms as rooms_mod
from nova_rdt.host.context import LOG
from nova_rdt.host.context import HostContext
from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import errors
from nova_rdt.resctrl.schemata import Schemata


def pmd_cache_ids(caps: caps_mod.Capabilities,
                  cores: Collection[int] | None) -> frozenset[int] | None:
    """The cache ids whose CPUs include a PMD core; None when the cores
    are not known (the PMD rule then holds on every id)."""
    if not cores:
        return None
    # L3 ids only: an L2 id numbers a core's own cache, not a socket's.
    return frozenset(cid for name, res in caps.cache.items()
                     if name.startswith("L3")
                     for cid, dom in res.domains.items()
                     if set(dom.cpus) & set(cores))


@dataclasses.dataclass(frozen=True)
class PmdInputs:
    """What the PMD COS is resolved from, as read under the lock."""

    caps: caps_mod.Capabilities
    base: Schemata | None                 # the layout's PMD ways
    groups: dict[str, Schemata]           # control groups; the root's "/"
    sharers: dict[str, str]               # sharing instance -> its group
    cores: set[int] | None                # PMD cores; None: unknown
    #: the ways the rooms of starting sharers keep free (:mod:`rooms`)
    rooms: Schemata | None = None


def resolve(inputs: PmdInputs, prefix: str,
            keep_free: Schemata | None = None) -> pmdplan.PmdPlan:
    """The PMD COS's masks.  Pure.  The rooms count as ``keep_free``:
    a starting sharer's ways stay out until its record says it runs."""
    return pmdplan.for_groups(inputs.caps, inputs.groups, prefix,
                              inputs.sharers, inputs.base,
                              pmd_cache_ids(inputs.caps, inputs.cores),
                              keep_free=rooms_mod.merged(keep_free,
                                                         inputs.rooms))


def summary(gname: str, plan: pmdplan.PmdPlan, cpus: Collection[int]
            ) -> str:
    masks = plan.schemata.format().strip().replace("\n", " ")
    return (f"{gname}: {masks}"
            f"; cpus {sorted(cpus)}; sharing "
            f"{', '.join(plan.sharing) or 'none'}"
            + (f"; DEGRADED, not covering {', '.join(plan.dropped)}"
               if plan.degraded else ""))


class NotPrepared(exception.NovaRdtError):
    """The host's resctrl is not laid out yet; str() says what to do."""

    msg_fmt = ("this host is not prepared: %(why)s; start nova-compute (it "
               "prepares the host) before syncing the PMD COS")


def unprepared(inputs: PmdInputs, layout: hostlayout.Layout
               ) -> str | None:
    """Why the host is not prepared (the root group still holds more
    than the reserved host ways); None when it is.  Pure.

    Before preparation every way is the root's, so the PMD COS "over the
    host's ways" would be every way."""
    root = inputs.groups.get("/")
    for res, per in layout.root.lines.items():
        for cid, want in per.items():
            have = root.get(res, cid) if root is not None else None
            if have is not None and have & ~want:
                return (f"the root group holds {res}:{cid}={have:x}, more "
                        f"than the {want:x} of [rdt] reserved_host_ways")
    return None


class PmdCos:
    """The PMD COS of one host."""

    def __init__(self, host: HostContext):
        self.host = host
        self.fs = host.fs
        self.rooms = rooms_mod.Pending.of(host)
        self.last_plan: pmdplan.PmdPlan | None = None
        #: the ways rooms kept out of the last sync's plan
        self.last_rooms: Schemata | None = None

    @property
    def group_name(self) -> str:
        return naming.pmd_group(self.fs.prefix)

    def ovs_client(self) -> ovs.OvsClient:
        s = self.host.settings
        return ovs.OvsClient(db=s.ovsdb_connection,
                             vswitchd_pidfile=s.ovs_vswitchd_pidfile,
                             appctl_target=s.ovs_vswitchd_target,
                             timeout=max(1.0, s.hook_timeout / 3))

    def sync(self, cores: set[int] | None = None,
             extra: tuple[records_mod.Record, ...] = (),
             prepared_only: bool = False,
             snap: context.Snapshot | None = None,
             keep_free: Schemata | None = None) -> str:
        """Recompute the PMD group from scratch; returns a summary.

        ``cores``: the PMD cores, asked of OVS when not given.
        ``extra``: records not (yet) on disk, such as the one a full state
        path refused, that must count all the same.  ``prepared_only``:
        raise NotPrepared, writing nothing, on a host nova-compute has
        not prepared.  ``keep_free``: ways the PMD COS leaves out for a
        moment, a domain about to start there (libvirt's allocator counts
        the PMD COS's ways as used); the cores stay as they are then,
        since the start must not wait on OVS."""
        if cores is None and keep_free is None:
            # Asked before the resctrl flock: OVSDB and ovs-appctl can take
            # a while, and libvirt's allocator waits on that lock.
            cores = self._ask_ovs()
        with self.fs.locked():
            snap = snap or context.Snapshot(self.fs)
            inputs = self._read(cores, extra, snap)
            if prepared_only:
                s = self.host.settings
                why = unprepared(inputs, hostlayout.plan(
                    inputs.caps, s.reserved_host_ways, s.pmd_shared_ways))
                if why:
                    raise NotPrepared(why=why)
            plan = resolve(inputs, self.fs.prefix, keep_free)
            self.last_plan = plan
            self.last_rooms = inputs.rooms
            if plan.degraded and keep_free is None and inputs.rooms is None:
                # libvirt placed a VM the driver did not predict; the
                # relation is partly lost until the layout changes.
                # (A room of a starting sharer cuts the span on purpose,
                # until that sharer runs.)
                LOG.warning("PMD COS degraded: cannot also cover the ways "
                            "of sharing instance(s) %s without covering "
                            "another group's ways or writing a mask the "
                            "kernel refuses", ", ".join(plan.dropped))
            text = self._apply(plan, cores, snap)
            LOG.info("PMD COS %s", text)
            return text

    def _ask_ovs(self) -> set[int] | None:
        try:
            return {t.core for t in self.ovs_client().pmd_threads()}
        except ovs.OvsError as e:
            LOG.warning("PMD cores unknown, keeping %s's CPUs: %s",
                        self.group_name, e)
            return None

    def _read(self, cores: set[int] | None,
              extra: tuple[records_mod.Record, ...],
              snap: context.Snapshot) -> PmdInputs:
        caps = snap.caps
        s = self.host.settings
        layout = hostlayout.plan(caps, s.reserved_host_ways,
                                 s.pmd_shared_ways)
        groups = dict(snap.schemata)
        sharers = {}
        recs, _bad = self.host.records.all()
        for rec in [*recs, *extra]:
            if rec.pmd_share and rec.group and rec.alive() \
                    and rec.group in groups:
                sharers[rec.uuid] = rec.group
        rooms = self.rooms.in_effect([*recs, *extra])
        for room in rooms:
            LOG.info("PMD COS: %s's ways %s stay out while it starts",
                     room.name, room.schemata.strip().replace("\n", " "))
        known = cores
        if known is None:
            # OVS did not answer: the PMD group's cores stay, and so do
            # the cache ids they use.
            try:
                known = set(self.fs.group(self.group_name).cpus())
            except errors.GroupNotFound:
                known = None
        return PmdInputs(caps, layout.pmd, groups, sharers, known,
                         rooms_mod.kept_free(rooms))

    def _apply(self, plan: pmdplan.PmdPlan, cores: set[int] | None,
               snap: context.Snapshot) -> str:
        """Write the PMD group's masks, then its cores when known."""
        gname = self.group_name
        try:
            g = self.fs.group(gname)
        except errors.GroupNotFound:
            g = self.fs.create_group(gname)
        failpoints.hit("agent.pmd_update")
        snap.kept(gname, self.fs.write_schemata(g, plan.schemata))
        if cores is not None:
            failpoints.hit("agent.pmd_cpus")
            self.fs.set_cpus(g, cores)
        return summary(gname, plan, g.cpus())
