"""Issue 16, the request language and the API: every finding, one test.

Each bad value must be a SpecError naming the key (a 400 at the API),
never a plain ValueError (a 500), and must cost next to nothing.
"""

from __future__ import annotations

import json
import time

import pytest

from nova_rdt.allocation import spec
from nova_rdt.allocation.spec import SpecError
from nova_rdt.api import flavor_check
from nova_rdt.resctrl import cpulist


def _refused(specs, key, why, vcpus=4, nodes=1):
    with pytest.raises(SpecError) as e:
        spec.parse(specs, vcpus, nodes)
    assert e.value.key == key, e.value
    assert why in e.value.reason, e.value.reason
    return e.value


# -- High: unbounded vCPU lists ----------------------------------------

@pytest.mark.parametrize("value,why", [
    ("0-9999999", "out of range"), ("0-99999999", "out of range"),
    ("0-4096", "out of range"), ("4096", "out of range"),
    ("0-" + "9" * 200, "out of range"), ("0-" + "9" * 5000, "at most 255")])
def test_huge_vcpu_lists_are_refused_at_once(value, why):
    t0 = time.perf_counter()
    _refused({"rdt:vcpus": value}, "rdt:vcpus", why, vcpus=8)
    # Generous: the refusal is microseconds; an expansion was seconds.
    assert time.perf_counter() - t0 < 1.0


def test_vcpus_9999999_is_a_400_naming_the_key():
    after = flavor_check.merged_specs(
        "POST", None, b'{"extra_specs": {"rdt:vcpus": "0-9999999"}}', {})
    msg = flavor_check.check(after, vcpus=4)
    assert msg.startswith("Validation failed for extra spec rdt:vcpus:")


def test_largest_vcpu_id_is_accepted():
    req = spec.parse({"rdt:vcpus": "4095"}, 4096)
    assert req.vcpus == {4095}


# -- Medium: escapes as ValueError, huge hw:numa_nodes, deep JSON ------

@pytest.mark.parametrize("key,value", [
    ("rdt:l3_cache_ways", "²"), ("rdt:l3_cache_ways", "٤"),
    ("rdt:l3_cache_ways", "４"), ("rdt:mb_percent", "5" * 5000),
    ("rdt:mb_mbps", "9" * 5000), ("rdt:l3_cache_ways", "1_0"),
    ("rdt:l3_cache_ways", "+4"), ("rdt:l3_cache_ways", "04"),
    ("rdt:vcpus", "²"), ("rdt:vcpus", "0-٣"), ("rdt:l3_cache_size", "٤MiB"),
    ("rdt:l3_cache_ways.²", "2"), ("rdt:l3_cache_ways.٤", "2"),
    ("rdt:l3_cache_ways." + "1" * 5000, "2"), ("rdt:l3_cache_ways.-1", "2"),
])
def test_non_ascii_and_huge_numbers_are_spec_errors(key, value):
    with pytest.raises(SpecError) as e:
        spec.check_value(key, value)
    assert e.value.key == key
    assert len(str(e.value)) < len(key) + 300


@pytest.mark.parametrize("nodes", ["100000000", "65", "0", "²", "x",
                                   "9" * 5000])
def test_huge_or_bad_numa_nodes_beside_rdt_is_a_400(nodes):
    specs = {"rdt:l3_cache_ways": "2", "hw:numa_nodes": nodes}
    t0 = time.perf_counter()
    msg = flavor_check.check(specs, vcpus=4)
    assert time.perf_counter() - t0 < 1.0
    assert msg.startswith("Validation failed for extra spec hw:numa_nodes")


def test_numa_nodes_without_rdt_are_left_to_nova():
    assert flavor_check.check({"hw:numa_nodes": "x" * 50}, vcpus=4) is None


@pytest.mark.parametrize("body", [b"[" * 1000 + b"]" * 1000,
                                  b'{"extra_specs": ' + b"[" * 100000,
                                  b'{"extra_specs": {"rdt:vcpus": 5}}',
                                  b'{"extra_specs": {"rdt:vcpus": null}}',
                                  b'{"extra_specs": {"rdt:vcpus": ["0"]}}',
                                  b"\xff\xfe", b'"x"', b"{}"])
def test_bodies_nova_answers_are_left_to_nova(body):
    # Deep nesting, non-strings: not ours to judge (Nova's schema answers
    # 400), and never an exception out of the filter.
    assert flavor_check.merged_specs("POST", None, body, {}) in (None, {})


def test_parse_refuses_huge_node_counts_from_any_caller():
    _refused({"rdt:l3_cache_ways": "2"}, "hw:numa_nodes", "1-64",
             nodes=10 ** 8)


# -- Low: accepted values that must be refused -------------------------

@pytest.mark.parametrize("key,value,why", [
    ("rdt:l3_cache_ways", "4\n", "whitespace"),
    ("rdt:l3_cache_ways", " 4", "whitespace"),
    ("rdt:class", "low\n", "whitespace"),
    ("rdt:vcpus", "0-1\n", "whitespace"),
    ("rdt:monitor", "true\n", "whitespace"),
    ("rdt:vcpus", "all ", "whitespace"),
    ("rdt:l3_cache_size", "1", "between 1KiB"),
    ("rdt:l3_cache_size", "1B", "between 1KiB"),
    ("rdt:l3_cache_size", "1023", "between 1KiB"),
    ("rdt:l3_cache_size", "9999999999999", "between 1KiB"),
    ("rdt:l3_cache_size", "10000000000000000000", "not a size"),
    ("rdt:l3_cache_size", "5000MiB", "between 1KiB"),
    ("rdt:l3_cache_size", "6656 KiB", "not a size"),
    ("rdt:vcpus", "", "vCPU list"),
    ("rdt:vcpus", "0,,1", "not a CPU number"),
    ("rdt:l3_cache_ways", "x" * 300, "at most 255"),
])
def test_values_that_were_accepted_are_refused(key, value, why):
    with pytest.raises(SpecError) as e:
        spec.check_value(key, value)
    assert e.value.key == key and why in e.value.reason, e.value.reason


def test_class_regex_has_no_newline_hole():
    _refused({"rdt:class": "low\n"}, "rdt:class", "whitespace")


@pytest.mark.parametrize("dup", ["rdt:l3_cache_ways.01",
                                 "rdt:l3_cache_ways.001"])
def test_one_node_cannot_be_named_twice(dup):
    _refused({"rdt:l3_cache_ways.1": "2", dup: "3"}, dup, "0-63", nodes=2)


@pytest.mark.parametrize("key", ["RDT:l3_cache_ways", "Rdt:l3_cache_ways",
                                 "rDt:vcpus", " rdt:l3_cache_ways"])
def test_miscased_namespace_is_refused_not_ignored(key):
    e = _refused({key: "2"}, key, "lower case")
    assert "rdt:" in e.reason
    msg = flavor_check.check({key: "2"}, vcpus=4)
    assert msg is not None and key in msg


def test_sizes_in_range_still_work():
    assert spec.parse_size("k", "1KiB") == 1024
    assert spec.parse_size("k", "4096MiB") == 1 << 32
    assert spec.parse_size("k", "6815744") == 6815744


def test_every_refusal_names_the_key_in_the_api_message():
    for key, value in [("rdt:l3_cache_ways", "²"), ("rdt:vcpus", "0-9999999"),
                       ("RDT:monitor", "true")]:
        msg = flavor_check.check({key: value}, vcpus=4)
        assert f"extra spec {key}:" in msg


# -- the one bounded CPU-list parser -----------------------------------

@pytest.mark.parametrize("text", ["0-8192", "8192", "1_0", "٤", "²", " 1",
                                  "1 ", "1,", ",1", "1--2", "-1", "0x1",
                                  "3-1", "1\n\n", "1" * 70000])
def test_cpulist_refuses(text):
    with pytest.raises(ValueError):
        cpulist.parse(text)


def test_cpulist_reads_kernel_files_and_formats_back():
    assert cpulist.parse("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert cpulist.parse("") == set() == cpulist.parse("\n")
    assert cpulist.format({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11"
    assert cpulist.parse("0-8191") == set(range(8192))
    with pytest.raises(ValueError, match="out of range"):
        cpulist.parse("0-4096", limit=4096)


def test_json_in_filter_body_is_checked_as_strings():
    body = json.dumps({"extra_specs": {"rdt:l3_cache_ways": "2",
                                       "rdt:vcpus": "0-1"}}).encode()
    after = flavor_check.merged_specs("POST", None, body, {})
    assert flavor_check.check(after, vcpus=2) is None
