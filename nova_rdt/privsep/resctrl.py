"""Privileged resctrl writes: one entry point per kind of write.

The caller (nova-compute) holds the resctrl ``flock`` and reads
``last_cmd_status`` itself; the daemon only makes the system call.  An
``OSError`` crosses back with its errno, so the library's error mapping
is the same as for a direct write.
"""

from __future__ import annotations

import errno
import os

from nova_rdt import exception
from nova_rdt import naming
from nova_rdt.privsep import sys_admin_pctxt

# File -> the owners whose groups may have it written.  The root's
# schemata is host preparation; a libvirt group's schemata is the hook's
# MBps line; tasks may go back to the root.
_WRITABLE = {
    "schemata": {"root", "nova-rdt", "libvirt"},
    "tasks": {"root", "nova-rdt"},
    "cpus_list": {"root", "nova-rdt"},
}


class Refused(PermissionError, exception.NovaRdtError):
    def __init__(self, path: str, why: str):
        super().__init__(errno.EPERM, f"nova-rdt privsep refused: {why}",
                         path)


def _owner(prefix: str, name: str) -> str:
    if name.startswith(prefix):
        return "nova-rdt"
    if naming.is_libvirt_group(name):
        return "libvirt"
    return "foreign"


def resolve(root: str, prefix: str, path: str,
            is_file: bool = True) -> tuple[str, list[str]]:
    """(owner, components below the mount) of ``path``, or Refused.

    ``path`` is a file of a group, or (``is_file=False``) a group's
    directory.

    Decided from the resolved path, not from the name: ``..``, symlinks
    and extra components cannot move the target out of the mount or into
    another group.
    """
    try:
        naming.check_prefix(prefix)
    except ValueError as e:
        raise Refused(path, str(e)) from None
    real_root = os.path.realpath(root)
    parent = os.path.realpath(os.path.dirname(path))
    real = os.path.join(parent, os.path.basename(path))
    rel = os.path.relpath(real, real_root)
    parts = rel.split(os.sep)
    if rel.startswith("..") or os.path.isabs(rel) or not parts \
            or any(p in ("", ".", "..") for p in parts):
        raise Refused(path, "not inside the resctrl mount")
    if parts[0] == "info":
        raise Refused(path, "info/ is read-only")
    # [group/][mon_groups/mon/]leaf: a control group directly under the
    # mount, a monitor group only inside a mon_groups directory.
    body = parts[:-1] if is_file else list(parts)
    if not body:
        if not is_file:
            raise Refused(path, "the root group cannot be made or removed")
        return "root", parts
    if body[0] == "mon_groups":
        ctrl_owner, body = "root", body[1:]
    else:
        ctrl = body.pop(0)
        if not naming.is_safe_group_name(ctrl):
            raise Refused(path, f"bad group name {ctrl!r}")
        ctrl_owner = _owner(prefix, ctrl)
        if body[:1] == ["mon_groups"]:
            body = body[1:]
        elif body:
            raise Refused(path, "not a resctrl group")
        else:
            return ctrl_owner, parts
    if len(body) != 1 or not naming.is_safe_group_name(body[0]):
        raise Refused(path, "not a resctrl group")
    # A monitor group of the root is whoever named it; one inside a
    # control group belongs to that group's owner (libvirt's "vcpus_N").
    owner = _owner(prefix, body[0]) if ctrl_owner == "root" else ctrl_owner
    return owner, parts


def _check_write(root: str, prefix: str, path: str, leaf: str) -> None:
    owner, parts = resolve(root, prefix, path)
    if parts[-1] != leaf:
        raise Refused(path, f"not a {leaf} file")
    if owner not in _WRITABLE[leaf]:
        raise Refused(path, f"{leaf} of a group owned by {owner}")


def _write(path: str, data: bytes) -> int:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        return os.write(fd, data)
    finally:
        os.close(fd)


@sys_admin_pctxt.entrypoint
def write_schemata(root: str, prefix: str, path: str, data: bytes) -> int:
    _check_write(root, prefix, path, "schemata")
    return _write(path, data)


@sys_admin_pctxt.entrypoint
def write_tasks(root: str, prefix: str, path: str, data: bytes) -> int:
    _check_write(root, prefix, path, "tasks")
    return _write(path, data)


@sys_admin_pctxt.entrypoint
def write_cpus(root: str, prefix: str, path: str, data: bytes) -> int:
    _check_write(root, prefix, path, "cpus_list")
    return _write(path, data)


@sys_admin_pctxt.entrypoint
def make_group(root: str, prefix: str, path: str) -> None:
    owner, parts = resolve(root, prefix, path, is_file=False)
    if owner != "nova-rdt":
        raise Refused(path, f"mkdir of a group owned by {owner}")
    os.mkdir(path)


@sys_admin_pctxt.entrypoint
def remove_group(root: str, prefix: str, path: str) -> None:
    owner, parts = resolve(root, prefix, path, is_file=False)
    if owner not in ("nova-rdt", "libvirt"):
        raise Refused(path, f"rmdir of a group owned by {owner}")
    os.rmdir(path)


_WRITERS = {"schemata": write_schemata, "tasks": write_tasks,
            "cpus_list": write_cpus}


class PrivsepOps:
    """:class:`nova_rdt.resctrl.groups.DirectOps`, through the daemon."""

    def __init__(self, root: str, prefix: str):
        self.root, self.prefix = root, prefix

    def write(self, path: str, data: bytes) -> int:
        writer = _WRITERS.get(os.path.basename(path))
        if writer is None:
            raise Refused(path, "not a writable resctrl file")
        return writer(self.root, self.prefix, path, data)

    def mkdir(self, path: str) -> None:
        make_group(self.root, self.prefix, path)

    def rmdir(self, path: str) -> None:
        remove_group(self.root, self.prefix, path)
