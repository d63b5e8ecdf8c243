"""Throughput search: the highest rate whose loss stays within tolerance.

Pure: it only calls ``measure(rate_pps, duration) -> Trial``.

:func:`search` borrows the two ideas that let FD.io's MLRsearch and
NFVbench beat plain bisection:

1. **Start from what the DUT forwarded at overload.**  The first trial
   offers the maximum rate; if frames are lost, the rate the DUT did
   forward is an estimate of its capacity, usually within a few per
   cent.  The next trial goes there, and an *external search* steps
   away from it with growing steps (``resolution``, 2×, 4×, ...) until
   the edge is bracketed, so the interval is narrow before any bisection.
2. **Handle noise near the edge.**  A failed trial whose loss is barely
   over tolerance (*marginal*: within ``marginal_loss`` and forwarding
   nearly all it was offered) is measured once more and the better of the
   two counts, so one transient burst cannot drag the result down; and the
   final rate is re-verified with full-length trials before it is
   reported.  A bound that a re-check overturns reopens the search.

:func:`bisection` is plain RFC 2544 binary search, the baseline of the
benchmark.  Both stop when ``upper - lower <= resolution * upper``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from nova_rdt.rfc2544.model import Trial

Measure = Callable[[float, float], Trial]


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
        if not 0 <= self.loss_tolerance < 1:
            raise ValueError("loss_tolerance must be in [0, 1)")
        if not 0 < self.resolution < 1:
            raise ValueError("resolution must be in (0, 1)")
        if self.trial_duration <= 0 or self.probe_duration <= 0:
            raise ValueError("trial durations must be positive")
        if self.max_trials < 2:
            raise ValueError("max_trials must be at least 2")


@dataclasses.dataclass(frozen=True)
class SearchResult:
    rate_pps: float                    # highest offered rate that passed
    achieved_pps: float                # what the generator really sent there
    forwarded_pps: float
    lower_pps: float
    upper_pps: float | None            # lowest failing rate (None: none)
    trials: tuple[Trial, ...]
    converged: bool
    generator_limited: bool
    note: str = ""

    @property
    def trial_count(self) -> int:
        return len(self.trials)


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
                and t.forwarded_pps >= t.offered_pps * (1 - 10 * (
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


def search(measure: Measure, max_rate_pps: float,
           cfg: SearchConfig = SearchConfig()) -> SearchResult:
    run = _Run(measure, cfg)
    tol, res = cfg.loss_tolerance, cfg.resolution
    lo: Trial | None = None            # highest pass
    hi: Trial | None = None            # lowest fail
    note = ""
    try:
        probe = run.trial(max_rate_pps, cfg.probe_duration)
        if probe.passed(tol):
            ok, t = run.classify(max_rate_pps)
            if ok:
                return _result(run, t, None, True, True,
                               "no loss at the generator's maximum rate")
            hi = t
        else:
            hi = probe
        # The external search starts from the rate the DUT forwarded.
        step = res
        guess = max(_below(hi, tol, step), cfg.min_rate_pps)
        verified = False
        while True:
            if lo is not None and hi is not None and \
                    hi.offered_pps - lo.offered_pps <= res * hi.offered_pps:
                if verified:
                    break
                # Re-check the result at full length before reporting it.
                checks = [run.classify(lo.offered_pps)
                          for _ in range(cfg.verify_repeats)]
                if all(ok for ok, _ in checks):
                    verified = True
                    continue
                hi = next(t for ok, t in checks if not ok)
                lo = None
                step = res
                guess = _below(hi, tol, step)
                continue
            if lo is None:
                rate = guess
            elif hi is None:
                rate = min(lo.offered_pps * (1 + step), max_rate_pps)
                step *= 2
            else:
                rate = _inside(lo, hi, tol, res)
            if rate < cfg.min_rate_pps:
                note = "no passing rate above min_rate_pps"
                break
            ok, t = run.classify(rate)
            if ok:
                lo = t
                if hi is not None and lo.offered_pps >= hi.offered_pps:
                    hi = None        # an earlier failure was overturned
            else:
                hi = t
                if lo is not None and lo.offered_pps >= hi.offered_pps:
                    lo = None
                if lo is None:
                    step *= 2
                    guess = _below(hi, tol, step)
    except _Budget:
        note = f"stopped after max_trials={cfg.max_trials}"
    converged = (lo is not None and hi is not None
                 and hi.offered_pps - lo.offered_pps
                 <= res * hi.offered_pps and not note)
    return _result(run, lo, hi, converged, False, note)


def _inside(lo: Trial, hi: Trial, tol: float, res: float) -> float:
    """The next rate inside the bracket: where the failing trial's
    forwarded rate puts the edge, but at least ``resolution`` above the
    pass (a failure there closes the search) and out of the top quarter
    (so a bracket far wider than the estimate still shrinks)."""
    width = hi.offered_pps - lo.offered_pps
    estimate = max(hi.forwarded_pps / (1 - tol),
                   lo.offered_pps * (1 + res))
    return min(max(estimate, lo.offered_pps + min(width / 4,
                                                  res * lo.offered_pps)),
               hi.offered_pps - width / 4)


def _below(hi: Trial, tol: float, step: float) -> float:
    """External search down from a failure: just under the rate it
    forwarded (its capacity then), or ``step`` under what it was
    offered, whichever is lower."""
    return min(hi.forwarded_pps / (1 - tol), hi.offered_pps) * (1 - step / 4)


def _result(run, lo, hi, converged, at_max, note) -> SearchResult:
    limited = at_max or any(t.generator_limited for t in run.trials
                            if lo is not None and t is lo)
    return SearchResult(
        rate_pps=lo.offered_pps if lo else 0.0,
        achieved_pps=lo.achieved_pps if lo else 0.0,
        forwarded_pps=lo.forwarded_pps if lo else 0.0,
        lower_pps=lo.offered_pps if lo else 0.0,
        upper_pps=hi.offered_pps if hi else None,
        trials=tuple(run.trials), converged=converged,
        generator_limited=limited, note=note)


def bisection(measure: Measure, max_rate_pps: float,
              cfg: SearchConfig = SearchConfig()) -> SearchResult:
    """Plain RFC 2544 binary search over [0, max]: the baseline."""
    run = _Run(measure, cfg)
    tol, res = cfg.loss_tolerance, cfg.resolution
    lo_rate, hi_rate = 0.0, max_rate_pps
    lo: Trial | None = None
    hi: Trial | None = None
    note = ""
    try:
        t = run.trial(max_rate_pps)
        if t.passed(tol):
            return _result(run, t, None, True, True,
                           "no loss at the generator's maximum rate")
        hi = t
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
