"""The compute's placement of RDT instances: decided, reserved, enforced.

The driver composes one :class:`Placer` (as Nova's driver composes its
``Host``).  It keeps a reservation per instance with the *positions* of
its ways, decided by :mod:`nova_rdt.allocation.placement` against
resctrl as it is plus every reservation (instances claimed but not
started, stopped ones, classes whose group does not exist yet).  When
the domain starts, libvirt allocates from the ``<cachetune>`` sizes
wherever it likes; :meth:`Placer.enforce` then writes the decided masks
into libvirt's group (and the PMD COS's), under the resctrl flock,
while the guest is still paused.  :meth:`Placer.starting` serialises
starts with placements, so one start's temporary ways never meet
another's plan.

Reservations outlive a stop, as Nova keeps a stopped instance's
allocations: the decided masks travel in the domain's nova-rdt metadata,
and :meth:`Placer.adopt` rebuilds the book from the defined domains at
start-up.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
import contextlib
import dataclasses
import threading
import time

from oslo_log import log as logging

from nova_rdt.allocation import hostlayout
from nova_rdt.allocation import hostplan
from nova_rdt.allocation import hoststate
from nova_rdt.allocation import metadata as meta_mod
from nova_rdt.allocation import placement
from nova_rdt.allocation import pmdplan
from nova_rdt.allocation import rdtclass
from nova_rdt.host import rooms as rooms_mod
from nova_rdt.resctrl import errors
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.hostview import HostView
from nova_rdt.resctrl.schemata import Schemata

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Entry:
    """One instance's reservation and the domain that carries it."""

    domain: str
    reservation: placement.Reservation
    created: float = 0.0
    # A group of its own without ways (MB only): a CLOS the planner,
    # which counts ways, does not see.
    mb_only: bool = False
    # libvirt makes a monitor group for it (an RMID on a monitoring host).
    monitor: bool = False


class Placer:
    def __init__(self, fs: Resctrl, classes: Mapping[str, rdtclass.RdtClass],
                 reserved_host_ways: int, pmd_shared_ways: int,
                 pmd_cos: bool, compaction: bool = False,
                 clock=time.monotonic, collect=HostView.collect,
                 monitor_rdt: bool = False,
                 rooms: Callable[[], list[rooms_mod.Room]] = list):
        """``monitor_rdt``: an instance with an ``rdt:`` request gets a
        monitor group ([rdt] monitor_default all or rdt), which the
        published solver input must count as the claim does.  ``rooms``:
        the rooms the hook's 'prepare' keeps for domains starting without
        nova-compute (:meth:`nova_rdt.host.rooms.Pending.pending_starts`),
        whose ways the PMD COS must leave out as the hook's own syncs
        do."""
        self.fs = fs
        self.monitor_rdt = monitor_rdt
        # One walk of resctrl (a test counts them, or answers from memory).
        self._collect = collect
        self.classes = dict(classes)
        self.reserved_host_ways = reserved_host_ways
        self.pmd_shared_ways = pmd_shared_ways
        self.pmd_cos = pmd_cos
        self.compaction = compaction
        self._rooms = rooms
        self._book: dict[str, Entry] = {}
        self._class_masks: dict[str, placement.PerId] = {}
        # Classes and instances a plan moved to make room, not yet
        # written: their book masks, not resctrl's, are where they are.
        self._class_moves: set[str] = set()
        self._instance_moves: set[str] = set()
        self._lock = threading.RLock()
        self._clock = clock
        # Instances compaction moved since start (each move is logged).
        self.compaction_moves = 0

    # -- the book --------------------------------------------------------

    def __contains__(self, uuid: object) -> bool:
        return uuid in self._book

    def uuids(self) -> set[str]:
        with self._lock:
            return set(self._book)

    def masks_of(self, uuid: str) -> placement.PerId | None:
        e = self._book.get(uuid)
        return e.reservation.masks if e else None

    def lays_out(self, uuid: str) -> bool:
        """Whether a start of ``uuid`` puts ways where a plan said: its
        own decided masks, or its class's group, which the hook makes at
        the planned masks.  Such starts are serialised (:meth:`starting`):
        while one runs, libvirt's allocator takes the first free run for
        a group it makes, which may be ways planned for another's class
        group; the hook, finding them taken, would place the class
        elsewhere, over another instance's decided ways."""
        e = self._book.get(uuid)
        return e is not None and bool(e.reservation.masks
                                      or e.reservation.rdt_class)

    def class_masks(self, name: str) -> placement.PerId | None:
        return self._class_masks.get(name)

    def release(self, uuid: str) -> bool:
        """Drop ``uuid``'s reservation; a sharer's leaves the PMD COS too
        (the hook's 'release' does the same; whichever runs last writes
        the same mask)."""
        with self._lock:
            e = self._book.pop(uuid, None)
            if e is not None and e.reservation.rdt_class and not any(
                    x.reservation.rdt_class == e.reservation.rdt_class
                    for x in self._book.values()):
                self._class_masks.pop(e.reservation.rdt_class, None)
            if e is not None and e.reservation.pmd_share and self.pmd_cos:
                try:
                    self._shrink_pmd()
                except (errors.ResctrlError, OSError) as exc:
                    LOG.warning("nova-rdt: PMD COS not shrunk after %s "
                                "left: %s (the hook's release does it)",
                                uuid, exc)
            return e is not None

    def _shrink_pmd(self) -> None:
        with self.fs.locked():
            view = self._collect(self.fs)
            owners = hostplan.ownership(
                view, self.fs.prefix,
                {u: e.domain for u, e in self._book.items()}, self.classes)
            if owners.pmd is None:
                return
            host = self._inputs(view)[1]
            self._write_pmd(view, owners, host, {})

    def forget_unless(self, defined: Iterable[str] | None,
                      grace: float) -> list[str]:
        """Drop the reservations of instances no longer defined here, once
        ``grace`` seconds old: a claim precedes its domain's definition
        by the build's plugging time.  None (listing failed): keep all."""
        if defined is None:
            return []
        keep, now = set(defined), self._clock()
        with self._lock:
            gone = [u for u, e in self._book.items()
                    if u not in keep and now - e.created > grace]
            for u in gone:
                self.release(u)
        return gone

    def state_of(self, view: HostView, cache_cpus=None, way_sizes=None,
                 host_cells=None) -> hoststate.HostRdtState:
        """resctrl as ``view`` holds it, with this host's PMD rule: what
        the PMD COS must span is its own base, whatever its mask holds."""
        base = None
        if self.pmd_cos:
            base = self._pmd_base(view) or Schemata({})
        return hoststate.from_resctrl(
            view, cache_cpus, way_sizes, host_cells=host_cells,
            classes=self.classes, prefix=self.fs.prefix,
            pmd_cos=self.pmd_cos, pmd_base=base)

    def published(self, view: HostView, cache_cpus=None, way_sizes=None,
                  host_cells=None) -> hoststate.HostRdtState:
        """What the scheduler is told, from one walk of resctrl: the
        state as the plan holds the host, with the inputs :meth:`claim`
        decides on (the filter runs the same claim on them)."""
        state = self.state_of(view, cache_cpus, way_sizes, host_cells)
        return self.effective(state, view=view, solve=True)

    def effective(self, state: hoststate.HostRdtState,
                  exclude: str | None = None, view: HostView | None = None,
                  solve: bool = False) -> hoststate.HostRdtState:
        """``state`` (resctrl as it is) as the plan holds the host: moves
        decided and not written yet at their new place; every reservation
        that has no group yet laid on at its decided position, with its
        CLOS and RMID (instances claimed or stopped, but ``exclude``, and
        classes whose group is still to be made).  ``solve``: with the
        solver's input for the scheduler (:meth:`published`)."""
        with self._lock:
            if not self._book and not solve:
                return state
            if view is None:
                view = self._collect(self.fs)
            owners, host, reservations, groups = self._inputs(view)
            state = state.with_relocated(
                self._pending_moves(view, owners, exclude))
            state = self._lay_on(state, owners, exclude)
            state = self._unplaced_classes(state, owners, host,
                                           reservations, groups)
            if solve:
                state = self._solved(state, view, host, reservations,
                                     groups)
            return state

    def _solved(self, state: hoststate.HostRdtState, view: HostView,
                host: placement.Host,
                reservations: Mapping[str, placement.Reservation],
                groups: Mapping[str, placement.ClassGroup]
                ) -> hoststate.HostRdtState:
        """``state`` with the solver's own input, the one :meth:`claim`
        hands it: the scheduler runs the same claim on it (one model)."""
        return state.with_solver(host, reservations, groups, self.compaction,
                                 monitor=self.monitor_rdt)

    def _pending_moves(self, view: HostView, owners: hostplan.Ownership,
                       exclude: str | None
                       ) -> dict[int, dict[str, list[tuple[int, int]]]]:
        """Moves decided and not written yet (a claim's, until its start
        writes them in make_room): resctrl still shows the old place, the
        plan already holds the new one.  cache id -> type -> (old, new)."""
        live, live_classes = hostplan.live_masks(view, owners)
        pending = [(live_classes.get(n), self._class_masks.get(n))
                   for n in self._class_moves]
        pending += [(live.get(u), self._book[u].reservation.masks)
                    for u in self._instance_moves
                    if u in self._book and u != exclude]
        pairs: dict[int, dict[str, list[tuple[int, int]]]] = {}
        for was, now in pending:
            if not was or not now:
                continue
            old_by = by_kind(was)
            for cid, per in by_kind(now).items():
                for kind, mask in per.items():
                    old = old_by.get(cid, {}).get(kind)
                    if old is not None and old != mask:
                        pairs.setdefault(cid, {}).setdefault(
                            kind, []).append((old, mask))
        return pairs

    def _lay_on(self, state: hoststate.HostRdtState,
                owners: hostplan.Ownership, exclude: str | None
                ) -> hoststate.HostRdtState:
        """The reservations and class masks that have no group yet."""
        for uuid, e in self._book.items():
            if uuid == exclude or uuid in owners.instances:
                continue
            r = e.reservation
            if r.masks and any(r.masks.values()):
                state = state.with_allocation(by_kind(r.masks),
                                              pmd_share=r.pmd_share)
            elif e.mb_only:
                state = state.with_allocation({})
            elif e.monitor and state.mon_capable:
                state = dataclasses.replace(
                    state, rmids_free=max(state.rmids_free - 1, 0))
        for name, masks in self._class_masks.items():
            if name not in owners.classes and masks:
                state = _class_made(state.with_allocation(by_kind(masks)),
                                    name)
        return state

    def _unplaced_classes(self, state, owners, host, reservations, groups):
        """A class in use with neither a group nor a decided place (its
        members all stopped, defined by an older nova-rdt) is placed when
        its first member starts: it costs its CLOS and ways now, where
        the planner would put it."""
        unplaced = sorted(n for n, g in groups.items()
                          if g.masks is None and n not in owners.classes)
        if not unplaced:
            return state
        try:
            plan = placement.release(host, reservations, groups, "")
        except placement.NoPlacement:
            plan = None
        for name in unplaced:
            masks = plan.classes.get(name) if plan else None
            if masks:
                state = state.with_allocation(by_kind(masks))
            state = _class_made(state, name)
        return state

    @contextlib.contextmanager
    def starting(self):
        """Held from a domain's creation until its masks are written."""
        with self._lock:
            yield

    # -- deciding --------------------------------------------------------

    def _pmd_base(self, view: HostView):
        """The PMD COS's own ways, as host preparation lays them out (None
        without ``pmd_shared_ways``)."""
        if not self.pmd_shared_ways:
            return None
        try:
            return hostlayout.plan(view.caps, self.reserved_host_ways,
                                   self.pmd_shared_ways).pmd
        except hostlayout.HostPrepError:
            return None

    def _inputs(self, view: HostView, wanted_class: str | None = None,
                claiming: str | None = None, mb_only: bool = False):
        owners = hostplan.ownership(
            view, self.fs.prefix,
            {u: e.domain for u, e in self._book.items()}, self.classes)
        base = self._pmd_base(view) if self.pmd_cos else None
        host = hostplan.host_of(view, owners, base, self.pmd_cos)
        # Groups of their own without ways take a CLOS the planner does
        # not count: it gets that many fewer.
        groups_without_ways = mb_only + sum(
            1 for u, e in self._book.items() if e.mb_only and u != claiming)
        if groups_without_ways:
            host = dataclasses.replace(
                host, clos=host.clos - groups_without_ways)
        live, live_classes = hostplan.live_masks(view, owners)
        reservations = {}
        for uuid, e in self._book.items():
            r = e.reservation
            if uuid in live and any(live[uuid].values()) \
                    and uuid not in self._instance_moves:
                # What resctrl holds is where the instance is.
                r = dataclasses.replace(r, masks=live[uuid])
            reservations[uuid] = r
        groups = {}
        in_use = {e.reservation.rdt_class for e in self._book.values()
                  if e.reservation.rdt_class}
        if wanted_class:
            in_use.add(wanted_class)
        for name in in_use | set(live_classes):
            c = self.classes.get(name)
            if c is None:
                continue
            ways = {r: {cid: max(c.l3_ways, host.resources[r].min_bits)
                        for cid in host.ids[r]} for r in host.resources}
            masks = self._class_masks.get(name) \
                if name in self._class_moves else (
                    live_classes.get(name) or self._class_masks.get(name))
            groups[name] = placement.ClassGroup(name, ways, masks)
        return owners, host, reservations, groups

    def claim(self, uuid: str, domain: str, ways: placement.PerId,
              pmd_share: bool = False, rdt_class: str | None = None,
              movable: bool = True, dry_run: bool = False,
              mb_only: bool = False, monitor: bool = False,
              view: HostView | None = None) -> placement.Plan:
        """Decide where ``uuid``'s ways go and reserve them (only decide,
        with ``dry_run``: a live migration's destination check).

        Raises :class:`placement.NoPlacement` when no valid placement
        exists; the book is then unchanged.  ``view``: the operation's
        walk of resctrl, when it has one.
        """
        with self._lock:
            if view is None:
                view = self._collect(self.fs)
            _owners, host, reservations, groups = self._inputs(
                view, rdt_class, claiming=uuid, mb_only=mb_only)
            old = reservations.get(uuid)
            new = placement.Reservation(
                uuid, ways, old.masks if old and old.ways == ways else None,
                pmd_share=pmd_share, rdt_class=rdt_class, movable=movable)
            try:
                plan = placement.place(host, reservations, groups, new,
                                       compaction=self.compaction)
            except placement.NoPlacement as e:
                if mb_only and "CLOS" in str(e):
                    raise placement.NoPlacement(
                        f"no CLOS left for instance {uuid}'s memory "
                        f"bandwidth group") from e
                raise
            if dry_run:
                return plan
            for moved in plan.moved:
                self.compaction_moves += 1
                LOG.info("nova-rdt: compaction moves %s to %s to make room "
                         "for %s (move %d since start)", moved,
                         plan.instances[moved], uuid, self.compaction_moves)
                e = self._book[moved]
                self._book[moved] = dataclasses.replace(
                    e, reservation=dataclasses.replace(
                        e.reservation, masks=plan.instances[moved]))
                self._instance_moves.add(moved)
            self._book[uuid] = Entry(domain, dataclasses.replace(
                new, masks=plan.instances.get(uuid, {})), self._clock(),
                mb_only=mb_only, monitor=monitor)
            for name, masks in plan.classes.items():
                self._class_masks[name] = masks
            for name in plan.moved_classes:
                LOG.info("nova-rdt: class %s moves to %s to make room for "
                         "%s", name, plan.classes[name], uuid)
                self._class_moves.add(name)
            return plan

    def adopt(self, uuid: str, domain: str, md: meta_mod.RdtMetadata,
              movable: bool = True) -> None:
        """Rebuild a reservation from a defined domain's metadata (at
        start-up; a stopped instance keeps its place)."""
        ways: dict[str, dict[int, int]] = {}
        masks: dict[str, dict[int, int]] = {}
        for cid, kind, n, mask in md.placed_cache():
            res = hostplan.RESOURCE_OF_KIND[kind]
            ways.setdefault(res, {})[cid] = n
            if mask:
                masks.setdefault(res, {})[cid] = mask
        placed = masks if masks and all(
            cid in masks.get(r, {}) for r, per in ways.items()
            for cid in per) else None
        with self._lock:
            self._book[uuid] = Entry(domain, placement.Reservation(
                uuid, ways, placed, pmd_share=md.pmd_share,
                rdt_class=md.rdt_class, movable=movable), self._clock())
            if md.rdt_class and md.class_masks \
                    and md.rdt_class not in self._class_masks:
                # A class whose members are all stopped has no group; its
                # place is still theirs, as it was before the restart.
                cls: dict[str, dict[int, int]] = {}
                for (cid, kind), mask in md.class_masks.items():
                    res = hostplan.RESOURCE_OF_KIND.get(kind)
                    if res is not None and mask:
                        cls.setdefault(res, {})[cid] = mask
                if cls:
                    self._class_masks[md.rdt_class] = cls

    # -- enforcing -------------------------------------------------------

    def make_room(self, uuid: str) -> None:
        """Before libvirt allocates for ``uuid``: write the moves its plan
        needs (class groups, compaction) and keep its decided ways out of
        the PMD COS for the moment.  libvirt's allocator counts every
        group's ways as used and needs a free run of the domain's size:
        without this, a class left in the way, a neighbour to be moved, or
        a stopped sharer's ways inside the PMD span (case 7) would make
        it refuse with "Not enough room".  :meth:`enforce` then writes the
        decided masks and the whole PMD COS.  Both apply the claims'
        plan, checked against resctrl as it is (:func:`placement.check`),
        and never decide again: masks that break a rule now raise."""
        with self._lock, self.fs.locked():
            e = self._book.get(uuid)
            if e is None or not e.reservation.masks:
                return
            view = self._collect(self.fs)
            owners, host, reservations, groups = self._inputs(view)
            reservations[uuid] = e.reservation
            plan = placement.check(host, reservations, groups)
            # The PMD COS is resolved from the groups' masks as they are
            # now: the moves' writes laid over the walk, not a new walk.
            view = _laid_over(view, self._write_moves(owners, plan))
            if owners.pmd is not None and self.pmd_cos:
                decided = {u: r.masks for u, r in reservations.items()
                           if r.masks and u != uuid}
                self._write_pmd(view, owners, host, decided,
                                keep_free=hostplan.schemata_of(
                                    e.reservation.masks), leaving=uuid)

    def _write_moves(self, owners: hostplan.Ownership,
                     plan: placement.Plan) -> dict[str, Schemata]:
        """Class groups and instances a plan moved, to their new masks;
        returns what was written (group -> lines)."""
        written: dict[str, Schemata] = {}
        for name in sorted(self._class_moves):
            g = owners.classes.get(name)
            want = plan.classes.get(name)
            if g is not None and want:
                written[g] = hostplan.schemata_of(want)
                self.fs.write_schemata(self.fs.group(g), written[g])
                LOG.info("nova-rdt: class group %s moved to %s", g,
                         written[g].format().strip())
            self._class_moves.discard(name)
        for uuid in sorted(self._instance_moves):
            g = owners.instances.get(uuid)
            want = plan.instances.get(uuid)
            if g is not None and want:
                written[g] = hostplan.schemata_of(want)
                self.fs.write_schemata(self.fs.group(g), written[g],
                                       allow_libvirt=True)
                LOG.info("nova-rdt: %s moved to %s", g,
                         written[g].format().strip())
            self._instance_moves.discard(uuid)
        return written

    def enforce(self, uuid: str) -> str | None:
        """Write ``uuid``'s decided masks into libvirt's group of it, and
        the PMD COS's and moved neighbours', under the resctrl flock.

        Returns the group written, or None when the instance has no group
        of its own (a class member, a monitor-only instance).  Raises
        ResctrlError (quoting last_cmd_status) or NoPlacement; the caller
        must then not let the guest run.
        """
        return self.enforce_seen(uuid)[0]

    def enforce_seen(self, uuid: str) -> tuple[str | None, HostView | None]:
        """:meth:`enforce`, and resctrl as it is after the writes (the
        walk it read, with what it wrote laid over it): what the host
        publishes next, without walking again.  None: nothing read."""
        with self._lock, self.fs.locked():
            e = self._book.get(uuid)
            if e is None or not e.reservation.masks:
                return None, None
            view = self._collect(self.fs)
            owners, host, reservations, groups = self._inputs(view)
            live = hostplan.live_masks(view, owners)[0]
            group = owners.instances.get(uuid)
            if group is None:
                raise placement.NoPlacement(
                    f"libvirt made no resctrl group for {e.domain}")
            # The reservation's decided masks, not the ones libvirt chose.
            reservations[uuid] = e.reservation
            plan = placement.check(host, reservations, groups)
            # Moves are written before libvirt allocates (make_room); one
            # still pending (a start the driver did not make) goes first.
            if self._class_moves or self._instance_moves:
                view = _laid_over(view, self._write_moves(owners, plan))
                live = hostplan.live_masks(view, owners)[0]
            written: dict[str, Schemata] = {}
            for other, g in sorted(owners.instances.items()):
                want = plan.instances.get(other)
                if not want:
                    continue
                current = live.get(other)
                if current != {r: dict(m) for r, m in want.items()}:
                    written[g] = hostplan.schemata_of(want)
                    self.fs.write_schemata(self.fs.group(g), written[g],
                                           allow_libvirt=True)
            if written:
                LOG.info("nova-rdt: decided masks written into %s",
                         ", ".join(written))
            if owners.pmd is not None and self.pmd_cos:
                written[owners.pmd] = self._write_pmd(view, owners, host,
                                                      plan.instances)
            return group, _laid_over(view, written)

    def _write_pmd(self, view: HostView, owners: hostplan.Ownership,
                   host: placement.Host,
                   decided: Mapping[str, placement.PerId],
                   keep_free=None, leaving: str | None = None
                   ) -> Schemata:
        """The PMD COS over the decided masks, by the hook's own rule
        (:func:`pmdplan.for_groups`): whichever writes last, the driver
        here or the hook on 'started', writes the same."""
        groups = {}
        for g in view.groups:
            if g.kind != "ctrl":
                continue
            s = Schemata({r: dict(m) for r, m in g.schemata.items()})
            groups[g.name] = s
        for uuid, g in owners.instances.items():
            masks = decided.get(uuid)
            if masks:
                groups[g] = groups[g].merged(hostplan.schemata_of(masks))
        sharers = {u: owners.instances[u] for u, e in self._book.items()
                   if e.reservation.pmd_share and u in owners.instances
                   and u != leaving}
        base = self._pmd_base(view)
        try:
            starting = self._rooms()
        except (OSError, ValueError) as e:
            # A state path nova-compute cannot read: the hook's next sync
            # honours the rooms all the same.
            LOG.warning("nova-rdt: the hook's rooms are unreadable: %s", e)
            starting = []
        # A room keeps ways free until libvirt has allocated them: once
        # the domain's group exists, its ways are the group's (a room its
        # 'started' left behind, on a failure, would keep a sharer out of
        # the PMD COS it shares).
        keep_free = rooms_mod.merged(keep_free, rooms_mod.kept_free(
            r for r in starting if r.uuid not in owners.instances))
        pmd = pmdplan.for_groups(view.caps, groups, self.fs.prefix, sharers,
                                 base, host.pmd_ids, keep_free=keep_free)
        if pmd.degraded and keep_free is None:
            LOG.warning("nova-rdt: PMD COS cannot cover %s",
                        ", ".join(pmd.dropped))
        # The hook's 'started', which runs inside libvirt's start, has
        # usually written the same by the same rule: then this is a check.
        now = next((g.schemata for g in view.groups if g.name == owners.pmd),
                   None)
        if now is None or any(now.get(r) != dict(pmd.schemata.domains(r))
                              for r in pmd.schemata.resources()):
            self.fs.write_schemata(self.fs.group(owners.pmd), pmd.schemata)
        return pmd.schemata


def _laid_over(view: HostView, written: Mapping[str, Schemata]
               ) -> HostView:
    """``view`` with ``written`` (group -> the lines written) merged, as
    the kernel merges a partial schemata write."""
    groups = []
    for g in view.groups:
        w = written.get(g.name) if g.kind == "ctrl" else None
        if w is not None:
            sch = {r: dict(m) for r, m in g.schemata.items()}
            for res, per in w.lines.items():
                if per:
                    sch.setdefault(res, {}).update(per)
            g = dataclasses.replace(g, schemata=sch)
        groups.append(g)
    return dataclasses.replace(view, groups=groups)


def _class_made(state: hoststate.HostRdtState, name: str
                ) -> hoststate.HostRdtState:
    """``state`` with class ``name``'s group as good as made: reserved,
    the next member joins it, it is no second group to make."""
    if state.classes is None or name not in state.classes:
        return state
    return dataclasses.replace(state, classes={
        **state.classes,
        name: dataclasses.replace(state.classes[name], exists=True)})


def by_kind(masks: placement.PerId) -> dict[int, dict[str, int]]:
    """Masks per resource as HostRdtState's cache id -> libvirt type."""
    out: dict[int, dict[str, int]] = {}
    for res, per in masks.items():
        kind = hostplan.KIND_OF_RESOURCE.get(res)
        if kind is None:
            continue
        for cid, mask in per.items():
            out.setdefault(cid, {})[kind] = mask
    return out


def metadata_masks(masks: placement.PerId | None
                   ) -> dict[tuple[int, str], int]:
    """Decided masks as the nova-rdt metadata carries them."""
    return {(cid, kind): mask
            for cid, per in by_kind(masks or {}).items()
            for kind, mask in per.items()}
