"""Reconcile: remove what dead domains left, re-apply what living ones need.

Run by ``nova-rdt reconcile`` and by nova-compute at start, for what the
hook could not see (a crash, a host reboot, resctrl lost and mounted
again).  Under the resctrl ``flock``: dead domains' records are dropped
with their libvirt groups; the groups resctrl lost are worked out from
the records (:func:`nova_rdt.host.recovery.lost_groups`, pure) and
re-created as the hook recorded them; class members rejoin their class;
empty class groups go; the PMD COS is synced.  One record or group that
cannot be handled is named and skipped, the rest is still done.
"""

from __future__ import annotations

import dataclasses
import errno
import os

from nova_rdt import failpoints
from nova_rdt.host import prep as host_prep
from nova_rdt.host import procinfo
from nova_rdt.host import records as records_mod
from nova_rdt.host import recovery
from nova_rdt.host import rooms as rooms_mod
from nova_rdt.host.classes import ClassGroups
from nova_rdt.host.context import LOG
from nova_rdt.host.context import HostContext
from nova_rdt.host.context import IsolationError
from nova_rdt.host.context import threads
from nova_rdt.host.pmdcos import PmdCos
from nova_rdt.resctrl import errors
from nova_rdt.resctrl.groups import OWNER_LIBVIRT
from nova_rdt.resctrl.groups import Group
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.schemata import Schemata


@dataclasses.dataclass
class ReconcileReport:
    removed_groups: list[str] = dataclasses.field(default_factory=list)
    dropped_records: list[str] = dataclasses.field(default_factory=list)
    rejoined: list[str] = dataclasses.field(default_factory=list)
    unreadable_records: list[str] = dataclasses.field(default_factory=list)
    pmd: str | None = None
    restored_groups: list[str] = dataclasses.field(default_factory=list)
    restored_host: bool = False
    swept: list[str] = dataclasses.field(default_factory=list)
    adopted: list[str] = dataclasses.field(default_factory=list)
    # "reason: detail" of what could not be repaired (recovery.REASONS).
    degraded: list[str] = dataclasses.field(default_factory=list)


def degraded(report: ReconcileReport, d: recovery.Degraded) -> None:
    """Say ``d`` in one log line and in the report."""
    LOG.error("%s", d.line())
    report.degraded.append(f"{d.reason}: {d.detail}")


def restore_group(fs: Resctrl, rec: records_mod.Record
                  ) -> recovery.Degraded | None:
    """Re-create libvirt's group of a running domain with the schemata
    and vCPU threads the hook recorded when the domain started; what
    could not be done, or None.

    libvirt does not do it: on reconnect (qemuProcessReconnect) it
    only recomputes its groups' paths (virResctrlAllocDeterminePath)
    and never writes them again, so a domain whose group vanished runs
    on the root's ways until it is restarted.
    """
    if rec.schemata is None:
        return recovery.Degraded(
            "group_not_restored",
            f"{rec.name} ({rec.uuid}) runs but its group {rec.group} is "
            f"gone and its record holds no schemata; restart the "
            f"instance to get its ways back")
    assert rec.group is not None      # lost_groups() only
    g = Group(fs, rec.group)
    failpoints.hit("reconcile.restore_group")
    try:
        try:
            fs.ops.mkdir(g.path)
        except FileExistsError:
            pass
        fs.write_schemata(g, Schemata.parse(rec.schemata),
                          allow_libvirt=True)
        running = set(threads(rec.pid))
        for tid in rec.tasks or ():
            if tid not in running:
                continue
            try:
                fs.write(g.file("tasks"), f"{tid}\n", what="task")
            except errors.WriteRejected as e:
                if e.errno != errno.ESRCH:
                    raise
    except (errors.ResctrlError, OSError) as e:
        if recovery.resctrl_lost(e):
            raise
        try:
            fs.delete_group(g, missing_ok=True, allow_libvirt=True)
        except (errors.ResctrlError, OSError):
            pass
        return recovery.Degraded(
            "group_not_restored",
            f"{rec.name} ({rec.uuid}): cannot re-create {rec.group}: {e}")
    LOG.info("reconcile: re-created %s of running %s", rec.group, rec.name)
    return None


def remove_orphan(fs: Resctrl, name: str) -> bool:
    """Remove libvirt's group ``name`` of a dead domain, when no task of
    it still runs; whether it was removed."""
    try:
        g = fs.group(name)
    except errors.GroupNotFound:
        return False
    if g.owner != OWNER_LIBVIRT:
        return False  # a record never authorises touching others
    if any(procinfo.is_running(t, None) for t in g.tasks()):
        return False
    fs.delete_group(g, missing_ok=True, allow_libvirt=True)
    LOG.info("removed orphaned group %s", name)
    return True


class Reconciler:
    def __init__(self, host: HostContext, classes: ClassGroups,
                 pmd: PmdCos):
        self.host = host
        self.fs = host.fs
        self.records = host.records
        self.classes = classes
        self.pmd = pmd
        self.rooms = rooms_mod.Pending.of(host)

    def reconcile(self) -> ReconcileReport:
        """Remove what dead domains left; re-apply what living ones need.

        Only touches: libvirt groups recorded for a managed domain that is
        gone (and whose tasks are all gone), libvirt groups recorded for a
        running domain that resctrl lost (re-created as they were),
        nova-rdt's own class groups and PMD group.  Foreign groups (pqos
        ``COS*``, other domains) are never touched.

        What cannot be repaired is in ``report.degraded`` (one line each,
        also logged once); the rest is still done.
        """
        report = ReconcileReport()
        lost = recovery.probe_resctrl(self.fs.root)
        if lost is None:
            try:
                with self.fs.locked():
                    self._reconcile(report)
            except (errors.ResctrlError, OSError) as e:
                if not recovery.resctrl_lost(e):
                    raise
                lost = recovery.Degraded(
                    "resctrl_unavailable",
                    f"{self.fs.root}: {e}; mount resctrl there, then run "
                    f"'nova-rdt reconcile'")
        if lost is not None:
            # Records are kept: they are what re-creates the groups of the
            # running domains once resctrl is back.
            degraded(report, lost)
        state = recovery.probe_state_path(self.records.state_path)
        if state is not None and not any(
                d.startswith(state.reason + ":") for d in report.degraded):
            degraded(report, state)
        return report

    def _state_failed(self, report: ReconcileReport, e: OSError,
                      what: str) -> None:
        reason = recovery.state_reason(e)
        if any(d.startswith(reason + ":") for d in report.degraded):
            return                     # said once per run
        degraded(report, recovery.Degraded(
            reason, f"{what} under {self.records.dir}: "
                    f"{e.strerror or e}; fix the state path, then run "
                    f"'nova-rdt reconcile'"))

    def _reconcile(self, report: ReconcileReport) -> None:
        try:
            report.swept = self.records.sweep_temporaries()
        except OSError as e:
            self._state_failed(report, e, "cannot remove temporary files")
        living = self._drop_dead(self._read_records(report), report)
        self._sweep_rooms(living, report)
        existing = {g.name for g in self.fs.groups(with_mon=False)}
        lost = recovery.lost_groups(living, existing)
        if lost:
            self._restore_host(report)
        for rec in lost:
            d = restore_group(self.fs, rec)
            if d is not None:
                degraded(report, d)
            elif rec.group is not None:        # lost_groups() only
                report.restored_groups.append(rec.group)
        self._rejoin_classes(living, report)
        report.removed_groups += self.classes.prune()
        if self.host.settings.pmd_cos:
            report.pmd = self.pmd.sync()
            plan = self.pmd.last_plan
            # A starting sharer's room cuts the span on purpose.
            if plan is not None and plan.degraded and \
                    self.pmd.last_rooms is None:
                degraded(report, recovery.Degraded(
                    "pmd_degraded",
                    f"the PMD COS cannot also cover {', '.join(plan.dropped)}"
                    f" (see the PMD COS warning above)"))

    def _sweep_rooms(self, living: list[records_mod.Record],
                     report: ReconcileReport) -> None:
        """Remove the rooms no start follows up any more, and files that
        are not rooms where rooms are kept (:mod:`rooms`)."""
        try:
            removed, kept = self.rooms.sweep(living)
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EPERM):
                # nova-compute's reconcile reads as its own user; the
                # hook's release and root's reconcile remove them.
                LOG.info("reconcile: stale rooms left for root: %s", e)
                return
            self._state_failed(report, e, "cannot remove stale rooms")
            return
        for path in removed:
            LOG.info("reconcile: removed stale room %s", path)
        for what in kept:
            LOG.error("reconcile: left in place, not a room: %s", what)
        report.swept += removed

    def _read_records(self, report: ReconcileReport
                      ) -> list[records_mod.Record]:
        recs, report.unreadable_records = self.records.all()
        for bad in report.unreadable_records:
            LOG.error("reconcile: skipped record %s", bad)
        if report.unreadable_records:
            degraded(report, recovery.Degraded(
                "records_unreadable",
                f"{len(report.unreadable_records)} record file(s) left in "
                f"place: {report.unreadable_records[0]}"))
        return recs

    def _drop_dead(self, recs: list[records_mod.Record],
                   report: ReconcileReport) -> list[records_mod.Record]:
        """Drop the records of dead domains with their orphaned groups;
        the living ones."""
        living = []
        for rec in recs:
            # One record that cannot be handled is named and skipped;
            # the others are still reconciled.
            try:
                if rec.alive():
                    living.append(rec)
                    continue
                if rec.group:
                    failpoints.hit("reconcile.remove")
                    if remove_orphan(self.fs, rec.group):
                        report.removed_groups.append(rec.group)
            except (errors.ResctrlError, OSError, ValueError) as e:
                if recovery.resctrl_lost(e):
                    raise
                where = os.path.join(self.records.dir, f"{rec.uuid}.json")
                LOG.error("reconcile: %s (group %s): %s", where,
                          rec.group, e)
                report.unreadable_records.append(f"{where}: {e}")
                continue
            failpoints.hit("reconcile.drop_record")
            try:
                self.records.remove(rec.uuid)
            except OSError as e:
                self._state_failed(report, e, f"cannot drop the record of "
                                              f"{rec.name} ({rec.uuid})")
                continue
            report.dropped_records.append(rec.uuid)
        return living

    def _restore_host(self, report: ReconcileReport) -> None:
        """The host layout (the root's ways, the PMD group) as nova-compute
        writes it at start: resctrl lost it with the domains' groups."""
        s = self.host.settings
        try:
            summary = host_prep.prepare(self.fs, s.reserved_host_ways,
                                        s.pmd_shared_ways)
        except (host_prep.HostPrepError, errors.ResctrlError) as e:
            if recovery.resctrl_lost(e):
                raise
            LOG.error("reconcile: cannot restore the host layout: %s", e)
            return
        report.restored_host = True
        LOG.info("reconcile: host layout restored: root %s", summary["root"])

    def _rejoin_classes(self, living: list[records_mod.Record],
                        report: ReconcileReport) -> None:
        # A running domain's group that could not be re-made here (this
        # process may not make libvirt's groups; root's reconcile will)
        # still owns the ways its record holds: a class made now must
        # not take them.
        existing = {g.name for g in self.fs.groups(with_mon=False)}
        # So do the ways kept free for a sharer about to start.
        held = rooms_mod.held(self.rooms.in_effect(living))
        for rec in living:
            if rec.group and rec.group not in existing and rec.schemata:
                try:
                    s = Schemata.parse(rec.schemata)
                except ValueError:
                    continue
                for res in s.resources():
                    for cid, mask in s.domains(res).items():
                        held[res, cid] = held.get((res, cid), 0) | mask
        # A class group resctrl lost is re-made where nova-rdt decided it
        # (a member's recorded class masks, when still safe), not at the
        # lowest free ways: there it would land beside the PMD sharers,
        # whose next one would then find no room next to the PMD COS.
        # The last member to start carries the latest decision.
        planned: dict[str, dict[tuple[int, str], int]] = {}
        for rec in sorted(living, key=lambda r: r.pid_start or 0):
            masks = rec.planned_class_masks() if rec.rdt_class else None
            if masks:
                planned[rec.rdt_class] = masks
        for rec in living:
            if not rec.rdt_class:
                continue
            try:
                self.classes.join(rec.rdt_class, threads(rec.pid),
                                  planned=planned.get(rec.rdt_class),
                                  held=held)
                report.rejoined.append(rec.uuid)
            except (IsolationError, errors.ResctrlError) as e:
                if recovery.resctrl_lost(e):
                    raise
                LOG.error("cannot re-add %s to class %s: %s",
                          rec.name, rec.rdt_class, e)
