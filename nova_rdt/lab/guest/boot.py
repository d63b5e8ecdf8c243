"""Booting the guest under QEMU, and choosing KVM or TCG.

This machine's /dev/kvm is a PVM flavour on which a stock kernel stops
after "Probing EDD" and never prints again; elsewhere KVM just works.
So the choice is made by trying: :func:`detect_accel` boots the image's
``probe`` role under KVM with a hard timeout, and falls back to TCG
(libvirt's ``domain type='qemu'``) when the guest never reaches
userspace, saying why.  The decision is cached for the process.

Every boot is a child process in its own session, killed (group-wide)
on stop and on interpreter exit, and every wait has a deadline: nothing
here can hang or leave a QEMU behind.
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from nova_rdt import exception
from nova_rdt.lab.guest import image as guest_image

ACCELS = ("kvm", "tcg")
PREFIX = "nova-rdt-guest: "
# The line each role prints once it is doing its job.
READY = {
    "probe": PREFIX + "init ",
    # Forwards once it finds two NICs, else idles: running is all a
    # server without them can show.
    "auto": PREFIX + "init ",
    "forward": PREFIX + "forwarding ",
    "noisy": PREFIX + "noisy running",
}
FAILED = (PREFIX + "error", "Kernel panic")
# nova_rdt.forwarder=: auto tries testpmd and falls back to the kernel
# bridge (printing why); testpmd fails the guest instead of falling back.
FORWARDER_CHOICES = ("auto", "testpmd", "kernel")
NOISY_CHOICES = ("memtester", "stressor")
ENV_ACCEL = "NOVA_RDT_GUEST_ACCEL"
PROBE_TIMEOUT = 20.0
# A kernel booting under a working KVM prints without pause until init
# (the probe boots without "quiet"); on this machine's PVM KVM it stops
# after "Probing EDD" for good.  Silence this long ends the probe early.
PROBE_STALL = 8.0
QEMU = "qemu-system-x86_64"


class GuestError(exception.NovaRdtError, RuntimeError):
    """The guest failed, timed out, or cannot be run here."""


@dataclasses.dataclass(frozen=True)
class AccelDecision:
    accel: str          # kvm | tcg
    reason: str

    @property
    def domain_type(self) -> str:
        """libvirt's ``<domain type=...>`` for this accel."""
        return domain_type(self.accel)


def domain_type(accel: str) -> str:
    if accel not in ACCELS:
        raise ValueError(
            f"accel must be one of {'|'.join(ACCELS)}, not {accel!r}")
    return "kvm" if accel == "kvm" else "qemu"


def cmdline(role: str, extra: str = "") -> str:
    if role not in READY:
        raise ValueError(
            f"guest role must be one of {'|'.join(READY)}, not {role!r}")
    # panic=-1 with -no-reboot: a panicking guest ends QEMU at once.
    # The probe keeps the kernel's messages: "quiet" would also hide the
    # boot stub's "Probing EDD", the last line a PVM-hung kernel prints.
    quiet = "" if role == "probe" else "quiet"
    return " ".join(p for p in ("console=ttyS0 panic=-1", quiet,
                                "nova_rdt.role=" + role, extra) if p)


def default_cpu(accel: str, role: str) -> str | None:
    """The vCPU model: not QEMU's default qemu64, which lacks the SSE4.2
    DPDK's x86 build (testpmd) needs, except for the KVM probe, which
    must not fail for another reason than the hang it looks for (on this
    machine's PVM KVM ``-cpu host`` fails outright, ``failed to set MSR
    0x10a``).  ``max`` is everything TCG emulates."""
    if accel == "tcg":
        return "max"
    return None if role == "probe" else "host"


def qemu_argv(img: guest_image.GuestImage, accel: str, role: str,
              serial_path: str, taps: tuple[str, ...] = (),
              memory_mib: int = 256, extra_cmdline: str = "",
              qemu: str = QEMU, guest_no: int = 0,
              vcpus: int = 1, cpu: str | None = None) -> list[str]:
    """A direct kernel boot: no disk, no display, the serial console to
    a file (-nographic also sends SeaBIOS and the boot stub there), one
    virtio-net NIC per tap device (created by QEMU, in the caller's
    network namespace).  MACs are unique per (process, ``guest_no``,
    NIC), so guests on one L2 segment never clash."""
    domain_type(accel)
    if vcpus < 1:
        raise ValueError(f"vcpus must be >= 1, not {vcpus!r}")
    if cpu is None:
        cpu = default_cpu(accel, role)
    argv = [qemu, "-accel", accel] + (["-cpu", cpu] if cpu else []) + [
            "-m", str(memory_mib), "-smp", str(vcpus),
            "-nodefaults", "-nographic", "-no-reboot",
            "-kernel", img.kernel, "-initrd", img.initrd,
            "-append", cmdline(role, extra_cmdline),
            "-serial", "file:" + serial_path]
    for i, tap in enumerate(taps):
        mac = (f"52:54:{os.getpid() % 256:02x}:{guest_no // 256 % 256:02x}:"
               f"{guest_no % 256:02x}:{i:02x}")
        argv += ["-netdev",
                 f"tap,id=n{i},ifname={tap},script=no,downscript=no",
                 "-device", f"virtio-net-pci,netdev=n{i},mac={mac}"]
    return argv


def direct_boot_os_xml(img: guest_image.GuestImage, role: str,
                       extra_cmdline: str = "") -> str:
    """The libvirt ``<os>`` element for the same direct kernel boot."""
    from xml.sax.saxutils import escape
    return ("<os><type arch='x86_64' machine='pc'>hvm</type>"
            f"<kernel>{escape(img.kernel)}</kernel>"
            f"<initrd>{escape(img.initrd)}</initrd>"
            f"<cmdline>{escape(cmdline(role, extra_cmdline))}</cmdline>"
            "</os>")


def guest_args(forwarder: str | None = None, noisy: str | None = None,
               noisy_mib: int | None = None) -> str:
    """The kernel command line words that choose the forwarder and the
    noise maker (None: the guest's default, auto and memtester)."""
    words = []
    if forwarder is not None:
        if forwarder not in FORWARDER_CHOICES:
            raise ValueError(f"forwarder must be one of "
                             f"{'|'.join(FORWARDER_CHOICES)}, not "
                             f"{forwarder!r}")
        words.append("nova_rdt.forwarder=" + forwarder)
    if noisy is not None:
        if noisy not in NOISY_CHOICES:
            raise ValueError(f"noisy must be one of "
                             f"{'|'.join(NOISY_CHOICES)}, not {noisy!r}")
        words.append("nova_rdt.noisy=" + noisy)
    if noisy_mib is not None:
        if noisy_mib < 1:
            raise ValueError(f"noisy_mib must be >= 1, not {noisy_mib!r}")
        words.append(f"nova_rdt.stress_mib={int(noisy_mib)}")
    return " ".join(words)


def forwarder_of(ready_line: str) -> str:
    """``forwarding eth0<->eth1 (kernel bridge)`` -> ``kernel``,
    ``forwarding eth0<->eth1 (testpmd)`` -> ``testpmd``."""
    m = re.search(r"forwarding \S+ \((\w+)", ready_line)
    if not m:
        raise GuestError(f"not a forwarding line: {ready_line!r}")
    return m.group(1)


def noisy_of(ready_line: str) -> str:
    """``noisy running (memtester 64 MiB, pid 57)`` -> ``memtester``."""
    m = re.search(r"noisy running \((\w[\w-]*)", ready_line)
    if not m:
        raise GuestError(f"not a noisy line: {ready_line!r}")
    return m.group(1)


def classify_probe(ready: bool, returncode: int | None, serial: str,
                   stderr: str, waited: float) -> AccelDecision:
    """The accel to use after a KVM probe boot.  Pure: ``ready`` says
    whether the guest's init line appeared, ``returncode`` is QEMU's
    exit status if it ended (None if we killed it after ``waited``
    seconds, at the timeout or when its console stalled)."""
    if ready:
        return AccelDecision("kvm", "the guest reached userspace under KVM")
    if returncode is not None:
        last = _last_line(stderr) or _last_line(serial) or "no output"
        return AccelDecision(
            "tcg", f"QEMU with KVM exited with status {returncode} before "
            f"the guest reached userspace ({last}): using TCG")
    last = _last_line(serial)
    why = ("no console output at all" if not last
           else f"the console stopped at {last!r}")
    hint = (" (the PVM KVM hang of stock kernels)"
            if "Probing EDD" in serial or not last else "")
    return AccelDecision(
        "tcg", f"no guest userspace within {waited:.0f} s under KVM, "
        f"{why}{hint}: using TCG")


def _last_line(text: str) -> str:
    # Without the firmware's terminal escapes (ESC c, CSI sequences).
    text = re.sub(r"\x1b(\[[0-9;?]*[A-Za-z]|[A-Za-z])", "", text)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it if we die, even by SIGKILL,
    when neither stop() nor atexit gets to run.  Survives the exec of
    ``ip netns exec`` and of QEMU (neither is setuid)."""
    import ctypes
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG,
                                             signal.SIGKILL)


_RUNNING: set[QemuGuest] = set()
_GUEST_NO = itertools.count()


@atexit.register
def _kill_all() -> None:
    for guest in list(_RUNNING):
        guest.stop()


class QemuGuest:
    """One QEMU running the guest image; a context manager."""

    def __init__(self, img: guest_image.GuestImage, accel: str, role: str,
                 workdir: str, taps: tuple[str, ...] = (),
                 netns: str | None = None, memory_mib: int = 256,
                 extra_cmdline: str = "", name: str = "guest",
                 vcpus: int = 1, cpu: str | None = None):
        self.serial_path = os.path.join(workdir, name + ".serial.log")
        self.stderr_path = os.path.join(workdir, name + ".qemu.log")
        self.role = role
        self.accel = accel
        self.argv = qemu_argv(img, accel, role, self.serial_path, taps,
                              memory_mib, extra_cmdline,
                              guest_no=next(_GUEST_NO), vcpus=vcpus,
                              cpu=cpu)
        if netns:
            # ip netns exec execs QEMU: the pid stays QEMU's.
            self.argv = ["ip", "netns", "exec", netns] + self.argv
        self.popen: subprocess.Popen | None = None

    def start(self) -> QemuGuest:
        if shutil.which(QEMU) is None:
            raise GuestError(
                f"{QEMU} not found (apt-get install qemu-system-x86)")
        open(self.serial_path, "w").close()
        with open(self.stderr_path, "w") as err:
            self.popen = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=err,
                stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent)
        _RUNNING.add(self)
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def serial(self) -> str:
        with open(self.serial_path, errors="replace") as f:
            return f.read()

    def qemu_output(self) -> str:
        with open(self.stderr_path, errors="replace") as f:
            return f.read()

    def wait_ready(self, timeout: float, stall: float | None = None) -> str:
        """The role's ready line; GuestError on failure, exit or
        timeout, with the console's tail.  ``stall``: also give up when
        the console has been silent that long (a booting kernel talks
        all the way to userspace; a hung one stops)."""
        want = READY[self.role]
        start = last_change = time.monotonic()
        deadline = start + timeout
        seen = ""
        while True:
            # Poll before reading: if QEMU has ended, the text read
            # after holds everything it wrote (a probe guest prints its
            # line and powers off at once).
            rc = self.popen.poll() if self.popen else -1
            text = self.serial()
            # Anywhere in a line: kernel messages carry a timestamp and
            # may interleave with ours.
            for line in text.splitlines():
                if want in line:
                    return line[line.index(want):].strip()
                if any(f in line for f in FAILED):
                    raise GuestError(f"guest ({self.role}, {self.accel}) "
                                     f"failed: {line.strip()}")
            if rc is not None:
                raise GuestError(
                    f"QEMU exited with status {rc} before "
                    f"{want.strip()!r}; its output: "
                    f"{self.qemu_output().strip()[-500:]}; "
                    f"console tail: {text.strip()[-500:]}")
            now = time.monotonic()
            if text != seen:
                seen, last_change = text, now
            if now >= deadline:
                raise GuestError(
                    f"no {want.strip()!r} within {timeout:g} s "
                    f"({self.accel}); console tail: {text[-500:]!r}")
            if stall is not None and now - last_change >= stall:
                raise GuestError(
                    f"no {want.strip()!r} after {now - start:.0f} s "
                    f"({self.accel}): the console has been silent for "
                    f"{stall:g} s; its tail: {text[-500:]!r}")
            time.sleep(0.1)

    def stop(self) -> None:
        _RUNNING.discard(self)
        p, self.popen = self.popen, None
        if p is None or p.poll() is not None:
            return
        for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                return
            try:
                p.wait(grace)
                return
            except subprocess.TimeoutExpired:
                continue

    def __enter__(self) -> QemuGuest:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def kvm_unavailable_reason() -> str | None:
    try:
        fd = os.open("/dev/kvm", os.O_RDWR)
    except OSError as e:
        return f"/dev/kvm cannot be opened ({e.strerror})"
    os.close(fd)
    return None


_DECISIONS: dict[tuple, AccelDecision] = {}


def detect_accel(img: guest_image.GuestImage | None = None,
                 timeout: float = PROBE_TIMEOUT,
                 stall: float | None = PROBE_STALL) -> AccelDecision:
    """KVM if this image's kernel boots under it, else TCG, with why.

    ``$NOVA_RDT_GUEST_ACCEL`` (kvm|tcg) skips the probe."""
    forced = os.environ.get(ENV_ACCEL)
    if forced:
        if forced not in ACCELS:
            raise GuestError(f"{ENV_ACCEL} must be kvm or tcg, not {forced!r}")
        return AccelDecision(forced, f"{ENV_ACCEL}={forced}")
    img = img or guest_image.load()
    key = (img.kernel, os.stat(img.kernel).st_mtime_ns)
    if key in _DECISIONS:
        return _DECISIONS[key]
    why_not = kvm_unavailable_reason()
    if why_not:
        decision = AccelDecision("tcg", why_not + ": using TCG")
    else:
        with tempfile.TemporaryDirectory(prefix="nova-rdt-probe-") as tmp:
            guest = QemuGuest(img, "kvm", "probe", tmp, name="probe")
            with guest:
                ready = True
                t0 = time.monotonic()
                try:
                    guest.wait_ready(timeout, stall)
                except GuestError:
                    ready = False
                waited = time.monotonic() - t0
                rc = guest.popen.poll() if guest.popen else None
                serial, stderr = guest.serial(), guest.qemu_output()
            decision = classify_probe(ready, rc, serial, stderr, waited)
    _DECISIONS[key] = decision
    return decision


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m nova_rdt.lab.guest.boot")
    p.add_argument("--image-dir", help=f"default: ${guest_image.ENV_DIR} "
                   "or <venv>/share/nova-rdt/guest")
    p.add_argument("--timeout", type=float, default=PROBE_TIMEOUT,
                   help="seconds the KVM probe may take (default %(default)s)")
    p.add_argument("--stall", type=float, default=PROBE_STALL,
                   help="seconds of console silence that end the KVM "
                   "probe early (default %(default)s; 0: never)")
    args = p.parse_args(argv)
    try:
        d = detect_accel(guest_image.load(args.image_dir), args.timeout,
                         args.stall or None)
    except (guest_image.ImageError, GuestError) as e:
        print(f"nova-rdt guest: {e}", file=sys.stderr)
        return 1
    print(f"accel={d.accel} domain_type={d.domain_type}: {d.reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
