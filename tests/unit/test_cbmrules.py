"""One CBM rules type and one "used by others" (issue 38), checked
against the kernel's own rule (cbm.check) over every mask of small
caches."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
import pytest

from nova_rdt.allocation import placement
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl import cbmrules


@pytest.mark.parametrize("n", range(1, 9))
@pytest.mark.parametrize("sparse", [False, True])
def test_cover_is_the_least_valid_mask_holding_the_ways(n, sparse):
    rules = cbmrules.CbmRules(n, 1, sparse)
    for ways in range(1, 1 << n):
        cover = rules.cover(ways)
        assert cover & ways == ways and rules.valid(cover)
        # No smaller valid mask holds them.
        assert not any(rules.valid(m) and m & ways == ways
                       and cbm.popcount(m) < cbm.popcount(cover)
                       for m in range(1, 1 << n))
    assert rules.cover(0) == 0


@given(st.integers(1, 12), st.integers(0, 3), st.booleans(),
       st.integers(0, (1 << 13) - 1))
def test_valid_is_the_kernels_rule(n, low, sparse, mask):
    rules = cbmrules.CbmRules(n, low, sparse)
    try:
        cbm.check(mask, n, low, sparse)
        kernel = True
    except cbm.CbmError:
        kernel = False
    assert rules.valid(mask) == kernel
    assert rules.full == (1 << n) - 1


@given(st.integers(0, 1 << 20))
def test_one_span(mask):
    assert cbmrules.span(mask) == placement.span(mask)
    if mask:
        assert cbm.is_contiguous(cbmrules.span(mask))


def test_of_a_resource_takes_one_way_as_the_least():
    class Res:
        cbm_len, min_cbm_bits, sparse_masks = 11, 0, True

    assert cbmrules.CbmRules.of(Res()) == cbmrules.CbmRules(11, 1, True)


lines = st.dictionaries(
    st.sampled_from(("L3", "L3CODE", "MB")),
    st.dictionaries(st.integers(0, 3), st.integers(0, 255), max_size=3),
    max_size=3)


@given(st.lists(lines, max_size=5), st.integers(0, 4))
def test_union_is_every_other_groups_ways(groups, me):
    others = [g for i, g in enumerate(groups) if i != me]
    got = cbmrules.union(others, ("L3", "L3CODE"))
    for res in ("L3", "L3CODE"):
        for cid in range(4):
            want = 0
            for g in others:
                want |= g.get(res, {}).get(cid, 0)
            assert got.get((res, cid), 0) == want
    assert not any(res == "MB" for res, _cid in got)
    assert cbmrules.union(others) == {
        **cbmrules.union(others, ("MB",)),
        **cbmrules.union(others, ("L3", "L3CODE"))}
