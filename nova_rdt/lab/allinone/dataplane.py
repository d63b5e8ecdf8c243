"""The cloud's dataplane: neutron-openvswitch-agent on the lab's OVS-DPDK,
two flat provider networks, and the software generator's ports on them.

As operators run ML2/OVS with OVS-DPDK (devstack's ``OVS_DATAPATH_TYPE=
netdev``): the agent's ``[ovs] datapath_type = netdev`` makes it report
the userspace datapath, and Neutron's openvswitch mechanism driver then
binds ports as ``vif_type=vhostuser`` with a socket in the agent's
``vhostuser_socket_dir``; Nova's libvirt driver writes
``<interface type='vhostuser'>`` and os-vif's ovs plugin adds the
``dpdkvhostuserclient`` port to br-int.  Nothing here plugs a port.

Each provider network is a physnet bridged (``bridge_mappings``) to a
netdev bridge of its own, ``br-dp0``/``br-dp1``, which holds one
``net_af_packet`` DPDK port on a veth whose other end is in the lab's
traffic namespace, where the software generator sends and receives:

    generator (netns) -> veth -> br-dp0 -> br-int -> vhost-user -> guest
    forwarder -> vhost-user -> br-int -> br-dp1 -> veth -> generator

The agent's configuration is checked before anything starts (and the
bridges it names once OVS runs): a wrong value is refused naming the
option, because the agent itself would start and then only fail to bind
ports, or bind them in a way QEMU cannot use.
"""

from __future__ import annotations

import configparser
import os
import re
import time

import yaml

from nova_rdt.lab.allinone import ini
from nova_rdt.lab.procs import LabError

#: The flat physnets of the two dataplane networks, and their bridges.
PHYSNETS = ("dataplane0", "dataplane1")
BRIDGES = {"dataplane0": "br-dp0", "dataplane1": "br-dp1"}
#: The networks' names in Neutron (one per physnet, in port order).
NETWORKS = {"dataplane0": "dataplane0", "dataplane1": "dataplane1"}
#: Documentation prefixes: the subnets only exist because Nova refuses a
#: network without one (NetworkRequiresSubnet); nothing hands these out
#: (no DHCP: the guest forwards at L2).
CIDRS = {"dataplane0": "192.0.2.0/24", "dataplane1": "198.51.100.0/24"}
INTEGRATION_BRIDGE = "br-int"
#: An ini file whose options replace the agent's (as devstack's
#: ``[[post-config|...]]`` blocks in local.conf do).
ENV_AGENT_CONF = "NOVA_RDT_CLOUD_AGENT_CONF"
AGENT_BINARY = "neutron-openvswitch-agent"
AGENT_TIMEOUT = 90.0
#: The agent has not ended on SIGTERM within 20 s in any run here, and
#: holds nothing the cloud needs (its flows go with the lab's OVS): it
#: gets a short grace before SIGKILL.
AGENT_STOP_TIMEOUT = 3.0
#: Where the throughput search starts: a TCG guest forwards ten to
#: thirty thousand frames a second with loss from run to run, and a
#: search from far above spends its trials coming down (at 200 kpps six
#: trials found no passing rate at 1024 B here).
MAX_RATE_PPS = 50_000
#: The firewalls that work with vhost-user ports (iptables_hybrid needs
#: a kernel tap and a Linux bridge per port, which vhost-user has not).
FIREWALLS = ("noop", "openvswitch")


class AgentConfigError(LabError):
    """The agent's configuration cannot work here; names the option."""

    def __init__(self, section: str, option: str, why: str):
        self.option = f"[{section}] {option}"
        super().__init__(f"neutron-openvswitch-agent: {self.option} {why}")


def agent_conf(transport_url: str, db_sock: str, socket_dir: str,
               of_port: int, state_path: str) -> dict:
    """openvswitch_agent.ini, as devstack's lib/neutron_plugins/
    openvswitch_agent writes it for OVS_DATAPATH_TYPE=netdev, with the
    lab's OVS."""
    return {
        "DEFAULT": {"debug": True, "use_stderr": True,
                    "transport_url": transport_url,
                    "state_path": state_path,
                    # oslo.service waits up to 60 s for its RPC loop
                    # at SIGTERM; the cloud stops it with the rest.
                    "graceful_shutdown_timeout": 2},
        "agent": {"tunnel_types": "", "report_interval": 5,
                  "polling_interval": 2},
        "ovs": {"datapath_type": "netdev",
                "vhostuser_socket_dir": socket_dir,
                "integration_bridge": INTEGRATION_BRIDGE,
                "bridge_mappings": ",".join(f"{p}:{BRIDGES[p]}"
                                            for p in PHYSNETS),
                "ovsdb_connection": f"unix:{db_sock}",
                "of_listen_port": of_port},
        # Port security is off on the dataplane networks; vhost-user
        # ports cannot take iptables_hybrid's per-port Linux bridge.
        "securitygroup": {"firewall_driver": "noop",
                          "enable_security_group": False},
    }


def with_overrides(conf: dict, path: str | None) -> dict:
    """``conf`` with every option of the ini file at ``path`` laid over
    it (an empty value removes the option: the agent's default)."""
    if not path:
        return conf
    if not os.path.isfile(path):
        raise LabError(f"${ENV_AGENT_CONF}={path}: no such file")
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str
    try:
        parser.read(path)
    except configparser.Error as e:
        raise LabError(f"${ENV_AGENT_CONF}={path}: {e}") from None
    out = {s: dict(o) for s, o in conf.items()}
    for section in parser.sections():
        for key, value in parser.items(section, raw=True):
            if section != "DEFAULT" and key in parser.defaults():
                continue
            out.setdefault(section, {})[key] = value if value != "" \
                else None
    for key, value in parser.defaults().items():
        out.setdefault("DEFAULT", {})[key] = value if value != "" else None
    return out


def _get(conf: dict, section: str, option: str):
    value = conf.get(section, {}).get(option)
    return None if value is None else str(value).strip()


def mappings(conf: dict) -> dict[str, str]:
    """``[ovs] bridge_mappings`` as physnet -> bridge; refuses a
    malformed entry."""
    out = {}
    for entry in (_get(conf, "ovs", "bridge_mappings") or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        physnet, sep, bridge = entry.partition(":")
        if not sep or not physnet.strip() or not bridge.strip():
            raise AgentConfigError("ovs", "bridge_mappings",
                                   f"has {entry!r}, not physnet:bridge")
        out[physnet.strip()] = bridge.strip()
    return out


def check(conf: dict, socket_dir: str, db_sock: str) -> None:
    """Refuse what cannot work on the lab's OVS-DPDK, naming the option.

    ``socket_dir``: where the lab's QEMU and ovs-vswitchd both reach
    vhost-user sockets; ``db_sock``: the lab's ovsdb-server.
    """
    dp = _get(conf, "ovs", "datapath_type")
    if dp != "netdev":
        raise AgentConfigError(
            "ovs", "datapath_type",
            (f"is {dp!r}" if dp else "is not set (the agent's default is "
             "'system')") + ": the lab's OVS is OVS-DPDK, the userspace "
            "datapath only (no kernel module); it must be netdev, or "
            "Neutron binds no port as vhostuser")
    sdir = _get(conf, "ovs", "vhostuser_socket_dir")
    if not sdir:
        raise AgentConfigError(
            "ovs", "vhostuser_socket_dir",
            f"is not set (the agent's default, /var/run/openvswitch, is "
            f"not where the lab's QEMU serves its sockets): set it to "
            f"{socket_dir}")
    if not os.path.isdir(sdir):
        raise AgentConfigError(
            "ovs", "vhostuser_socket_dir",
            f"is {sdir!r}, which is not a directory: QEMU could not "
            f"create the guests' vhost-user sockets there (the lab's "
            f"is {socket_dir})")
    if os.path.realpath(sdir) != os.path.realpath(socket_dir):
        raise AgentConfigError(
            "ovs", "vhostuser_socket_dir",
            f"is {sdir!r}: the lab's ovs-vswitchd and QEMU meet in "
            f"{socket_dir}; Nova would plug ports whose socket neither "
            f"side looks for there")
    conn = _get(conf, "ovs", "ovsdb_connection")
    if not conn:
        raise AgentConfigError(
            "ovs", "ovsdb_connection",
            f"is not set (the agent's default is tcp:127.0.0.1:6640, "
            f"where the lab's ovsdb-server does not listen): set it to "
            f"unix:{db_sock}")
    if conn != f"unix:{db_sock}":
        raise AgentConfigError(
            "ovs", "ovsdb_connection",
            f"is {conn!r}, not the lab's ovsdb-server (unix:{db_sock})")
    found = mappings(conf)
    for physnet in PHYSNETS:
        if physnet not in found:
            raise AgentConfigError(
                "ovs", "bridge_mappings",
                f"has no bridge for physnet {physnet} (it has "
                f"{_get(conf, 'ovs', 'bridge_mappings') or 'none'}): the "
                f"dataplane network {NETWORKS[physnet]} would have no "
                f"way to the generator")
    fw = _get(conf, "securitygroup", "firewall_driver") or "noop"
    if fw not in FIREWALLS:
        raise AgentConfigError(
            "securitygroup", "firewall_driver",
            f"is {fw!r}: vhost-user ports take {' or '.join(FIREWALLS)} "
            f"only (iptables_hybrid needs a kernel tap per port)")
    tunnels = [t for t in re.split(r"[,\s]+",
                                   _get(conf, "agent", "tunnel_types") or "")
               if t]
    if tunnels and not _get(conf, "ovs", "local_ip"):
        raise AgentConfigError(
            "agent", "tunnel_types",
            f"is {','.join(tunnels)} but [ovs] local_ip is not set: the "
            f"agent refuses to start (the lab's networks are flat)")
    port = _get(conf, "ovs", "of_listen_port")
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        raise AgentConfigError("ovs", "of_listen_port",
                               f"is {port!r}, not a TCP port")


def check_bridges(conf: dict, ovs) -> None:
    """Every bridge ``bridge_mappings`` names is a netdev bridge of the
    lab's OVS (the agent exits on a missing one, and a system-datapath
    bridge cannot exist beside OVS-DPDK here)."""
    for physnet, bridge in sorted(mappings(conf).items()):
        try:
            dp = ovs.vsctl("get", "Bridge", bridge, "datapath_type")
        except LabError:
            raise AgentConfigError(
                "ovs", "bridge_mappings",
                f"maps {physnet} to {bridge}, which the lab's OVS does not "
                f"have (its dataplane bridges: "
                f"{', '.join(BRIDGES.values())})") from None
        if dp.strip('"') != "netdev":
            raise AgentConfigError(
                "ovs", "bridge_mappings",
                f"maps {physnet} to {bridge}, whose datapath is {dp}, not "
                f"netdev")


class Dataplane:
    """The generator's veths on br-dp0/br-dp1 (made by :meth:`start`,
    removed with the Host lab: the traffic namespace is the lab's)."""

    def __init__(self, lab):
        self.lab = lab
        #: physnet -> (OVS port, interface in the traffic namespace).
        self.ports: dict[str, tuple[str, str]] = {}

    def start(self) -> None:
        from nova_rdt.lab.netns import TrafficNamespace
        lab = self.lab
        ovs = lab.ovs
        if lab.traffic is None:
            # The lab's own attribute: Lab.stop() deletes it and
            # Lab.leaks() looks for what is left of it.
            lab.traffic = TrafficNamespace(f"nova-rdt-lab-{lab.id}",
                                           f"nrl{lab.id}")
            lab.traffic.start()
        for i, physnet in enumerate(PHYSNETS):
            bridge = BRIDGES[physnet]
            ovs.vsctl("--may-exist", "add-br", bridge, "--", "set",
                      "bridge", bridge, "datapath_type=netdev")
            host, inner = lab.traffic.add_veth()
            port = f"p{i}"
            ovs.add_af_packet_port(port, host, bridge=bridge)
            self.ports[physnet] = (port, inner)

    @property
    def netns(self) -> str:
        return self.lab.traffic.name

    def generator_doc(self, short: bool) -> dict:
        """The RFC 2544 configuration of the Tempest scenario (its
        ``[nova_rdt] generator_config``): the software generator in the
        traffic namespace, both directions."""
        doc = {"generator": {
            "type": "software",
            "tx_interface": self.ports[PHYSNETS[0]][1],
            "rx_interface": self.ports[PHYSNETS[1]][1],
            "netns": self.netns, "max_rate_pps": MAX_RATE_PPS,
            "bidirectional": True}}
        if short:
            # A short search: coarser steps, fewer and shorter trials.
            doc.update(resolution=0.1, max_trials=8, probe_duration=0.3)
        else:
            doc.update(resolution=0.05, max_trials=12)
        return doc

    def write_generator_config(self, path: str, short: bool) -> str:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("# The lab cloud's software generator: veths from its "
                    "traffic namespace\n# to br-dp0 and br-dp1 "
                    "(nova-rdt lab --scenario cloud).\n")
            yaml.safe_dump(self.generator_doc(short), f,
                           default_flow_style=False, sort_keys=False)
        return path


class Agent:
    """neutron-openvswitch-agent's configuration, and whether it is up."""

    def __init__(self, etc: str, data: str, transport_url: str, ovs,
                 of_port: int):
        self.etc = etc
        self.data = data
        self.ovs = ovs
        self.conf_path = os.path.join(etc, "openvswitch_agent.ini")
        self.conf = with_overrides(
            agent_conf(transport_url, ovs.db_sock, ovs.run_dir, of_port,
                       data),
            os.environ.get(ENV_AGENT_CONF))

    def check(self) -> None:
        check(self.conf, self.ovs.run_dir, self.ovs.db_sock)

    def write(self) -> str:
        os.makedirs(self.data, exist_ok=True)
        return ini.write(self.conf_path, self.conf)

    def argv(self, neutron_conf: str) -> list[str]:
        return [AGENT_BINARY, "--config-file", neutron_conf,
                "--config-file", self.conf_path]

    @staticmethod
    def refusal(log_tail: str) -> str | None:
        """The agent's own reason for ending, from its log (an option it
        refused, a bridge it did not find)."""
        for line in reversed(log_tail.splitlines()):
            if " ERROR " in line or " CRITICAL " in line:
                return line.split(" ERROR ", 1)[-1].split(
                    " CRITICAL ", 1)[-1].strip()[:600]
        return None


def wait_agent_alive(conn, proc, host: str | None, timeout: float,
                     alive_check=None) -> dict:
    """Until Neutron lists an alive Open vSwitch agent (it reported its
    state, bridges and datapath over RPC); returns its record."""
    deadline = time.monotonic() + timeout
    while True:
        if not proc.running():
            tail = proc.log_tail(20000)
            why = Agent.refusal(tail)
            raise LabError(f"neutron-openvswitch-agent exited (status "
                           f"{proc.popen.poll()}) before reporting to "
                           f"Neutron" + (f": {why}" if why else "")
                           + f"; its log: {proc.log_path}")
        agents = [a for a in conn.network.agents(
            binary=AGENT_BINARY) if a.is_alive]
        if agents:
            a = agents[0]
            return {"id": a.id, "host": a.host,
                    "configurations": a.configuration}
        if time.monotonic() > deadline:
            raise LabError(f"neutron-openvswitch-agent did not report to "
                           f"Neutron within {timeout:.0f}s; its log: "
                           f"{proc.log_path}")
        time.sleep(1)


def create_networks(conn) -> dict[str, str]:
    """The two flat provider networks (shared, port security off) with a
    subnet each (no DHCP); physnet -> network id."""
    out = {}
    for physnet in PHYSNETS:
        net = conn.network.create_network(
            name=NETWORKS[physnet], provider_network_type="flat",
            provider_physical_network=physnet, is_shared=True,
            is_port_security_enabled=False, mtu=1500)
        conn.network.create_subnet(
            network_id=net.id, name=f"{NETWORKS[physnet]}-subnet",
            ip_version=4, cidr=CIDRS[physnet], is_dhcp_enabled=False,
            gateway_ip=None)
        out[physnet] = net.id
    return out
