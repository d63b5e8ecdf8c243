"""One NFV compute host in a temp directory: the Host lab.

Steps, each usable on its own and in this order::

    lab = Lab(profile="gold-6252")
    lab.start_resctrl()      # emulator (or the host's real resctrl)
    lab.start_namespace()    # private mount namespace with the lab dirs
    lab.start_libvirt()      # virtlogd + libvirtd, diskless guests
    lab.start_ovs()          # ovsdb-server + ovs-vswitchd-dpdk, PMDs
    lab.add_traffic_port()   # veth: OVS af_packet port <-> traffic netns
    lab.start_vnf()          # dpdk-testpmd behind a vhost-user port
    ...
    lab.stop()               # everything, by pid; idempotent

or ``with Lab(...).start() as lab:`` for the usual set.  ``lab.timings``
holds what each step cost, ``lab.leaks()`` what stop() left behind (it
should be nothing), ``lab.logs()`` every component's log.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import signal
import sys
import tempfile
import time

from nova_rdt.emulator import mount as emulator_mount
from nova_rdt.emulator import profiles as profiles_mod
from nova_rdt.lab import libvirtd as libvirtd_mod
from nova_rdt.lab import ovsdpdk
from nova_rdt.lab.mountns import MountNamespace
from nova_rdt.lab.netns import TrafficNamespace
from nova_rdt.lab.procs import LabError
from nova_rdt.lab.procs import Supervisor

REAL_RESCTRL = "/sys/fs/resctrl"


def real_resctrl_present() -> bool:
    return (os.path.ismount(REAL_RESCTRL)
            and os.path.exists(os.path.join(REAL_RESCTRL, "info")))


def mounts_under(path: str) -> list[str]:
    """Mount points at or below ``path`` in our own namespace."""
    prefix = os.path.realpath(path).rstrip("/") + "/"
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            if (point + "/").startswith(prefix):
                out.append(point)
    return out


def _cmdline(pid: int) -> str:
    """What a leftover process runs, for the leak report ('' if gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")[:120]
    except OSError:
        return ""


class Lab:
    """A compute host: resctrl, libvirt, OVS-DPDK and traffic links."""

    def __init__(self, profile: str = profiles_mod.DEFAULT_PROFILE,
                 resctrl: str = "emulated", base_dir: str | None = None,
                 libvirt: bool = True, ovs: bool = True,
                 pmd_cpu_mask: int = 0x2,
                 libvirt_cache_dir: str | None = None,
                 failure_log_dir: str | None = None,
                 hook: dict | None = None,
                 log=None, kernel: str | None = None):
        if resctrl not in ("emulated", "real", "auto"):
            raise ValueError(f"resctrl must be emulated, real or auto, "
                             f"not {resctrl!r}")
        self.profile = profiles_mod.get(profile)
        self.resctrl_mode = resctrl
        # The kernel release the emulator behaves as (None: its default);
        # only an emulated resctrl has one.
        self.kernel = kernel
        self.id = secrets.token_hex(2)
        self.base = base_dir or tempfile.mkdtemp(
            prefix=f"nova-rdt-lab-{self.id}-")
        os.makedirs(self.base, exist_ok=True)
        self.log_dir = os.path.join(self.base, "logs")
        self.failure_log_dir = failure_log_dir or os.path.join(
            tempfile.gettempdir(), "nova-rdt-lab-logs")
        self.sup = Supervisor(self.log_dir)
        self._say = log or (lambda msg: None)
        self.timings: dict[str, float] = {}
        self.swept: list[str] = []
        self.emulator: emulator_mount.Emulator | None = None
        self.ns = MountNamespace(self.sup, os.path.join(self.base, "ns"))
        self.libvirt = (libvirtd_mod.Libvirt(
            os.path.join(self.base, "libvirt"), self.sup,
            cache_dir=libvirt_cache_dir) if libvirt else None)
        self.ovs = (ovsdpdk.OvsDpdk(
            os.path.join(self.base, "ovs"), self.sup,
            pmd_cpu_mask=pmd_cpu_mask,
            file_prefix=f"nova-rdt-lab-{self.id}") if ovs else None)
        # The nova-rdt libvirt hook: installed before libvirtd starts
        # (libvirtd looks for hooks only then), with HookSettings
        # overrides from ``hook`` and the lab's own paths.
        self.hook_overrides = hook
        self.hook_settings_path = os.path.join(self.base, "hook.json")
        self.state_path = os.path.join(self.base, "state")
        self.traffic: TrafficNamespace | None = None
        self.vnfs: list[ovsdpdk.TestPmd] = []
        self.resctrl_root: str | None = None
        self.sysfs_cpu_root: str | None = None
        self.stopped = False

    # -- steps ------------------------------------------------------------

    def _timed(self, step: str, fn, *args, **kw):
        t0 = time.monotonic()
        try:
            return fn(*args, **kw)
        finally:
            self.timings[step] = time.monotonic() - t0

    def start_resctrl(self) -> str:
        """Mount the emulator, or adopt the host's resctrl; says which."""
        use_real = (self.resctrl_mode == "real"
                    or (self.resctrl_mode == "auto"
                        and real_resctrl_present()))
        if use_real:
            if not real_resctrl_present():
                raise LabError(f"resctrl='real' but {REAL_RESCTRL} is not "
                               f"a mounted resctrl filesystem")
            if self.kernel:
                raise LabError(f"kernel={self.kernel!r} applies to the "
                               f"emulated resctrl only, but this lab uses "
                               f"the real one at {REAL_RESCTRL}")
            self.resctrl_root = REAL_RESCTRL
            self.sysfs_cpu_root = "/sys/devices/system/cpu"
            msg = f"using the host's real resctrl at {REAL_RESCTRL}"
        else:
            extra = {"kernel": self.kernel} if self.kernel else {}
            self.emulator = emulator_mount.Emulator(
                self.profile.name,
                state_dir=os.path.join(self.base, "emulator"), **extra)
            self._timed("emulator", self.emulator.start)
            self.resctrl_root = self.emulator.mountpoint
            self.sysfs_cpu_root = self.emulator.sysfs_cpu
            msg = (f"emulated resctrl ({self.profile.name}: "
                   f"{self.profile.description}) at {self.resctrl_root}")
        self._say(msg)
        return msg

    @property
    def emulated(self) -> bool:
        return self.emulator is not None

    def start_namespace(self) -> None:
        binds = []
        if self.libvirt:
            binds += self.libvirt.binds()
        if self.ovs:
            binds += self.ovs.binds()
        self._timed("namespace", self.ns.start, binds,
                    resctrl_source=self.resctrl_root if self.emulated
                    else None,
                    topology_profile=self.profile.name if self.emulated
                    else None)

    def hook_settings(self, host_view: bool = False):
        """The hook's settings; ``host_view`` gives the paths as seen from
        outside the lab namespace (for running the agent from a test)."""
        from nova_rdt.host.settings import HookSettings

        values = dict(self.hook_overrides or {})
        values.setdefault("state_path", self.state_path)
        values.setdefault("log_file", os.path.join(self.log_dir, "hook.log"))
        if self.ovs:
            values.setdefault("ovsdb_connection", f"unix:{self.ovs.db_sock}")
            values.setdefault("ovs_vswitchd_pidfile",
                              self.ovs.vswitchd_pidfile)
            values.setdefault("ovs_vswitchd_target", self.ovs.vswitchd_ctl)
        if "classes" in values:
            values["classes"] = tuple(values["classes"])
        if host_view:
            values["resctrl_root"] = self.resctrl_root
            values["sysfs_cpu_root"] = self.sysfs_cpu_root
            values["libvirt_qemu_run_dir"] = os.path.join(
                self.libvirt.dirs["run"], "qemu")
        return HookSettings(**values)

    def agent(self):
        """The host agent (pmd sync, reconcile) run from outside the lab."""
        from nova_rdt.host.agent import Agent
        return Agent(self.hook_settings(host_view=True))

    def start_libvirt(self) -> None:
        if not self.libvirt:
            raise LabError("this lab was made with libvirt=False")
        if self.hook_overrides is not None:
            from nova_rdt.hook import install
            os.makedirs(self.log_dir, exist_ok=True)
            install.install(self.hook_settings(),
                            hooks_dir=self.libvirt.hooks_dir,
                            settings_path=self.hook_settings_path,
                            python=self._hook_python())
        self._timed("libvirtd", self.libvirt.start, self.ns)
        self._say(f"libvirtd up ({self.libvirt.domain_type} guests) "
                  f"in {self.timings['libvirtd']:.1f}s")
        for forced in self.libvirt.forced:
            self._say(f"this machine forces: {forced}")

    def _hook_python(self) -> str:
        """The hook's interpreter: a wrapper of this one.  libvirt runs
        hooks with a clean environment: under a ``PYTHONPATH`` (a source
        tree under test, not the installed copy) the wrapper keeps it for
        the hook, and a test may put itself between libvirt and the hook
        there (tests/integration/test_hook_prepare_room.py)."""
        # libvirt runs the hook from /: a relative entry would point there,
        # and the installed copy would run instead.
        path = os.pathsep.join(
            os.path.abspath(p) for p in
            os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
        env = f"PYTHONPATH={shlex.quote(path)} " if path else ""
        wrapper = os.path.join(self.base, "hook-python")
        with open(wrapper, "w") as f:
            f.write(f"#!/bin/sh\n{env}exec {shlex.quote(sys.executable)} "
                    f"\"$@\"\n")
        os.chmod(wrapper, 0o755)
        return wrapper

    def restart_libvirt(self) -> None:
        self._timed("libvirtd restart", self.libvirt.restart, self.ns)

    def start_ovs(self) -> None:
        if not self.ovs:
            raise LabError("this lab was made with ovs=False")
        self._timed("ovs", self.ovs.start, self.ns)
        self._say(f"OVS-DPDK up (pmd-cpu-mask={self.ovs.pmd_cpu_mask:#x}) "
                  f"in {self.timings['ovs']:.1f}s")

    def add_traffic_port(self) -> tuple[str, str]:
        """A veth pair: an OVS af_packet port and its traffic-side end.

        Returns (OVS port name, interface in the traffic namespace).
        """
        if self.traffic is None:
            self.traffic = TrafficNamespace(f"nova-rdt-lab-{self.id}",
                                            f"nrl{self.id}")
            self.traffic.start()
        t0 = time.monotonic()
        host, inner = self.traffic.add_veth()
        port = f"p{len(self.traffic.pairs) - 1}"
        self.ovs.add_af_packet_port(port, host)
        self.timings["traffic ports"] = (self.timings.get("traffic ports", 0)
                                         + time.monotonic() - t0)
        return port, inner

    def start_vnf(self, cpu: int = 0) -> tuple[str, ovsdpdk.TestPmd]:
        """testpmd forwarding behind a new dpdkvhostuserclient port."""
        t0 = time.monotonic()
        port = f"vhu{len(self.vnfs)}"
        sock = self.ovs.add_vhostuser_client_port(port)
        vnf = ovsdpdk.TestPmd(self.base, self.sup, sock, cpu=cpu,
                              file_prefix=f"nova-rdt-lab-{self.id}-vnf"
                                          f"{len(self.vnfs)}")
        self.vnfs.append(vnf)
        vnf.start(self.ns)
        deadline = time.monotonic() + 15
        while self.ovs.link_state(port) != "up":
            if time.monotonic() > deadline:
                raise LabError(f"vhost-user port {port} did not come up; "
                               f"testpmd log:\n{vnf.proc.log_tail()}")
            time.sleep(0.05)
        self.timings[f"vnf{len(self.vnfs) - 1}"] = time.monotonic() - t0
        return port, vnf

    def start(self, traffic_ports: int = 0, vnf: bool = False,
              linux_image=None) -> Lab:
        """Every step this lab was made with.

        ``linux_image``: the guest image Linux guests will boot; how they
        run here is decided before libvirtd starts
        (:meth:`.Libvirt.prepare_for_linux`).

        On failure everything started so far is stopped, the logs are
        kept in ``failure_log_dir`` and a :class:`LabError` names the
        step that failed.
        """
        steps = [("mounting resctrl", self.start_resctrl),
                 ("building the mount namespace", self.start_namespace)]
        if self.libvirt:
            if linux_image is not None:
                steps.append(("deciding how Linux guests run",
                              lambda: self.libvirt.prepare_for_linux(
                                  linux_image)))
            steps.append(("starting libvirtd", self.start_libvirt))
        if self.ovs:
            steps.append(("starting OVS-DPDK", self.start_ovs))
            steps += [(f"adding traffic port p{i}", self.add_traffic_port)
                      for i in range(traffic_ports)]
            if vnf:
                steps.append(("starting the testpmd VNF", self.start_vnf))
        t0 = time.monotonic()
        for what, step in steps:
            try:
                step()
            except BaseException as e:
                kept = self.keep_logs(os.path.join(self.failure_log_dir,
                                                   f"lab-{self.id}"))
                self.stop()
                if not isinstance(e, Exception):
                    raise  # Ctrl-C: stopped cleanly, nothing to explain
                raise LabError(f"lab start failed while {what}: {e} "
                               f"(logs kept in {kept})") from e
        self.timings["start"] = time.monotonic() - t0
        return self

    # -- teardown ---------------------------------------------------------

    def stop(self, remove: bool = True) -> None:
        """Stop everything this lab started, by pid.  Safe to repeat.

        ``remove=False`` keeps the lab directory (logs) for inspection.
        """
        t0 = time.monotonic()
        for vnf in self.vnfs:
            vnf.stop()
        if self.ovs:
            self.ovs.stop()
        if self.libvirt:
            self.libvirt.stop()
        if self.traffic:
            self.traffic.stop()
        self._sweep_namespace()
        self.ns.stop()
        self.sup.stop_all()
        if self.emulator:
            self.emulator.stop()
        if remove and not mounts_under(self.base):
            shutil.rmtree(self.base, ignore_errors=True)
        self.stopped = True
        self.timings["teardown"] = time.monotonic() - t0

    def _sweep_namespace(self) -> None:
        """Kill what is left in our namespace (QEMU of a dead libvirtd).

        An orderly stop leaves nothing; what this kills is recorded in
        ``swept`` so that tests can insist it stays empty.
        """
        holder = self.ns.holder.pid if self.ns.holder else None
        # Short-lived helpers (a background libvirt hook finishing a
        # release) get a moment to end on their own first.
        grace = time.monotonic() + 3.0
        while time.monotonic() < grace:
            if not [p for p in self.ns.members() if p != holder]:
                return
            time.sleep(0.05)
        for _ in range(50):
            left = [p for p in self.ns.members() if p != holder]
            if not left:
                return
            for pid in left:
                try:
                    with open(f"/proc/{pid}/comm") as f:
                        self.swept.append(f"{f.read().strip()}[{pid}]")
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    continue
            time.sleep(0.1)

    def leaks(self) -> list[str]:
        """What is still there after stop(): should be empty."""
        left = [f"process {p.name}[{p.pid}]" for p in self.sup.alive()]
        left += [f"process in lab namespace {_cmdline(pid)}[{pid}]"
                 for pid in self.ns.members()]
        left += [f"mount {m}" for m in mounts_under(self.base)]
        if self.traffic:
            left += self.traffic.leftovers()
        if self.stopped and os.path.exists(self.base):
            left.append(f"directory {self.base}")
        return left

    # -- logs -------------------------------------------------------------

    def logs(self) -> dict[str, str]:
        """Component name -> log file path, for every log that exists."""
        found = {}
        for root, dirs, files in os.walk(self.base):
            dirs[:] = [d for d in dirs
                       if not os.path.ismount(os.path.join(root, d))]
            for name in files:
                if name.endswith(".log"):
                    path = os.path.join(root, name)
                    rel = os.path.relpath(path, self.base)
                    found[rel] = path
        return dict(sorted(found.items()))

    def log_report(self, limit: int = 3000) -> str:
        parts = []
        for rel, path in self.logs().items():
            try:
                with open(path, errors="replace") as f:
                    text = f.read()[-limit:]
            except OSError:
                continue
            parts.append(f"----- {rel} -----\n{text}")
        return "\n".join(parts)

    def keep_logs(self, dest: str) -> str:
        """Copy every log to ``dest`` (outlives stop()); returns dest."""
        for rel, path in self.logs().items():
            target = os.path.join(dest, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            try:
                shutil.copy(path, target)
            except OSError:
                continue
        return dest

    def say_failed(self, out_dir: str, error: BaseException) -> str:
        """A run on this lab failed: its logs are kept under ``out_dir``
        (they outlive stop()) and the failure is said with where."""
        kept = self.keep_logs(os.path.join(out_dir, "failure-logs",
                                           f"lab-{self.id}"))
        self._say(f"FAILED: {error} (the lab's logs are kept in {kept})")
        return kept

    def stop_and_say(self, note: str = "") -> list[str]:
        """stop(), then what outlived it (:meth:`leaks`), in one line."""
        self.stop()
        left = self.leaks()
        self._say("everything stopped"
                  + (f"; LEFT BEHIND: {left}" if left
                     else "; nothing left behind") + note)
        return left

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
