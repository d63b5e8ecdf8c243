"""nova_rdt.host.ovs reads OVSDB through ovsdbapp: against a real
ovsdb-server with OVS's own vswitch schema, started as the Host lab starts
it (nova_rdt/lab/ovsdpdk.py), written with ovs-vsctl as an operator would.
No ovs-vswitchd is needed: these are OVSDB's rows, not runtime state."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from nova_rdt.host import ovs
from nova_rdt.lab.ovsdpdk import SCHEMA

pytest.importorskip("ovsdbapp", reason="pip install ovsdbapp")


@pytest.fixture
def ovsdb(tmp_path):
    for tool in ("ovsdb-server", "ovsdb-tool", "ovs-vsctl"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed (apt-get install "
                        "openvswitch-switch)")
    if not os.path.exists(SCHEMA):
        pytest.skip(f"no OVS schema at {SCHEMA}")
    db, sock = tmp_path / "conf.db", tmp_path / "db.sock"
    subprocess.run(["ovsdb-tool", "create", str(db), SCHEMA], check=True,
                   capture_output=True)
    server = subprocess.Popen(
        ["ovsdb-server", str(db), f"--remote=punix:{sock}",
         f"--unixctl={tmp_path / 'ovsdb-server.ctl'}",
         f"--log-file={tmp_path / 'ovsdb-server.log'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():
            assert server.poll() is None, server.stderr.read()
            assert time.monotonic() < deadline, "ovsdb-server: no socket"
            time.sleep(0.05)
        url = f"unix:{sock}"

        def vsctl(*args):
            return subprocess.run(
                ["ovs-vsctl", f"--db={url}", "--no-wait", *args],
                check=True, capture_output=True, text=True).stdout

        vsctl("init")
        yield url, vsctl
    finally:
        server.terminate()
        server.wait(30)


def test_pmd_cpu_mask_and_other_config(ovsdb):
    url, vsctl = ovsdb
    client = ovs.OvsClient(db=url, timeout=10)
    assert client.pmd_cpu_mask() == set()          # unset: OVS chooses
    vsctl("set", "Open_vSwitch", ".", "other_config:pmd-cpu-mask=0x16",
          "other_config:dpdk-init=true")
    assert client.pmd_cpu_mask() == {1, 2, 4}
    assert client.other_config() == {"pmd-cpu-mask": "0x16",
                                     "dpdk-init": "true"}
    # The same as ovs-vsctl reads it.
    assert vsctl("get", "Open_vSwitch", ".",
                 "other_config:pmd-cpu-mask").strip().strip('"') == "0x16"
    vsctl("remove", "Open_vSwitch", ".", "other_config", "pmd-cpu-mask")
    assert client.pmd_cpu_mask() == set()


def test_bridges(ovsdb):
    url, vsctl = ovsdb
    db = ovs.Ovsdb(url, timeout=10)
    assert db.bridges() == {}
    vsctl("add-br", "br-int")
    vsctl("add-br", "br-dpdk", "--", "set", "bridge", "br-dpdk",
          "datapath_type=netdev")
    assert db.bridges() == {"br-int": "", "br-dpdk": "netdev"}


def test_a_bad_mask_in_ovsdb_is_named(ovsdb):
    url, vsctl = ovsdb
    vsctl("set", "Open_vSwitch", ".", "other_config:pmd-cpu-mask=0xzz")
    with pytest.raises(ovs.OvsError, match="'0xzz' is not hexadecimal"):
        ovs.OvsClient(db=url).pmd_cpu_mask()


def test_no_server_is_an_ovs_error(tmp_path):
    with pytest.raises(ovs.OvsError, match=f"OVSDB at unix:{tmp_path}"):
        ovs.Ovsdb(f"unix:{tmp_path}/none.sock", timeout=2).other_config()
