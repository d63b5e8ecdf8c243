"""Neutron ports bound as ``vhostuser`` on an OVS-DPDK bridge, in Nova's
Neutron fixture: what Neutron's ML2/OVS driver returns for a port on a
netdev-datapath OVS, so that Nova's own VIF code writes
``<interface type='vhostuser'>`` and os-vif's ovs plugin plugs the port.
"""

from __future__ import annotations

import os

#: os-vif names vhost-user ports "vhu" + the port id, cut to 14 characters
#: (vif_plug_ovs.ovs.OvsPlugin.gen_port_name, NIC_NAME_LEN); Neutron's
#: OVS agent names the socket the same way.
PORT_PREFIX = "vhu"
NIC_NAME_LEN = 14

#: A flat or VLAN provider network's MTU, as the ONP dataplane has.  The
#: fixture's network is a VXLAN tenant network (1450), which Nova would
#: give the guest's NICs and os-vif OVS's ports: 1512 B frames would be
#: dropped before they reach the forwarder.
DATAPLANE_MTU = 1500


def ovs_port_name(port_id: str) -> str:
    return (PORT_PREFIX + port_id)[:NIC_NAME_LEN]


def binding(socket_dir: str, port_id: str, bridge: str,
            mode: str = "server") -> dict:
    """``binding:vif_type``/``binding:vif_details`` of a vhost-user port.

    ``mode`` is QEMU's side of the socket, as Neutron says it: "server"
    (QEMU listens; OVS's dpdkvhostuserclient port connects, and
    reconnects when the guest restarts) or "client".
    """
    if mode not in ("server", "client"):
        raise ValueError(f"vhostuser_mode must be server or client, "
                         f"not {mode!r}")
    return {
        "binding:vif_type": "vhostuser",
        "binding:vnic_type": "normal",
        "binding:vif_details": {
            "vhostuser_socket": os.path.join(socket_dir,
                                             ovs_port_name(port_id)),
            "vhostuser_mode": mode,
            "vhostuser_ovs_plug": True,
            "datapath_type": "netdev",
            "bridge_name": bridge,
            "ovs_hybrid_plug": False,
            "port_filter": False,
        },
    }


def create_port(neutron, name: str, socket_dir: str, bridge: str,
                mode: str = "server") -> dict:
    """A new port on the fixture's network, bound as vhost-user; returns
    the port as Neutron shows it."""
    port = neutron.create_port({"port": {"name": name}})["port"]
    body = {"name": name, **binding(socket_dir, port["id"], bridge, mode)}
    # Without a host, the fixture keeps this as the port's only binding;
    # Nova's own binding to the compute then inherits vif_type and keeps
    # the details on the port.
    neutron.update_port(port["id"], {"port": body})
    # The fixture has no call to make a network: its one network becomes
    # the dataplane's, in this fixture only (the dict it starts from is a
    # class attribute, shared with every other test's fixture).
    net_id = port.get("network_id")
    if net_id in neutron._networks:
        neutron._networks[net_id] = {**neutron._networks[net_id],
                                     "mtu": DATAPLANE_MTU}
    return neutron.show_port(port["id"])["port"]
