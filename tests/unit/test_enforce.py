"""The hook writes decided masks only when they are safe: the domain's
XML is hostile input, and the hook runs as root."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nova_rdt.host import enforce

RULES = {"L3": (11, 1, False)}
SPARSE = {"L3": (12, 1, True)}


def test_a_decided_mask_moves_libvirts_choice():
    lines, why = enforce.check({(0, "both"): 0x180},
                               {"L3": {0: 0x00c}},
                               {"L3": {0: 0x603}}, RULES)
    assert why is None and lines == {"L3": {0: 0x180}}


def test_nothing_to_write_when_libvirt_chose_the_same():
    assert enforce.check({(0, "both"): 0x180}, {"L3": {0: 0x180}},
                         {"L3": {0: 0x3}}, RULES) == ({}, None)


def test_a_mask_over_another_groups_ways_is_refused():
    lines, why = enforce.check({(0, "both"): 0x00c}, {"L3": {0: 0x030}},
                               {"L3": {0: 0x00f}}, RULES)
    assert lines == {} and "overlaps other groups' ways c" in why


def test_more_ways_than_libvirt_allocated_are_refused():
    lines, why = enforce.check({(0, "both"): 0x1f0}, {"L3": {0: 0x030}},
                               {"L3": {0: 0x3}}, RULES)
    assert lines == {} and "holds 5 ways, libvirt allocated 2" in why


def test_a_mask_the_kernel_refuses_is_refused():
    _, why = enforce.check({(0, "both"): 0x5}, {"L3": {0: 0x30}},
                           {}, RULES)
    assert "non-consecutive" in why or "contiguous" in why
    _, why = enforce.check({(0, "both"): 0x1800}, {"L3": {0: 0x3}},
                           {}, RULES)
    assert why is not None


def test_a_cache_id_or_type_the_group_lacks_is_refused():
    _, why = enforce.check({(1, "both"): 0x30}, {"L3": {0: 0x30}}, {},
                           RULES)
    assert "no L3 line for cache id 1" in why
    _, why = enforce.check({(0, "code"): 0x30}, {"L3": {0: 0x30}}, {},
                           RULES)
    assert "no code cache resource" in why


def test_one_bad_line_refuses_the_whole_write():
    lines, why = enforce.check({(0, "both"): 0x180, (1, "both"): 0x00f},
                               {"L3": {0: 0x00c, 1: 0x00c}},
                               {"L3": {0: 0x3, 1: 0x3}}, RULES)
    assert lines == {} and why is not None


@given(mask=st.integers(1, (1 << 12) - 1), have=st.integers(1, 0xfff),
       taken=st.integers(0, 0xfff))
def test_whatever_it_writes_is_safe(mask, have, taken):
    """Any decided mask at all: what is written never overlaps another
    group, never grows the domain, and is one the kernel takes."""
    lines, why = enforce.check({(0, "both"): mask}, {"L3": {0: have}},
                               {"L3": {0: taken}}, SPARSE)
    if why is None and lines:
        written = lines["L3"][0]
        assert written & taken == 0
        assert bin(written).count("1") == bin(have).count("1")
        assert written < (1 << 12)
