"""A private mount namespace that shows lab directories at system paths.

libvirtd, QEMU and DPDK hard-code ``/sys/fs/resctrl``, ``/run/libvirt``,
``/var/lib/libvirt``, ``/run/dpdk`` and friends.  Rather than touch those
on the host, the lab runs its daemons in one mount namespace where each
such path is a bind of a directory under the lab's temp dir.

The namespace is held open by a small holder process (this module run
under ``unshare``).  Daemons join it with ``nsenter``.  The holder exits
when its stdin closes, so the namespace cannot outlive both the lab and
the last daemon in it.

A path that does not exist on the host cannot be bind-mounted over, and
creating it would touch the host.  So its nearest existing ancestor is
*shadowed*: a tmpfs is put over it and every original entry is bound
back, which makes room for a new directory in the namespace only.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import weakref

from nova_rdt.lab.procs import LabError
from nova_rdt.lab.procs import Process
from nova_rdt.lab.procs import Supervisor

MS_BIND = 0x1000
MS_REC = 0x4000

_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str, target: str, fstype: str | None = None,
           flags: int = 0, data: str | None = None) -> None:
    rc = _libc.mount(source.encode(), target.encode(),
                     fstype.encode() if fstype else None,
                     ctypes.c_ulong(flags),
                     data.encode() if data else None)
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def _bind(source: str, target: str) -> None:
    _mount(source, target, None, MS_BIND | MS_REC)


class _Shadower:
    """Makes arbitrary paths creatable inside the namespace."""

    def __init__(self, work: str):
        self.aside_root = os.path.join(work, "aside")
        os.makedirs(self.aside_root, exist_ok=True)
        self.shadowed: set[str] = set()
        self.created: set[str] = set()

    def shadow(self, path: str) -> None:
        if path in self.shadowed:
            return
        aside = os.path.join(self.aside_root,
                             path.strip("/").replace("/", "%") or "%root")
        os.mkdir(aside)
        _bind(path, aside)
        mode = os.stat(path).st_mode & 0o7777
        _mount("nova-rdt-lab", path, "tmpfs", 0, f"mode={mode:o}")
        for name in sorted(os.listdir(aside)):
            src = os.path.join(aside, name)
            dst = os.path.join(path, name)
            if os.path.islink(src):
                os.symlink(os.readlink(src), dst)
            elif os.path.isdir(src):
                os.mkdir(dst)
                _bind(src, dst)
            else:
                open(dst, "w").close()
                _bind(src, dst)
        self.shadowed.add(path)

    def ensure_dir(self, path: str) -> None:
        """Make ``path`` exist in this namespace only."""
        if os.path.isdir(path):
            return
        parent = os.path.dirname(path)
        self.ensure_dir(parent)
        if parent not in self.shadowed and parent not in self.created:
            # Never mkdir in a host directory: cover it first.
            self.shadow(parent)
        os.mkdir(path)
        self.created.add(path)

    def bind_over(self, source: str, target: str) -> None:
        self.ensure_dir(target)
        _bind(source, target)


def _holder_main(spec: dict) -> int:
    """Inside the new namespace: build the view, report, then wait."""
    from nova_rdt.emulator import profiles
    from nova_rdt.emulator import topology

    if spec.get("hostname"):
        # A second compute on this machine: its libvirtd and nova-compute
        # name their host (libvirt's getHostname, Nova's [DEFAULT] host
        # and the Placement provider) by the namespace's own hostname.
        import socket
        socket.sethostname(spec["hostname"])
    sh = _Shadower(spec["work"])
    if spec.get("resctrl"):
        # sysfs refuses mkdir, so /sys/fs is always shadowed first.
        sh.shadow("/sys/fs")
        if os.path.isdir("/sys/fs/resctrl"):
            _bind(spec["resctrl"], "/sys/fs/resctrl")
        else:
            sh.bind_over(spec["resctrl"], "/sys/fs/resctrl")
    if spec.get("topology_profile"):
        topology.bind_over_host(profiles.get(spec["topology_profile"]),
                                os.path.join(spec["work"], "topology"))
    for source, target in spec.get("binds", []):
        if os.path.isdir(source):
            sh.bind_over(source, target)
        else:
            # Files are only ever laid over existing ones (/etc/passwd).
            _mount(source, target, None, MS_BIND)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    # Hold the namespace until the lab closes our stdin (or dies).
    sys.stdin.read()
    return 0


class MountNamespace:
    """The lab's namespace, entered with :meth:`command`."""

    def __init__(self, supervisor: Supervisor, work: str):
        self.sup = supervisor
        self.work = work
        self.holder: Process | None = None
        self.ns_inode: int | None = None
        #: The namespace's own hostname (a UTS namespace too), or None:
        #: the machine's.
        self.hostname: str | None = None

    def start(self, binds: list[tuple[str, str]],
              resctrl_source: str | None = None,
              topology_profile: str | None = None,
              timeout: float = 20.0, hostname: str | None = None) -> None:
        os.makedirs(self.work, exist_ok=True)
        spec = {"work": self.work, "binds": binds,
                "resctrl": resctrl_source,
                "topology_profile": topology_profile,
                "hostname": hostname}
        self.hostname = hostname
        uts = ["--uts"] if hostname else []
        self.holder = self.sup.spawn(
            "mountns",
            ["unshare", "--mount", *uts, "--propagation", "private", "--",
             sys.executable, "-m", "nova_rdt.lab.mountns",
             json.dumps(spec)],
            stdin=subprocess.PIPE)
        ready_file = self.holder.log_path

        def ready():
            try:
                with open(ready_file) as f:
                    return "ready\n" in f.read()
            except OSError:
                return False

        self.sup.wait_for(self.holder, ready, timeout,
                          "a ready mount namespace")
        # A reference to the namespace, held for as long as this object
        # lives: the kernel reuses a dead namespace's inode number, and
        # members() would then count a stranger's processes (another
        # lab's) as ours after stop().
        fd = os.open(f"/proc/{self.holder.pid}/ns/mnt", os.O_RDONLY)
        weakref.finalize(self, os.close, fd)
        self.ns_inode = os.fstat(fd).st_ino

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` wrapped to run inside the namespace."""
        if self.holder is None or not self.holder.running():
            raise LabError("the lab's mount namespace is not running")
        pid = self.holder.pid
        uts = [f"--uts=/proc/{pid}/ns/uts"] if self.hostname else []
        return ["nsenter", f"--mount=/proc/{pid}/ns/mnt", *uts, "--",
                *argv]

    def run(self, argv: list[str], timeout: float = 60.0,
            check: bool = True, input: str | None = None
            ) -> subprocess.CompletedProcess:
        res = subprocess.run(self.command(argv), capture_output=True,
                             text=True, timeout=timeout, input=input)
        if check and res.returncode != 0:
            raise LabError(f"{' '.join(argv)} failed ({res.returncode}): "
                           f"{res.stderr.strip() or res.stdout.strip()}")
        return res

    def members(self) -> list[int]:
        """Pids of every process in this namespace (the leak check)."""
        if self.ns_inode is None:
            return []
        out = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                if os.stat(f"/proc/{pid}/ns/mnt").st_ino == self.ns_inode:
                    out.append(int(pid))
            except OSError:
                continue
        return out

    def stop(self) -> None:
        if self.holder is not None:
            self.sup.stop(self.holder)


if __name__ == "__main__":
    sys.exit(_holder_main(json.loads(sys.argv[1])))
