"""PMD discovery: parsing OVS output and /proc, with no OVS running."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st
import pytest

from nova_rdt.host import ovs

RXQ_SHOW = """\
Displaying last 60 seconds pmd usage %
pmd thread numa_id 0 core_id 1:
  isolated : false
  port: p0                queue-id:  0 (enabled)   pmd usage:  0 %
  overhead:  0 %
pmd thread numa_id 1 core_id 17:
  isolated : true
  port: vhu0              queue-id:  0 (enabled)   pmd usage:  3 %
"""


@given(st.sets(st.integers(0, 255)))
def test_cpu_mask_round_trip(cores):
    mask = sum(1 << c for c in cores)
    assert ovs.parse_cpu_mask(f'"{mask:#x}"\n') == cores
    assert ovs.parse_cpu_mask(f"{mask:x}") == cores


@pytest.mark.parametrize("text", ["", "\n", '""'])
def test_unset_mask_is_empty(text):
    assert ovs.parse_cpu_mask(text) == set()


def test_bad_mask_is_named():
    with pytest.raises(ovs.OvsError, match="'0xzz' is not hexadecimal"):
        ovs.parse_cpu_mask("0xzz")


def test_rxq_show_gives_cores_and_numa():
    assert ovs.parse_pmd_rxq_show(RXQ_SHOW) == {1: 0, 17: 1}
    assert ovs.parse_pmd_rxq_show("Displaying last 60 seconds\n") == {}


@pytest.mark.parametrize("comm,core", [
    ("pmd-c01/id:8", 1), ("pmd-c17/id:123\n", 17), ("pmd-c1/id:8", 1),
    ("pmd8", None), ("revalidator6", None), ("pmd-c01", None),
    ("xpmd-c01/id:8", None)])
def test_pmd_thread_names(comm, core):
    assert ovs.parse_pmd_comm(comm) == core


def _task(root, pid, tid, comm, cpus):
    d = root / str(pid) / "task" / str(tid)
    d.mkdir(parents=True)
    (d / "comm").write_text(comm + "\n")
    (d / "status").write_text(f"Name:\t{comm}\nCpus_allowed_list:\t{cpus}\n")


def test_threads_need_name_and_affinity(tmp_path):
    _task(tmp_path, 100, 100, "ovs-vswitchd", "0-3")
    _task(tmp_path, 100, 101, "pmd-c01/id:8", "1")
    _task(tmp_path, 100, 102, "pmd-c02/id:9", "2")
    # A thread started by a PMD inherits its name, not its pinning.
    _task(tmp_path, 100, 103, "pmd-c01/id:8", "0-3")
    # A PMD on a core outside the asked set is not ours.
    _task(tmp_path, 100, 104, "pmd-c03/id:10", "3")
    found = ovs.pmd_threads_of(100, {1: 0, 2: 0}, proc_root=str(tmp_path))
    assert found == [ovs.PmdThread(1, 101, "pmd-c01/id:8", 0),
                     ovs.PmdThread(2, 102, "pmd-c02/id:9", 0)]


def test_vanished_vswitchd_is_reported(tmp_path):
    with pytest.raises(ovs.OvsError, match="pid 4242"):
        ovs.pmd_threads_of(4242, {1: 0}, proc_root=str(tmp_path))


def test_client_without_ovs_says_so(tmp_path):
    client = ovs.OvsClient(db=f"unix:{tmp_path}/none.sock",
                           vswitchd_pidfile=str(tmp_path / "none.pid"),
                           timeout=2)
    with pytest.raises(ovs.OvsError, match="not running"):
        client.vswitchd_pid()
    (tmp_path / "none.pid").write_text(f"{os.getpid()}\n")
    assert client.vswitchd_pid() == os.getpid()


@pytest.mark.parametrize("other_config,cores", [
    ({}, set()),
    ({"pmd-cpu-mask": ""}, set()),
    ({"pmd-cpu-mask": "0x6"}, {1, 2}),
    ({"pmd-cpu-mask": "6", "dpdk-init": "true"}, {1, 2}),
    ({"pmd-cpu-mask": "0x8000000000000001"}, {0, 63}),
])
def test_cpu_mask_of_other_config(other_config, cores):
    assert ovs.cpu_mask_of(other_config) == cores


def test_cpu_mask_of_a_bad_mask_names_it():
    with pytest.raises(ovs.OvsError, match="'0xg' is not hexadecimal"):
        ovs.cpu_mask_of({"pmd-cpu-mask": "0xg"})
