"""mkdir, rmdir and rename, and the CLOSIDs and RMIDs they take and give.

Mirrors rdtgroup_mkdir()/mkdir_rdt_prepare()/rdtgroup_mkdir_ctrl_mon()/
rdtgroup_mkdir_mon(), rdtgroup_rmdir() and rdtgroup_rename() in
rdtgroup.c, closid_alloc() and __init_one_rdt_domain() for a new group's
ways, and alloc_rmid()/free_rmid() (monitor.c) with the limbo list.  The
VFS steps in front of them (ENOENT, EEXIST, ENOTDIR, EBUSY) come first,
as they do in the kernel.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from nova_rdt.emulator import paths
from nova_rdt.emulator.state import LOCKED
from nova_rdt.emulator.state import LOCKSETUP
from nova_rdt.emulator.state import SHAREABLE
from nova_rdt.emulator.state import U32_MAX
from nova_rdt.emulator.state import Group
from nova_rdt.emulator.state import KernelError

if TYPE_CHECKING:
    from nova_rdt.emulator.kernel import ResctrlKernel


def _split(path: str) -> tuple[list[str], str, str]:
    parts = [p for p in path.split("/") if p]
    if not parts:
        raise KernelError(errno.EBUSY)          # the mount point itself
    return parts, "/".join(parts[:-1]), parts[-1]


def _lookup_absent(k: ResctrlKernel, parent: str, path: str) -> paths.Node:
    """The VFS part of mkdir/rename's target: the parent must be a
    directory and the name free."""
    node = paths.resolve(k, parent)
    if node.kind != "dir":
        raise KernelError(errno.ENOTDIR)
    try:
        paths.resolve(k, path)
    except KernelError as e:
        if e.errno in (errno.ENOENT,):
            return node
        raise
    raise KernelError(errno.EEXIST)


# -- mkdir -----------------------------------------------------------------

def mkdir(k: ResctrlKernel, path: str) -> None:
    _, parent, name = _split(path)
    node = _lookup_absent(k, parent, path)
    if "\n" in name:
        raise KernelError(errno.EINVAL)          # rdtgroup_mkdir()
    if node.what == "group" and node.group is k.root:
        return _mkdir_ctrl(k, name)
    if not paths.has_mon(k):
        raise KernelError(errno.EPERM)
    is_mon_groups = node.what == "mon_groups" and name != "mon_groups"
    if not k.version.mkdir_checks_parent_under_lock:
        if not is_mon_groups:
            raise KernelError(errno.EPERM)       # no message
        return _mkdir_mon(k, node.group, name)
    # v6.15 on: mkdir_rdt_prepare() takes the parent's group first, and
    # info/ has none.
    if node.group is None:
        raise KernelError(errno.ENODEV)
    if k.version.clears_status_on_cpus_and_mkdir:
        k.status.clear()
    if not is_mon_groups:
        raise KernelError(errno.EPERM)
    return _mkdir_mon(k, node.group, name)


def _mkdir_ctrl(k: ResctrlKernel, name: str) -> None:
    """rdtgroup_mkdir_ctrl_mon()."""
    if k.version.clears_status_on_cpus_and_mkdir:
        k.status.clear()
    mon = paths.has_mon(k)
    if k.version.rmid_after_closid:
        closid = _alloc_closid(k)
        try:
            rmid = k.alloc_rmid() if mon else 0
        except KernelError:
            k.closids_used.discard(closid)
            raise
    else:
        # mkdir_rdt_prepare() took the RMID before closid_alloc(); a
        # refusal for want of a CLOSID still puts it through limbo.
        rmid = k.alloc_rmid() if mon else 0
        try:
            closid = _alloc_closid(k)
        except KernelError:
            k.free_rmid(rmid)
            raise
    init = _init_alloc(k, closid)
    if isinstance(init, str):
        k.free_rmid(rmid)
        k.closids_used.discard(closid)
        k.fail(errno.ENOSPC, init)
    for key, doms in init.items():
        k.ctrl_val[(key, closid)] = doms
    g = Group(name, closid, rmid, mba_mbps_event=k.default_mbps_event)
    k.groups[name] = g
    k.reset_counters(rmid)


def _alloc_closid(k: ResctrlKernel) -> int:
    """closid_alloc(): the lowest free one below closids_supported()."""
    closid = next((c for c in range(k.closids_supported)
                   if c not in k.closids_used), None)
    if closid is None:
        k.fail(errno.ENOSPC, "Out of CLOSIDs\n")
    k.closids_used.add(closid)
    return closid


def _mkdir_mon(k: ResctrlKernel, parent: Group, name: str) -> None:
    """rdtgroup_mkdir_mon()."""
    if parent.mode in (LOCKSETUP, LOCKED):
        k.fail(errno.EINVAL, "Pseudo-locking in progress\n")
    rmid = k.alloc_rmid()
    parent.mon[name] = Group(name, parent.closid, rmid, parent=parent)
    k.reset_counters(rmid)


def _init_alloc(k: ResctrlKernel, closid: int):
    """rdtgroup_init_alloc(): shareable and unused ways, lowest run only
    (__init_one_rdt_domain(), cbm_ensure_valid()); MB at its default."""
    init: dict[str, dict[int, int]] = {}
    for s in k.schemas:
        if not s.cache:
            v = U32_MAX if k.profile.mba_mbps else s.max_bw
            init[s.name] = {d: v for d in k.domains_of(s)}
            continue
        full = (1 << s.cbm_len) - 1
        init[s.name] = {}
        for d in k.domains_of(s):
            new = used = s.shareable_bits
            for other in k.closids_used:
                if other == closid:
                    continue
                mode = k.group_by_closid(other).mode
                if mode == LOCKSETUP:
                    continue
                v = k.ctrl_val[(s.name, other)][d]
                if s.peer:
                    v |= k.ctrl_val[(s.peer, other)][d]
                used |= v
                if mode == SHAREABLE:
                    new |= v
            used |= k.plr_cbm(d, s.level)
            new |= ~used & full
            new = ensure_valid(new, s.cbm_len)
            if bin(new).count("1") < s.min_cbm_bits:
                return f"No space on {s.name}:{d}\n"
            init[s.name][d] = new
    return init


def ensure_valid(cbm: int, cbm_len: int) -> int:
    """cbm_ensure_valid(): keep the lowest run of ones only."""
    if not cbm:
        return 0
    first = (cbm & -cbm).bit_length() - 1
    end = first
    while end < cbm_len and cbm >> end & 1:
        end += 1
    return ((1 << (end - first)) - 1) << first


# -- rmdir -----------------------------------------------------------------

def rmdir(k: ResctrlKernel, path: str) -> None:
    """rdtgroup_rmdir(): only a control group at the root or a monitor
    group in mon_groups; EPERM for anything else, no message."""
    parts = [p for p in path.split("/") if p]
    node = paths.resolve(k, path)
    if node.kind != "dir":
        raise KernelError(errno.ENOTDIR)
    if not parts:
        raise KernelError(errno.EBUSY)
    g = node.group
    if node.what == "group" and g is not k.root:
        return _rmdir_ctrl(k, g)
    if node.what == "mon":
        return _rmdir_mon(k, g)
    raise KernelError(errno.EPERM)


def _rmdir_ctrl(k: ResctrlKernel, g: Group) -> None:
    """rdtgroup_rmdir_ctrl(): tasks (its monitor groups' too) and CPUs go
    to the default group; all its RMIDs are freed.  A pseudo-locking
    group only goes (rdtgroup_ctrl_remove(), rdtgroup_pseudo_lock_remove():
    a locksetup group frees its CLOSID there, a locked one already has)."""
    k.tick()
    del k.groups[g.name]
    if g.mode in (LOCKSETUP, LOCKED):
        if g.mode == LOCKSETUP:
            _free_closid(k, g.closid)
        return
    for tid, tg in list(k.assigned.items()):
        if tg[0].ctrl is g:
            del k.assigned[tid]
    k.root.cpus |= g.cpus
    k.free_rmid(g.rmid)
    for m in g.mon.values():
        k.free_rmid(m.rmid)
    _free_closid(k, g.closid)


def _free_closid(k: ResctrlKernel, closid: int) -> None:
    k.closids_used.discard(closid)
    for s in k.schemas:
        k.ctrl_val.pop((s.name, closid), None)


def _rmdir_mon(k: ResctrlKernel, g: Group) -> None:
    """rdtgroup_rmdir_mon(): tasks go to the parent control group."""
    k.tick()
    for tid, (tg, _) in list(k.assigned.items()):
        if tg is g:
            k.assign(tid, g.parent)
    k.free_rmid(g.rmid)
    del g.parent.mon[g.name]


# -- rename ----------------------------------------------------------------

def rename(k: ResctrlKernel, old: str, new: str) -> None:
    """vfs_rename() then kernfs_iop_rename() then rdtgroup_rename()."""
    old_parts, _, _ = _split(old)
    new_parts, new_parent, new_name = _split(new)
    src = paths.resolve(k, old)
    if old_parts == new_parts:
        return                                   # vfs_rename(): no-op
    if new_parts[:len(old_parts)] == old_parts:
        raise KernelError(errno.EINVAL)          # into itself
    dst_parent = paths.resolve(k, new_parent)
    if dst_parent.kind != "dir":
        raise KernelError(errno.ENOTDIR)
    if not k.version.mon_group_rename:
        raise KernelError(errno.EPERM)           # no kernfs rename op
    if _owner(k, src) is None or _owner(k, dst_parent) is None:
        raise KernelError(errno.ENOENT)          # kernfs_to_rdtgroup()
    k.status.clear()
    if src.kind != "dir":
        # The kernel's message has no newline.
        k.fail(errno.EPERM, "Source and destination must be directories")
    if src.what != "mon":
        k.fail(errno.EPERM, "Source must be a MON group\n")
    if dst_parent.what != "mon_groups" or new_name == "mon_groups":
        k.fail(errno.EPERM, "Destination must be a mon_groups subdirectory\n")
    m, dest = src.group, dst_parent.group
    if m.cpus and m.parent is not dest:
        k.fail(errno.EPERM, "Cannot move a MON group that monitors CPUs\n")
    if new_name in dest.mon and dest.mon[new_name] is not m:
        raise KernelError(errno.EEXIST)          # kernfs_rename_ns()
    # mongrp_reparent(): its tasks take the new parent's CLOSID.
    del m.parent.mon[m.name]
    m.name, m.parent, m.closid = new_name, dest, dest.closid
    dest.mon[new_name] = m


def _owner(k: ResctrlKernel, node: paths.Node):
    """kernfs_to_rdtgroup(): a directory's own group, a file's parent's;
    None for info/ and its subdirectories (their files get the parent
    directory's private data, which is not None)."""
    if node.what in ("info", "info_res"):
        return None
    if node.what == "last_cmd_status":
        return None
    if node.what == "info_file":
        return node.extra
    return node.group
