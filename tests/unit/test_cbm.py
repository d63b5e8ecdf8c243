"""CBM arithmetic, checked exhaustively against brute-force definitions."""

from hypothesis import given
from hypothesis import strategies as st
import pytest

from nova_rdt.resctrl import cbm

CBM_LEN = st.integers(min_value=1, max_value=24)


@st.composite
def mask_and_len(draw):
    n = draw(CBM_LEN)
    return draw(st.integers(min_value=0, max_value=(1 << n) - 1)), n


def brute_runs(mask, n):
    out, start = [], None
    for i in range(n + 1):
        bit = i < n and mask >> i & 1
        if bit and start is None:
            start = i
        elif not bit and start is not None:
            out.append(cbm.Run(start, i - start))
            start = None
    return out


@given(mask_and_len())
def test_runs_match_brute_force(ml):
    mask, n = ml
    assert cbm.runs(mask) == brute_runs(mask, n)


@given(mask_and_len())
def test_runs_rebuild_the_mask(ml):
    mask, _ = ml
    rebuilt = 0
    for r in cbm.runs(mask):
        assert rebuilt & r.mask == 0
        rebuilt |= r.mask
    assert rebuilt == mask


@given(mask_and_len())
def test_contiguous_means_one_run(ml):
    mask, n = ml
    assert cbm.is_contiguous(mask) == (len(brute_runs(mask, n)) == 1)


@given(mask_and_len(), st.integers(min_value=1, max_value=24))
def test_best_fit_is_free_contiguous_and_smallest(ml, ways):
    free, n = ml
    got = cbm.best_fit(free, ways)
    fitting = [r for r in brute_runs(free, n) if r.length >= ways]
    if not fitting:
        assert got is None
        return
    assert got & ~free == 0
    assert cbm.popcount(got) == ways and cbm.is_contiguous(got)
    # It sits at the bottom of a smallest fitting run (libvirt's policy).
    smallest = min(r.length for r in fitting)
    run = next(r for r in brute_runs(free, n) if r.mask & got)
    assert run.length == smallest
    assert run.start == (got & -got).bit_length() - 1


@given(mask_and_len())
def test_free_runs_are_disjoint_from_used(ml):
    used, n = ml
    for r in cbm.free_runs(used, n):
        assert r.mask & used == 0
    assert sum(r.length for r in cbm.free_runs(used, n)) == \
        n - cbm.popcount(used)
    assert cbm.largest_free_run(used, n) == max(
        (r.length for r in cbm.free_runs(used, n)), default=0)


@given(mask_and_len(), st.integers(0, 3), st.booleans())
def test_check_agrees_with_kernel_rules(ml, min_bits, sparse):
    mask, n = ml
    rs = brute_runs(mask, n)
    if (min_bits > 0 and mask == 0):
        expected = "Mask out of range"
    elif not sparse and len(rs) > 1:
        expected = f"The mask {mask:x} has non-consecutive 1-bits"
    elif (rs[0].length if rs else 0) < min_bits:
        expected = f"Need at least {min_bits} bits in the mask"
    else:
        expected = None
    if expected is None:
        cbm.check(mask, n, min_bits, sparse)
    else:
        with pytest.raises(cbm.CbmError, match=expected):
            cbm.check(mask, n, min_bits, sparse)


def test_check_rejects_bits_beyond_the_cache():
    with pytest.raises(cbm.CbmError, match="Mask out of range"):
        cbm.check(0x800, 11)


def test_non_consecutive_wording_is_the_kernels():
    with pytest.raises(cbm.CbmError) as e:
        cbm.check(0x5, 11)
    assert str(e.value) == "The mask 5 has non-consecutive 1-bits"


@given(st.integers(1, 24), st.integers(1, 64 << 20))
def test_ways_bytes_round_trip(ways, cache_size):
    n = 24
    size = cbm.ways_to_bytes(ways, cache_size * n, n)
    assert cbm.bytes_to_ways(size, cache_size * n, n) == ways


def test_gold_6252_way_size_is_libvirts_granularity():
    # DESIGN.md: 35.75 MiB with mask 7ff gives libvirt 3328 KiB.
    assert cbm.way_size(36608 * 1024, 11) == 3328 * 1024


def test_bytes_not_a_multiple_of_a_way_are_refused():
    with pytest.raises(ValueError, match="not a multiple"):
        cbm.bytes_to_ways(3 << 20, 36608 * 1024, 11)


@given(st.integers(1, 100), st.sampled_from([1, 5, 10, 20]))
def test_mb_round_matches_kernel_roundup(value, gran):
    min_bw = gran
    if value < min_bw:
        with pytest.raises(ValueError, match="out of range"):
            cbm.mb_round(value, gran, min_bw, 100)
        return
    got = cbm.mb_round(value, gran, min_bw, 100)
    assert got % gran == 0 and value <= got < value + gran


def test_mb_round_examples():
    assert cbm.mb_round(11, 10, 10, 100) == 20
    assert cbm.mb_round(10, 10, 10, 100) == 10
    assert cbm.mb_round(95, 10, 10, 100) == 100
    with pytest.raises(ValueError,
                       match=r"MB value 101 out of range \[10,100\]"):
        cbm.mb_round(101, 10, 10, 100)
