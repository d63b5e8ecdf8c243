"""The tree's shape: which directories and files exist, and what a path is.

rdtgroup_add_files() decides a group's files from its type (RFTYPE_BASE,
RFTYPE_CTRL, RFTYPE_MON) and the release; rdtgroup_create_info_dir() the
info/ tree.  Permission bits are kernfs': 0644 for files with a write op,
0444 otherwise, and 0 for the files rdtgroup_locksetup_user_restrict()
locks down while a group is being pseudo-locked.
"""

from __future__ import annotations

import dataclasses
import errno
from typing import TYPE_CHECKING

from nova_rdt.emulator.state import LOCKED
from nova_rdt.emulator.state import LOCKSETUP
from nova_rdt.emulator.state import Group
from nova_rdt.emulator.state import KernelError

if TYPE_CHECKING:
    from nova_rdt.emulator.kernel import ResctrlKernel

DIR_MODE = 0o755
RESTRICTED = ("tasks", "cpus", "cpus_list", "mon_groups")
WRITABLE_GROUP_FILES = ("cpus", "cpus_list", "tasks", "schemata", "mode",
                        "mba_MBps_event")
MON_INFO_FILES = ("max_threshold_occupancy", "mon_features", "num_rmids")


@dataclasses.dataclass(frozen=True)
class Node:
    kind: str                   # "dir" | "file"
    what: str                   # see resolve()
    group: Group | None = None
    extra: object = None


def resolve(k: ResctrlKernel, path: str) -> Node:
    """Map a path relative to the mount point to a Node.

    Directories: "group" (root or control group), "mon" (monitor group),
    "mon_groups", "mon_data", "mon_domain", "info", "info_res".  Files:
    "group_file" (extra: name), "last_cmd_status", "info_file" (extra:
    (resource dir, name)), "mon_event" (extra: (domain, event)).
    """
    parts = [p for p in path.split("/") if p]
    if not parts:
        return Node("dir", "group", k.root)
    if parts[0] == "info":
        return _resolve_info(k, parts[1:])
    g, rest = k.root, parts
    if parts[0] in k.groups:
        g, rest = k.groups[parts[0]], parts[1:]
    if rest and rest[0] == "mon_groups" and has_mon(k):
        if len(rest) == 1:
            return Node("dir", "mon_groups", g)
        m = g.mon.get(rest[1])
        if m is None:
            raise KernelError(errno.ENOENT)
        return _resolve_in_group(k, m, rest[2:])
    return _resolve_in_group(k, g, rest)


def _resolve_in_group(k: ResctrlKernel, g: Group, rest: list[str]) -> Node:
    if not rest:
        return Node("dir", "mon" if g.is_mon else "group", g)
    name = rest[0]
    if name == "mon_data" and has_mon(k):
        if len(rest) == 1:
            return Node("dir", "mon_data", g)
        dom = _mon_dir_domain(k, rest[1])
        if dom is None:
            raise KernelError(errno.ENOENT)
        if len(rest) == 2:
            return Node("dir", "mon_domain", g, dom)
        if len(rest) == 3 and rest[2] in k.profile.monitor.features:
            return Node("file", "mon_event", g, (dom, rest[2]))
        raise KernelError(errno.ENOENT)
    if len(rest) == 1 and name in group_files(k, g):
        return Node("file", "group_file", g, name)
    if len(rest) > 1 and name in group_files(k, g):
        raise KernelError(errno.ENOTDIR)
    raise KernelError(errno.ENOENT)


def _resolve_info(k: ResctrlKernel, rest: list[str]) -> Node:
    if not rest:
        return Node("dir", "info")
    if rest[0] == "last_cmd_status":
        if len(rest) > 1:
            raise KernelError(errno.ENOTDIR)
        return Node("file", "last_cmd_status")
    name = rest[0]
    if name not in info_dirs(k):
        raise KernelError(errno.ENOENT)
    if len(rest) == 1:
        return Node("dir", "info_res", None, name)
    if len(rest) == 2 and rest[1] in info_files(k, name):
        return Node("file", "info_file", None, (name, rest[1]))
    raise KernelError(errno.ENOENT)


def _mon_dir_domain(k: ResctrlKernel, name: str) -> int | None:
    prefix = "mon_L3_"
    if not name.startswith(prefix):
        return None
    tail = name[len(prefix):]
    if not tail.isdigit():
        return None
    dom = int(tail)
    return dom if dom in k.domains and name == mon_dir(dom) else None


def mon_dir(dom: int) -> str:
    """mkdir_mondata_subdir(): "mon_%s_%02d"."""
    return f"mon_L3_{dom:02d}"


def has_mon(k: ResctrlKernel) -> bool:
    return k.profile.monitor is not None


def group_files(k: ResctrlKernel, g: Group) -> list[str]:
    """res_common_files[] filtered by the group's RFTYPE flags."""
    files = ["cpus", "cpus_list", "tasks"]
    if not g.is_mon:
        files += ["schemata", "mode", "size"]
        if (k.profile.mba_mbps and has_mon(k)
                and k.version.mba_mbps_event):
            files.append("mba_MBps_event")
    return files


def group_dirs(k: ResctrlKernel, g: Group) -> list[str]:
    if not has_mon(k):
        return []
    return ["mon_data"] if g.is_mon else ["mon_groups", "mon_data"]


def info_dirs(k: ResctrlKernel) -> list[str]:
    names = [s.name for s in k.schemas]
    if has_mon(k):
        names.append("L3_MON")
    return names


def info_files(k: ResctrlKernel, name: str) -> list[str]:
    if name == "L3_MON":
        return list(MON_INFO_FILES)
    s = k.schema(name)
    if s.cache:
        files = ["bit_usage", "cbm_mask", "min_cbm_bits", "num_closids",
                 "shareable_bits"]
        if k.version.sparse_masks_file:
            files.append("sparse_masks")
        return files
    files = ["bandwidth_gran", "delay_linear", "min_bandwidth", "num_closids"]
    if s.throttle_mode:
        files.append("thread_throttle_mode")
    return files


def listdir(k: ResctrlKernel, node: Node) -> list[str]:
    g = node.group
    if node.what == "info":
        return ["last_cmd_status"] + info_dirs(k)
    if node.what == "info_res":
        return info_files(k, node.extra)
    if node.what == "mon_groups":
        return list(g.mon)
    if node.what == "mon_data":
        return [mon_dir(d) for d in k.domains]
    if node.what == "mon_domain":
        return list(k.profile.monitor.features)
    names = group_files(k, g) + group_dirs(k, g)
    if g is k.root:
        names = ["info"] + names + list(k.groups)
    return names


def mode_of(k: ResctrlKernel, node: Node) -> int:
    """Permission bits as kernfs shows them."""
    g = node.group
    restricted = (g is not None and not g.is_mon
                  and g.mode in (LOCKSETUP, LOCKED))
    if node.kind == "dir":
        if node.what == "mon_groups" and restricted:
            return 0
        return DIR_MODE
    if node.what == "group_file":
        if restricted and node.extra in RESTRICTED:
            return 0
        return 0o644 if node.extra in WRITABLE_GROUP_FILES else 0o444
    if node.what == "info_file":
        return 0o644 if node.extra[1] == "max_threshold_occupancy" else 0o444
    return 0o444
