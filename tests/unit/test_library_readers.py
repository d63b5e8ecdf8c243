"""The library's read side (discovery, host view, monitoring) on snapshots
of the emulator's files: plain directories, no FUSE needed.

Every test runs on each kernel release the emulator models: the library
must read padded (before 6.15) and unpadded values alike, with and
without sparse_masks (6.7) and mba_MBps_event (6.14)."""

import json

import pytest

from nova_rdt.emulator import profiles
from nova_rdt.emulator import topology
from nova_rdt.resctrl import capabilities
from nova_rdt.resctrl import errors
from nova_rdt.resctrl import monitoring
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.hostview import HostView
from tests.kernel_fixtures import KERNELS
from tests.kernel_fixtures import make_kernel
from tests.kernel_fixtures import materialize


def snapshot(tmp_path, k):
    root = materialize(k, str(tmp_path / "resctrl"))
    cpu = topology.write_tree(k.profile, str(tmp_path / "cpu"))
    return root, cpu


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("name", sorted(profiles.PROFILES))
def test_discovery_matches_every_profile(tmp_path, name, kernel):
    k, _, _ = make_kernel(name, kernel=kernel)
    p = k.profile
    root, cpu = snapshot(tmp_path, k)
    caps = capabilities.discover(root, cpu)
    l3_names = ["L3CODE", "L3DATA"] if p.cdp else ["L3"]
    l2_names = [] if p.l2 is None else (
        ["L2CODE", "L2DATA"] if p.cdp_l2 else ["L2"])
    assert sorted(caps.cache) == sorted(l3_names + l2_names)
    for n in l2_names:
        r = caps.cache[n]
        assert r.level == 2 and r.cbm_len == p.l2.cbm_len
        assert r.num_closids == p.l2.num_closids // (2 if p.cdp_l2 else 1)
        assert sorted(r.domains) == p.l2_ids
        for d in r.domains.values():
            assert d.size == p.l2.size
            assert list(d.cpus) == p.cpus_of_l2(d.id)
    assert caps.l2_cdp == p.cdp_l2
    for n in l3_names:
        r = caps.cache[n]
        assert r.cbm_len == p.l3.cbm_len
        assert r.min_cbm_bits == p.l3.min_cbm_bits
        assert r.sparse_masks == p.l3.sparse_masks
        assert r.num_closids == p.l3.num_closids // (2 if p.cdp else 1)
        assert sorted(r.domains) == list(range(p.domains))
        for d in r.domains.values():
            assert d.size == p.l3.size
            assert list(d.cpus) == p.cpus_of_domain(d.id)
    assert caps.cdp == p.cdp
    counts = [r.num_closids for r in caps.cache.values()] + \
        [b.num_closids for b in p.bandwidth]
    assert caps.clos_count == min(counts)
    assert caps.usable_clos == caps.clos_count - 1
    assert sorted(caps.bandwidth) == sorted(b.name for b in p.bandwidth)
    assert caps.mba_mbps == p.mba_mbps
    if p.monitor:
        assert caps.monitoring["L3_MON"].num_rmids == p.monitor.num_rmids
        assert caps.monitoring["L3_MON"].features == p.monitor.features


@pytest.mark.parametrize("kernel", KERNELS)
def test_mb_units(tmp_path, kernel):
    units = {}
    for name in ("gold-6252", "amd-epyc", "gold-6252-mbps"):
        k, _, _ = make_kernel(name, kernel=kernel)
        root, cpu = snapshot(tmp_path / name, k)
        mb = capabilities.discover(root, cpu).bandwidth["MB"]
        units[name] = (mb.units, mb.max_bandwidth, mb.bandwidth_gran,
                       mb.min_bandwidth)
    assert units == {
        "gold-6252": ("percent", 100, 10, 10),
        "amd-epyc": ("1/8GBps", 2048, 1, 0),
        "gold-6252-mbps": ("MBps", None, 10, 10),
    }


def test_not_mounted_is_a_clear_error(tmp_path):
    with pytest.raises(errors.NotMounted, match="no resctrl filesystem"):
        capabilities.discover(str(tmp_path))


def test_sysfs_size_and_cpu_lists():
    assert capabilities.parse_sysfs_size("36608K\n") == 36608 * 1024
    assert capabilities.parse_sysfs_size("32M") == 32 << 20
    assert capabilities.parse_cpu_list("0-3,8,10-11\n") == \
        {0, 1, 2, 3, 8, 10, 11}
    assert capabilities.format_cpu_list({0, 1, 2, 3, 8, 10, 11}) == \
        "0-3,8,10-11"
    assert capabilities.parse_cpu_list("\n") == set()


@pytest.mark.parametrize("kernel", KERNELS)
def test_host_view_way_map_and_free_runs(tmp_path, kernel):
    k, _, _ = make_kernel(kernel=kernel)
    k.write("schemata", b"L3:0=3;1=3\n")             # host keeps ways 0-1
    k.mkdir("nova-rdt-pmd")
    k.write("nova-rdt-pmd/schemata", b"L3:0=1fc;1=c\n")
    k.mkdir("qemu-1-vm0-vcpus_0-1")
    k.write("qemu-1-vm0-vcpus_0-1/schemata", b"L3:0=1c;1=30\n")
    k.mkdir("pqos-thing")
    k.write("pqos-thing/schemata", b"L3:0=3;1=3\n")
    root, cpu = snapshot(tmp_path, k)
    view = HostView.collect(Resctrl(root, sysfs_cpu=cpu))
    owners = {g.name: g.owner for g in view.groups}
    assert owners == {"/": "root", "nova-rdt-pmd": "nova-rdt",
                      "pqos-thing": "foreign",
                      "qemu-1-vm0-vcpus_0-1": "libvirt"}
    holders = view.holders("L3", 0)
    assert holders[0] == ["/", "pqos-thing"]
    assert holders[3] == ["nova-rdt-pmd", "qemu-1-vm0-vcpus_0-1"]
    assert holders[9] == []
    runs = view.free_runs("L3", 0)
    assert [(r.start, r.length) for r in runs] == [(9, 2)]
    runs = view.free_runs("L3", 1)
    assert [(r.start, r.length) for r in runs] == [(6, 5)]
    doc = json.loads(json.dumps(view.to_dict()))
    assert doc["version"] == 1
    assert doc["free_runs"]["L3"]["1"] == [{"start": 6, "ways": 5,
                                            "mask": "7c0"}]
    text = view.render()
    assert "qemu-1-vm0-vcpus_0-1" in text and "cache id 1: 5 ways at 6" in text


@pytest.mark.parametrize("kernel", KERNELS)
def test_monitoring_reads_and_unavailable(tmp_path, kernel):
    k, clock, _ = make_kernel(kernel=kernel)
    k.mkdir("g")
    k.write("g/tasks", b"101")
    clock.advance(1)
    k.unavailable.add(("g", 1, "mbm_total_bytes"))
    root, _ = snapshot(tmp_path, k)
    readings = {(r.resource, r.domain): r for r in
                monitoring.read_mon_data(f"{root}/g")}
    assert readings[("L3", 0)].mbm_total_bytes > 0
    assert readings[("L3", 1)].mbm_total_bytes is None
    assert readings[("L3", 1)].mbm_local_bytes > 0


@pytest.mark.parametrize("kernel", KERNELS)
def test_haswell_has_no_mbm_files(tmp_path, kernel):
    k, _, _ = make_kernel("e5-2658-v3", kernel=kernel)
    root, _ = snapshot(tmp_path, k)
    (r0, r1) = monitoring.read_mon_data(root)
    assert r0.llc_occupancy is not None and r0.mbm_total_bytes is None


def test_counter_delta_wrap_and_reset():
    assert monitoring.counter_delta(10, 25) == 15
    # A 24-bit counter that wrapped: small remainder to the top.
    assert monitoring.counter_delta((1 << 24) - 5, 10, 1 << 24) == 15
    # A reset (new RMID) is not a huge wrap: no delta at all.
    assert monitoring.counter_delta(10 ** 12, 5, 1 << 64) is None


def test_rate_tracker_bridges_unavailable_and_is_monotonic():
    t = monitoring.RateTracker(modulus=1 << 24)
    assert t.observe("k", 100, 0.0) is None
    assert t.observe("k", 1100, 1.0) == 1000.0
    assert t.observe("k", None, 2.0) is None          # "Unavailable"
    assert t.observe("k", 3100, 3.0) == 1000.0        # 2000 over 2 s
    assert t.observe("k", 100, 4.0) is None           # reset: no rate
    assert t.total("k") == 3000
    assert t.observe("k", (1 << 24) - 400, 5.0) is not None
    assert t.observe("k", 600, 6.0) == 1000.0          # wrapped
    assert t.total("k") == 3000 + (1 << 24) - 500 + 1000
    t.forget([])
    assert t.total("k") == 0
