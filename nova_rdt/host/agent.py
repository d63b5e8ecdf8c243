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
import logging
import os

from nova_rdt.allocation import hostlayout
from nova_rdt.allocation import naming
from nova_rdt.allocation import pmdplan
from nova_rdt.allocation import rdtclass
from nova_rdt.host import ovs
from nova_rdt.host import procinfo
from nova_rdt.host import records as records_mod
from nova_rdt.host.events import HookEvent
from nova_rdt.host.settings import HookSettings
from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl import errors
from nova_rdt.resctrl.groups import OWNER_LIBVIRT
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.schemata import Schemata

LOG = logging.getLogger("nova_rdt.hook")


class IsolationError(RuntimeError):
    """Isolation could not be applied to a domain."""


@dataclasses.dataclass
class ReconcileReport:
    removed_groups: list[str] = dataclasses.field(default_factory=list)
    dropped_records: list[str] = dataclasses.field(default_factory=list)
    rejoined: list[str] = dataclasses.field(default_factory=list)
    unreadable_records: list[str] = dataclasses.field(default_factory=list)
    pmd: str | None = None


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
            rec = records_mod.Record(
                uuid=event.uuid, name=event.name, pid=pid,
                pid_start=procinfo.proc_start_time(pid),
                pmd_share=m.pmd_share, rdt_class=m.rdt_class,
                group=holder, slo=m.slo,
                instance_name=event.instance_name, flavor=event.flavor)
            self.records.put(rec)
            if m.mb_mbps:
                self.set_mb_mbps(event.name, rec.group, m.mb_mbps)
            if m.rdt_class:
                self.join_class(m.rdt_class, tids)
            if self.settings.pmd_cos and m.pmd_share:
                self.sync_pmd()

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
            self.records.remove(uuid)
            if rec is None:
                return
            if rec.rdt_class:
                self.prune_classes()
            if self.settings.pmd_cos and rec.pmd_share:
                self.sync_pmd()

    # -- class groups ----------------------------------------------------

    def join_class(self, name: str, tids) -> str:
        cls = self.classes.get(name)
        if cls is None:
            raise IsolationError(f"rdt:class={name} is not defined in "
                                 f"[rdt] classes on this host")
        gname = cls.group_name(self.fs.prefix)
        with self.fs.locked():
            try:
                g = self.fs.group(gname)
            except errors.GroupNotFound:
                schemata = self._class_schemata(cls)
                g = self.fs.create_group(gname)
                try:
                    self.fs.write_schemata(g, schemata)
                except errors.ResctrlError:
                    self.fs.delete_group(g, missing_ok=True)
                    raise
                LOG.info("created class group %s: %s", gname,
                         schemata.format().strip().replace("\n", " "))
            self.fs.add_tasks(g, tids, ignore_missing=True)
        return gname

    def _class_schemata(self, cls: rdtclass.RdtClass) -> Schemata:
        """``cls.l3_ways`` free ways on every cache id, libvirt's way."""
        caps = self.fs.capabilities()
        used: dict[tuple[str, int], int] = {}
        for g in self.fs.groups(with_mon=False):
            if g.kind != "ctrl":
                continue
            s = g.schemata()
            for res in s.resources():
                for cid, mask in s.domains(res).items():
                    used[res, cid] = used.get((res, cid), 0) | mask
        lines: dict[str, dict[int, int]] = {}
        for res_name, res in caps.cache.items():
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

    def sync_pmd(self, cores: set[int] | None = None) -> str:
        """Recompute the PMD group from scratch; returns a summary."""
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
            root = self.fs.root_group().schemata()
            shares = {}
            share_groups = set()
            recs, _bad = self.records.all()
            for rec in recs:
                if not (rec.pmd_share and rec.group and rec.alive()):
                    continue
                try:
                    shares[rec.uuid] = self.fs.group(rec.group).schemata()
                except errors.GroupNotFound:
                    continue
                share_groups.add(rec.group)
            others = self._other_masks(caps, {gname} | share_groups)
            mb_full = {name: bw.unthrottled
                       for name, bw in caps.bandwidth.items() if name == "MB"}
            plan = pmdplan.plan(
                {name: sorted(res.domains)
                 for name, res in caps.cache.items()},
                layout.pmd, root, shares, mb_full,
                rules={name: pmdplan.CacheRules(res.cbm_len, res.min_cbm_bits,
                                                res.sparse_masks)
                       for name, res in caps.cache.items()},
                others=others)
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
            self.fs.write_schemata(g, plan.schemata)
            if cores is not None:
                self.fs.set_cpus(g, cores)
            masks = plan.schemata.format().strip().replace("\n", " ")
            summary = (f"{gname}: {masks}"
                       f"; cpus {sorted(g.cpus())}; sharing "
                       f"{', '.join(plan.sharing) or 'none'}"
                       + (f"; DEGRADED, not covering {', '.join(plan.dropped)}"
                          if plan.degraded else ""))
            LOG.info("PMD COS %s", summary)
            return summary

    def _other_masks(self, caps, skip: set[str]
                     ) -> dict[str, dict[int, int]]:
        """Per cache resource and id, the union of the masks the PMD COS
        must not cover: the root's (the host's ways), libvirt's groups and
        nova-rdt's class groups, except those in ``skip``.  Foreign groups
        (pqos ``COS*``, ...) share nothing with instances and a new group
        starts with every way, so they are left out."""
        out: dict[str, dict[int, int]] = {}
        classes = self.fs.prefix + naming.CLASS_INFIX
        for g in self.fs.groups(with_mon=False):
            if g.kind != "ctrl":
                continue
            if not g.is_root and (
                    g.name in skip
                    or not (naming.libvirt_short_name(g.name)
                            or g.name.startswith(classes))):
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

    # -- reconcile -------------------------------------------------------

    def reconcile(self) -> ReconcileReport:
        """Remove what dead domains left; re-apply what living ones need.

        Only touches: libvirt groups recorded for a managed domain that is
        gone (and whose tasks are all gone), nova-rdt's own class groups
        and PMD group.  Foreign groups (pqos ``COS*``, other domains) are
        never touched.
        """
        report = ReconcileReport()
        with self.fs.locked():
            recs, report.unreadable_records = self.records.all()
            for bad in report.unreadable_records:
                LOG.error("reconcile: skipped record %s", bad)
            living = []
            for rec in recs:
                # One record that cannot be handled is named and skipped;
                # the others are still reconciled.
                try:
                    if rec.alive():
                        living.append(rec)
                        continue
                    if rec.group and self._remove_orphan(rec.group):
                        report.removed_groups.append(rec.group)
                except (errors.ResctrlError, OSError, ValueError) as e:
                    where = os.path.join(self.records.dir,
                                         f"{rec.uuid}.json")
                    LOG.error("reconcile: %s (group %s): %s", where,
                              rec.group, e)
                    report.unreadable_records.append(f"{where}: {e}")
                    continue
                self.records.remove(rec.uuid)
                report.dropped_records.append(rec.uuid)
            for rec in living:
                if rec.rdt_class:
                    try:
                        self.join_class(rec.rdt_class, self.threads(rec.pid))
                        report.rejoined.append(rec.uuid)
                    except (IsolationError, errors.ResctrlError) as e:
                        LOG.error("cannot re-add %s to class %s: %s",
                                  rec.name, rec.rdt_class, e)
            report.removed_groups += self.prune_classes()
            if self.settings.pmd_cos:
                report.pmd = self.sync_pmd()
        return report

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
