"""The faults that are not failpoints, done to a running Host lab.

* the state path on its own small tmpfs, mounted before the lab's mount
  namespace is made, so that the namespace's copy shares its superblock:
  filling it (ENOSPC) or remounting it read-only is seen by the hook
  under libvirtd and by nova-compute alike;
* the resctrl emulator lost (unmounted, then back empty) or killed
  (ENOTCONN until restarted): the new mount is put back at
  ``/sys/fs/resctrl`` inside the lab's namespace with ``open_tree`` and
  ``move_mount``, the one way to attach a mount made in one mount
  namespace into another (mount(2) refuses a source from another
  namespace);
* hook failpoints: libvirt runs hooks with a scrubbed environment
  (``virHookCall`` passes only ``virCommandAddEnvPassCommon``'s
  variables), so a variable given to libvirtd never reaches the hook;
  the lab's own copy of the hook shim exports it instead.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import subprocess
import sys

from nova_rdt.lab.procs import LabError

_libc = ctypes.CDLL(None, use_errno=True)

# x86_64 and aarch64 share these (the new mount API, Linux 5.2).
SYS_OPEN_TREE = 428
SYS_MOVE_MOUNT = 429
OPEN_TREE_CLONE = 1
OPEN_TREE_CLOEXEC = os.O_CLOEXEC
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
CLONE_NEWNS = 0x20000
MNT_DETACH = 2

#: Size of the state path's tmpfs: room for every record many times over.
STATE_FS_SIZE = "512k"
FILLER = ".faults-filler"


def _check(rc: int, what: str) -> int:
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return rc


# -- the state path -----------------------------------------------------


class StateFs:
    """A small tmpfs at the hook's state path (host namespace)."""

    def __init__(self, path: str):
        self.path = path
        self.mounted = False

    def mount(self) -> None:
        os.makedirs(self.path, exist_ok=True)
        _run(["mount", "-t", "tmpfs", "-o",
              f"size={STATE_FS_SIZE},mode=0755", "nova-rdt-faults-state",
              self.path])
        self.mounted = True

    def fill(self) -> None:
        """Until the next write gets ENOSPC (unbuffered: every byte that
        fits is written, none is left to fail at close)."""
        fd = os.open(os.path.join(self.path, FILLER),
                     os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            for size in (65536, 4096, 512, 64, 1):
                while True:
                    try:
                        os.write(fd, b"\0" * size)
                    except OSError as e:
                        if e.errno != errno.ENOSPC:
                            raise
                        break
        finally:
            os.close(fd)

    def free(self) -> None:
        try:
            os.unlink(os.path.join(self.path, FILLER))
        except FileNotFoundError:
            pass

    def readonly(self, ro: bool = True) -> None:
        # Without bind: the superblock itself, in every namespace.
        _run(["mount", "-o", "remount," + ("ro" if ro else "rw"),
              self.path])

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", self.path], check=False,
                           capture_output=True)
            self.mounted = False


def _run(argv: list[str]) -> None:
    res = subprocess.run(argv, capture_output=True, text=True)
    if res.returncode != 0:
        raise LabError(f"{' '.join(argv)}: {res.stderr.strip()}")


# -- the resctrl emulator ---------------------------------------------------


def emulator_alive(lab) -> bool:
    proc = lab.emulator.proc
    return proc is not None and proc.poll() is None


def kill_emulator(lab) -> None:
    """SIGKILL the FUSE server: every access is ENOTCONN from now on."""
    proc = lab.emulator.proc
    if proc is None:
        raise LabError("the lab's emulator is not running")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def unmount_dead_emulator(lab) -> None:
    """A dead FUSE mount fails lstat (ENOTCONN), so os.path.ismount, and
    with it Emulator.stop(), does not see it: unmounted here by name."""
    from nova_rdt.lab.host import mounts_under
    if lab.emulator and not emulator_alive(lab) and \
            mounts_under(lab.emulator.mountpoint):
        subprocess.run(["umount", "-l", lab.emulator.mountpoint],
                       check=False, capture_output=True)


def restart_emulator(lab) -> None:
    """Unmount what is left, mount a new (empty) emulator at the same
    place, and put it back at /sys/fs/resctrl in the lab namespace."""
    unmount_dead_emulator(lab)
    lab.emulator.stop()
    lab.emulator.start()
    attach_into_namespace(lab.ns.holder.pid, lab.emulator.mountpoint,
                          "/sys/fs/resctrl")


def attach_into_namespace(ns_pid: int, source: str, target: str) -> None:
    """Clone the mount at ``source`` (our namespace) over ``target`` in
    the mount namespace of ``ns_pid``, replacing what is mounted there.

    In a child process: setns() needs a single-threaded caller.
    """
    res = subprocess.run(
        [sys.executable, "-m", "nova_rdt.lab.faults.hostfaults", "attach",
         str(ns_pid), source, target],
        capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        raise LabError(f"cannot attach {source} at {target} in the lab "
                       f"namespace: {res.stderr.strip()}")


def _attach_main(ns_pid: int, source: str, target: str) -> int:
    syscall = _libc.syscall
    syscall.restype = ctypes.c_long
    fd = _check(syscall(SYS_OPEN_TREE, AT_FDCWD, source.encode(),
                        OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE),
                f"open_tree {source}")
    nsfd = os.open(f"/proc/{ns_pid}/ns/mnt", os.O_RDONLY)
    _check(_libc.setns(nsfd, CLONE_NEWNS), "setns")
    # The old mount (a dead FUSE connection, or a stale one): detached.
    if _libc.umount2(target.encode(), MNT_DETACH) != 0:
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOENT):
            raise OSError(err, f"umount {target}: {os.strerror(err)}")
    _check(syscall(SYS_MOVE_MOUNT, fd, b"", AT_FDCWD, target.encode(),
                   MOVE_MOUNT_F_EMPTY_PATH), f"move_mount to {target}")
    return 0


# -- hook failpoints ------------------------------------------------------


class HookArming:
    """Arms failpoints in the lab's installed hook shim."""

    MARK = "# nova-rdt faults lab:"
    QUIET = ">/dev/null 2>&1"

    def __init__(self, hooks_dir: str, stderr_log: str):
        self.path = os.path.join(hooks_dir, "qemu.d", "nova-rdt")
        self.stderr_log = stderr_log
        with open(self.path) as f:
            self.original = f.read()

    def arm(self, value: str) -> None:
        """Export ``value`` to the hook; its stderr (where an ``exit``
        failpoint says it fired) goes to ``stderr_log`` meanwhile."""
        first, _, rest = self.original.partition("\n")
        line = (f"export NOVA_RDT_FAILPOINTS='{value}'  {self.MARK} "
                f"libvirt scrubs its hooks' environment\n")
        rest = rest.replace(self.QUIET,
                            f">/dev/null 2>>'{self.stderr_log}'")
        self._write(first + "\n" + line + rest)

    def disarm(self) -> None:
        self._write(self.original)

    def _write(self, text: str) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o755)
        os.replace(tmp, self.path)


if __name__ == "__main__":
    if sys.argv[1:2] == ["attach"] and len(sys.argv) == 5:
        sys.exit(_attach_main(int(sys.argv[2]), sys.argv[3], sys.argv[4]))
    sys.exit("usage: python -m nova_rdt.lab.faults.hostfaults attach "
             "NS_PID SOURCE TARGET")
