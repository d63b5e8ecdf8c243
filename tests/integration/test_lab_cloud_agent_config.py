"""The cloud refuses a neutron-openvswitch-agent configuration that
cannot work on the lab's OVS-DPDK, naming the option, and leaves nothing
behind: before anything starts (the datapath), and once the host lab,
the databases and the broker run (a bridge the lab's OVS has not)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nova_rdt.lab.allinone import cloud as cloud_mod
from nova_rdt.lab.allinone import dataplane
from tests.integration.conftest import lab_env


@pytest.mark.parametrize("override, option", [
    ("[ovs]\ndatapath_type = system\n", "[ovs] datapath_type"),
    ("[ovs]\nbridge_mappings = dataplane0:br-nope,dataplane1:br-dp1\n",
     "[ovs] bridge_mappings"),
])
def test_a_bad_agent_option_is_refused_by_name_leaving_nothing(
        tmp_path, libvirt_cache, override, option):
    reason = cloud_mod.unavailable_reason()
    if reason:
        pytest.skip(reason)
    conf = tmp_path / "agent-override.ini"
    conf.write_text(override)
    env = {**lab_env(), dataplane.ENV_AGENT_CONF: str(conf)}
    res = subprocess.run(
        [sys.executable, "-m", "nova_rdt.cmd.main", "lab", "--scenario",
         "cloud", "--short", "--out", str(tmp_path / "out"),
         "--libvirt-cache-dir", libvirt_cache],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert res.returncode != 0
    assert option in res.stdout, res.stdout[-3000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert option in summary["error"]
    assert summary["left_behind"] == []
    assert "nothing left behind" in res.stdout
