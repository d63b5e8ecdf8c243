"""ovsdb-server and ovs-vswitchd-dpdk of our own, and a testpmd VNF.

DPDK runs without hugepages (``--no-huge --legacy-mem``) and without PCI,
so the only ports are virtual: ``net_af_packet`` on veths, and
``dpdkvhostuserclient`` towards a ``dpdk-testpmd`` virtio-user forwarder
that stands in for a DPDK VNF.  The daemons run in the lab's mount
namespace, where ``/run/dpdk`` is a lab directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

from nova_rdt.host import ovs
from nova_rdt.lab.mountns import MountNamespace
from nova_rdt.lab.procs import LabError
from nova_rdt.lab.procs import Process
from nova_rdt.lab.procs import Supervisor

VSWITCHD_DPDK = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"
SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
BRIDGE = "br-lab"
MGMT_SOCKET_TIMEOUT = 15.0


def ovs_dpdk_unavailable_reason() -> str | None:
    if not os.path.exists(VSWITCHD_DPDK):
        return ("ovs-vswitchd-dpdk is not installed (apt-get install "
                "openvswitch-switch-dpdk)")
    for tool in ("ovsdb-server", "ovsdb-tool", "ovs-vsctl", "ovs-appctl"):
        if not shutil.which(tool):
            return f"{tool} is not installed (apt-get install " \
                   f"openvswitch-switch-dpdk)"
    return None


def testpmd_unavailable_reason() -> str | None:
    if not shutil.which("dpdk-testpmd"):
        return "dpdk-testpmd is not installed (apt-get install dpdk-dev)"
    return None


class OvsDpdk:
    """ovsdb-server + ovs-vswitchd-dpdk with one netdev bridge."""

    def __init__(self, root: str, supervisor: Supervisor,
                 pmd_cpu_mask: int = 0x2, dpdk_memory_mb: int = 512,
                 file_prefix: str = "nova-rdt-lab"):
        self.root = root
        self.sup = supervisor
        self.pmd_cpu_mask = pmd_cpu_mask
        self.dpdk_memory_mb = dpdk_memory_mb
        self.file_prefix = file_prefix
        self.run_dir = os.path.join(root, "run")
        self.dpdk_dir = os.path.join(root, "dpdk")
        self.db_path = os.path.join(root, "conf.db")
        self.db_sock = os.path.join(self.run_dir, "db.sock")
        self.vswitchd_ctl = os.path.join(self.run_dir, "ovs-vswitchd.ctl")
        self.vswitchd_pidfile = os.path.join(self.run_dir, "ovs-vswitchd.pid")
        self.ovsdb: Process | None = None
        self.vswitchd: Process | None = None
        self._vdevs = 0

    def binds(self) -> list[tuple[str, str]]:
        os.makedirs(self.dpdk_dir, exist_ok=True)
        return [(self.dpdk_dir, "/run/dpdk")]

    @property
    def client(self) -> ovs.OvsClient:
        return ovs.OvsClient(db=f"unix:{self.db_sock}",
                             vswitchd_pidfile=self.vswitchd_pidfile,
                             appctl_target=self.vswitchd_ctl)

    def _env(self) -> dict[str, str]:
        return {**os.environ, "OVS_RUNDIR": self.run_dir,
                "OVS_DBDIR": self.root, "OVS_LOGDIR": self.root}

    def vsctl(self, *args: str, wait: bool = True) -> str:
        argv = ["ovs-vsctl", f"--db=unix:{self.db_sock}", "--timeout=30",
                *([] if wait else ["--no-wait"]), *args]
        res = subprocess.run(argv, capture_output=True, text=True,
                             env=self._env(), timeout=60)
        if res.returncode != 0:
            raise LabError(f"ovs-vsctl {' '.join(args)}: "
                           f"{res.stderr.strip()}")
        return res.stdout.strip()

    def ofctl(self, *args: str) -> str:
        """ovs-ofctl against br-lab's management socket."""
        mgmt = f"unix:{self.mgmt_sock}"
        cmd, *rest = args
        res = subprocess.run(["ovs-ofctl", cmd, mgmt, *rest],
                             capture_output=True, text=True,
                             env=self._env(), timeout=60)
        if res.returncode != 0:
            raise LabError(f"ovs-ofctl {' '.join(args)}: "
                           f"{res.stderr.strip()}")
        return res.stdout.strip()

    @property
    def mgmt_sock(self) -> str:
        return os.path.join(self.run_dir, BRIDGE + ".mgmt")

    def _wait_bridge(self, timeout: float = MGMT_SOCKET_TIMEOUT) -> None:
        """Until ovs-vswitchd has made br-lab (its management socket).

        add-br's wait ends when vswitchd has tried, not when it managed:
        the netdev datapath needs a tap named ``ovs-netdev`` in the host's
        network namespace, which another OVS-DPDK running on this machine
        (another lab) may hold.
        """
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.mgmt_sock):
            if time.monotonic() > deadline:
                errors = [line.split("|")[-1] for line in
                          self.vswitchd_log_tail().splitlines()
                          if "|ERR|" in line or "|WARN|" in line]
                said = "; ".join(dict.fromkeys(errors[-4:]))
                raise LabError(
                    f"ovs-vswitchd did not create {BRIDGE} in {timeout:.0f}s"
                    f"{': ' + said if said else ''} (is another OVS-DPDK "
                    f"using the netdev datapath on this host?)")
            time.sleep(0.05)

    def vswitchd_log_tail(self) -> str:
        try:
            with open(os.path.join(self.root, "ovs-vswitchd.log"),
                      errors="replace") as f:
                return f.read()[-8000:]
        except OSError:
            return ""

    def cross_connect(self, a: str, b: str) -> None:
        """Forward everything from port ``a`` to ``b`` and back, and
        nothing else: a fixed path for RFC 2544, no MAC learning."""
        self.ofctl("del-flows")
        self.ofctl("add-flow", f"in_port={a},actions=output:{b}")
        self.ofctl("add-flow", f"in_port={b},actions=output:{a}")

    def appctl(self, *args: str) -> str:
        return self.client.appctl(*args)

    def start(self, ns: MountNamespace, timeout: float = 60.0) -> None:
        os.makedirs(self.run_dir, exist_ok=True)
        if not os.path.exists(self.db_path):
            subprocess.run(["ovsdb-tool", "create", self.db_path, SCHEMA],
                           check=True, capture_output=True)
        self.ovsdb = self.sup.spawn("ovsdb-server", ns.command(
            ["ovsdb-server", self.db_path, f"--remote=punix:{self.db_sock}",
             f"--unixctl={os.path.join(self.run_dir, 'ovsdb-server.ctl')}",
             "--log-file=" + os.path.join(self.root, "ovsdb-server.log")]),
            env=self._env())
        self.sup.wait_for(self.ovsdb, lambda: os.path.exists(self.db_sock),
                          timeout, "its socket")
        # The whole DPDK configuration must be in OVSDB before vswitchd
        # reads it: dpdk-init is one-shot.
        self.vsctl("init", wait=False)
        self.vsctl("set", "Open_vSwitch", ".",
                   "other_config:dpdk-init=true",
                   f"other_config:dpdk-extra=--no-huge --legacy-mem "
                   f"-m {self.dpdk_memory_mb} --no-pci --no-telemetry "
                   f"--file-prefix={self.file_prefix}",
                   f"other_config:pmd-cpu-mask={self.pmd_cpu_mask:#x}",
                   wait=False)
        self.vsctl("remove", "Open_vSwitch", ".", "other_config",
                   "dpdk-socket-mem", wait=False)
        self.vswitchd = self.sup.spawn("ovs-vswitchd", ns.command(
            [VSWITCHD_DPDK, f"unix:{self.db_sock}",
             f"--unixctl={self.vswitchd_ctl}",
             f"--pidfile={self.vswitchd_pidfile}",
             "--log-file=" + os.path.join(self.root, "ovs-vswitchd.log")]),
            env=self._env())
        self.sup.wait_for(self.vswitchd, self._dpdk_initialized, timeout,
                          "dpdk_initialized=true")
        self.vsctl("--may-exist", "add-br", BRIDGE, "--", "set", "bridge",
                   BRIDGE, "datapath_type=netdev")
        self._wait_bridge()

    def _dpdk_initialized(self) -> bool:
        try:
            return self.dpdk_initialized()
        except LabError:
            return False

    def dpdk_initialized(self) -> bool:
        return self.vsctl("get", "Open_vSwitch", ".", "dpdk_initialized",
                          wait=False) == "true"

    def add_af_packet_port(self, port: str, iface: str,
                           bridge: str = BRIDGE) -> None:
        """A DPDK port over a kernel interface (a veth end)."""
        vdev = f"net_af_packet{self._vdevs}"
        self._vdevs += 1
        self.vsctl("add-port", bridge, port, "--", "set", "Interface",
                   port, "type=dpdk",
                   f"options:dpdk-devargs={vdev},iface={iface}")
        self._check_port(port)

    def vhost_socket(self, port: str) -> str:
        return os.path.join(self.run_dir, f"{port}.sock")

    def add_vhostuser_client_port(self, port: str) -> str:
        """A vhost-user port where OVS is the client; returns the socket."""
        sock = self.vhost_socket(port)
        self.vsctl("add-port", BRIDGE, port, "--", "set", "Interface",
                   port, "type=dpdkvhostuserclient",
                   f"options:vhost-server-path={sock}")
        self._check_port(port)
        return sock

    def _check_port(self, port: str) -> None:
        error = self.vsctl("get", "Interface", port, "error")
        if error not in ("[]", ""):
            raise LabError(f"OVS refused port {port}: {error}")

    def link_state(self, port: str) -> str:
        return self.vsctl("get", "Interface", port, "link_state")

    def set_pmd_cpu_mask(self, mask: int) -> None:
        self.pmd_cpu_mask = mask
        self.vsctl("set", "Open_vSwitch", ".",
                   f"other_config:pmd-cpu-mask={mask:#x}")

    def pmd_threads(self) -> list[ovs.PmdThread]:
        return self.client.pmd_threads()

    def stop(self) -> None:
        for proc in (self.vswitchd, self.ovsdb):
            if proc is not None:
                self.sup.stop(proc)


class TestPmd:
    """``dpdk-testpmd`` forwarding on a virtio-user port (a DPDK VNF)."""

    __test__ = False  # not a pytest class

    def __init__(self, root: str, supervisor: Supervisor, socket: str,
                 cpu: int = 0, memory_mb: int = 256,
                 file_prefix: str = "nova-rdt-lab-testpmd"):
        self.root = root
        self.sup = supervisor
        self.socket = socket
        self.cpu = cpu
        self.memory_mb = memory_mb
        self.file_prefix = file_prefix
        self.proc: Process | None = None

    def start(self, ns: MountNamespace, timeout: float = 30.0) -> None:
        # testpmd needs a main and a forwarding lcore; both run on one
        # CPU so that it fits beside the PMD on a 2-core machine.  It
        # serves the vhost socket (OVS is the client) and exits on EOF on
        # stdin, so stdin stays an open pipe until stop().
        self.proc = self.sup.spawn("testpmd", ns.command(
            ["stdbuf", "-oL", "-eL",
             "dpdk-testpmd", f"--lcores=(0,1)@{self.cpu}", "--no-huge",
             "-m", str(self.memory_mb), "--no-pci", "--no-telemetry",
             f"--file-prefix={self.file_prefix}",
             f"--vdev=net_virtio_user0,path={self.socket},server=1,queues=1",
             "--", "--forward-mode=io", "--auto-start", "--stats-period=0",
             "--total-num-mbufs=8192"]),
            stdin=subprocess.PIPE)
        # Readiness is the vhost-user socket it serves; the caller then
        # waits for OVS to connect and the link to come up.
        self.sup.wait_for(self.proc, lambda: os.path.exists(self.socket),
                          timeout, "serving its vhost-user socket")

    def stop(self) -> None:
        if self.proc is not None:
            self.sup.stop(self.proc)
