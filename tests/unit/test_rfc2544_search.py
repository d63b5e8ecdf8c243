"""The throughput search against simulated DUTs with known capacity."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from nova_rdt.rfc2544 import latency
from nova_rdt.rfc2544 import search
from nova_rdt.rfc2544.model import SEED_BINS_US
from nova_rdt.rfc2544.model import Trial
from nova_rdt.rfc2544.simdut import SimulatedDut

LINE_64B = 14_880_952      # 10GbE at 64-byte frames


def _dut(seed, **kw):
    cap = random.Random(seed).uniform(0.05, 0.97) * LINE_64B
    return SimulatedDut(cap, LINE_64B, seed=seed, **kw)


@pytest.mark.parametrize("tolerance", [0.0, 0.001])
@pytest.mark.parametrize("resolution", [0.005, 0.01])
def test_found_rate_is_within_precision_in_95_percent_of_200_runs(
        tolerance, resolution):
    cfg = search.SearchConfig(loss_tolerance=tolerance,
                              resolution=resolution)
    hits = 0
    for seed in range(200):
        dut = _dut(seed)
        r = search.search(dut.measure, dut.line_rate, cfg)
        truth = dut.truth(tolerance)
        hits += abs(r.rate_pps - truth) <= resolution * truth
    assert hits >= 190, hits


def test_fewer_trials_than_bisection_at_equal_precision():
    cfg = search.SearchConfig(loss_tolerance=0.001, resolution=0.005)
    ours = theirs = 0
    for seed in range(100):
        a, b = _dut(seed), _dut(seed)
        ours += search.search(a.measure, a.line_rate, cfg).trial_count
        theirs += search.bisection(b.measure, b.line_rate, cfg).trial_count
    assert ours <= 0.6 * theirs, (ours, theirs)


def test_noisier_dut_still_mostly_right():
    cfg = search.SearchConfig(loss_tolerance=0.0, resolution=0.01)
    hits = 0
    for seed in range(100):
        dut = _dut(seed, jitter=0.002, spurious=0.2)
        r = search.search(dut.measure, dut.line_rate, cfg)
        hits += abs(r.rate_pps - dut.truth(0.0)) <= 0.01 * dut.truth(0.0)
    assert hits >= 90, hits


@settings(max_examples=200, deadline=None)
@given(cap=st.floats(1e3, 1e7), line=st.floats(1e3, 2e7),
       tol=st.sampled_from([0.0, 0.001, 0.01]),
       res=st.sampled_from([0.002, 0.005, 0.02]))
def test_noiseless_search_brackets_the_truth(cap, line, tol, res):
    dut = SimulatedDut(cap, line, jitter=0.0, spurious=0.0)
    r = search.search(dut.measure, line, search.SearchConfig(
        loss_tolerance=tol, resolution=res, max_trials=60))
    truth = dut.truth(tol)
    if truth >= line:
        assert r.generator_limited and r.rate_pps == line
        return
    assert r.converged, r.note
    assert r.rate_pps <= truth * (1 + 1e-9)
    assert r.rate_pps >= truth * (1 - res) - 1
    assert r.upper_pps is not None and r.upper_pps >= truth - 1


def test_budget_is_respected_and_said():
    def always_lossy(rate, duration):
        return Trial(rate, duration, int(rate * duration),
                     int(rate * duration * 0.5))
    r = search.search(always_lossy, 1e6, search.SearchConfig(max_trials=7))
    assert r.trial_count <= 7 and not r.converged
    assert "max_trials" in r.note or "min_rate" in r.note


def test_generator_limited_when_the_dut_is_faster():
    dut = SimulatedDut(2 * LINE_64B, LINE_64B, spurious=0.0)
    r = search.search(dut.measure, LINE_64B, search.SearchConfig())
    assert r.generator_limited and r.rate_pps == LINE_64B


def test_achieved_rate_is_reported_not_only_offered():
    def short_sender(rate, duration):       # sends 90% of what is asked
        tx = int(0.9 * rate * duration)
        return Trial(rate, duration, tx, tx)
    r = search.search(short_sender, 1e6, search.SearchConfig())
    assert r.achieved_pps == pytest.approx(0.9 * r.rate_pps, rel=1e-3)


@pytest.mark.parametrize("bad", [dict(loss_tolerance=1.0),
                                 dict(resolution=0), dict(max_trials=1),
                                 dict(trial_duration=0)])
def test_bad_config_is_refused(bad):
    with pytest.raises(ValueError):
        search.SearchConfig(**bad)


def test_histogram_uses_the_seed_bins():
    h = latency.histogram([1, 24.9, 25, 60, 1000, 5000], SEED_BINS_US)
    assert h[0] == (0.0, 25.0, 2) and h[1] == (25.0, 50.0, 1)
    assert h[2] == (50.0, 75.0, 1) and h[-1] == (1000.0, None, 2)
    assert sum(c for *_x, c in h) == 6


def test_summary_percentiles():
    s = latency.summarize([float(i) for i in range(1, 1001)], SEED_BINS_US)
    assert (s.min_us, s.max_us, s.avg_us) == (1.0, 1000.0, 500.5)
    assert s.percentiles_us["50"] == 500.0
    assert s.percentiles_us["99"] == 990.0
    assert s.percentiles_us["99.9"] == 999.0
    with pytest.raises(ValueError):
        latency.check_bins([25, 25])
