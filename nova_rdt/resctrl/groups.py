"""Resource groups: list, create, delete, configure.

This is the only module that writes to resctrl.  It follows three rules:

* Every multi-step change holds ``flock(LOCK_EX)`` on the resctrl root,
  the lock libvirt's allocator takes, so neither sees the other half done.
* A refused write raises a typed error that quotes the kernel's
  ``info/last_cmd_status`` (read under the same lock, so it is ours).
* Only groups under nova-rdt's name prefix are created, changed or
  removed.  libvirt's, pqos' and container runtimes' groups are read,
  never touched; the root group is changed only when asked explicitly
  (host way reservation).

Ownership is decided from the structure first, as the privileged
daemon does (:func:`nova_rdt.privsep.resctrl.resolve`): each name is one
safe path component, and the group's resolved path is where those names
say inside the mount.  Only then does the name prefix decide; a name such
as ``nova-rdt-x/../COS1`` is nobody's group, so never ours.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Iterator
import contextlib
import dataclasses
import errno
import fcntl
import os
import threading
import time
from typing import Any
from typing import Protocol

from nova_rdt import naming
from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl import capcache
from nova_rdt.resctrl import errors
from nova_rdt.resctrl.schemata import Schemata

DEFAULT_PREFIX = naming.DEFAULT_PREFIX

OWNER_ROOT = "root"
OWNER_NOVA_RDT = "nova-rdt"
OWNER_LIBVIRT = "libvirt"
OWNER_FOREIGN = "foreign"

MODES = ("shareable", "exclusive", "pseudo-locksetup")

# Directories in a control group that are not groups.
_NOT_GROUPS = naming.NOT_GROUPS
_NAME_RE = naming.GROUP_NAME_RE


def is_component(name: object) -> bool:
    """Whether ``name`` can be a group's name: one safe path component."""
    return isinstance(name, str) and naming.is_safe_group_name(name) \
        and name not in _NOT_GROUPS


@dataclasses.dataclass(frozen=True)
class Group:
    """A control group (``parent is None``) or a monitor group."""

    fs: Resctrl
    name: str                      # "" for the root group
    parent: str | None = None      # control group of a monitor group

    @property
    def is_root(self) -> bool:
        return self.name == "" and self.parent is None

    @property
    def kind(self) -> str:
        return "mon" if self.parent is not None else "ctrl"

    @property
    def path(self) -> str:
        if self.parent is None:
            return os.path.join(self.fs.root, self.name) if self.name \
                else self.fs.root
        ctrl = os.path.join(self.fs.root, self.parent) if self.parent \
            else self.fs.root
        return os.path.join(ctrl, "mon_groups", self.name)

    @property
    def display_name(self) -> str:
        base = self.name or "/"
        if self.parent is None:
            return base
        return f"{self.parent or ''}/mon_groups/{self.name}"

    @property
    def owner(self) -> str:
        if self.is_root:
            return OWNER_ROOT
        if not self.fs.in_place(self):
            return OWNER_FOREIGN
        # A monitor group inside a control group is that group's owner's
        # (libvirt names its own "vcpus_N"); one of the root's is whoever
        # named it.
        return self.fs.owner_of_name(self.parent or self.name)

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def schemata(self) -> Schemata:
        return Schemata.parse(self.fs.read(self.file("schemata")))

    def cpus(self) -> set[int]:
        return caps_mod.parse_cpu_list(self.fs.read(self.file("cpus_list")))

    def tasks(self) -> list[int]:
        return [int(t) for t in self.fs.read(self.file("tasks")).split()]

    def mode(self) -> str:
        return self.fs.read(self.file("mode")).strip()

    def mon_groups(self) -> list[Group]:
        d = os.path.join(self.path, "mon_groups")
        if self.kind != "ctrl" or not os.path.isdir(d):
            return []
        return [Group(self.fs, n, self.name) for n in sorted(os.listdir(d))
                if os.path.isdir(os.path.join(d, n))]


class FileOps(Protocol):
    def write(self, path: str, data: bytes) -> int: ...
    def mkdir(self, path: str) -> None: ...
    def rmdir(self, path: str) -> None: ...


class DirectOps:
    """The three system calls that change resctrl, made by this process.

    nova-compute swaps in :class:`nova_rdt.privsep.resctrl.PrivsepOps`,
    so that only these calls cross into its privileged daemon while the
    planning, the reads and the lock stay unprivileged.
    """

    def write(self, path: str, data: bytes) -> int:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            return os.write(fd, data)
        finally:
            os.close(fd)

    def mkdir(self, path: str) -> None:
        os.mkdir(path)

    def rmdir(self, path: str) -> None:
        os.rmdir(path)


class Resctrl:
    """One resctrl mount, and the one way nova-rdt changes it."""

    def __init__(self, root: str = caps_mod.DEFAULT_ROOT,
                 prefix: str = DEFAULT_PREFIX,
                 sysfs_cpu: str = caps_mod.DEFAULT_SYSFS_CPU,
                 lock_timeout: float = 30.0, ops: FileOps | None = None):
        naming.check_prefix(prefix)
        self.ops: FileOps = ops or DirectOps()
        self.root = root
        self.prefix = prefix
        self.sysfs_cpu = sysfs_cpu
        self.lock_timeout = lock_timeout
        self._lock_fd: int | None = None
        self._lock_depth = 0
        self._thread_lock = threading.RLock()

    @classmethod
    def from_conf(cls, conf: Any) -> Resctrl:
        """From the ``[rdt]`` options (see :mod:`nova_rdt.conf`)."""
        rdt = conf.rdt
        return cls(rdt.resctrl_root, prefix=rdt.group_prefix,
                   sysfs_cpu=rdt.sysfs_cpu_root,
                   lock_timeout=rdt.lock_timeout)

    # -- discovery -------------------------------------------------------

    def capabilities(self, fresh: bool = False) -> caps_mod.Capabilities:
        """The host's RDT capabilities, read once per mount and shared by
        every Resctrl of this process (:mod:`~nova_rdt.resctrl.capcache`);
        ``fresh``: read them again."""
        return capcache.capabilities(self.root, self.sysfs_cpu, fresh)

    def owns_name(self, name: str) -> bool:
        return is_component(name) and name.startswith(self.prefix)

    def owner_of_name(self, name: str) -> str:
        if self.owns_name(name):
            return OWNER_NOVA_RDT
        if is_component(name) and naming.is_libvirt_group(name):
            return OWNER_LIBVIRT
        return OWNER_FOREIGN

    def in_place(self, g: Group) -> bool:
        """Whether ``g``'s path is the one its names give, in the mount.

        Each name must be one safe component and no symlink may move the
        resolved path; otherwise the group is nobody's, never ours.
        """
        if g.is_root:
            return True
        if not is_component(g.name) or \
                (g.parent and not is_component(g.parent)):
            return False
        parts = [g.name]
        if g.parent is not None:
            parts = ([g.parent] if g.parent else []) + ["mon_groups", g.name]
        real_root = os.path.realpath(self.root)
        return os.path.realpath(g.path) == os.path.join(real_root, *parts)

    def root_group(self) -> Group:
        return Group(self, "")

    def group(self, name: str, parent: str | None = None) -> Group:
        g = Group(self, name, parent)
        if not is_component(name) or \
                (parent and not is_component(parent)):
            raise errors.InvalidGroupName(
                f"invalid resctrl group name {g.display_name!r}: each name "
                f"is one component of letters, digits and '_.:-'",
                path=self.root)
        if not os.path.isdir(g.path) or not self.in_place(g):
            raise errors.GroupNotFound(f"no resctrl group {g.display_name}",
                                       path=g.path, errno=errno.ENOENT)
        return g

    def groups(self, with_mon: bool = True) -> list[Group]:
        """The root, every control group and (optionally) monitor groups."""
        if not os.path.isdir(os.path.join(self.root, "info")):
            raise errors.NotMounted(f"no resctrl filesystem at {self.root}",
                                    path=self.root)
        ctrl = [self.root_group()] + [
            Group(self, n) for n in sorted(os.listdir(self.root))
            if n not in _NOT_GROUPS
            and os.path.isdir(os.path.join(self.root, n))]
        if not with_mon:
            return ctrl
        out = []
        for g in ctrl:
            out.append(g)
            out.extend(g.mon_groups())
        return out

    # -- locking ---------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold flock(LOCK_EX) on the resctrl root; re-entrant per object."""
        with self._thread_lock:
            if self._lock_depth == 0:
                self._lock_fd = self._acquire()
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
                if self._lock_depth == 0:
                    fd, self._lock_fd = self._lock_fd, None
                    assert fd is not None
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    os.close(fd)

    def _acquire(self) -> int:
        try:
            fd = os.open(self.root,
                         os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            raise errors.NotMounted(f"cannot open resctrl root: {e}",
                                    errno=e.errno, path=self.root) from e
        deadline = time.monotonic() + self.lock_timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise errors.LockTimeout(
                        f"resctrl lock held by another process for more "
                        f"than {self.lock_timeout}s", path=self.root) from None
                time.sleep(0.01)

    # -- raw I/O with kernel error capture -------------------------------

    def read(self, path: str) -> str:
        try:
            with open(path) as f:
                return f.read()
        except FileNotFoundError as e:
            raise errors.GroupNotFound(f"{path} does not exist",
                                       errno=e.errno, path=path) from e

    def last_cmd_status(self) -> str:
        try:
            with open(os.path.join(self.root, "info", "last_cmd_status")) as f:
                return f.read().strip()
        except OSError:
            return ""

    def write(self, path: str, text: str,
              error_cls: type[errors.ResctrlError] = errors.WriteRejected,
              what: str = "write") -> None:
        """One write(2) of ``text``; the kernel acts on each call alone."""
        data = text.encode()
        self._inside(path)
        with self.locked():
            try:
                n = self.ops.write(path, data)
            except OSError as e:
                raise self._error(e, path, f"{what} {text.strip()!r} refused",
                                  error_cls) from e
            if n != len(data):
                raise error_cls(f"short write to {path}: {n}/{len(data)}",
                                path=path)

    def _inside(self, path: str) -> None:
        """Refuse a write whose resolved directory is not in the mount."""
        root = os.path.realpath(self.root)
        where = os.path.realpath(os.path.dirname(path))
        if os.path.commonpath([root, where]) != root or \
                os.path.basename(path) in ("", ".", ".."):
            raise errors.NotOwned(f"refusing to write {path}: not inside "
                                  f"the resctrl mount {self.root}", path=path)

    def _error(self, e: OSError, path: str, message: str,
               default: type[errors.ResctrlError]) -> errors.ResctrlError:
        status = self.last_cmd_status()
        cls = default
        if e.errno == errno.ENOENT:
            cls = errors.GroupNotFound
        elif e.errno == errno.EEXIST:
            cls = errors.GroupExists
        elif "CLOSID" in status.upper():
            cls = errors.OutOfClosids
        elif "RMID" in status.upper():
            cls = errors.OutOfRmids
        return cls(message, errno=e.errno, path=path, status=status)

    # -- group lifecycle -------------------------------------------------

    def check_name(self, name: str) -> None:
        if not is_component(name):
            raise errors.InvalidGroupName(
                f"invalid resctrl group name {name!r}: use letters, digits "
                f"and '_.:-', at most 128 characters")
        if not self.owns_name(name):
            raise errors.NotOwned(
                f"refusing group {name!r}: nova-rdt only manages groups "
                f"named {self.prefix}*")

    def create_group(self, name: str) -> Group:
        """mkdir a control group.  Out of CLOSIDs raises OutOfClosids."""
        self.check_name(name)
        return self._mkdir(Group(self, name))

    def create_mon_group(self, name: str, parent: str = "") -> Group:
        """mkdir a monitor group under control group ``parent`` (root: "")."""
        self.check_name(name)
        if parent:
            # Inside a control group only if it is ours: a monitor group
            # belongs to its control group's owner.
            self._require_owned(self.group(parent))
        return self._mkdir(Group(self, name, parent))

    def _mkdir(self, g: Group) -> Group:
        with self.locked():
            try:
                self.ops.mkdir(g.path)
            except OSError as e:
                raise self._error(e, g.path,
                                  f"cannot create group {g.display_name}",
                                  errors.ResctrlError) from e
        return g

    def delete_group(self, g: Group, missing_ok: bool = False,
                     allow_libvirt: bool = False) -> None:
        """rmdir one of our groups; its tasks and CPUs go back to the parent.

        ``allow_libvirt`` lets reconciliation remove a group libvirt made
        for a managed domain that is gone (libvirt cannot, once dead).
        """
        if not (allow_libvirt and g.owner == OWNER_LIBVIRT):
            self._require_owned(g)
        with self.locked():
            try:
                self.ops.rmdir(g.path)
            except FileNotFoundError:
                if not missing_ok:
                    raise errors.GroupNotFound(
                        f"no resctrl group {g.display_name}",
                        errno=errno.ENOENT, path=g.path) from None
            except OSError as e:
                raise self._error(e, g.path,
                                  f"cannot remove group {g.display_name}",
                                  errors.ResctrlError) from e

    def _require_owned(self, g: Group, allow_root: bool = False) -> None:
        if g.is_root and allow_root:
            return
        if g.owner != OWNER_NOVA_RDT:
            raise errors.NotOwned(
                f"refusing to change {g.display_name}: owned by {g.owner}, "
                f"not nova-rdt", path=g.path)

    # -- configuration ---------------------------------------------------

    def write_schemata(self, g: Group, update: Schemata,
                       allow_root: bool = False,
                       allow_libvirt: bool = False) -> Schemata:
        """Write (possibly partial) schemata; return what the kernel kept.

        ``allow_libvirt``: also a libvirt group (the hook sets the MBps
        values libvirt cannot express in its domain's group).
        """
        if not (allow_libvirt and g.owner == OWNER_LIBVIRT):
            self._require_owned(g, allow_root)
        if g.kind != "ctrl":
            raise errors.WriteRejected(
                f"{g.display_name} is a monitor group: it has no schemata",
                path=g.path)
        with self.locked():
            self.write(g.file("schemata"), update.format(), what="schemata")
            return g.schemata()

    def set_cpus(self, g: Group, cpus: Iterable[int],
                 allow_root: bool = False) -> None:
        self._require_owned(g, allow_root)
        self.write(g.file("cpus_list"),
                   caps_mod.format_cpu_list(cpus) + "\n", what="cpus_list")

    def add_tasks(self, g: Group, tids: Iterable[int],
                  ignore_missing: bool = False,
                  allow_root: bool = False) -> list[int]:
        """Move thread ids into ``g``, one write each (older kernels take
        only one id per write).  Returns the ids that were moved."""
        self._require_owned(g, allow_root)
        moved = []
        with self.locked():
            for tid in tids:
                try:
                    self.write(g.file("tasks"), f"{int(tid)}\n", what="task")
                except errors.WriteRejected as e:
                    if ignore_missing and e.errno == errno.ESRCH:
                        continue  # the thread exited meanwhile
                    raise
                moved.append(int(tid))
        return moved

    def set_mode(self, g: Group, mode: str) -> None:
        self._require_owned(g)
        if mode not in MODES:
            raise errors.WriteRejected(
                f"unknown mode {mode!r}; one of {', '.join(MODES)}",
                path=g.file("mode"))
        self.write(g.file("mode"), mode + "\n", what="mode")
