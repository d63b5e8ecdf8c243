"""Throughput search: the highest rate whose loss stays within tolerance.

Pure: it only calls ``measure(rate_pps, duration) -> Trial``.

Every bound is the rate a trial really **sent** (``achieved_pps``), never
the rate it asked for: a generator that cannot send what it is asked
would otherwise turn "not sent" into "forwarded".

:func:`search` needs far fewer trials than bisection because failed
trials say more than "fail": the rate the DUT forwarded.

1. **The drop curve.**  For a failed trial at sent rate ``a`` the excess
   ``h(a) = a * (1 - tolerance) - forwarded(a)`` is positive; the
   throughput is where ``h`` reaches zero.  A DUT that forwards its
   capacity at any overload has slope ``1 - tolerance`` there, so one
   failure puts the edge at ``forwarded / (1 - tolerance)``.  A DUT in
   *receive livelock* (OVS-DPDK on AF_PACKET, kernel forwarding, a
   virtio path: every dropped frame still costs receive work) forwards
   less the harder it is pushed, 2-10x under its capacity at overload;
   ``h`` is then steeper and that estimate far too low.  The secant
   through the two failures nearest the edge finds it for either kind,
   and never goes below the one-failure estimate (a forwarded rate that
   fell with load can only mean the edge is higher).
2. **Two failures first.**  After the overload probe, the second trial
   goes well above the one-failure estimate, so that on a collapsing DUT
   it still fails and gives the secant its second point.  Then a trial
   just under the estimate and one just over it close the bracket.
3. **No creeping.**  A pass above the estimate disproves it; then the
   next trial bisects the bracket, whatever its width, until a new
   failure gives a new estimate.  Each trial is kept at least
   ``resolution / 8`` inside the bracket.
4. **Noise.**  A failed trial whose loss is barely over tolerance
   (*marginal*), or one that contradicts a pass at or above its rate
   (a noisy software path), is measured once more and the better of the
   two counts; the final rate is re-verified with full-length trials
   before it is reported, and a bound that a re-check overturns reopens
   the search.

:func:`bisection` is plain RFC 2544 binary search (bounded, like
:func:`search`, by what the first trial really sent), the baseline of
the benchmark.  Both stop when ``upper - lower <= resolution * upper``.
"""

from __future__ import annotations

from collections.abc import Callable
import dataclasses
import math

from nova_rdt.rfc2544.model import Trial

Measure = Callable[[float, float], Trial]

# Where the second trial goes, between the one-failure estimate and the
# first failure: high enough to fail on a DUT that forwards 2-10x under
# capacity at overload, far enough from the first failure for a steady
# secant; and at least SECOND_GAP under the first failure (no closer:
# a DUT whose capacity lies just under it must still fail there).
SECOND_POINT = 0.6
SECOND_GAP = 0.2
# With nothing forwarded at all, step down by this factor, not to zero.
FLOOR = 1 / 64
# A trial meant to pass goes PASS_MARGIN x resolution under the
# estimate; one meant to fail and close the bracket, FAIL_AIM x
# resolution over it.  Tuned on benchmarks.bench_rfc2544_search.
PASS_MARGIN = 0.3
FAIL_AIM = 0.5
# Where a bisection step goes inside the bracket (0.5: the middle).
BISECT_POINT = 0.5


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    loss_tolerance: float = 0.0        # 0: RFC 2544 proper; 0.001: 0.1%
    resolution: float = 0.005          # relative width of the final bracket
    trial_duration: float = 10.0       # seconds, full-length trials
    probe_duration: float = 1.0        # the overload probe may be shorter
    max_trials: int = 40
    verify_repeats: int = 1            # full-length re-checks of the result
    marginal_loss: float = 1e-4        # over tolerance by at most this
    min_rate_pps: float = 1.0

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or \
                    not math.isfinite(v):
                raise ValueError(f"{f.name} must be a finite number")
        if not 0 <= self.loss_tolerance < 1:
            raise ValueError("loss_tolerance must be in [0, 1)")
        if not 0 < self.resolution < 1:
            raise ValueError("resolution must be in (0, 1)")
        if self.trial_duration <= 0:
            raise ValueError("trial_duration must be positive")
        if self.probe_duration <= 0:
            raise ValueError("probe_duration must be positive")
        if not isinstance(self.max_trials, int) or self.max_trials < 2:
            raise ValueError("max_trials must be an integer of at least 2")
        if not isinstance(self.verify_repeats, int) or \
                self.verify_repeats < 0:
            raise ValueError("verify_repeats must be an integer >= 0")
        if not 0 <= self.marginal_loss < 1:
            raise ValueError("marginal_loss must be in [0, 1)")
        if self.min_rate_pps <= 0:
            raise ValueError("min_rate_pps must be positive")


@dataclasses.dataclass(frozen=True)
class SearchResult:
    rate_pps: float                    # sent rate of the highest pass
    achieved_pps: float                # the same: what was really sent
    forwarded_pps: float               # what the DUT forwarded there
    lower_pps: float
    upper_pps: float | None            # lowest failing sent rate
    trials: tuple[Trial, ...]
    converged: bool
    generator_limited: bool
    note: str = ""
    offered_pps: float = 0.0           # what that trial asked for

    @property
    def trial_count(self) -> int:
        return len(self.trials)

    @property
    def throughput_pps(self) -> float:
        """RFC 2544 throughput: forwarded at the highest passing rate."""
        return self.forwarded_pps


class _Budget(Exception):
    pass


class _Run:
    def __init__(self, measure: Measure, cfg: SearchConfig):
        self.measure = measure
        self.cfg = cfg
        self.trials: list[Trial] = []

    def trial(self, rate: float, duration: float | None = None) -> Trial:
        if len(self.trials) >= self.cfg.max_trials:
            raise _Budget
        t = self.measure(rate, duration or self.cfg.trial_duration)
        self.trials.append(t)
        return t

    def marginal(self, t: Trial) -> bool:
        tol = self.cfg.loss_tolerance
        return (t.loss_ratio <= tol + self.cfg.marginal_loss
                and t.forwarded_pps >= t.achieved_pps * (1 - 10 * (
                    tol + self.cfg.marginal_loss)))

    def classify(self, rate: float) -> tuple[bool, Trial]:
        """Pass or fail at ``rate``; a marginal failure gets one more go."""
        t = self.trial(rate)
        if t.passed(self.cfg.loss_tolerance):
            return True, t
        if self.marginal(t) and len(self.trials) < self.cfg.max_trials:
            again = self.trial(rate)
            if again.passed(self.cfg.loss_tolerance):
                return True, again
            return False, min(t, again, key=lambda x: x.forwarded_pps)
        return False, t


class _Bracket:
    """Passing and failing trials by sent rate; the newest trial wins a
    contradiction (a pass at or above a failure, or the reverse)."""

    def __init__(self, tol: float):
        self.tol = tol
        self.passes: list[Trial] = []
        self.fails: list[Trial] = []
        self.streak = 0                # failures since the last pass

    def add(self, ok: bool, t: Trial) -> None:
        a = t.achieved_pps
        self.streak = 0 if ok else self.streak + 1
        if ok:
            self.fails = [f for f in self.fails if f.achieved_pps > a]
            self.passes.append(t)
        else:
            self.passes = [p for p in self.passes if p.achieved_pps < a]
            self.fails.append(t)

    @property
    def lo(self) -> Trial | None:
        return max(self.passes, key=lambda t: t.achieved_pps, default=None)

    @property
    def hi(self) -> Trial | None:
        return min(self.fails, key=lambda t: t.achieved_pps, default=None)

    def closed(self, res: float) -> bool:
        lo, hi = self.lo, self.hi
        return (lo is not None and hi is not None and
                hi.achieved_pps - lo.achieved_pps <= res * hi.achieved_pps)

    def excess(self, t: Trial) -> float:
        return t.achieved_pps * (1 - self.tol) - t.forwarded_pps

    def estimate(self, res: float) -> float:
        """Where the drop curve of the failures reaches the tolerance."""
        fs = sorted(self.fails, key=lambda t: t.achieved_pps)
        near = fs[0]
        a1 = near.achieved_pps
        lower = min(near.forwarded_pps / (1 - self.tol), a1)
        far = next((t for t in fs[1:]
                    if t.achieved_pps >= a1 * (1 + 2 * res)), None)
        if far is None:
            return lower
        slope = (self.excess(far) - self.excess(near)) / \
            (far.achieved_pps - a1)
        if slope <= 1 - self.tol:
            return lower
        return min(max(a1 - self.excess(near) / slope, lower), a1)


def _next_rate(b: _Bracket, res: float) -> float:
    lo, hi = b.lo, b.hi
    top = hi.achieved_pps
    est = b.estimate(res)
    if lo is None:
        if len(b.fails) == 1:
            # Second trial: aim for a second failure (see SECOND_POINT).
            rate = max(est + SECOND_POINT * (top - est),
                       top * (1 - SECOND_GAP))
            if rate >= top * (1 - res):
                rate = est * (1 - PASS_MARGIN * res)
        else:
            rate = est * (1 - PASS_MARGIN * res)
            if b.streak > 3:
                # Trials meant to pass keep failing: the forwarded rate
                # overstates the edge (loss that is not from capacity,
                # as on a noisy software path).  Step down in growing
                # steps instead of creeping.
                rate = min(rate, top * (1 - min(0.5, res * 2 ** (
                    b.streak - 3))))
        return max(rate, top * FLOOR)
    bottom = lo.achieved_pps
    if est < bottom:
        # The estimate is disproven (a pass above it): bisect.
        rate = bottom + BISECT_POINT * (top - bottom)
    else:
        # A failure up to ``reach`` closes the bracket (less a little for
        # the generator's rate error).
        reach = bottom * (1 + 0.9 * res)
        if est * (1 + res / 4) <= reach:
            rate = min(reach, est * (1 + FAIL_AIM * res))
        else:
            rate = est * (1 - PASS_MARGIN * res)
    edge = res / 8 * bottom
    return min(max(rate, bottom + edge), top - edge)


def search(measure: Measure, max_rate_pps: float,
           cfg: SearchConfig = SearchConfig()) -> SearchResult:
    run = _Run(measure, cfg)
    tol, res = cfg.loss_tolerance, cfg.resolution
    b = _Bracket(tol)
    note = ""
    try:
        probe = run.trial(max_rate_pps, cfg.probe_duration)
        if probe.passed(tol):
            ok, t = run.classify(max_rate_pps)
            if ok:
                # Both passed at the maximum: the DUT kept up with the
                # most the generator sent in either.
                best = max((probe, t), key=lambda x: x.achieved_pps)
                return _result(run, best, None, True, True,
                               "no loss at the generator's maximum rate")
            b.add(False, t)
        else:
            b.add(False, probe)
        verified = False
        while True:
            if b.closed(res):
                if verified:
                    break
                # Re-check the result at full length before reporting it.
                lo = b.lo
                checks = [run.classify(lo.achieved_pps)
                          for _ in range(cfg.verify_repeats)]
                for ok, t in checks:
                    if not ok and lo in b.passes:
                        b.passes.remove(lo)     # the re-check overturns it
                    b.add(ok, t)
                verified = all(ok for ok, _ in checks)
                continue
            if b.hi is None:
                # Every failure was overturned by a later pass: go up.
                lo = b.lo
                if lo.offered_pps >= max_rate_pps:
                    return _result(run, lo, None, True, True,
                                   "no loss at the generator's maximum "
                                   "rate")
                rate = min(lo.achieved_pps * (1 + 4 * res), max_rate_pps)
            else:
                rate = _next_rate(b, res)
            if rate < cfg.min_rate_pps:
                note = "no passing rate above min_rate_pps"
                break
            ok, t = run.classify(rate)
            lo = b.lo
            if not ok and lo is not None and \
                    t.achieved_pps <= lo.achieved_pps:
                # A failure at or under a rate that passed contradicts
                # it: measure once more before either is thrown away.
                ok, t = run.classify(rate)
            b.add(ok, t)
            verified = False
    except _Budget:
        note = f"stopped after max_trials={cfg.max_trials}"
    return _result(run, b.lo, b.hi, b.closed(res) and not note, False, note)


def _result(run, lo, hi, converged, at_max, note) -> SearchResult:
    # Limited only if nothing sent above the highest pass failed: a
    # short sender inside a closed bracket changes no conclusion.
    limited = lo is not None and (at_max or (lo.generator_limited
                                             and hi is None))
    if limited and lo is not None:
        note = (f"generator-limited: {lo.achieved_pps:,.0f} pps was all "
                f"the generator sent, within tolerance, so the DUT's "
                f"capacity is at least {lo.achieved_pps:,.0f} pps"
                + (f" ({note})" if note and "maximum rate" not in note
                   else ""))
    return SearchResult(
        rate_pps=lo.achieved_pps if lo else 0.0,
        achieved_pps=lo.achieved_pps if lo else 0.0,
        forwarded_pps=lo.forwarded_pps if lo else 0.0,
        lower_pps=lo.achieved_pps if lo else 0.0,
        upper_pps=hi.achieved_pps if hi else None,
        trials=tuple(run.trials), converged=converged,
        generator_limited=limited, note=note,
        offered_pps=lo.offered_pps if lo else 0.0)


def bisection(measure: Measure, max_rate_pps: float,
              cfg: SearchConfig = SearchConfig()) -> SearchResult:
    """Plain RFC 2544 binary search over [0, sent at max]: the baseline."""
    run = _Run(measure, cfg)
    tol, res = cfg.loss_tolerance, cfg.resolution
    lo: Trial | None = None
    hi: Trial | None = None
    note = ""
    try:
        t = run.trial(max_rate_pps)
        if t.passed(tol):
            return _result(run, t, None, True, True,
                           "no loss at the generator's maximum rate")
        hi = t
        lo_rate, hi_rate = 0.0, t.achieved_pps
        while hi_rate - lo_rate > res * hi_rate:
            rate = (lo_rate + hi_rate) / 2
            t = run.trial(rate)
            if t.passed(tol):
                lo, lo_rate = t, rate
            else:
                hi, hi_rate = t, rate
    except _Budget:
        note = f"stopped after max_trials={cfg.max_trials}"
    return _result(run, lo, hi, not note and lo is not None, False, note)
