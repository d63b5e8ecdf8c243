"""A managed domain's life on this host, as libvirt's hook tells it.

``prepare`` checks that the domain's class is defined here and makes
room for a sharer's ways before libvirt allocates, kept by a room
(:mod:`nova_rdt.host.rooms`) until the domain runs.
``started`` and ``reconnect`` find libvirt's group of the domain's vCPUs
and give it what libvirt cannot (:mod:`nova_rdt.host.domaingroup`),
record the domain (:mod:`nova_rdt.host.records`) in place of its room,
and join its class and the PMD COS.  ``release`` forgets the domain and
its room and shrinks what it shared.  All of it happens under the
resctrl ``flock`` that libvirt's allocator also takes; the agent never
calls libvirt.
"""

from __future__ import annotations

from collections.abc import Iterable
import os

from nova_rdt import failpoints
from nova_rdt import naming
from nova_rdt.host import domaingroup
from nova_rdt.host import procinfo
from nova_rdt.host import records as records_mod
from nova_rdt.host import recovery
from nova_rdt.host import rooms as rooms_mod
from nova_rdt.host.classes import ClassGroups
from nova_rdt.host.context import LOG
from nova_rdt.host.context import HostContext
from nova_rdt.host.context import IsolationError
from nova_rdt.host.context import Snapshot
from nova_rdt.host.context import threads
from nova_rdt.host.domaingroup import DomainGroup
from nova_rdt.host.events import HookEvent
from nova_rdt.host.pmdcos import PmdCos
from nova_rdt.host.reconcile import restore_group
from nova_rdt.resctrl import errors
from nova_rdt.resctrl.schemata import Schemata


class DomainLifecycle:
    """The hook's events of managed domains on one host."""

    def __init__(self, host: HostContext, domain_group: DomainGroup,
                 classes: ClassGroups, pmd: PmdCos):
        self.host = host
        self.settings = host.settings
        self.fs = host.fs
        self.records = host.records
        self.domain_group = domain_group
        self.classes = classes
        self.pmd = pmd
        self.rooms = rooms_mod.Pending.of(host)
        #: this hook process: when libvirt invoked the operation it runs
        self.invocation = rooms_mod.Invocation.current()

    def handle(self, event: HookEvent) -> None:
        m = event.managed
        if m is None:
            return
        if event.operation == "prepare":
            if m.rdt_class and m.rdt_class not in self.host.classes:
                raise IsolationError(
                    f"rdt:class={m.rdt_class} is not defined in [rdt] "
                    f"classes on this host")
            if self.settings.pmd_cos and m.pmd_share and not m.rdt_class:
                self.make_room(event)
        elif event.operation in ("started", "reconnect"):
            self.started(event)
        elif event.operation == "release":
            self.released(event.uuid)

    def make_room(self, event: HookEvent) -> None:
        """Before libvirt allocates for a sharer (libvirt runs ``prepare``
        in ``qemuProcessInit``, before ``qemuProcessResctrlCreate``): its
        ways out of the PMD COS for the moment, as the compute's start
        does (:meth:`Placer.make_room`), so that a domain started by hand
        gets the same room.  The PMD COS stays one run, so it covers the
        ways a sharer in the middle left; libvirt's allocator counts them
        as used and would refuse "Not enough room" though they are free.
        ``started`` then writes the whole PMD COS again."""
        with self.fs.locked():
            snap = Snapshot(self.fs)
            decided = self.domain_group.decided(event, snap)
            pmd = snap.schemata.get(self.pmd.group_name)
            ways = domaingroup.schemata_of(decided or ())
            if decided:
                # Kept until 'started' records the domain: a re-derivation
                # of the PMD COS from the records alone (a stopped
                # sharer's release, late in the background) would put
                # the ways back before libvirt allocates.
                self._put_room(event, ways)
            if pmd is None or not any(
                    (pmd.get(res, cid) or 0) & mask
                    for res in ways.resources()
                    for cid, mask in ways.domains(res).items()):
                return
            LOG.info("%s: its ways %s out of the PMD COS until it starts",
                     event.name, ways.format().strip().replace("\n", " "))
            self.pmd.sync(snap=snap, keep_free=ways)

    def _put_room(self, event: HookEvent, ways: Schemata) -> None:
        """Keep ``ways`` free for ``event``'s domain until it runs.  The
        room is made all the same when this fails; only a re-derivation
        of the PMD COS before 'started' may then undo it."""
        inv = self.invocation
        boot = rooms_mod.boot_id()
        try:
            if inv.start is None or boot is None:
                raise rooms_mod.RoomError(
                    "this process's start time or the boot id is "
                    "unreadable")
            room = rooms_mod.Room(
                uuid=event.uuid, name=event.name, schemata=ways.format(),
                boot_id=boot, pid=inv.pid, pid_start=inv.start,
                made=max(rooms_mod.now_ticks()[0], inv.start))
        except rooms_mod.RoomError as e:
            LOG.warning("%s: no room kept for its ways: %s", event.name, e)
            return
        try:
            self.rooms.store.put(room)
        except OSError as e:
            LOG.error("%s", recovery.Degraded(
                recovery.state_reason(e),
                f"room of {event.name} ({event.uuid}) not written under "
                f"{self.rooms.store.dir}: {e.strerror or e}; a PMD COS "
                f"sync before it starts may take its ways back").line())

    def _drop_room(self, uuid: str) -> None:
        try:
            self.rooms.store.remove(uuid)
        except OSError as e:
            # Harmless once the domain runs with its record (the room
            # then no longer counts); swept by the next reconcile.
            LOG.error("%s", recovery.Degraded(
                recovery.state_reason(e),
                f"cannot remove the room of {uuid}: {e}").line())

    # -- QEMU ------------------------------------------------------------

    def qemu_pid(self, name: str) -> int:
        path = os.path.join(self.settings.libvirt_qemu_run_dir,
                            f"{naming.check_domain_name(name)}.pid")
        try:
            with open(path) as f:
                return int(f.read().strip())
        except (OSError, ValueError) as e:
            raise IsolationError(f"no QEMU pid for domain {name!r} in "
                                 f"{path}: {e}") from e

    def group_holding(self, tids: Iterable[int],
                      snap: Snapshot | None = None) -> str | None:
        """The control group (other than root) holding any of ``tids``."""
        if snap is not None:
            return snap.holding(tids)
        wanted = set(tids)
        for g in self.fs.groups(with_mon=False):
            if g.is_root or g.kind != "ctrl":
                continue
            try:
                if wanted & set(g.tasks()):
                    return g.name
            except errors.ResctrlError:
                continue
        return None

    # -- started / reconnect ---------------------------------------------

    def started(self, event: HookEvent) -> None:
        m = event.managed
        assert m is not None
        pid = self.qemu_pid(event.name)
        tids = threads(pid)
        if not tids:
            raise IsolationError(f"QEMU pid {pid} of {event.name!r} is gone")
        with self.fs.locked():
            # One walk of resctrl for the whole event; each step's writes
            # are laid over it.
            snap = Snapshot(self.fs)
            holder = None if m.rdt_class else self._libvirt_holder(
                event, tids, snap)
            lost = None
            if holder is None and not m.rdt_class:
                lost = self._lost_group_of(event.uuid, pid)
            if lost is not None:
                # libvirtd reconnecting to a domain whose group resctrl
                # lost: keep what the record knew, and re-create it.
                holder, schemata, members = \
                    lost.group, lost.schemata, lost.tasks
            else:
                self.domain_group.apply(event, holder, snap)
                schemata, members = self._group_content(holder, snap)
            failpoints.hit("agent.between_schemata_and_record")
            rec = records_mod.Record(
                uuid=event.uuid, name=event.name, pid=pid,
                pid_start=procinfo.proc_start_time(pid),
                pmd_share=m.pmd_share, rdt_class=m.rdt_class,
                group=holder, slo=m.slo,
                instance_name=event.instance_name, flavor=event.flavor,
                project_id=event.project_id,
                project_name=event.project_name,
                schemata=schemata, tasks=members,
                class_masks=tuple((cid, kind, mask) for (cid, kind), mask
                                  in m.class_masks)
                if m.rdt_class and m.class_masks else None)
            recorded = self._put_record(rec)
            # The record (or, unwritten, ``extra`` below) holds the ways
            # now: a room outliving this is no longer counted.
            self._drop_room(event.uuid)
            if lost is not None:
                d = restore_group(self.fs, rec)
                if d is not None:
                    LOG.error("%s", d.line())
            failpoints.hit("agent.after_record")
            if m.rdt_class:
                # A class group made now stays off a starting sharer's
                # room, as libvirt will allocate there.
                recs, _bad = self.records.all()
                self.classes.join(m.rdt_class, tids,
                                  planned=dict(m.class_masks) or None,
                                  held=rooms_mod.held(self.rooms.in_effect(
                                      [*recs, rec])) or None,
                                  snap=snap)
            if self.settings.pmd_cos and m.pmd_share:
                self.pmd.sync(extra=() if recorded else (rec,), snap=snap)

    def _libvirt_holder(self, event: HookEvent, tids: list[int],
                        snap: Snapshot) -> str | None:
        """libvirt's group of the domain's vCPUs.  A record names only
        that group (the one reconcile may remove); another owner's is not
        recorded."""
        holder = self.group_holding(tids, snap)
        if holder is not None and not naming.is_libvirt_group(holder):
            LOG.warning("%s: vCPUs are in %s, not a libvirt group",
                        event.name, holder)
            return None
        return holder

    def _lost_group_of(self, uuid: str, pid: int
                       ) -> records_mod.Record | None:
        """The record of this very domain (same QEMU) naming a libvirt
        group that no longer exists, if any."""
        recs, _bad = self.records.all()
        old = next((r for r in recs if r.uuid == uuid), None)
        if old is None or old.pid != pid or old.group is None:
            return None
        try:
            self.fs.group(old.group)
        except errors.GroupNotFound:
            return old
        return None

    def _group_content(self, name: str | None, snap: Snapshot
                       ) -> tuple[str | None, tuple[int, ...] | None]:
        """The schemata and tasks of libvirt's group ``name``, what
        reconcile needs to re-create it after resctrl lost it."""
        if name is None:
            return None, None
        if name not in snap.schemata:
            LOG.warning("%s: cannot read back: gone", name)
            return None, None
        text = snap.schemata[name].format()
        members = tuple(sorted(snap.tasks.get(name, ())))[
            :records_mod.MAX_TASKS]
        if len(text) > records_mod.MAX_SCHEMATA:
            return None, members
        return text, members

    def _put_record(self, rec: records_mod.Record) -> bool:
        """Write ``rec``; a full or read-only state path is said in one
        line and the isolation goes on without the record."""
        try:
            self.records.put(rec)
            return True
        except OSError as e:
            d = recovery.Degraded(
                recovery.state_reason(e),
                f"record of {rec.name} ({rec.uuid}) not written under "
                f"{self.records.dir}: {e.strerror or e}; the domain is "
                f"isolated, but a crash of it will not be cleaned up until "
                f"the state path is fixed and 'nova-rdt reconcile' runs")
            LOG.error("%s", d.line())
            return False

    # -- release ---------------------------------------------------------

    def released(self, uuid: str) -> None:
        with self.fs.locked():
            recs, _bad = self.records.all()
            rec = next((r for r in recs if r.uuid == uuid), None)
            self._release_room(uuid, recs)
            failpoints.hit("agent.release_before_record")
            if rec is not None and rec.pid_start is not None \
                    and rec.alive():
                # libvirt runs 'release' once the run's QEMU is gone: a
                # record whose very QEMU (pid and start time) still runs
                # is a later run's, stopped and started again while this
                # release ran late in the background.  Removing it would
                # take that run's ways out of the PMD COS until the next
                # reconcile.
                LOG.info("%s: its record stays: QEMU %d of a later run "
                         "still runs", rec.name, rec.pid)
                return
            try:
                self.records.remove(uuid)
            except OSError as e:
                # The PMD COS and the classes must still shrink; the
                # stale record is dropped by the next reconcile.
                LOG.error("%s", recovery.Degraded(
                    recovery.state_reason(e),
                    f"cannot remove the record of {uuid}: {e}").line())
            if rec is not None and rec.rdt_class:
                self.classes.prune()
            # No record: a start that failed after ``prepare`` may have
            # left the PMD COS without its ways (make_room).
            if self.settings.pmd_cos and (rec is None or rec.pmd_share):
                self.pmd.sync()

    def _release_room(self, uuid: str,
                      recs: list[records_mod.Record]) -> None:
        """Drop ``uuid``'s room unless it is a later start's (this release
        ran late: :func:`rooms.dropped_by`), and sweep stale ones."""
        try:
            room = self.rooms.store.read(f"{uuid}.json")
        except rooms_mod.RoomError:
            room = None              # none, or not one: the sweep's
        if room is not None:
            if rooms_mod.dropped_by(room, self.invocation):
                self._drop_room(uuid)
            else:
                LOG.info("%s: its room stays: a start that began after "
                         "this release was invoked made it", room.name)
        try:
            removed, _kept = self.rooms.sweep(recs)
        except OSError as e:
            LOG.warning("cannot sweep stale rooms: %s", e)
            return
        for path in removed:
            LOG.info("removed stale room %s", path)
