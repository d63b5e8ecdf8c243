"""The host agent: class groups, the PMD COS, and reconciliation.

Called by the hook on libvirt's events, and by ``nova-rdt pmd sync`` and
``nova-rdt reconcile``.  Every change happens under the resctrl
``flock`` that libvirt's allocator also takes, so libvirt never sees a
half-updated PMD mask.  It never calls libvirt.

The PMD COS holds the PMD *cores* (``cpus_list``), not their thread ids:
OVS replaces its PMD threads whenever ``pmd-cpu-mask`` changes, so tids
would go stale, while PMD cores are isolated and dedicated to those
threads.  A task in the default group runs with the CLOS of the CPU it
is on, which is exactly the PMD group on a PMD core.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os

from nova_rdt import failpoints
from nova_rdt.allocation import hostlayout
from nova_rdt.allocation import hostplan
from nova_rdt.allocation import naming
from nova_rdt.allocation import placement
from nova_rdt.allocation import pmdplan
from nova_rdt.allocation import rdtclass
from nova_rdt.host import enforce
from nova_rdt.host import ovs
from nova_rdt.host import prep as host_prep
from nova_rdt.host import procinfo
from nova_rdt.host import records as records_mod
from nova_rdt.host import recovery
from nova_rdt.host.events import HookEvent
from nova_rdt.host.settings import HookSettings
from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl import errors
from nova_rdt.resctrl.groups import OWNER_LIBVIRT
from nova_rdt.resctrl.groups import Group
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.hostview import HostView
from nova_rdt.resctrl.schemata import Schemata

LOG = logging.getLogger("nova_rdt.hook")


class IsolationError(RuntimeError):
    """Isolation could not be applied to a domain."""


def _l3(caps: caps_mod.Capabilities) -> dict[str, caps_mod.CacheResource]:
    """The L3 resources (L3, or L3CODE and L3DATA): what classes hold."""
    return {n: r for n, r in caps.cache.items() if r.level == 3}


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


def _ways(masks) -> dict[str, dict[int, int]]:
    """The number of ways of each mask."""
    return {r: {cid: cbm.popcount(m) for cid, m in per.items()}
            for r, per in masks.items()}


def pmd_cache_ids(caps, cores) -> frozenset[int] | None:
    """The cache ids whose CPUs include a PMD core; None when the cores
    are not known (the PMD rule then holds on every id)."""
    if not cores:
        return None
    # L3 ids only: an L2 id numbers a core's own cache, not a socket's.
    return frozenset(cid for name, res in caps.cache.items()
                     if name.startswith("L3")
                     for cid, dom in res.domains.items()
                     if set(dom.cpus) & set(cores))


class Agent:
    def __init__(self, settings: HookSettings, fs: Resctrl | None = None,
                 records: records_mod.Records | None = None):
        """``fs`` and ``records`` default to direct access (the hook runs
        as root); nova-compute passes privsep-backed ones."""
        self.settings = settings
        self.fs = fs or Resctrl(settings.resctrl_root,
                                prefix=settings.group_prefix,
                                sysfs_cpu=settings.sysfs_cpu_root,
                                lock_timeout=settings.lock_timeout)
        self.records = records or records_mod.Records(settings.state_path)
        self.classes = rdtclass.parse_all(settings.classes)
        self.last_pmd_plan: pmdplan.PmdPlan | None = None

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

    @staticmethod
    def threads(pid: int) -> list[int]:
        try:
            return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
        except OSError:
            return []

    def group_holding(self, tids) -> str | None:
        """The control group (other than root) holding any of ``tids``."""
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

    # -- events ----------------------------------------------------------

    def handle(self, event: HookEvent) -> None:
        m = event.managed
        if m is None:
            return
        if event.operation == "prepare":
            if m.rdt_class and m.rdt_class not in self.classes:
                raise IsolationError(
                    f"rdt:class={m.rdt_class} is not defined in [rdt] "
                    f"classes on this host")
        elif event.operation in ("started", "reconnect"):
            self.started(event)
        elif event.operation == "release":
            self.released(event.uuid)

    def started(self, event: HookEvent) -> None:
        m = event.managed
        pid = self.qemu_pid(event.name)
        tids = self.threads(pid)
        if not tids:
            raise IsolationError(f"QEMU pid {pid} of {event.name!r} is gone")
        with self.fs.locked():
            holder = None if m.rdt_class else self.group_holding(tids)
            # A record names only libvirt's group of the domain (the one
            # reconcile may remove); another owner's is not recorded.
            if holder is not None and not naming.is_libvirt_group(holder):
                LOG.warning("%s: vCPUs are in %s, not a libvirt group",
                            event.name, holder)
                holder = None
            lost = None
            if holder is None and not m.rdt_class:
                lost = self._lost_group_of(event.uuid, pid)
            if lost is not None:
                # libvirtd reconnecting to a domain whose group resctrl
                # lost: keep what the record knew, and re-create it.
                holder, schemata, members = \
                    lost.group, lost.schemata, lost.tasks
            else:
                if holder is not None and m.masks:
                    self.write_decided(event.name, holder, m)
                elif holder is not None and m.cache:
                    self.place_here(event, holder)
                if m.mb_mbps:
                    self.set_mb_mbps(event.name, holder, m.mb_mbps)
                schemata, members = self._group_content(holder)
            failpoints.hit("agent.between_schemata_and_record")
            rec = records_mod.Record(
                uuid=event.uuid, name=event.name, pid=pid,
                pid_start=procinfo.proc_start_time(pid),
                pmd_share=m.pmd_share, rdt_class=m.rdt_class,
                group=holder, slo=m.slo,
                instance_name=event.instance_name, flavor=event.flavor,
                project_id=event.project_id,
                project_name=event.project_name,
                schemata=schemata, tasks=members)
            recorded = self._put_record(rec)
            if lost is not None:
                self._restore_group(rec, ReconcileReport())
            failpoints.hit("agent.after_record")
            if m.rdt_class:
                self.join_class(m.rdt_class, tids,
                                planned=dict(m.class_masks) or None)
            if self.settings.pmd_cos and m.pmd_share:
                self.sync_pmd(extra=() if recorded else (rec,))

    def _taken(self, caps, skip: set[str]) -> dict[str, dict[int, int]]:
        """Per cache resource and id, the union of the masks of every
        control group (the root's, foreign ones' included) but ``skip``."""
        out: dict[str, dict[int, int]] = {}
        for g in self.fs.groups(with_mon=False):
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

    def write_decided(self, name: str, holder: str, m) -> bool:
        """The masks nova-rdt decided for the domain, into libvirt's group
        of it, when they are safe (:mod:`nova_rdt.host.enforce`); else
        libvirt's choice stays and the reason is logged."""
        caps = self.fs.capabilities()
        g = self.fs.group(holder)
        current = g.schemata()
        skip = {holder}
        if m.pmd_share:
            skip.add(naming.pmd_group(self.fs.prefix))
        lines, why = enforce.check(
            dict(m.masks),
            {r: current.domains(r) for r in current.resources()},
            self._taken(caps, skip),
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
            LOG.info("%s: decided masks in %s: %s", name, holder,
                     kept.restricted(lines).format().strip()
                     .replace("\n", " "))
        return True

    def place_here(self, event: HookEvent, holder: str) -> bool:
        """A domain that carries no decided masks (defined by hand, or by
        an older nova-rdt) is placed here, by the compute's rules
        (:mod:`nova_rdt.allocation.placement`), against resctrl as it is:
        a sharer next to the PMD COS, anyone else away from it.  When no
        placement exists, libvirt's choice stays and that is logged."""
        m = event.managed
        assert m is not None
        view = HostView.collect(self.fs)
        recs, _bad = self.records.all()
        domains = {r.uuid: r.name for r in recs if r.alive()}
        domains[event.uuid] = event.name
        sharing = {r.uuid for r in recs if r.pmd_share}
        owners = hostplan.ownership(view, self.fs.prefix, domains,
                                    self.classes)
        try:
            base = hostlayout.plan(view.caps,
                                   self.settings.reserved_host_ways,
                                   self.settings.pmd_shared_ways).pmd
        except hostlayout.HostPrepError:
            base = None
        host = hostplan.host_of(view, owners, base, self.settings.pmd_cos)
        live, live_classes = hostplan.live_masks(view, owners)
        reservations = {
            u: placement.Reservation(u, _ways(masks), masks,
                                     pmd_share=u in sharing, movable=False)
            for u, masks in live.items() if u != event.uuid}
        classes = {c: placement.ClassGroup(c, _ways(masks), masks)
                   for c, masks in live_classes.items()}
        new = placement.Reservation(
            event.uuid,
            hostplan.ways_of({cid: {kind: n} for cid, kind, n in m.cache}),
            pmd_share=m.pmd_share and self.settings.pmd_cos)
        try:
            plan = placement.place(host, reservations, classes, new)
        except placement.NoPlacement as e:
            LOG.warning("%s: no placement by nova-rdt's rules (%s); "
                        "libvirt's choice stays", event.name, e)
            return False
        decided = tuple(sorted(
            ((cid, hostplan.KIND_OF_RESOURCE[res]), mask)
            for res, per in plan.instances.get(event.uuid, {}).items()
            for cid, mask in per.items()))
        LOG.info("%s: no decided masks in its metadata; placed here",
                 event.name)
        return self.write_decided(event.name, holder,
                                  dataclasses.replace(m, masks=decided))

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

    def _group_content(self, name: str | None
                       ) -> tuple[str | None, tuple[int, ...] | None]:
        """The schemata and tasks of libvirt's group ``name``, what
        reconcile needs to re-create it after resctrl lost it."""
        if name is None:
            return None, None
        try:
            g = self.fs.group(name)
            text = g.schemata().format()
            members = tuple(g.tasks())[:records_mod.MAX_TASKS]
        except errors.ResctrlError as e:
            LOG.warning("%s: cannot read back: %s", name, e)
            return None, None
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

    def set_mb_mbps(self, name: str, group: str | None, values) -> None:
        """MB in MBps, which libvirt's <memorytune> cannot carry.

        Written into libvirt's group of the domain's vCPUs (the flavor
        must give them L3 ways, so that the group exists).
        """
        if group is None:
            raise IsolationError(f"no resctrl group holds the vCPUs of "
                                 f"{name!r}: MB {dict(values)} MBps not set")
        bw = self.fs.capabilities().bandwidth.get("MB")
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
        LOG.info("%s: MB %s MBps in %s", name,
                 dict(kept.domains("MB")), group)

    def released(self, uuid: str) -> None:
        with self.fs.locked():
            recs, _bad = self.records.all()
            rec = next((r for r in recs if r.uuid == uuid), None)
            failpoints.hit("agent.release_before_record")
            try:
                self.records.remove(uuid)
            except OSError as e:
                # The PMD COS and the classes must still shrink; the
                # stale record is dropped by the next reconcile.
                LOG.error("%s", recovery.Degraded(
                    recovery.state_reason(e),
                    f"cannot remove the record of {uuid}: {e}").line())
            if rec is None:
                return
            if rec.rdt_class:
                self.prune_classes()
            if self.settings.pmd_cos and rec.pmd_share:
                self.sync_pmd()

    # -- class groups ----------------------------------------------------

    def join_class(self, name: str, tids,
                   planned: dict[tuple[int, str], int] | None = None) -> str:
        """Add ``tids`` to class ``name``'s group, making it first if need
        be: at the masks nova-rdt decided (``planned``, from the member's
        metadata) when they are safe, else at free ways found here."""
        cls = self.classes.get(name)
        if cls is None:
            raise IsolationError(f"rdt:class={name} is not defined in "
                                 f"[rdt] classes on this host")
        gname = cls.group_name(self.fs.prefix)
        with self.fs.locked():
            try:
                g = self.fs.group(gname)
            except errors.GroupNotFound:
                schemata = self._planned_class_schemata(cls, planned) \
                    or self._class_schemata(cls)
                g = self.fs.create_group(gname)
                failpoints.hit("agent.class_update")
                try:
                    self.fs.write_schemata(g, schemata)
                except errors.ResctrlError:
                    self.fs.delete_group(g, missing_ok=True)
                    raise
                LOG.info("created class group %s: %s", gname,
                         schemata.format().strip().replace("\n", " "))
            else:
                self._repair_class(cls, g)
            failpoints.hit("agent.class_join")
            self.fs.add_tasks(g, tids, ignore_missing=True)
        return gname

    def _repair_class(self, cls: rdtclass.RdtClass, g) -> None:
        """A class group made but never given its ways (a crash between
        its mkdir and its schemata write) still has the kernel's default
        (every way, or on newer kernels every unused and shareable way),
        wider than the class: give it its own ways now.  A group no wider
        than its class is left alone: the runtime controller narrows
        classes on purpose, and this runs on every member's start.
        """
        caps = self.fs.capabilities()
        current = g.schemata()
        want = {name: max(cls.l3_ways, res.min_cbm_bits)
                for name, res in _l3(caps).items()}
        if all(bin(mask).count("1") <= want[name]
               for name in want
               for mask in current.domains(name).values()):
            return
        schemata = self._class_schemata(cls, skip=g.name)
        self.fs.write_schemata(g, schemata)
        LOG.warning("class group %s had no ways of its own (a write cut "
                    "short); now %s", g.name,
                    schemata.format().strip().replace("\n", " "))

    def _planned_class_schemata(self, cls: rdtclass.RdtClass,
                                planned: dict[tuple[int, str], int] | None
                                ) -> Schemata | None:
        """The decided class masks, when they hold the class's ways on
        every cache id, pass the kernel's rules and overlap no group."""
        if not planned:
            return None
        caps = self.fs.capabilities()
        taken = self._taken(caps, set())
        lines: dict[str, dict[int, int]] = {}
        for (cid, kind), mask in planned.items():
            res = enforce.RESOURCE_OF_KIND.get(kind)
            info = caps.cache.get(res or "")
            if info is None or cid not in info.domains:
                return None
            if cbm.popcount(mask) != max(cls.l3_ways, info.min_cbm_bits) \
                    or mask & taken.get(res, {}).get(cid, 0):
                return None
            try:
                cbm.check(mask, info.cbm_len, info.min_cbm_bits,
                          info.sparse_masks)
            except cbm.CbmError:
                return None
            lines.setdefault(res, {})[cid] = mask
        want = {n for n in ("L3CODE", "L3DATA") if caps.cdp} or {"L3"}
        for res in want & set(caps.cache):
            if set(lines.get(res, {})) != set(caps.cache[res].domains):
                return None
        if cls.mb is not None and "MB" in caps.bandwidth:
            lines["MB"] = {n: cls.mb
                           for n in caps.bandwidth["MB"].domain_ids}
        return Schemata(lines)

    def _class_schemata(self, cls: rdtclass.RdtClass,
                        skip: str | None = None) -> Schemata:
        """``cls.l3_ways`` free ways on every L3 cache id, libvirt's way.

        Only L3 lines: a class is defined in L3 ways.  Its L2 (on hosts
        with L2 CAT) stays what the kernel gives a new group, the
        shareable and unused ways (rdtgroup_init_alloc()): every way, as
        the root keeps all of L2, so no L2 way is ever looked for."""
        caps = self.fs.capabilities()
        used: dict[tuple[str, int], int] = {}
        for g in self.fs.groups(with_mon=False):
            if g.kind != "ctrl" or g.name == skip:
                continue
            s = g.schemata()
            for res in s.resources():
                for cid, mask in s.domains(res).items():
                    used[res, cid] = used.get((res, cid), 0) | mask
        lines: dict[str, dict[int, int]] = {}
        for res_name, res in _l3(caps).items():
            lines[res_name] = {}
            for cid in sorted(res.domains):
                free = cbm.full_mask(res.cbm_len) & ~used.get((res_name, cid),
                                                              0)
                mask = cbm.best_fit(free, max(cls.l3_ways, res.min_cbm_bits))
                if mask is None:
                    raise IsolationError(
                        f"class {cls.name}: no {cls.l3_ways} contiguous "
                        f"free ways on {res_name} cache id {cid}")
                lines[res_name][cid] = mask
        if cls.mb is not None and "MB" in caps.bandwidth:
            bw = caps.bandwidth["MB"]
            lines["MB"] = {n: cls.mb for n in bw.domain_ids}
        return Schemata(lines)

    def prune_classes(self) -> list[str]:
        """Remove class groups with no living member."""
        recs, _bad = self.records.all()
        live = {r.rdt_class for r in recs if r.rdt_class and r.alive()}
        removed = []
        infix = self.fs.prefix + naming.CLASS_INFIX
        with self.fs.locked():
            for g in self.fs.groups(with_mon=False):
                if not g.name.startswith(infix):
                    continue
                if g.name[len(infix):] in live:
                    continue
                self.fs.delete_group(g, missing_ok=True)
                removed.append(g.name)
                LOG.info("removed class group %s: no members left", g.name)
        return removed

    # -- the PMD COS -----------------------------------------------------

    def ovs_client(self) -> ovs.OvsClient:
        return ovs.OvsClient(db=self.settings.ovsdb_connection,
                             vswitchd_pidfile=self.settings.ovs_vswitchd_pidfile,
                             appctl_target=self.settings.ovs_vswitchd_target,
                             timeout=max(1.0, self.settings.hook_timeout / 3))

    def sync_pmd(self, cores: set[int] | None = None,
                 extra: tuple[records_mod.Record, ...] = ()) -> str:
        """Recompute the PMD group from scratch; returns a summary.

        ``extra``: records not (yet) on disk, such as the one a full state
        path refused, that must count all the same."""
        gname = naming.pmd_group(self.fs.prefix)
        if cores is None:
            # Asked before the resctrl flock: OVSDB and ovs-appctl can take
            # a while, and libvirt's allocator waits on that lock.
            try:
                cores = {t.core for t in self.ovs_client().pmd_threads()}
            except ovs.OvsError as e:
                LOG.warning("PMD cores unknown, keeping %s's CPUs: %s",
                            gname, e)
        with self.fs.locked():
            caps = self.fs.capabilities()
            layout = hostlayout.plan(caps, self.settings.reserved_host_ways,
                                   self.settings.pmd_shared_ways)
            groups = {}
            for g in self.fs.groups(with_mon=False):
                if g.kind != "ctrl":
                    continue
                try:
                    groups["/" if g.is_root else g.name] = g.schemata()
                except errors.GroupNotFound:
                    continue          # removed meanwhile by libvirt
            sharers = {}
            recs, _bad = self.records.all()
            for rec in [*recs, *extra]:
                if rec.pmd_share and rec.group and rec.alive() \
                        and rec.group in groups:
                    sharers[rec.uuid] = rec.group
            known = cores
            if known is None:
                # OVS did not answer: the PMD group's cores stay, and so
                # do the cache ids they use.
                try:
                    known = set(self.fs.group(gname).cpus())
                except errors.GroupNotFound:
                    known = None
            plan = pmdplan.for_groups(caps, groups, self.fs.prefix, sharers,
                                      layout.pmd,
                                      pmd_cache_ids(caps, known))
            self.last_pmd_plan = plan
            if plan.degraded:
                # libvirt placed a VM the driver did not predict; the
                # relation is partly lost until the layout changes.
                LOG.warning("PMD COS degraded: cannot also cover the ways "
                            "of sharing instance(s) %s without covering "
                            "another group's ways or writing a mask the "
                            "kernel refuses", ", ".join(plan.dropped))
            try:
                g = self.fs.group(gname)
            except errors.GroupNotFound:
                g = self.fs.create_group(gname)
            failpoints.hit("agent.pmd_update")
            self.fs.write_schemata(g, plan.schemata)
            if cores is not None:
                failpoints.hit("agent.pmd_cpus")
                self.fs.set_cpus(g, cores)
            masks = plan.schemata.format().strip().replace("\n", " ")
            summary = (f"{gname}: {masks}"
                       f"; cpus {sorted(g.cpus())}; sharing "
                       f"{', '.join(plan.sharing) or 'none'}"
                       + (f"; DEGRADED, not covering {', '.join(plan.dropped)}"
                          if plan.degraded else ""))
            LOG.info("PMD COS %s", summary)
            return summary

    # -- reconcile -------------------------------------------------------

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
            self._degraded(report, lost)
        state = recovery.probe_state_path(self.records.state_path)
        if state is not None and not any(
                d.startswith(state.reason + ":") for d in report.degraded):
            self._degraded(report, state)
        return report

    @staticmethod
    def _degraded(report: ReconcileReport, d: recovery.Degraded) -> None:
        LOG.error("%s", d.line())
        report.degraded.append(f"{d.reason}: {d.detail}")

    def _state_failed(self, report: ReconcileReport, e: OSError,
                      what: str) -> None:
        reason = recovery.state_reason(e)
        if any(d.startswith(reason + ":") for d in report.degraded):
            return                     # said once per run
        self._degraded(report, recovery.Degraded(
            reason, f"{what} under {self.records.dir}: "
                    f"{e.strerror or e}; fix the state path, then run "
                    f"'nova-rdt reconcile'"))

    def _reconcile(self, report: ReconcileReport) -> None:
        try:
            report.swept = self.records.sweep_temporaries()
        except OSError as e:
            self._state_failed(report, e, "cannot remove temporary files")
        recs, report.unreadable_records = self.records.all()
        for bad in report.unreadable_records:
            LOG.error("reconcile: skipped record %s", bad)
        if report.unreadable_records:
            self._degraded(report, recovery.Degraded(
                "records_unreadable",
                f"{len(report.unreadable_records)} record file(s) left in "
                f"place: {report.unreadable_records[0]}"))
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
                    if self._remove_orphan(rec.group):
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
        existing = {g.name for g in self.fs.groups(with_mon=False)}
        lost = recovery.lost_groups(living, existing)
        if lost:
            self._restore_host(report)
        for rec in lost:
            self._restore_group(rec, report)
        for rec in living:
            if rec.rdt_class:
                try:
                    self.join_class(rec.rdt_class, self.threads(rec.pid))
                    report.rejoined.append(rec.uuid)
                except (IsolationError, errors.ResctrlError) as e:
                    if recovery.resctrl_lost(e):
                        raise
                    LOG.error("cannot re-add %s to class %s: %s",
                              rec.name, rec.rdt_class, e)
        report.removed_groups += self.prune_classes()
        if self.settings.pmd_cos:
            report.pmd = self.sync_pmd()
            plan = self.last_pmd_plan
            if plan is not None and plan.degraded:
                self._degraded(report, recovery.Degraded(
                    "pmd_degraded",
                    f"the PMD COS cannot also cover {', '.join(plan.dropped)}"
                    f" (see the PMD COS warning above)"))

    def _restore_host(self, report: ReconcileReport) -> None:
        """The host layout (the root's ways, the PMD group) as nova-compute
        writes it at start: resctrl lost it with the domains' groups."""
        try:
            summary = host_prep.prepare(self.fs,
                                        self.settings.reserved_host_ways,
                                        self.settings.pmd_shared_ways)
        except (host_prep.HostPrepError, errors.ResctrlError) as e:
            if recovery.resctrl_lost(e):
                raise
            LOG.error("reconcile: cannot restore the host layout: %s", e)
            return
        report.restored_host = True
        LOG.info("reconcile: host layout restored: root %s", summary["root"])

    def _restore_group(self, rec: records_mod.Record,
                       report: ReconcileReport) -> None:
        """Re-create libvirt's group of a running domain with the schemata
        and vCPU threads the hook recorded when the domain started.

        libvirt does not do it: on reconnect (qemuProcessReconnect) it
        only recomputes its groups' paths (virResctrlAllocDeterminePath)
        and never writes them again, so a domain whose group vanished runs
        on the root's ways until it is restarted.
        """
        if rec.schemata is None:
            self._degraded(report, recovery.Degraded(
                "group_not_restored",
                f"{rec.name} ({rec.uuid}) runs but its group {rec.group} is "
                f"gone and its record holds no schemata; restart the "
                f"instance to get its ways back"))
            return
        assert rec.group is not None      # lost_groups() only
        g = Group(self.fs, rec.group)
        failpoints.hit("reconcile.restore_group")
        try:
            try:
                self.fs.ops.mkdir(g.path)
            except FileExistsError:
                pass
            self.fs.write_schemata(g, Schemata.parse(rec.schemata),
                                   allow_libvirt=True)
            running = set(self.threads(rec.pid))
            for tid in rec.tasks or ():
                if tid not in running:
                    continue
                try:
                    self.fs.write(g.file("tasks"), f"{tid}\n", what="task")
                except errors.WriteRejected as e:
                    if e.errno != errno.ESRCH:
                        raise
        except (errors.ResctrlError, OSError) as e:
            if recovery.resctrl_lost(e):
                raise
            try:
                self.fs.delete_group(g, missing_ok=True, allow_libvirt=True)
            except (errors.ResctrlError, OSError):
                pass
            self._degraded(report, recovery.Degraded(
                "group_not_restored",
                f"{rec.name} ({rec.uuid}): cannot re-create {rec.group}: "
                f"{e}"))
            return
        report.restored_groups.append(rec.group)
        LOG.info("reconcile: re-created %s of running %s", rec.group,
                 rec.name)

    def _remove_orphan(self, name: str) -> bool:
        try:
            g = self.fs.group(name)
        except errors.GroupNotFound:
            return False
        if g.owner != OWNER_LIBVIRT:
            return False  # a record never authorises touching others
        if any(procinfo.is_running(t, None) for t in g.tasks()):
            return False
        self.fs.delete_group(g, missing_ok=True, allow_libvirt=True)
        LOG.info("removed orphaned group %s", name)
        return True
