"""virtlogd and libvirtd of our own, with diskless guests.

Both daemons run privileged (resctrl needs root) inside the lab's mount
namespace, where ``/etc/libvirt``, ``/run/libvirt``, ``/var/lib/libvirt``,
``/var/cache/libvirt`` and ``/var/log/libvirt`` are directories of the lab.
Clients outside the namespace reach libvirtd through the socket's path in
the lab directory, so no host libvirtd is ever involved.
"""

from __future__ import annotations

import fcntl
import glob
import os
import shutil
import subprocess
import sys
import time
import uuid
from xml.sax.saxutils import escape

from nova_rdt.host.procinfo import is_running
from nova_rdt.lab.mountns import MountNamespace
from nova_rdt.lab.procs import LabError
from nova_rdt.lab.procs import Process
from nova_rdt.lab.procs import Supervisor

_KVM_GET_API_VERSION = 0xAE00
# Debian's build-time QEMU user and group, and the id Debian gives them.
QEMU_ACCOUNT = "libvirt-qemu"
_QEMU_ID = 64055

# What privileged libvirtd hard-codes, and the lab subdirectory behind it.
SYSTEM_DIRS = {
    "etc": "/etc/libvirt",
    "run": "/run/libvirt",
    "lib": "/var/lib/libvirt",
    "cache": "/var/cache/libvirt",
    "log": "/var/log/libvirt",
}

_LIBVIRTD_CONF = """\
# Written by nova_rdt.lab: a private libvirtd for one lab.
auth_unix_ro = "none"
auth_unix_rw = "none"
unix_sock_rw_perms = "0700"
log_filters = "1:util.virresctrl"
log_outputs = "1:file:/var/log/libvirt/libvirtd.log"
"""

# No security driver, no per-guest /dev namespace and no ownership
# changes: diskless root guests need none of them, and each can fail in a
# container.
_QEMU_CONF = """\
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
namespaces = [ ]
"""

_VIRTLOGD_CONF = """\
log_outputs = "3:file:/var/log/libvirt/virtlogd.log"
"""


def kvm_unavailable_reason() -> str | None:
    """Why QEMU cannot use KVM here, or None when it can."""
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        return f"/dev/kvm: {e.strerror}"
    try:
        version = fcntl.ioctl(fd, _KVM_GET_API_VERSION)
    except OSError as e:
        return f"/dev/kvm does not answer KVM_GET_API_VERSION: {e.strerror}"
    finally:
        os.close(fd)
    return None if version == 12 else f"unexpected KVM API {version}"


def libvirt_unavailable_reason() -> str | None:
    for tool in ("libvirtd", "virtlogd", "virsh", "qemu-system-x86_64",
                 "nsenter", "unshare"):
        if not shutil.which(tool):
            return (f"{tool} is not installed (apt-get install "
                    f"libvirt-daemon-driver-qemu libvirt-clients "
                    f"qemu-system-x86 util-linux)")
    return None


def diskless_domain_xml(name: str, vcpus: int = 1, memory_mib: int = 64,
                        domain_type: str = "kvm", cputune: str = "",
                        metadata: str = "") -> str:
    """A guest with no disk, NIC or display: enough to run resctrl."""
    return f"""<domain type='{domain_type}'>
  <name>{escape(name)}</name>
  <memory unit='MiB'>{memory_mib}</memory>
  <vcpu placement='static'>{vcpus}</vcpu>
  {f'<metadata>{metadata}</metadata>' if metadata else ''}
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  {f'<cputune>{cputune}</cputune>' if cputune else ''}
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <controller type='usb' model='none'/>
    <memballoon model='none'/>
  </devices>
</domain>
"""


class VirshError(LabError):
    def __init__(self, args, stderr):
        self.stderr = stderr.strip()
        super().__init__(f"virsh {' '.join(args)}: {self.stderr}")


class Libvirt:
    """One virtlogd + libvirtd pair for a lab."""

    def __init__(self, root: str, supervisor: Supervisor,
                 cache_dir: str | None = None):
        self.root = root
        self.sup = supervisor
        self.dirs = {k: os.path.join(root, k) for k in SYSTEM_DIRS}
        # The QEMU capability probe costs seconds; labs in one test run
        # may share its result.
        if cache_dir:
            self.dirs["cache"] = cache_dir
        self.virtlogd: Process | None = None
        self.libvirtd: Process | None = None
        # Diskless guests never run a kernel: KVM whenever /dev/kvm
        # answers.  Linux guests ask linux_accel(), which boots one.
        self.domain_type = "qemu" if kvm_unavailable_reason() else "kvm"
        self._linux_accel = None
        #: Why kvm domains run TCG here (None: they run KVM); set by
        #: :meth:`use_tcg_for_kvm` before libvirtd starts.
        self.tcg_for_kvm: str | None = None
        #: libvirt refuses a migration between two daemons with one host
        #: UUID ("Attempt to migrate guest to the same host"), and two
        #: labs on one machine would read the same SMBIOS UUID.
        self.host_uuid = str(uuid.uuid4())
        #: (min, max) of the ports QEMU listens on for incoming
        #: migrations; None: libvirt's own (49152-49215).  Two libvirtds
        #: on one machine each check a port free, then QEMU binds it: two
        #: migrations at once, one each way, picked the same port, and
        #: one failed "Address already in use".
        self.migration_ports: tuple[int, int] | None = None

    @property
    def bin_dir(self) -> str:
        """Put first on libvirtd's PATH: where it finds its QEMU."""
        return os.path.join(self.root, "bin")

    def use_tcg_for_kvm(self, why: str) -> None:
        """kvm domains run QEMU's TCG (:mod:`nova_rdt.lab.tcg_qemu`).

        libvirt takes the default emulator of its capabilities from its
        PATH, so a wrapper found first there serves every domain that
        names no ``<emulator>`` (Nova's), and libvirt's capability probe
        through it still sees KVM.  The real binary is exec'd from where
        it is installed: QEMU finds its accelerator modules and firmware
        relative to its own directory."""
        if self.libvirtd is not None:
            raise LabError("use_tcg_for_kvm() must come before libvirtd "
                           "starts (it reads its emulators at start)")
        if self.domain_type != "kvm":
            raise LabError(f"no kvm domains here ({kvm_unavailable_reason()})"
                           f": TCG for kvm domains needs a /dev/kvm that "
                           f"answers")
        from nova_rdt.lab import tcg_qemu
        real = shutil.which("qemu-system-x86_64")
        if real is None:
            raise LabError("qemu-system-x86_64 is not installed")
        os.makedirs(self.bin_dir, exist_ok=True)
        path = os.path.join(self.bin_dir, "qemu-system-x86_64")
        with open(path, "w") as f:
            f.write(tcg_qemu.wrapper_script(sys.executable, real))
        os.chmod(path, 0o755)
        self.tcg_for_kvm = why

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.tcg_for_kvm:
            path = env.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            env["PATH"] = f"{self.bin_dir}:{path}"
        return env

    def linux_accel(self, image=None):
        """KVM or TCG for guests that boot a Linux kernel, with why
        (:func:`nova_rdt.lab.guest.boot.detect_accel`: a KVM that hangs
        a stock kernel, as this machine's PVM one does, means TCG)."""
        if self._linux_accel is None:
            from nova_rdt.lab.guest import boot as guest_boot
            if kvm_unavailable_reason():
                self._linux_accel = guest_boot.AccelDecision(
                    "tcg", f"{kvm_unavailable_reason()}: using TCG")
            else:
                self._linux_accel = guest_boot.detect_accel(image)
        return self._linux_accel

    def prepare_for_linux(self, image=None):
        """Decide, before libvirtd starts, how Linux guests run here, and
        return :meth:`linux_accel`'s decision.

        Where /dev/kvm answers but its KVM cannot boot a Linux kernel
        (this machine kind's PVM), kvm domains get the TCG wrapper
        (:meth:`use_tcg_for_kvm`): they stay kvm, so libvirt takes
        Nova's ``<cachetune>`` and makes the groups itself.  Where KVM
        boots Linux nothing changes; with no KVM at all, domains are
        qemu-typed and libvirt refuses RDT elements (said, not hidden)."""
        decision = self.linux_accel(image)
        if (decision.accel == "tcg" and self.domain_type == "kvm"
                and not self.tcg_for_kvm):
            self.use_tcg_for_kvm(decision.reason)
        return decision

    @property
    def linux_domain_type(self) -> str:
        """``<domain type>`` for Linux guests: kvm (KVM, or TCG under a
        kvm domain) or qemu (TCG, no KVM here)."""
        if self.tcg_for_kvm:
            return "kvm"
        return self.linux_accel().domain_type

    @property
    def forced(self) -> list[str]:
        """What this machine makes the lab's libvirt do, "what: why"."""
        if not self.tcg_for_kvm:
            return []
        return [f"kvm domains run QEMU's TCG (nova_rdt.lab.tcg_qemu, first "
                f"on libvirtd's PATH; libvirt still takes <cachetune> and "
                f"makes the groups): {self.tcg_for_kvm}"]

    @property
    def socket(self) -> str:
        return os.path.join(self.dirs["run"], "libvirt-sock")

    @property
    def uri(self) -> str:
        return f"qemu:///system?socket={self.socket}"

    @property
    def hooks_dir(self) -> str:
        return os.path.join(self.dirs["etc"], "hooks")

    def binds(self) -> list[tuple[str, str]]:
        for d in self.dirs.values():
            os.makedirs(d, exist_ok=True)
        return ([(self.dirs[k], SYSTEM_DIRS[k]) for k in SYSTEM_DIRS]
                + self._identity_binds())

    def _identity_binds(self) -> list[tuple[str, str]]:
        """/etc/passwd and /etc/group with libvirt's QEMU account.

        Debian's libvirtd looks up ``libvirt-qemu`` before it reads
        qemu.conf, and only libvirt-daemon-system creates that account.
        Inside the namespace we show copies that have it, rather than add
        a user to the host.
        """
        binds = []
        for path, line in (
                ("/etc/passwd", f"{QEMU_ACCOUNT}:x:{_QEMU_ID}:{_QEMU_ID}:"
                                f"nova-rdt lab:/var/lib/libvirt:"
                                f"/usr/sbin/nologin\n"),
                ("/etc/group", f"{QEMU_ACCOUNT}:x:{_QEMU_ID}:\n")):
            with open(path) as f:
                text = f.read()
            if any(entry.split(":")[0] == QEMU_ACCOUNT
                   for entry in text.splitlines()):
                continue
            copy = os.path.join(self.root, os.path.basename(path))
            with open(copy, "w") as f:
                f.write(text if text.endswith("\n") or not text
                        else text + "\n")
                f.write(line)
            binds.append((copy, path))
        return binds

    def _ports_conf(self) -> str:
        if self.migration_ports is None:
            return ""
        low, high = self.migration_ports
        return f"migration_port_min = {low}\nmigration_port_max = {high}\n"

    def _write_config(self) -> None:
        etc = self.dirs["etc"]
        for name, text in (("libvirtd.conf", _LIBVIRTD_CONF
                            + f'host_uuid = "{self.host_uuid}"\n'),
                           ("qemu.conf", _QEMU_CONF + self._ports_conf()),
                           ("virtlogd.conf", _VIRTLOGD_CONF)):
            with open(os.path.join(etc, name), "w") as f:
                f.write(text)
        os.makedirs(self.hooks_dir, exist_ok=True)

    def start(self, ns: MountNamespace, timeout: float = 60.0) -> None:
        self._write_config()
        self.virtlogd = self.sup.spawn("virtlogd", ns.command(
            ["virtlogd", "-f", "/etc/libvirt/virtlogd.conf"]))
        logd_sock = os.path.join(self.dirs["run"], "virtlogd-sock")
        self.sup.wait_for(self.virtlogd, lambda: os.path.exists(logd_sock),
                          timeout, "its socket")
        self.libvirtd = self.sup.spawn("libvirtd", ns.command(
            ["libvirtd", "-f", "/etc/libvirt/libvirtd.conf"]),
            env=self._env())
        self.sup.wait_for(self.libvirtd, lambda: os.path.exists(self.socket),
                          timeout, "its socket")
        # The first capabilities call runs QEMU's probe: part of start-up.
        self.sup.wait_for(self.libvirtd, self._answers, timeout,
                          "answering virsh capabilities")

    def restart(self, ns: MountNamespace, timeout: float = 60.0) -> None:
        """Stop (or reap a crashed) libvirtd and start a new one; it
        reconnects to the running guests, firing the ``reconnect`` hook."""
        if self.libvirtd is not None:
            self.sup.stop(self.libvirtd)
        self.libvirtd = self.sup.spawn("libvirtd", ns.command(
            ["libvirtd", "-f", "/etc/libvirt/libvirtd.conf"]),
            env=self._env())
        self.sup.wait_for(self.libvirtd, self._answers, timeout,
                          "answering virsh capabilities")

    def _answers(self) -> bool:
        res = subprocess.run(["virsh", "-c", self.uri, "capabilities"],
                             capture_output=True, text=True, timeout=120)
        return res.returncode == 0

    def virsh(self, *args: str, check: bool = True,
              timeout: float = 120.0) -> str:
        res = subprocess.run(["virsh", "-q", "-c", self.uri, *args],
                             capture_output=True, text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise VirshError(args, res.stderr or res.stdout)
        return res.stdout

    def capabilities(self) -> str:
        return self.virsh("capabilities")

    def define(self, xml: str) -> None:
        path = os.path.join(self.root, f"define-{time.monotonic_ns()}.xml")
        with open(path, "w") as f:
            f.write(xml)
        try:
            self.virsh("define", path)
        finally:
            os.unlink(path)

    def start_domain(self, name: str, paused: bool = True) -> None:
        self.virsh("start", name, *(["--paused"] if paused else []))

    def destroy(self, name: str) -> None:
        self.virsh("destroy", name)

    def undefine(self, name: str) -> None:
        self.virsh("undefine", name)

    def dumpxml(self, name: str) -> str:
        return self.virsh("dumpxml", name)

    def domains(self, running_only: bool = False) -> list[str]:
        out = self.virsh("list", "--name",
                         *([] if running_only else ["--all"]))
        return [line.strip() for line in out.splitlines() if line.strip()]

    def qemu_pids(self) -> list[int]:
        """Pids of this libvirtd's QEMU processes, from its pidfiles."""
        pids = []
        for path in glob.glob(os.path.join(self.dirs["run"], "qemu",
                                           "*.pid")):
            try:
                with open(path) as f:
                    pids.append(int(f.read().strip()))
            except (OSError, ValueError):
                continue
        return [p for p in pids if is_running(p, None)]

    def vcpu_tids(self, name: str) -> dict[int, int]:
        """vCPU number -> host thread id, as QEMU reports them."""
        out = self.virsh("qemu-monitor-command", name, "--hmp",
                         "info cpus")
        tids = {}
        for line in out.splitlines():
            # "* CPU #0: thread_id=1234"
            if "CPU #" in line and "thread_id=" in line:
                cpu = int(line.split("CPU #")[1].split(":")[0])
                tids[cpu] = int(line.split("thread_id=")[1].split()[0])
        return tids

    def stop(self) -> None:
        """Destroy every guest, then stop both daemons.  Idempotent."""
        if self.libvirtd is not None and self.libvirtd.running():
            try:
                for name in self.domains(running_only=True):
                    self.virsh("destroy", name, check=False)
                for name in self.domains():
                    self.virsh("undefine", name, check=False)
            except (LabError, subprocess.TimeoutExpired):
                pass  # the pid sweep below still applies
        for proc in (self.libvirtd, self.virtlogd):
            if proc is not None:
                self.sup.stop(proc)
