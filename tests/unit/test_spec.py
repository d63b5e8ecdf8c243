"""The rdt: extra-spec language: every bad-spec class names its key."""

from hypothesis import given
from hypothesis import strategies as st
import pytest

from nova_rdt.allocation import spec
from nova_rdt.allocation.spec import CacheAmount
from nova_rdt.allocation.spec import SpecError


def test_nothing_asked():
    assert spec.parse({"hw:cpu_policy": "dedicated"}, vcpus=4) is None


def test_forwarding_vm():
    req = spec.parse({"rdt:l3_cache_ways": "4", "rdt:mb_percent": "50",
                      "rdt:vcpus": "2-3", "rdt:monitor": "true",
                      "rdt:pmd_share": "yes"}, vcpus=4)
    assert req.nodes[0].cache == CacheAmount(ways=4)
    assert req.nodes[0].mb_percent == 50
    assert req.vcpus == {2, 3} and req.monitor is True and req.pmd_share
    assert req.wants_allocation and not req.wants_cdp


def test_sizes_and_way_conversion():
    req = spec.parse({"rdt:l3_cache_size": "6656KiB"}, vcpus=2)
    amount = req.nodes[0].cache
    assert amount.size == 6656 * 1024
    assert amount.to_ways(3328 * 1024) == 2
    with pytest.raises(ValueError, match="whole number"):
        CacheAmount(size=3 << 20).to_ways(3328 * 1024)
    assert spec.parse_size("k", "13MiB") == 13 << 20
    assert spec.parse_size("k", "4096") == 4096


def test_cdp_pair():
    req = spec.parse({"rdt:l3_code_ways": "2", "rdt:l3_data_size": "13MiB"},
                     vcpus=2)
    assert req.wants_cdp
    assert req.nodes[0].code == CacheAmount(ways=2)


def test_per_node_overrides_the_all_nodes_value():
    req = spec.parse({"rdt:l3_cache_ways": "2", "rdt:l3_cache_ways.1": "5",
                      "rdt:mb_percent.0": "30"}, vcpus=8, numa_nodes=2)
    assert [n.cache.ways for n in req.nodes] == [2, 5]
    assert [n.mb_percent for n in req.nodes] == [30, None]


def test_class_member():
    req = spec.parse({"rdt:class": "low_priority"}, vcpus=2)
    assert req.rdt_class == "low_priority" and not req.wants_allocation


@pytest.mark.parametrize("specs, key, why", [
    ({"rdt:l3_cache_ways": "lots"}, "rdt:l3_cache_ways", "must be 1-64"),
    ({"rdt:l3_cache_ways": "0"}, "rdt:l3_cache_ways", "must be 1-64"),
    ({"rdt:l3_cache_size": "3GB"}, "rdt:l3_cache_size", "not a size"),
    ({"rdt:l3_cache_ways": "2", "rdt:l3_cache_size": "1MiB"},
     "rdt:l3_cache_size", "not both"),
    ({"rdt:l3_cache_ways": "2", "rdt:l3_code_ways": "1",
      "rdt:l3_data_ways": "1"}, "rdt:l3_code_ways", "cannot be mixed"),
    ({"rdt:l3_code_ways": "1"}, "rdt:l3_code_ways", "needs both"),
    ({"rdt:mb_percent": "0"}, "rdt:mb_percent", "must be 1-100"),
    ({"rdt:mb_percent": "101"}, "rdt:mb_percent", "must be 1-100"),
    ({"rdt:mb_percent": "50", "rdt:mb_mbps": "100"}, "rdt:mb_mbps",
     "not both"),
    ({"rdt:mb_mbps": "2000"}, "rdt:mb_mbps", "needs L3 ways"),
    ({"rdt:vcpus": "0-4"}, "rdt:vcpus", "vCPU 4 is out of range"),
    ({"rdt:vcpus": "3-1"}, "rdt:vcpus", "runs backwards"),
    ({"rdt:vcpus": "one"}, "rdt:vcpus", "vCPU list"),
    ({"rdt:monitor": "maybe"}, "rdt:monitor", "not true or false"),
    ({"rdt:class": "Bad Name"}, "rdt:class", "must be 1-32"),
    ({"rdt:class": "lp", "rdt:l3_cache_ways": "2"}, "rdt:l3_cache_ways",
     "shares the class"),
    ({"rdt:pmd_share": "true"}, "rdt:pmd_share", "needs L3 ways"),
    ({"rdt:l3_cache_ways.2": "2"}, "rdt:l3_cache_ways.2", "NUMA node"),
    ({"rdt:vcpus.1": "0"}, "rdt:vcpus.1", "no '.N'"),
    ({"rdt:l3_cache_way": "2"}, "rdt:l3_cache_way", "unknown rdt:"),
])
def test_bad_specs_name_the_key(specs, key, why):
    with pytest.raises(SpecError) as e:
        spec.parse(specs, vcpus=4, numa_nodes=2)
    assert e.value.key == key
    assert why in e.value.reason


@given(st.sets(st.integers(0, 63), min_size=1))
def test_cpu_list_round_trip(cpus):
    from nova_rdt.resctrl.capabilities import format_cpu_list
    assert spec.parse_cpu_list("rdt:vcpus", format_cpu_list(cpus)) == cpus


@given(st.integers(1, 1 << 30), st.sampled_from(["", "B", "KiB", "MiB"]))
def test_sizes(n, unit):
    mult = {"": 1, "B": 1, "KiB": 1024, "MiB": 1 << 20}[unit]
    if spec.MIN_SIZE <= n * mult <= spec.MAX_SIZE:
        assert spec.parse_size("k", f"{n}{unit}") == n * mult
    else:
        with pytest.raises(SpecError, match="between 1KiB and 4096MiB"):
            spec.parse_size("k", f"{n}{unit}")
