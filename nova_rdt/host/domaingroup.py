"""libvirt's group of a managed domain: what it gets beyond libvirt's writes.

libvirt allocates from ``<cachetune>`` sizes and writes the group first;
the hook then writes into it, while the guest is paused: the masks
nova-rdt decided for the domain (or, for a domain that carries none, a
placement found here by the compute's rules), and MB in MBps, which
``<memorytune>`` cannot carry.  Each write is resolved first, by the pure
:func:`nova_rdt.host.enforce.check` and :func:`placed_masks`, then done in
one step, under the resctrl ``flock`` libvirt's allocator also takes.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping
import dataclasses

from nova_rdt import failpoints
from nova_rdt import naming
from nova_rdt.allocation import hostlayout
from nova_rdt.allocation import hostplan
from nova_rdt.allocation import placement
from nova_rdt.allocation import rdtclass
from nova_rdt.host import context
from nova_rdt.host import enforce
from nova_rdt.host import rooms as rooms_mod
from nova_rdt.host.context import LOG
from nova_rdt.host.context import HostContext
from nova_rdt.host.context import IsolationError
from nova_rdt.host.events import HookEvent
from nova_rdt.host.events import Managed
from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl.hostview import HostView
from nova_rdt.resctrl.schemata import Schemata

Decided = tuple[tuple[tuple[int, str], int], ...]


# -- resolve: pure ----------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class PlaceInputs:
    """What a plan-less domain is placed against, as read under the lock."""

    view: HostView
    domains: Mapping[str, str]       # living domains' uuid -> name
    sharing: frozenset[str]          # uuids sharing the PMD COS
    pmd_base: Schemata | None        # None: the layout cannot be made
    #: starting sharers' rooms (:mod:`nova_rdt.host.rooms`): uuid ->
    #: (domain name, the ways kept free for it)
    rooms: Mapping[str, tuple[str, Schemata]] = dataclasses.field(
        default_factory=dict)


def _ways(masks: Mapping[str, Mapping[int, int]]
          ) -> dict[str, dict[int, int]]:
    """The number of ways of each mask."""
    return {r: {cid: cbm.popcount(m) for cid, m in per.items()}
            for r, per in masks.items()}


def placed_masks(inputs: PlaceInputs, prefix: str,
                 classes: Mapping[str, rdtclass.RdtClass], uuid: str,
                 m: Managed, pmd_cos: bool) -> Decided:
    """The masks the compute's rules (:mod:`nova_rdt.allocation.placement`)
    give domain ``uuid`` against resctrl as it is, every other group
    staying where it is: a sharer next to the PMD COS, anyone else away
    from it.  Raises :class:`placement.NoPlacement` when none exists."""
    view = inputs.view
    owners = hostplan.ownership(view, prefix, inputs.domains, classes)
    host = hostplan.host_of(view, owners, inputs.pmd_base, pmd_cos)
    live, live_classes = hostplan.live_masks(view, owners)
    reservations = {
        u: placement.Reservation(u, _ways(masks), masks,
                                 pmd_share=u in inputs.sharing,
                                 movable=False)
        for u, masks in live.items() if u != uuid}
    groups = {c: placement.ClassGroup(c, _ways(masks), masks)
              for c, masks in live_classes.items()}
    new = placement.Reservation(
        uuid, hostplan.ways_of({cid: {kind: n} for cid, kind, n in m.cache}),
        pmd_share=m.pmd_share and pmd_cos)
    # A starting sharer's room is its place until libvirt made its group
    # (that group, foreign until its record, then holds its ways).
    machines = naming.LibvirtMachines(
        g.name for g in view.groups if g.kind == "ctrl")
    rooms = {}
    for u, (name, ways) in sorted(inputs.rooms.items()):
        if u == uuid or u in reservations or name in machines:
            continue
        masks = {r: dict(ways.domains(r)) for r in ways.resources()
                 if r in host.resources}
        if any(masks.values()):
            rooms[u] = placement.Reservation(
                u, _ways(masks), masks, pmd_share=pmd_cos, movable=False)
    try:
        plan = placement.place(host, {**reservations, **rooms}, groups, new)
    except placement.InvalidState:
        if not rooms:
            raise
        # A room that breaks a rule now (the host changed under it) is
        # no reason to refuse this domain: placed as without rooms.
        plan = placement.place(host, reservations, groups, new)
    return tuple(sorted(
        ((cid, hostplan.KIND_OF_RESOURCE[res]), mask)
        for res, per in plan.instances.get(uuid, {}).items()
        for cid, mask in per.items()))


def schemata_of(decided: Decided) -> Schemata:
    """Decided masks as the schemata lines they are written as."""
    lines: dict[str, dict[int, int]] = {}
    for (cid, kind), mask in decided:
        lines.setdefault(hostplan.RESOURCE_OF_KIND[kind], {})[cid] = mask
    return Schemata(lines)


# -- apply -----------------------------------------------------------------

class DomainGroup:
    """Writes into libvirt's groups of managed domains on one host."""

    def __init__(self, host: HostContext):
        self.host = host
        self.settings = host.settings
        self.fs = host.fs
        self.records = host.records
        self.rooms = rooms_mod.Pending.of(host)

    def apply(self, event: HookEvent, holder: str | None,
              snap: context.Snapshot | None = None) -> None:
        """What libvirt's group ``holder`` of the started domain gets
        beyond libvirt's writes: the decided masks (or a placement here),
        and MB in MBps.  ``snap``: the event's one walk of resctrl."""
        m = event.managed
        assert m is not None
        snap = snap or context.Snapshot(self.fs)
        if holder is not None and m.masks:
            self.write_decided(event.name, holder, m, snap)
        elif holder is not None and m.cache:
            self.place_here(event, holder, snap)
        if m.mb_mbps:
            self.set_mb_mbps(event.name, holder, m.mb_mbps, snap)


    def write_decided(self, name: str, holder: str, m: Managed,
                      snap: context.Snapshot | None = None) -> bool:
        """The masks nova-rdt decided for the domain, into libvirt's group
        of it, when they are safe (:mod:`nova_rdt.host.enforce`); else
        libvirt's choice stays and the reason is logged."""
        snap = snap or context.Snapshot(self.fs)
        caps = snap.caps
        g = self.fs.group(holder)
        current = snap.schemata.get(holder) or g.schemata()
        skip = {holder}
        others_ = None
        if m.pmd_share:
            # A sharer joins the PMD COS, so the PMD group's mask is no
            # obstacle; its base ways are the PMD threads' own, which no
            # sharer may take (the metadata is hostile input).
            skip.add(naming.pmd_group(self.fs.prefix))
            others_ = snap.taken(skip)
            for res, per in self._pmd_base(caps).items():
                for cid, mask in per.items():
                    line = others_.setdefault(res, {})
                    line[cid] = line.get(cid, 0) | mask
        lines, why = enforce.check(
            dict(m.masks),
            {r: current.domains(r) for r in current.resources()},
            others_ if others_ is not None else snap.taken(skip),
            {n: (r.cbm_len, r.min_cbm_bits, r.sparse_masks)
             for n, r in caps.cache.items()})
        if why is not None:
            LOG.warning("%s: the decided masks are not written, libvirt's "
                        "choice stays: %s", name, why)
            return False
        if lines:
            failpoints.hit("agent.write_decided")
            kept = self.fs.write_schemata(g, Schemata(lines),
                                          allow_libvirt=True)
            snap.kept(holder, kept)
            LOG.info("%s: decided masks in %s: %s", name, holder,
                     kept.restricted(lines).format().strip()
                     .replace("\n", " "))
        return True

    def decided(self, event: HookEvent, snap: context.Snapshot
                ) -> Decided | None:
        """The domain's masks: those its metadata carries (the compute's
        plan), else a placement here by the compute's rules
        (:func:`placed_masks`: a domain defined by hand, or by an older
        nova-rdt); None, logged, when there is none."""
        m = event.managed
        assert m is not None
        if m.masks or not m.cache:
            return m.masks or None
        try:
            return placed_masks(self._place_inputs(event, snap),
                                self.fs.prefix, self.host.classes,
                                event.uuid, m, self.settings.pmd_cos)
        except placement.NoPlacement as e:
            LOG.warning("%s: no placement by nova-rdt's rules (%s); "
                        "libvirt's choice stays", event.name, e)
            return None

    def place_here(self, event: HookEvent, holder: str,
                   snap: context.Snapshot | None = None) -> bool:
        """A domain that carries no decided masks is placed here
        (:meth:`decided`); when no placement exists, libvirt's choice
        stays."""
        m = event.managed
        assert m is not None
        snap = snap or context.Snapshot(self.fs)
        decided = self.decided(event, snap)
        if decided is None:
            return False
        LOG.info("%s: no decided masks in its metadata; placed here",
                 event.name)
        return self.write_decided(event.name, holder,
                                  dataclasses.replace(m, masks=decided),
                                  snap)

    def _place_inputs(self, event: HookEvent, snap: context.Snapshot
                      ) -> PlaceInputs:
        view = snap.view()
        recs, _bad = self.records.all()
        domains = {r.uuid: r.name for r in recs if r.alive()}
        domains[event.uuid] = event.name
        base = self._pmd_base(view.caps)
        rooms = {r.uuid: (r.name, r.ways())
                 for r in self.rooms.in_effect(recs)
                 if r.uuid not in domains}
        return PlaceInputs(view, domains,
                           frozenset(r.uuid for r in recs if r.pmd_share),
                           Schemata(base) if base else None, rooms)

    def _pmd_base(self, caps) -> dict[str, dict[int, int]]:
        """The PMD COS's own ways as host preparation lays them out (none
        without the PMD COS or ``pmd_shared_ways``)."""
        if not self.settings.pmd_cos or not self.settings.pmd_shared_ways:
            return {}
        try:
            base = hostlayout.plan(caps, self.settings.reserved_host_ways,
                                   self.settings.pmd_shared_ways).pmd
        except hostlayout.HostPrepError:
            return {}
        if base is None:
            return {}
        return {r: dict(base.domains(r)) for r in base.resources()}

    def set_mb_mbps(self, name: str, group: str | None,
                    values: Iterable[tuple[int, int]],
                    snap: context.Snapshot | None = None) -> None:
        """MB in MBps, which libvirt's <memorytune> cannot carry.

        Written into libvirt's group of the domain's vCPUs (the flavor
        must give them L3 ways, so that the group exists).
        """
        if group is None:
            raise IsolationError(f"no resctrl group holds the vCPUs of "
                                 f"{name!r}: MB {dict(values)} MBps not set")
        bw = (snap.caps if snap else self.fs.capabilities()
              ).bandwidth.get("MB")
        if bw is None or bw.units != caps_mod.UNITS_MBPS:
            # Refused, not converted: a percent of what the link can do
            # is not a fixed MBps, and writing the number as a percent
            # would silently give a different throttle.  Reached only by
            # a domain moved from an MBps host (the driver refuses
            # rdt:mb_mbps on a percent host).
            LOG.error("%s: MB %s MBps in the nova-rdt metadata NOT set: "
                      "this host's MB is in %s (mount resctrl with "
                      "-o mba_MBps to honour it)", name, dict(values),
                      bw.units if bw else "no MBA")
            return
        g = self.fs.group(group)
        kept = self.fs.write_schemata(
            g, Schemata({"MB": dict(values)}), allow_libvirt=True)
        if snap is not None:
            snap.kept(group, kept)
        LOG.info("%s: MB %s MBps in %s", name,
                 dict(kept.domains("MB")), group)
