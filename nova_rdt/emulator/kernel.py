"""An in-memory model of the kernel's resctrl filesystem.

It mirrors resctrl (``fs/resctrl`` from v6.16, ``arch/x86/kernel/cpu/
resctrl`` before) closely enough that libvirt and nova-rdt cannot tell it
from the real thing: the same files, formats, check order, errno values
and ``last_cmd_status`` texts, for the kernel release it is built for
(:mod:`nova_rdt.emulator.versions`).  Pure logic: the FUSE adaptor
(:mod:`nova_rdt.emulator.fusefs`) only maps paths and errors.

This module holds the state and the VFS surface; each concern lives in its
own module and is reached through the dispatch tables below:
:mod:`~nova_rdt.emulator.paths` (the tree), :mod:`~nova_rdt.emulator.info`,
:mod:`~nova_rdt.emulator.ctrl` (schemata, size, mode, pseudo-locking),
:mod:`~nova_rdt.emulator.membership` (tasks, cpus),
:mod:`~nova_rdt.emulator.dirs` (mkdir, rmdir, rename, CLOSIDs),
:mod:`~nova_rdt.emulator.counters` (mon_data).  What it does not model is
listed in doc/source/emulator.rst.
"""

from __future__ import annotations

from collections.abc import Callable
import errno
import time

from nova_rdt.emulator import counters
from nova_rdt.emulator import ctrl
from nova_rdt.emulator import dirs
from nova_rdt.emulator import info
from nova_rdt.emulator import membership
from nova_rdt.emulator import paths
from nova_rdt.emulator import taskspace
from nova_rdt.emulator import versions
from nova_rdt.emulator.profiles import Profile
from nova_rdt.emulator.state import LOCKED
from nova_rdt.emulator.state import LOCKSETUP
from nova_rdt.emulator.state import MON_SCALE
from nova_rdt.emulator.state import PAGE_SIZE
from nova_rdt.emulator.state import U32_MAX
from nova_rdt.emulator.state import Counter
from nova_rdt.emulator.state import Group
from nova_rdt.emulator.state import KernelError
from nova_rdt.emulator.state import Schema
from nova_rdt.emulator.state import StatusBuffer

__all__ = ["KernelError", "ResctrlKernel", "MON_SCALE", "U32_MAX"]

LIMBO_SECONDS = 1.0             # the limbo worker runs about once a second

Show = Callable[["ResctrlKernel", Group, int], str]
Write = Callable[["ResctrlKernel", Group, str, int], None]

#: A group's files: name -> (seq_show, write).  Which of them a group has
#: is paths.group_files().
GROUP_FILES: dict[str, tuple[Show, Write | None]] = {
    "tasks": (membership.show_tasks, membership.write_tasks),
    "cpus": (membership.show_cpus, membership.write_cpus),
    "cpus_list": (membership.show_cpus_list, membership.write_cpus_list),
    "schemata": (ctrl.show_schemata, ctrl.write_schemata),
    "mode": (ctrl.show_mode, ctrl.write_mode),
    "size": (ctrl.show_size, None),
    "mba_MBps_event": (ctrl.show_mbps_event, ctrl.write_mbps_event),
}


class ResctrlKernel:
    """The filesystem, addressed by paths relative to the mount point.

    ``kernel`` is the release to behave as (``"6.8"``; default:
    :func:`versions.default`).  ``tasks`` is where threads come from
    (default: this host's /proc, PIDs resolved in each caller's PID
    namespace).  ``caller`` arguments are the calling process's pid as the
    server sees it, as FUSE reports it.
    """

    def __init__(self, profile: Profile,
                 clock: Callable[[], float] = time.monotonic,
                 tasks: taskspace.TaskSpace | None = None,
                 kernel: str | versions.KernelVersion | None = None):
        self.profile = profile
        self.version = versions.resolve(kernel)
        self.clock = clock
        self.tasks = tasks or taskspace.HostTasks()
        # L3 cache ids: the domains of L3, MB and monitoring.
        self.domains = list(range(profile.domains))
        self.l2_domains = profile.l2_ids
        self.nr_cpu_ids = profile.num_cpus
        self.cpus_online = set(range(profile.num_cpus))
        self.schemas = self._make_schemas()
        self.status = StatusBuffer()
        # (schema name, closid) -> {domain: value}; the mba_MBps value for
        # MB when mounted with mba_MBps (mbps_val[]).
        self.ctrl_val: dict[tuple[str, int], dict[int, int]] = {}
        self.default_mbps_event = self._default_mbps_event()
        self.root = Group("", 0, 0, cpus=set(self.cpus_online),
                          mba_mbps_event=self.default_mbps_event)
        self.groups: dict[str, Group] = {}
        self.closids_used = {0}
        for s in self.schemas:
            self.ctrl_val[(s.name, 0)] = {d: self._default_ctrl(s)
                                          for d in self.domains_of(s)}
        mon = profile.monitor
        self.rmid_free = list(range(1, mon.num_rmids)) if mon else []
        self.rmid_limbo: list[tuple[float, int]] = []
        # tid -> (group, start): threads put in a group other than the
        # root, by a write or by inheritance; seen: tid -> start of every
        # thread already accounted for.
        self.assigned: dict[int, tuple[Group, int]] = {}
        self.seen: dict[int, int] | None = None
        self._order: list[int] = []
        self.counters: dict[tuple[int, int], Counter] = {}
        self.last_tick = clock()
        self.max_threshold_occupancy = (
            (profile.l3.size // mon.num_rmids) // MON_SCALE * MON_SCALE
            if mon else 0)
        # Test seam: (group path, domain, event) forced to read "Unavailable".
        self.unavailable: set[tuple[str, int, str]] = set()

    # -- setup -----------------------------------------------------------

    def _make_schemas(self) -> list[Schema]:
        p = self.profile

        def caches(c, name, cdp):
            def one(sname, peer=None, div=1):
                return Schema(name=sname, cache=True, level=c.level,
                              size=c.size, num_closid=c.num_closids // div,
                              cbm_len=c.cbm_len, min_cbm_bits=c.min_cbm_bits,
                              shareable_bits=c.shareable_bits,
                              sparse=c.sparse_masks, peer=peer,
                              data_width=(c.cbm_len + 3) // 4)
            if cdp:
                return [one(name + "CODE", name + "DATA", 2),
                        one(name + "DATA", name + "CODE", 2)]
            return [one(name)]
        made = caches(p.l3, "L3", p.cdp)
        if p.l2 is not None:
            made += caches(p.l2, "L2", p.cdp_l2)
        for bw in p.bandwidth:
            made.append(Schema(
                name=bw.name, cache=False, num_closid=bw.num_closids,
                max_bw=bw.max_bandwidth, min_bw=bw.min_bandwidth,
                bw_gran=bw.bandwidth_gran, delay_linear=bw.delay_linear,
                throttle_mode=bw.thread_throttle_mode,
                data_width=bw.data_width))
        # schemata_list_create() walks L3, L2, MB, SMBA and
        # schemata_list_add() uses list_add(), so the kernel shows them in
        # reverse: MB first, then L2, then L3; L3DATA before L3CODE.
        made.reverse()
        return made

    def domains_of(self, s: Schema) -> list[int]:
        """r->ctrl_domains, by id: one per L2 cache id for the L2 family,
        one per L3 cache id for L3 and MB."""
        return self.l2_domains if s.cache and s.level == 2 else self.domains

    def cpus_of(self, s: Schema, dom: int) -> list[int]:
        """d->hdr.cpu_mask."""
        if s.cache and s.level == 2:
            return self.profile.cpus_of_l2(dom)
        return self.profile.cpus_of_domain(dom)

    def _default_ctrl(self, s: Schema) -> int:
        if s.cache:
            return (1 << s.cbm_len) - 1
        return U32_MAX if self.profile.mba_mbps else s.max_bw

    def _default_mbps_event(self) -> str:
        """resctrl_mon_resource_init(): local when counted, else total."""
        feats = self.profile.monitor.features if self.profile.monitor else ()
        return ("mbm_local_bytes" if "mbm_local_bytes" in feats
                else "mbm_total_bytes")

    def schema(self, name: str) -> Schema | None:
        return next((s for s in self.schemas if s.name == name), None)

    @property
    def closids_supported(self) -> int:
        """closid_init(): the minimum num_closid over every schema."""
        return min(s.num_closid for s in self.schemas)

    @property
    def name_width(self) -> int:
        """max_name_width: +4 for a CDP-capable cache mounted without
        CDP."""
        p = self.profile
        w = max(len(s.name) for s in self.schemas)
        if p.l3.cdp_capable and not p.cdp:
            w = max(w, len("L3") + 4)
        if p.l2 is not None and p.l2.cdp_capable and not p.cdp_l2:
            w = max(w, len("L2") + 4)
        return w

    @property
    def data_width(self) -> int:
        """max_data_width (before v6.15)."""
        return max(s.data_width for s in self.schemas)

    # -- status ----------------------------------------------------------

    def fail(self, err: int, *msgs: str):
        for m in msgs:
            self.status.puts(m)
        raise KernelError(err)

    def last_cmd_status(self) -> str:
        """rdt_last_cmd_status_show(): the buffer, or "ok" when empty."""
        return self.status.show()

    # -- groups ----------------------------------------------------------

    def group_by_closid(self, closid: int) -> Group:
        if closid == 0:
            return self.root
        return next(g for g in self.groups.values()
                    if g.closid == closid and g.mode != LOCKED)

    def plr_of_domain(self, dom: int, level: int = 3):
        """d->plr: the pseudo-locked region on the cache domain ``dom`` of
        ``level`` (L3 domain 0 and L2 domain 0 are different caches)."""
        for g in self.groups.values():
            if g.mode == LOCKED and g.plr.domain == dom and \
                    self.schema(g.plr.schema).level == level:
                return g.plr
        return None

    def plr_cbm(self, dom: int, level: int = 3) -> int:
        plr = self.plr_of_domain(dom, level)
        return plr.cbm if plr else 0

    def locked_in_hierarchy(self, s: Schema, dom: int) -> bool:
        """rdtgroup_pseudo_locked_in_hierarchy(): a region on any cache
        sharing a CPU with this domain (an L3 holds its cores' L2s)."""
        cpus = set(self.cpus_of(s, dom))
        for g in self.groups.values():
            if g.mode == LOCKED:
                locked = self.schema(g.plr.schema)
                if cpus & set(self.cpus_of(locked, g.plr.domain)):
                    return True
        return False

    def rmid_groups(self):
        yield self.root
        for g in self.groups.values():
            if g.mode not in (LOCKSETUP, LOCKED):
                yield g
            yield from g.mon.values()

    def path_of(self, g: Group) -> str:
        if not g.is_mon:
            return g.name
        return f"{g.parent.name}/mon_groups/{g.name}".lstrip("/")

    # -- RMIDs -----------------------------------------------------------

    def alloc_rmid(self) -> int:
        """alloc_rmid(): ENOSPC when none, EBUSY while some are in limbo."""
        now = self.clock()
        while self.rmid_limbo and self.rmid_limbo[0][0] <= now:
            self.rmid_free.append(self.rmid_limbo.pop(0)[1])
        if not self.rmid_free:
            self.fail(errno.EBUSY if self.rmid_limbo else errno.ENOSPC,
                      "Out of RMIDs\n")
        return self.rmid_free.pop(0)

    def free_rmid(self, rmid: int) -> None:
        """free_rmid(): to limbo while llc_occupancy may still be dirty."""
        if not rmid:
            return
        if "llc_occupancy" in self.profile.monitor.features:
            self.rmid_limbo.append((self.clock() + LIMBO_SECONDS, rmid))
        else:
            self.rmid_free.append(rmid)
        self.counters = {key: v for key, v in self.counters.items()
                         if key[0] != rmid}

    def reset_counters(self, rmid: int) -> None:
        for d in self.domains:
            self.counters[(rmid, d)] = Counter()

    def tick(self) -> None:
        counters.tick(self)

    # -- tasks -----------------------------------------------------------

    def members(self) -> dict[int, Group]:
        """Every live thread not in the root: its group.

        Threads first seen now take their parent's group, as a fork would
        have given them; dead threads and reused tids are forgotten.  Only
        threads new since the last look, and those in a group, are read
        from /proc; the rest cost a directory listing.
        """
        tids = self.tasks.tids()
        first = self.seen is None
        seen = self.seen or {}
        infos: dict[int, object] = {}

        def info(tid):
            if tid not in infos:
                infos[tid] = self.tasks.info(tid) if tid in tids else None
            return infos[tid]

        for tid in list(self.assigned):
            t = info(tid)
            if t is None or t.start != self.assigned[tid][1]:
                del self.assigned[tid]

        def group_of(tid: int, depth: int = 0) -> Group:
            if tid in self.assigned:
                return self.assigned[tid][0]
            if first or tid in seen or depth > 64:
                return self.root
            t = info(tid)
            if t is None:
                return self.root
            parent = t.parent if t.parent in tids and t.parent != tid \
                else None
            g = group_of(parent, depth + 1) if parent else self.root
            if g is not self.root and self._exists(g):
                self.assigned[tid] = (g, t.start)
                return g
            return self.root

        new_seen = {}
        for tid in tids:
            group_of(tid)
            t = infos.get(tid)
            new_seen[tid] = t.start if t else seen.get(tid, 0)
        self.seen = new_seen
        self._order = sorted(tids, key=lambda t: (tids[t], t))
        return {tid: g for tid, (g, _) in self.assigned.items()}

    def task_order(self) -> list[int]:
        """for_each_process_thread() order, approximately: each process,
        then its threads, by pid."""
        return self._order

    def assign(self, tid: int, g: Group) -> None:
        if g is self.root:
            self.assigned.pop(tid, None)
            return
        t = self.tasks.info(tid)
        self.assigned[tid] = (g, t.start if t else 0)

    def _exists(self, g: Group) -> bool:
        if g.is_mon:
            return self._exists(g.parent) and g.parent.mon.get(g.name) is g
        return self.groups.get(g.name) is g

    # -- the VFS surface -------------------------------------------------

    def stat(self, path: str) -> tuple[str, int]:
        """("dir"|"file", permission bits)."""
        node = paths.resolve(self, path)
        return node.kind, paths.mode_of(self, node)

    def listdir(self, path: str) -> list[str]:
        node = paths.resolve(self, path)
        if node.kind != "dir":
            raise KernelError(errno.ENOTDIR)
        return paths.listdir(self, node)

    def read(self, path: str, caller: int = 0) -> str:
        node = paths.resolve(self, path)
        if node.kind != "file":
            raise KernelError(errno.EISDIR)
        if node.what == "last_cmd_status":
            return self.last_cmd_status()
        if node.what == "info_file":
            return info.show(self, *node.extra)
        if node.what == "mon_event":
            return counters.show_event(self, node.group, *node.extra)
        show, _ = GROUP_FILES[node.extra]
        return show(self, node.group, caller)

    def write(self, path: str, data: bytes, caller: int = 0) -> int:
        node = paths.resolve(self, path)
        if node.kind != "file":
            raise KernelError(errno.EISDIR)
        if len(data) > PAGE_SIZE:
            # kernfs_fop_write_iter(): atomic_write_len, nothing changes.
            raise KernelError(errno.E2BIG)
        text = data.decode("latin-1")
        if node.what == "info_file" and \
                node.extra[1] == "max_threshold_occupancy":
            info.write_threshold(self, text)
            return len(data)
        write = (GROUP_FILES[node.extra][1]
                 if node.what == "group_file" else None)
        if write is None:
            # kernfs_fop_open() refuses write opens of files without a
            # write op (KERNFS_ROOT_EXTRA_OPEN_PERM_CHECK).
            raise KernelError(errno.EACCES)
        if node.extra == "tasks" or node.extra == "schemata":
            self.tick()
        write(self, node.group, text, caller)
        return len(data)

    def mkdir(self, path: str) -> None:
        dirs.mkdir(self, path)

    def rmdir(self, path: str) -> None:
        dirs.rmdir(self, path)

    def rename(self, old: str, new: str) -> None:
        dirs.rename(self, old, new)

