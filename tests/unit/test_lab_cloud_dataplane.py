"""The lab cloud's neutron-openvswitch-agent configuration: what it
writes, what an operator's override file changes, and every value that
cannot work on the lab's OVS-DPDK refused naming the option."""

from __future__ import annotations

import pytest

from nova_rdt.lab.allinone import dataplane
from nova_rdt.lab.procs import LabError


@pytest.fixture
def lab(tmp_path):
    sockets = tmp_path / "ovs-run"
    sockets.mkdir()
    db = str(sockets / "db.sock")
    conf = dataplane.agent_conf("rabbit://x", db, str(sockets), 6634,
                                str(tmp_path / "state"))
    return conf, str(sockets), db


def test_the_labs_own_configuration_passes(lab):
    conf, sockets, db = lab
    dataplane.check(conf, sockets, db)
    assert conf["ovs"]["datapath_type"] == "netdev"
    assert dataplane.mappings(conf) == {"dataplane0": "br-dp0",
                                        "dataplane1": "br-dp1"}


@pytest.mark.parametrize("section, option, value, said", [
    ("ovs", "datapath_type", "system", "[ovs] datapath_type is 'system'"),
    ("ovs", "datapath_type", None, "[ovs] datapath_type is not set"),
    ("ovs", "vhostuser_socket_dir", None,
     "[ovs] vhostuser_socket_dir is not set"),
    ("ovs", "vhostuser_socket_dir", "/nonexistent/ovs",
     "which is not a directory"),
    ("ovs", "vhostuser_socket_dir", "/tmp",
     "[ovs] vhostuser_socket_dir is '/tmp'"),
    ("ovs", "ovsdb_connection", None, "[ovs] ovsdb_connection is not set"),
    ("ovs", "ovsdb_connection", "tcp:127.0.0.1:6640",
     "not the lab's ovsdb-server"),
    ("ovs", "bridge_mappings", "dataplane0:br-dp0",
     "[ovs] bridge_mappings has no bridge for physnet dataplane1"),
    ("ovs", "bridge_mappings", "dataplane0", "not physnet:bridge"),
    ("securitygroup", "firewall_driver", "iptables_hybrid",
     "[securitygroup] firewall_driver is 'iptables_hybrid'"),
    ("agent", "tunnel_types", "vxlan", "[ovs] local_ip is not set"),
    ("ovs", "of_listen_port", "http", "[ovs] of_listen_port is 'http'"),
])
def test_a_value_that_cannot_work_is_refused_naming_it(lab, section, option,
                                                       value, said):
    conf, sockets, db = lab
    conf[section][option] = value
    with pytest.raises(dataplane.AgentConfigError) as e:
        dataplane.check(conf, sockets, db)
    assert said in str(e.value)
    assert e.value.option.startswith("[")
    assert str(e.value).startswith("neutron-openvswitch-agent: ")


def test_an_override_file_replaces_options_and_an_empty_value_unsets(
        lab, tmp_path):
    conf, sockets, db = lab
    path = tmp_path / "override.ini"
    path.write_text("[ovs]\ndatapath_type = system\nof_listen_port =\n"
                    "[agent]\nextensions = qos\n")
    got = dataplane.with_overrides(conf, str(path))
    assert got["ovs"]["datapath_type"] == "system"
    assert got["ovs"]["of_listen_port"] is None
    assert got["agent"]["extensions"] == "qos"
    # The lab's own dict is not changed.
    assert conf["ovs"]["datapath_type"] == "netdev"
    with pytest.raises(dataplane.AgentConfigError,
                       match=r"\[ovs\] datapath_type"):
        dataplane.check(got, sockets, db)


def test_a_missing_or_broken_override_file_is_said(lab, tmp_path):
    conf, _, _ = lab
    with pytest.raises(LabError, match="no such file"):
        dataplane.with_overrides(conf, str(tmp_path / "missing.ini"))
    bad = tmp_path / "bad.ini"
    bad.write_text("no section header\n")
    with pytest.raises(LabError, match=dataplane.ENV_AGENT_CONF):
        dataplane.with_overrides(conf, str(bad))


def test_the_agents_own_refusal_is_read_from_its_log():
    tail = ("2026 INFO neutron.x starting\n"
            "2026 ERROR neutron.plugins.ml2.drivers.openvswitch.agent."
            "ovs_neutron_agent [-] Bridge br-dp9 for physical network "
            "dataplane0 does not exist. Agent terminated!\n")
    assert dataplane.Agent.refusal(tail).endswith(
        "Bridge br-dp9 for physical network dataplane0 does not exist. "
        "Agent terminated!")
    assert dataplane.Agent.refusal("2026 INFO all well\n") is None
