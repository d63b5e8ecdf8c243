"""The cloud's second compute (``--computes 2``), as a devstack subnode.

What it has of its own, in its own mount and UTS namespace (hostname
:func:`hostname`): an emulated resctrl of the same profile, a libvirtd
(its own host UUID), the plugin's hook, nova-compute with its own
``[DEFAULT] host`` and ``state_path``, and the plugin's exporter and
controller.  What it shares with the first compute, as the computes of a
small lab share them: the instances path (so that moves need no SSH, as
with NFS) and the machine's one OVS-DPDK (two netdev datapaths cannot run
on one machine): its hook and ``pmd sync`` read that OVS's PMD cores, so
it keeps a PMD COS of its own, and its servers boot with no NIC (the
dataplane's ports are bound to the first compute's agent).

Live migration goes over the loopback: each compute's
``[libvirt] live_migration_inbound_addr`` is its own loopback address
(127.0.0.1, 127.0.0.2), and ``live_migration_uri`` names a socket per
address, a link to that compute's libvirtd socket.
"""

from __future__ import annotations

import os
import socket

#: Each compute's loopback address, in start order.
ADDRESSES = ("127.0.0.1", "127.0.0.2")


def hostname() -> str:
    """The second compute's hostname: this machine's, suffixed."""
    return f"{socket.gethostname()}-2"


def migration_options(socket_dir: str, index: int) -> dict:
    """``[libvirt]`` options for compute ``index`` (0 or 1).

    Nova connects to the destination at ``live_migration_uri % addr``,
    where ``addr`` is the destination's ``live_migration_inbound_addr``,
    and tells QEMU to migrate to ``tcp://addr``: one address per compute
    gives each its own libvirtd socket and its own listener."""
    return {"live_migration_uri": "qemu+unix:///system?socket="
                                  + os.path.join(socket_dir, "%s.sock"),
            "live_migration_inbound_addr": ADDRESSES[index]}


def migration_ports(index: int) -> tuple[int, int]:
    """Compute ``index``'s half of libvirt's incoming migration ports
    (49152-49215): both libvirtds share this machine's ports."""
    half = 32
    low = 49152 + index * half
    return low, low + half - 1


def link_sockets(socket_dir: str, sockets: list[str]) -> None:
    """``<addr>.sock`` -> each compute's libvirtd socket (host paths, seen
    alike from both namespaces)."""
    os.makedirs(socket_dir, exist_ok=True)
    for addr, target in zip(ADDRESSES, sockets):
        link = os.path.join(socket_dir, f"{addr}.sock")
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(target, link)


def hosts_file(path: str, name: str) -> str:
    """/etc/hosts with ``name`` at the second compute's address: sudo
    (privsep's way in) looks its host up, and a name it cannot resolve
    costs a DNS timeout per call."""
    with open("/etc/hosts") as f:
        text = f.read()
    if text and not text.endswith("\n"):
        text += "\n"
    with open(path, "w") as f:
        f.write(text + f"{ADDRESSES[1]} {name}\n")
    return path


class Subnode:
    """The second compute of :class:`~.cloud.AllInOne`; its steps run in
    the cloud's start-up beside the first compute's."""

    #: devstack's ENABLED_SERVICES on a compute subnode with nova-rdt.
    SERVICES = "n-cpu,nova-rdt,nova-rdt-exporter,nova-rdt-controller"

    def __init__(self, cloud):
        from nova_rdt.lab.allinone import cloud as cloud_mod
        from nova_rdt.lab.allinone import nova as nova_mod
        from nova_rdt.lab.allinone import ports
        self.cloud = cloud
        self.name = hostname()
        self.exporter_port = ports.free_port()
        self.controller_port = ports.free_port()
        self.lab = cloud_mod.CloudLab(
            profile=cloud.profile.name, resctrl="emulated",
            kernel=cloud.lab.kernel, hook=None, ovs=False,
            failure_log_dir=cloud.lab.failure_log_dir,
            libvirt_cache_dir=cloud.libvirt_cache_dir, log=self._say,
            hostname=self.name)
        base = self.lab.base
        self.etc, self.data, self.nova_etc, binds = cloud_mod.compute_dirs(
            base)
        # The machine's one OVS, as the first compute sees it.
        self.lab.extra_binds = binds + [
            (cloud.lab.ovs.run_dir, "/run/openvswitch")]
        for src, _dst in self.lab.extra_binds:
            os.makedirs(src, exist_ok=True)
        self.lab.extra_binds.append(
            (hosts_file(os.path.join(base, "hosts"), self.name),
             "/etc/hosts"))
        # The instances path (and Nova's image cache) is the first
        # compute's: nova.conf's [DEFAULT] instances_path comes from it.
        self.nova = nova_mod.Nova(
            self.nova_etc, os.path.join(cloud.data, "nova"), cloud.sup,
            cloud.db, cloud.keystone, cloud.rabbit.transport_url,
            cloud.pythonpath)
        self.plugin = None
        self.plugin_processes: dict[str, str] = {}

    def _say(self, msg: str) -> None:
        # What this machine forces is said once, for the first compute.
        if not msg.startswith("this machine forces"):
            self.cloud.say(f"{self.name}: {msg}")

    def start_host(self) -> None:
        self.lab.start_resctrl()
        self.lab.start_namespace()

    def configure(self, libvirt: dict, rdt_host: dict,
                  overrides: dict) -> None:
        """nova.conf as the first compute's, with this host's name, state
        and loopback address; then the plugin's post-config."""
        from nova_rdt.lab.allinone import devstack_plugin
        from nova_rdt.lab.allinone import nova as nova_mod
        state = os.path.join(self.data, "nova-state")
        os.makedirs(state, exist_ok=True)
        self.nova.write_conf(libvirt, rdt_host, overrides={
            **overrides,
            "DEFAULT": {"host": self.name, "state_path": state},
            "rdt_controller": {
                "port": self.controller_port,
                "state_file": os.path.join(self.data, "nova-rdt",
                                           "controller.json")},
            "os_vif_ovs": {"ovsdb_connection": rdt_host[
                "ovsdb_connection"]}})
        env = {**self.cloud.plugin_env(),
               "ENABLED_SERVICES": self.SERVICES,
               "NOVA_RDT_EXPORTER_PORT": str(self.exporter_port)}
        self.plugin = devstack_plugin.Plugin(
            env, os.path.join(self.lab.log_dir, "devstack-plugin.log"),
            wrap=self.lab.ns.command)
        self.plugin.run("post-config", nova_mod.Nova.CPU_CONF_BASH)

    def start_libvirt(self, choice) -> None:
        """The plugin's ``stack extra`` (hook, pmd sync), then libvirtd,
        with the first compute's choice of how Linux guests run."""
        rec = self.plugin.run("extra")
        self.plugin_processes = rec.processes
        if choice.tcg_for_kvm:
            self.lab.libvirt.use_tcg_for_kvm(choice.reason)
        self.lab.libvirt.migration_ports = migration_ports(1)
        self.lab.start_libvirt()
