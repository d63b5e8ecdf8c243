"""The throughput search against simulated DUTs with known capacity."""

from __future__ import annotations

import random
import sys

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import pytest

from nova_rdt.rfc2544 import latency
from nova_rdt.rfc2544 import search
from nova_rdt.rfc2544 import simdut
from nova_rdt.rfc2544.model import SEED_BINS_US
from nova_rdt.rfc2544.model import Trial
from nova_rdt.rfc2544.simdut import SimulatedDut

LINE_64B = 14_880_952      # 10GbE at 64-byte frames


def _dut(seed, **kw):
    cap = random.Random(seed).uniform(0.05, 0.97) * LINE_64B
    return SimulatedDut(cap, LINE_64B, seed=seed, **kw)


CELLS = [(tol, res) for tol in (0.0, 0.001) for res in (0.005, 0.01)]


@pytest.mark.parametrize("model", sorted(simdut.MODELS))
def test_every_dut_model_within_resolution_in_95_percent_of_200_runs(
        model):
    """For every DUT model and every tolerance and resolution of the
    benchmark (the benchmark holds the issue's set-up to 99%)."""
    for tol, res in CELLS:
        cfg = search.SearchConfig(loss_tolerance=tol, resolution=res)
        hits = 0
        for seed in range(200):
            dut = simdut.MODELS[model](seed, LINE_64B)
            r = search.search(dut.measure, dut.line_rate, cfg)
            lo, hi = dut.truth_band(tol)
            hits += lo * (1 - res) <= r.rate_pps <= hi * (1 + res)
        # A capacity moving +-2% between trials passes a rate above its
        # nominal edge twice in a row in ~7% of tries: at 0.5%
        # resolution that is a miss (bisection: ~77% there).
        need = 180 if model == "drift" and res < 0.01 else 190
        assert hits >= need, (model, tol, res, hits)


# Mean trials against bisection's: at most its own on the collapsing
# models, 0.6x on steady ones.  A capacity that moves +-2% between
# trials costs failed re-checks of the result at 0.5-1% resolution;
# there the search stays under 0.8x (benchmarks.bench_rfc2544_search).
TRIAL_BAR = dict.fromkeys(simdut.COLLAPSING, 1.0) | {
    "benign": 0.6, "gen-ceiling": 0.6, "drift": 0.8}


@pytest.mark.parametrize("model", sorted(simdut.MODELS))
def test_fewer_trials_than_bisection_at_equal_precision(model):
    bar = TRIAL_BAR[model]
    for tol, res in CELLS:
        cfg = search.SearchConfig(loss_tolerance=tol, resolution=res)
        ours = theirs = 0
        for seed in range(200):
            a = simdut.MODELS[model](seed, LINE_64B)
            b = simdut.MODELS[model](seed, LINE_64B)
            ours += search.search(a.measure, LINE_64B, cfg).trial_count
            theirs += search.bisection(b.measure, LINE_64B,
                                       cfg).trial_count
        assert ours <= bar * theirs, (model, tol, res, ours, theirs)


def test_a_collapsing_dut_is_not_crept_up_on():
    """The issue's run: offered 1M, sent 131k, forwarded 57k of a DUT
    whose capacity is higher; the search must not creep in
    resolution-sized steps from 57k (that is 10 trials and more).  It
    takes 7: the third failure tells its linear drop from a power of
    the overload."""
    dut = SimulatedDut(70_000, 1_000_000, gen_ceiling_pps=131_000,
                       collapse=70_000 / 57_000, spurious=0.0, seed=3)
    cfg = search.SearchConfig(loss_tolerance=0.001, resolution=0.02,
                              trial_duration=1.0, probe_duration=0.5,
                              max_trials=10)
    r = search.search(dut.measure, 1_000_000, cfg)
    assert r.converged and not r.generator_limited, r
    assert r.trial_count <= 7
    assert abs(r.rate_pps - dut.truth(0.001)) <= 0.02 * dut.truth(0.001)
    # Every bound is a sent rate: none above what the generator sent.
    assert r.upper_pps <= 131_000 * 1.001


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
       collapse=st.sampled_from([1.0, 2.0, 10.0]),
       tol=st.sampled_from([0.0, 0.001, 0.01]),
       res=st.sampled_from([0.002, 0.005, 0.02]))
def test_noiseless_search_brackets_the_truth(cap, line, collapse, tol, res):
    dut = SimulatedDut(cap, line, jitter=0.0, spurious=0.0,
                       collapse=collapse)
    r = search.search(dut.measure, line, search.SearchConfig(
        loss_tolerance=tol, resolution=res, max_trials=60))
    truth = dut.truth(tol)
    if truth >= line * (1 - res):
        # At the generator's maximum, within a resolution: either answer.
        assert r.generator_limited or r.converged, r.note
        assert r.rate_pps >= min(truth, line) * (1 - res) - 1
        return
    assert r.converged, r.note
    assert r.rate_pps <= truth * (1 + 1e-9) + 1
    assert r.rate_pps >= truth * (1 - res) - 1
    assert r.upper_pps is not None and r.upper_pps >= truth - 1
    # Throughput is what was forwarded at the highest pass.
    assert r.throughput_pps == r.forwarded_pps <= r.rate_pps


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
    assert r.generator_limited
    assert r.rate_pps == pytest.approx(LINE_64B, rel=1e-6)


def test_a_short_sender_is_bounded_by_what_it_sent():
    """A generator that claims 1M but sends 131k, through a DUT faster
    than that: the result is 131k, generator-limited, "at least"."""
    dut = SimulatedDut(500_000, 1_000_000, gen_ceiling_pps=131_000,
                       spurious=0.0)
    r = search.search(dut.measure, 1_000_000, search.SearchConfig())
    assert r.generator_limited
    assert r.rate_pps == pytest.approx(131_000, rel=1e-3)
    assert r.offered_pps == 1_000_000
    assert "at least 131,000 pps" in r.note


def test_achieved_rate_is_reported_not_only_offered():
    def short_sender(rate, duration):       # sends 90% of what is asked
        tx = int(0.9 * rate * duration)
        return Trial(rate, duration, tx, tx)
    r = search.search(short_sender, 1e6, search.SearchConfig())
    assert r.achieved_pps == pytest.approx(0.9 * r.offered_pps, rel=1e-3)
    assert r.rate_pps == r.achieved_pps


def test_bisection_is_bounded_by_the_first_trial_sent_rate():
    dut = SimulatedDut(50_000, 1_000_000, gen_ceiling_pps=100_000,
                       spurious=0.0, jitter=0.0)
    r = search.bisection(dut.measure, 1_000_000, search.SearchConfig())
    assert r.converged
    assert r.trials[1].offered_pps == pytest.approx(50_000, rel=1e-3)


@pytest.mark.parametrize("bad", [
    dict(loss_tolerance=1.0), dict(resolution=0), dict(max_trials=1),
    dict(trial_duration=0), dict(trial_duration=float("nan")),
    dict(probe_duration=float("inf")), dict(max_trials=2.9),
    dict(resolution=float("nan")), dict(verify_repeats=-1),
    dict(loss_tolerance=True)])
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


def test_a_noisy_software_path_still_converges_and_never_overstates():
    """Loss bursts of up to 5% in a third of all trials, whatever the
    rate (a PMD preempted on a busy host): the contradiction re-checks
    and growing steps still close the bracket, and the result is never
    above the DUT's real edge."""
    cfg = search.SearchConfig(loss_tolerance=0.001, resolution=0.02,
                              trial_duration=1.0, probe_duration=0.5,
                              max_trials=24)
    converged = 0
    for seed in range(100):
        dut = SimulatedDut(100_000, 400_000, spurious=0.3, burst=5_000,
                           collapse=3.0, seed=seed)
        r = search.search(dut.measure, 10_000_000, cfg)
        converged += r.converged
        assert r.rate_pps <= dut.truth(0.001) * 1.001
    assert converged >= 80, converged


# -- The drop curve and the search's invariants, on exact models --------

def _power(cap, p, a):
    return cap * (cap / a) ** p if a > cap else a


def _linear(cap, k, a):
    return max(cap - k * (a - cap), 0.0) if a > cap else a


@settings(max_examples=300, deadline=None)
@given(p=st.floats(0.0, 3.0), k=st.floats(0.0, 20.0),
       x1=st.floats(1.05, 20.0), x2=st.floats(1.1, 3.0),
       tol=st.sampled_from([0.0, 0.001, 0.01]))
def test_two_failures_bracket_the_edge_of_a_linear_or_power_drop(
        p, k, x1, x2, tol):
    """The bracket holds the edge for both families of drop, however
    steep and however far the failures are from it."""
    res = 0.01
    cap = 1e6
    for drop, edge in ((lambda a: _power(cap, p, a),
                        cap * (1 / (1 - tol)) ** (1 / (1 + p))),
                       (lambda a: _linear(cap, k, a),
                        cap * (1 + k) / (1 - tol + k))):
        a1, a2 = cap * x1, cap * x1 * x2
        f1, f2 = drop(a1), drop(a2)
        if f1 >= a1 * (1 - tol) or f2 >= a2 * (1 - tol):
            continue                    # not failures
        low, high = search.edge_bracket([(a2, f2), (a1, f1)], tol, res)
        assert high is not None
        assert low * (1 - 1e-6) <= edge <= high * (1 + 1e-6), (low, high)
        assert high <= a1


@settings(max_examples=200, deadline=None)
@given(p=st.floats(0.3, 2.5), x=st.floats(1.1, 20.0))
def test_three_failures_pin_a_power_drop(p, x):
    cap, tol = 1e6, 0.001
    pts = [(cap * x * m, _power(cap, p, cap * x * m)) for m in (1, 1.5, 3)]
    low, high = search.edge_bracket(pts, tol, 0.01)
    edge = cap * (1 / (1 - tol)) ** (1 / (1 + p))
    assert low == high == pytest.approx(edge, rel=1e-3)


def test_one_failure_gives_only_the_flat_estimate():
    low, high = search.edge_bracket([(2e6, 1e5)], 0.001, 0.01)
    assert high is None and low == pytest.approx(1e5 / 0.999)


@settings(max_examples=150, deadline=None)
@given(cap=st.floats(1e3, 1e7), over=st.floats(1.0, 30.0),
       p=st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]),
       ceiling=st.sampled_from([None, 1.5, 4.0]),
       drift=st.sampled_from([0.0, 0.02]),
       tol=st.sampled_from([0.0, 0.001]),
       res=st.sampled_from([0.005, 0.01, 0.02]),
       budget=st.integers(2, 30), seed=st.integers(0, 1000))
def test_invariants_on_model_duts(cap, over, p, ceiling, drift, tol, res,
                                  budget, seed):
    """On any model DUT: the budget holds (so the search ends), every
    bound is a rate a trial really sent, the lower one a pass and the
    upper one a failure, and a converged bracket is within the
    resolution."""
    line = cap * over
    dut = SimulatedDut(cap, line, seed=seed, collapse_exponent=p,
                       gen_ceiling_pps=ceiling and cap * ceiling,
                       drift=drift)
    cfg = search.SearchConfig(loss_tolerance=tol, resolution=res,
                              max_trials=budget)
    r = search.search(dut.measure, line, cfg)
    assert r.trial_count <= budget
    passed = {t.achieved_pps for t in r.trials if t.passed(tol)}
    failed = {t.achieved_pps for t in r.trials if not t.passed(tol)}
    if r.rate_pps:
        assert r.rate_pps in passed and r.lower_pps == r.rate_pps
    if r.upper_pps is not None:
        assert r.upper_pps in failed
    if r.converged and r.upper_pps is not None:
        assert r.upper_pps - r.lower_pps <= res * r.upper_pps
        # The result passed at least twice: once, and its re-check.
        assert sum(t.achieved_pps == r.rate_pps and t.passed(tol)
                   for t in r.trials) >= 2


@pytest.mark.parametrize("p", [0.5, 1.0, 2.0])
def test_a_livelock_is_not_fooled_by_its_forwarded_rate(p):
    """At 10x overload this DUT forwards 3-100x under its capacity; the
    search still lands within the resolution in a handful of trials."""
    dut = SimulatedDut(1e6, 1e7, collapse_exponent=p, spurious=0.0,
                       seed=1)
    cfg = search.SearchConfig(loss_tolerance=0.001, resolution=0.01)
    r = search.search(dut.measure, 1e7, cfg)
    truth = dut.truth(0.001)
    assert r.converged and abs(r.rate_pps - truth) <= 0.01 * truth
    assert r.trial_count <= 7            # bisection: 9 or 10


def test_power_law_model_and_its_truth():
    dut = SimulatedDut(1e6, 1e7, collapse_exponent=2.0)
    assert dut.forwarded(1e7) == pytest.approx(1e4)
    assert dut.truth(0.001) == pytest.approx(1e6 / 0.999 ** (1 / 3),
                                             rel=1e-9)
    drifting = SimulatedDut(1e6, 1e7, drift=0.02)
    lo, hi = drifting.truth_band(0.0)
    assert (lo, hi) == (pytest.approx(0.98e6), pytest.approx(1e6))


@pytest.mark.parametrize("bad", [dict(collapse_exponent=-1),
                                 dict(collapse_exponent=float("inf")),
                                 dict(drift=1.0), dict(drift=-0.1)])
def test_bad_model_is_refused(bad):
    with pytest.raises(ValueError):
        SimulatedDut(1e6, 1e7, **bad)


def test_benchmark_says_why_mlrsearch_is_missing(monkeypatch):
    from benchmarks import bench_rfc2544_search as bench
    monkeypatch.setitem(sys.modules, "MLRsearch", None)
    (_n1, f1, _w1), (_n2, f2, _w2), (name, fn, why) = bench.searchers()
    assert f1 and f2 and fn is None
    assert name.startswith("MLRsearch") and "pip install" in why
