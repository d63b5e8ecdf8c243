"""OVS-DPDK on the Host lab: real PMD threads, found by nova_rdt.host.ovs."""

from __future__ import annotations

import os
import time

import pytest

from nova_rdt.resctrl.capabilities import parse_cpu_list
from tests.integration.conftest import finish_lab
from tests.integration.conftest import lab_skip_reason
from tests.integration.conftest import start_lab


@pytest.fixture(scope="module")
def lab():
    reason = lab_skip_reason(ovs=True, vnf=True)
    if reason:
        pytest.skip(reason)
    lab = start_lab(libvirt=False, ovs=True, pmd_cpu_mask=0x2)
    try:
        lab.start(traffic_ports=2, vnf=True)
    except BaseException:
        finish_lab(lab)
        raise
    yield lab
    finish_lab(lab)


def _thread_cpus(pid: int, tid: int) -> set[int]:
    with open(f"/proc/{pid}/task/{tid}/status") as f:
        for line in f:
            if line.startswith("Cpus_allowed_list:"):
                return parse_cpu_list(line.split(":", 1)[1])
    raise AssertionError("no Cpus_allowed_list")


def test_dpdk_is_initialised_with_the_pmd_mask(lab):
    assert lab.ovs.dpdk_initialized()
    assert lab.ovs.vsctl("get", "Open_vSwitch", ".",
                         "other_config:pmd-cpu-mask") == '"0x2"'
    assert lab.ovs.client.pmd_cpu_mask() == {1}


def test_pmd_discovery_finds_the_real_thread(lab):
    pid = lab.ovs.vswitchd.pid
    assert lab.ovs.client.vswitchd_pid() == pid
    threads = lab.ovs.pmd_threads()
    assert len(threads) == 1
    pmd = threads[0]
    assert pmd.core == 1
    assert pmd.name.startswith("pmd-c01/id:")
    # Independently of the discovery code: the thread exists in
    # ovs-vswitchd, is pinned to core 1 and polls the lab's ports.
    assert str(pmd.tid) in os.listdir(f"/proc/{pid}/task")
    assert _thread_cpus(pid, pmd.tid) == {1}
    rxq = lab.ovs.appctl("dpif-netdev/pmd-rxq-show")
    assert "core_id 1:" in rxq
    for port in ("p0", "p1", "vhu0"):
        assert f"port: {port} " in rxq


def test_pmd_threads_follow_a_mask_change(lab):
    before = lab.ovs.pmd_threads()
    lab.ovs.set_pmd_cpu_mask(0x1)
    try:
        deadline = time.monotonic() + 20
        while True:
            now = lab.ovs.pmd_threads()
            if [t.core for t in now] == [0]:
                break
            assert time.monotonic() < deadline, now
            time.sleep(0.1)
        assert now[0].tid != before[0].tid
    finally:
        lab.ovs.set_pmd_cpu_mask(0x2)
        deadline = time.monotonic() + 20
        while [t.core for t in lab.ovs.pmd_threads()] != [1]:
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_vnf_is_connected_over_vhost_user(lab):
    assert lab.ovs.link_state("vhu0") == "up"
    assert lab.vnfs[0].proc.running()
    status = lab.ovs.vsctl("get", "Interface", "vhu0", "status")
    assert "mode=client" in status and "status=connected" in status


def test_frames_cross_the_pmd_between_traffic_ports(lab):
    """A burst sent into one veth comes out of the other through OVS."""
    (_host0, t0), (_host1, t1) = lab.traffic.pairs
    counter = f"/sys/class/net/{t1}/statistics/rx_packets"

    def rx():
        res = lab.traffic.exec(["cat", counter], capture_output=True,
                               text=True, check=True)
        return int(res.stdout)

    before = rx()
    send = (
        "import socket\n"
        f"s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n"
        f"s.bind(('{t0}', 0))\n"
        "frame = b'\\xff' * 6 + b'\\x02\\x00\\x00\\x00\\x00\\x01' "
        "+ b'\\x88\\xb5' + bytes(50)\n"
        "for _ in range(100): s.send(frame)\n")
    lab.traffic.exec(["python3", "-c", send], check=True)
    deadline = time.monotonic() + 10
    while rx() - before < 100:
        assert time.monotonic() < deadline, rx() - before
        time.sleep(0.05)

