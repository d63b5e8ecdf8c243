"""Start and stop the emulator, on a directory or as /sys/fs/resctrl.

:class:`Emulator` runs the FUSE server as a child process, so a crash or a
hung request in it never takes the caller down, and it can always be
stopped by unmounting.  :func:`run_in_namespace` gives a command the full
illusion: the emulator at ``/sys/fs/resctrl`` and the profile's cache
topology under ``/sys/devices/system/cpu``, in a private mount namespace
that disappears with the command.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from nova_rdt import exception
from nova_rdt.emulator import profiles as profiles_mod
from nova_rdt.emulator import topology
from nova_rdt.emulator import versions

RESCTRL_PATH = "/sys/fs/resctrl"


def _listed_as_mount(path: str) -> bool:
    """Whether ``path`` is a mount point in this mount namespace, from
    /proc/self/mountinfo, which needs no answer from the file system."""
    target = os.path.realpath(path)
    try:
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return os.path.ismount(path)
    for line in lines:
        fields = line.split()
        # Field 5 is the mount point, with space, tab, newline and
        # backslash written as octal escapes.
        if len(fields) > 4 and _unescape(fields[4]) == target:
            return True
    return False


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)),
                  field)


class EmulatorError(exception.NovaRdtError, RuntimeError):
    pass


def fuse_unavailable_reason() -> str | None:
    """Why the emulator cannot mount here, or None when it can."""
    if os.geteuid() != 0:
        return "the resctrl emulator needs root to mount FUSE with allow_other"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    if not shutil.which("fusermount3") and not shutil.which("fusermount"):
        return "fusermount3 is not installed (apt-get install fuse3)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as e:
        return f"libfuse is not usable: {e}"
    return None


class Emulator:
    """One emulated resctrl mount, served by a child process."""

    def __init__(self, profile: str = profiles_mod.DEFAULT_PROFILE,
                 mountpoint: str | None = None,
                 state_dir: str | None = None,
                 kernel: str | None = None):
        self.profile = profiles_mod.get(profile)
        # Resolved here, so a bad version is a clear error in the caller
        # and the child serves exactly this release.
        self.kernel = versions.resolve(kernel)
        self._own_state = state_dir is None
        self.state_dir = state_dir or tempfile.mkdtemp(prefix="nova-rdt-emu-")
        self.mountpoint = mountpoint or os.path.join(self.state_dir, "resctrl")
        self.sysfs_cpu = os.path.join(self.state_dir, "cpu")
        self.log_path = os.path.join(self.state_dir, "emulator.log")
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 20.0) -> Emulator:
        reason = fuse_unavailable_reason()
        if reason:
            raise EmulatorError(reason)
        os.makedirs(self.mountpoint, exist_ok=True)
        topology.write_tree(self.profile, self.sysfs_cpu)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nova_rdt.emulator.serve",
             "--profile", self.profile.name, "--mountpoint", self.mountpoint,
             "--kernel", str(self.kernel)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            # The hardware: a terminal's Ctrl-C must not take it away
            # from under a run that is still cleaning up; stop() ends it.
            start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        probe = os.path.join(self.mountpoint, "info", "last_cmd_status")
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise EmulatorError(
                        f"emulator exited with {self.proc.returncode}: "
                        f"{self.log()}")
                if os.path.ismount(self.mountpoint) and \
                        os.path.exists(probe):
                    return self
                time.sleep(0.05)
        except BaseException:
            # A Ctrl-C in this wait no longer reaches the server (its
            # own session): stop it here, or it outlives its caller.
            self.stop()
            raise
        self.stop()
        raise EmulatorError(f"emulator did not mount within {timeout}s: "
                            f"{self.log()}")

    def log(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Unmount and reap the server; safe to call twice."""
        # Not os.path.ismount: a dead server's mount answers ENOTCONN to
        # stat(), so ismount() says no and the mount would stay behind.
        if _listed_as_mount(self.mountpoint):
            tool = shutil.which("fusermount3") or shutil.which("fusermount")
            cmd = [tool, "-u", "-z", self.mountpoint] if tool else \
                ["umount", "-l", self.mountpoint]
            subprocess.run(cmd, check=False, capture_output=True)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        if self._own_state:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def env(self) -> dict[str, str]:
        """Variables that point nova-rdt commands at this emulator."""
        return {"NOVA_RDT_RESCTRL_ROOT": self.mountpoint,
                "NOVA_RDT_SYSFS_CPU": self.sysfs_cpu}

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def run_in_namespace(profile: str, command: list[str],
                     kernel: str | None = None) -> int:
    """Run ``command`` where /sys/fs/resctrl is the emulator.

    Re-executes this module under ``unshare --mount`` so that every mount
    is private and vanishes with the command, leaving the host untouched.
    """
    reason = fuse_unavailable_reason()
    if reason:
        raise EmulatorError(reason)
    if not shutil.which("unshare"):
        raise EmulatorError("unshare (util-linux) is not installed")
    release = str(versions.resolve(kernel))
    return subprocess.call(
        ["unshare", "--mount", "--propagation", "private", "--",
         sys.executable, "-m", "nova_rdt.emulator.mount", profile, release,
         "--"] + command)


def _namespace_main(profile: str, command: list[str],
                    kernel: str | None = None) -> int:
    """Inside the private namespace: build /sys/fs/resctrl, run, tear down."""
    work = tempfile.mkdtemp(prefix="nova-rdt-ns-")
    aside = os.path.join(work, "sysfs-fs")
    os.mkdir(aside)

    def mount(*args):
        subprocess.run(["mount", *args], check=True)

    # sysfs refuses mkdir, so put a tmpfs over /sys/fs and bring back what
    # was there (cgroup, bpf, ...), then add a resctrl directory of our own.
    mount("--rbind", "/sys/fs", aside)
    mount("-t", "tmpfs", "-o", "mode=755", "nova-rdt-sysfs", "/sys/fs")
    for name in sorted(os.listdir(aside)):
        if name == "resctrl":
            continue
        os.mkdir(os.path.join("/sys/fs", name))
        mount("--rbind", os.path.join(aside, name),
              os.path.join("/sys/fs", name))
    os.mkdir(RESCTRL_PATH)
    emu = Emulator(profile, mountpoint=RESCTRL_PATH,
                   state_dir=os.path.join(work, "emulator"), kernel=kernel)
    try:
        emu.start()
        topology.bind_over_host(emu.profile, os.path.join(work, "topology"))
        return subprocess.call(command)
    finally:
        emu.stop()
        # Never rmtree through the rbind of the real /sys/fs: detach it,
        # and leave the directory behind if that fails.
        if subprocess.run(["umount", "-R", "-l", aside]).returncode == 0:
            os.rmdir(aside)
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    _args = sys.argv[1:]
    _sep = _args.index("--")
    sys.exit(_namespace_main(_args[0], _args[_sep + 1:],
                             _args[1] if _sep > 1 else None))

