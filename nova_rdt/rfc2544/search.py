"""Throughput search: the highest rate whose loss stays within tolerance.

Pure: it only calls ``measure(rate_pps, duration) -> Trial``, and
chooses both.

Every bound is the rate a trial really **sent** (``achieved_pps``), never
the rate it asked for: a generator that cannot send what it is asked
would otherwise turn "not sent" into "forwarded".

:func:`search` needs far fewer trials than bisection because failed
trials say more than "fail": the rate the DUT forwarded.  What they say
depends on how the DUT behaves past its capacity, and the search never
bets on one behaviour:

1. **The drop curve.**  A DUT that forwards its capacity at any overload
   puts the edge at ``forwarded / (1 - tolerance)`` after one failure.
   A DUT in *receive livelock* (kernel forwarding, OVS on AF_PACKET, a
   virtio path: every dropped frame still costs receive work) forwards
   less the harder it is pushed, 3-100x under its capacity at 10x
   overload, and that estimate is then an order of magnitude too low.
   So one failure gives only a *lower* end for the edge; two failures
   give its bracket: the excess ``a * (1 - tolerance) - forwarded(a)``
   extended along its secant, and the forwarded rate extended along its
   secant in log-log (a power of the overload).  The first is exact
   where forwarding falls linearly and low where it falls as a power;
   the second the reverse; so the edge of any drop curve between the
   two (convex, and concave in log-log) lies between them
   (:func:`edge_bracket`).
2. **Aim, then verify.**  The trial after the overload probe goes just
   over the one-failure estimate: a DUT that forwards its capacity fails
   there, next to the edge, and one pass closes the bracket.  A
   collapsing DUT passes, and the next trial goes high enough (as if
   forwarding fell as the cube of the overload) to fail again and give
   the second point.  Then a trial goes just under the bracket's upper
   end: it passes if the drop is a power of the overload, and otherwise
   fails closer to the edge, which narrows the bracket again.  Whenever
   the edge is expected within a resolution of a bound, the trial goes
   where a pass (or a failure) closes the search.
3. **No creeping.**  A pass above the whole bracket disproves the
   model: the next trials step up from it, in doubling steps after the
   first few, never past the middle of what is left.  Trials meant to
   pass that keep failing step down in doubling steps.
4. **A capacity that moves.**  The capacity is taken to move between
   trials (a neighbour's load, heat, a noisy host) once a trial has
   gone against the estimate (a pass where it said fail, or the
   reverse, or a failed re-check), once a pass lies above the whole
   bracket, or once two failures disagree: the one sent less forwarded
   less, which no drop curve does.  The forwarded rate of the last
   failure then says little about the next trial, so the search walks a
   staircase from the last trial instead: up from a pass, down from a
   failure, each step as long as still closes the bracket with that
   trial (half that while the failures disagree by less than a
   resolution: a failure may then be just under the edge).
5. **Verify.**  The result is the highest rate that two full-length
   trials sustained: itself, and a re-check at or above it
   (``verify_repeats`` re-checks in all).  Where the capacity moves, the
   re-check goes just above the pass: a pass there backs it as well as
   one at it would, and a failure there is a failure closer to the
   edge, not a pass thrown away; one more pass a step under it closes
   the search, backed by the pass above.  Elsewhere the re-check is at
   the rate itself, and a re-check that fails overturns it.  A failed
   trial whose loss is barely over tolerance (*marginal*), or one that
   contradicts a pass at or above its rate (a noisy software path), is
   measured once more and the better of the two counts.

6. **Short trials find the edge, full-length trials prove it.**  A
   trial's verdict depends on its length: a deep buffer passes a short
   trial at a rate a full-length one fails, a warm-up fails it at a
   rate a full-length one passes.  So exploratory trials
   (``initial_trial_duration``) only aim; the result needs
   ``verify_repeats + 1`` full-length passes, and the upper bound a
   *sure* failure: a full-length one, or a shorter one that lost more
   frames than a whole full-length trial may (the full-length trial
   loses them in its first seconds too, if the DUT starts every trial
   alike), never by a marginal few (a transient burst need not come
   back).  The failure next to the edge is therefore measured only as
   long as it must be to be sure, aimed where its loss makes that
   short.  Where durations disagree the longer trial wins and the
   search logs it: a longer pass where a short trial failed is
   confirmed at full length and explored above (twice, and short
   failures become suspect: a warm-up); a longer failure that
   forwarded less than a shorter one is a DUT that holds frames, whose
   line through both gives the full-length edge (:func:`_held`).

:func:`search_goals` serves several RFC 9971 goals (:class:`SearchGoal`)
from shared trials.  :func:`bisection` is plain RFC 2544 binary search
(bounded, like :func:`search`, by what the first trial really sent),
the baseline of the benchmark.  Both stop when
``upper - lower <= resolution * upper``.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
import dataclasses
import logging
import math

from nova_rdt.rfc2544.model import Trial

Measure = Callable[[float, float], Trial]
LOG = logging.getLogger(__name__)

# The steepest collapse the second failure is aimed for: forwarding that
# falls as the overload to this power.  The livelock models of the
# benchmark span 0.5-2 (3-100x under capacity at 10x overload); 3
# leaves room, and a DUT steeper still passes there, which moves the
# next such trial up.
STEEPEST = 3.0
# With nothing forwarded at all, step down by this factor, not to zero.
FLOOR = 1 / 64
# A trial meant to pass goes PASS_MARGIN x resolution under the edge's
# estimate; the trial after the probe goes FAIL_AIM x resolution over
# the one-failure estimate; a trial meant to close the bracket goes
# CLOSE x resolution inside its far bound (under 1, so that a bound set
# by a noisy trial still leaves the result within the resolution).
# A trial is aimed at closing with a pass when the estimate lies within
# NEAR resolutions under the failure (NOISE once the estimate has been
# wrong).  Tuned on benchmarks.bench_rfc2544_search.
PASS_MARGIN = 0.3
FAIL_AIM = 0.5
CLOSE = 0.8
ONE_FAIL_PASS = 0.6
# A failure that forwarded within GENTLE resolutions (plus the
# tolerance) of what it sent only barely failed.
GENTLE = 0.5
# Where the capacity moves between trials, the search walks a staircase
# instead: STEP x resolution from the last trial (up from a pass, down
# from a failure), as far as still closes the bracket with it, once the
# capacity is seen to move by MOVED resolutions or more; NOISY_CLOSE x
# resolution while it is only seen to move less (a failure may then be
# just under the edge, and a longer step would land more than a
# resolution under it).  Steps up double after RISES passes in a row,
# and steps down after STREAK failures (trials that keep going against
# the estimate: loss that is not from capacity).
STEP = 0.9
NOISY_CLOSE = 0.5
MOVED = 1.0
RISES = 2
STREAK = 5
NEAR = 1.0
NOISE = 4.0
# Failures this close (relative, in resolutions) are one point for the
# secants: their difference is mostly noise.
SPREAD = 2.0
# A short failure that is not yet sure (see _Run.sure) is re-measured
# long enough to lose SURE x what a full-length trial may, at its loss
# ratio; past LONGEST x the full-length duration, a full-length trial
# costs little more and needs no prediction.
SURE = 1.5
# A short failure is sure when it lost SURE_LOSS x what a full-length
# trial may lose in all (more than 1 would only guard an upper bound
# against the jitter of a trial at the edge, where a bound within the
# resolution of it is right anyway).
SURE_LOSS = 1.0
# ... and SURE_LOSS_DOUBTED x once a longer trial has passed where a
# short one failed (a warm-up's loss, all of it in a trial's first
# seconds, moves with the capacity's jitter by tens of per cent).
SURE_LOSS_DOUBTED = 1.5
LONGEST = 0.8
# The trial after the probe, aimed at a sure failure, goes AIM_SURE x
# resolution over the one-failure estimate (a higher loss ratio there
# makes the trial shorter); the full-length candidate goes FULL_MARGIN x
# resolution under the lowest sure failure (a full-length failure costs
# a minute; a result lower within the resolution costs nothing).
AIM_SURE = 0.6
CLOSE_SURE = 0.99
# The full-length candidate goes CAND_MARGIN x resolution under the
# edge a sure failure's forwarded rate gives: a full-length failure
# there costs a minute.
CAND_MARGIN = 0.4
# The most the candidate is moved up to close with a failure that came
# out higher than aimed, in resolutions.
NUDGE = 0.25
FULL_MARGIN = 0.6
# The full-length phase shortens a trial meant to fail only where the
# drop curve puts its loss at SHORTEN x the tolerance or more.
SHORTEN = 4.0
# Two failures of different durations that disagree by DURATION_GAP
# (relative) or more, the longer one lower, are a DUT that holds frames.
DURATION_GAP = 0.05
# Exploring stops at a sure failure whose forwarded rate puts the edge
# within NEAR_SURE resolutions under it.
NEAR_SURE = 1.5


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    loss_tolerance: float = 0.0        # 0: RFC 2544 proper; 0.001: 0.1%
    resolution: float = 0.005          # relative width of the final bracket
    trial_duration: float = 10.0       # seconds, full-length trials
    probe_duration: float = 1.0        # the overload probe may be shorter
    # Exploratory trials (0: as long as the full-length ones, no
    # exploration; longer than those: the full-length duration).
    initial_trial_duration: float = 1.0
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
        if self.initial_trial_duration < 0:
            raise ValueError("initial_trial_duration must be >= 0")
        if not isinstance(self.max_trials, int) or self.max_trials < 2:
            raise ValueError("max_trials must be an integer of at least 2")
        if not isinstance(self.verify_repeats, int) or \
                self.verify_repeats < 0:
            raise ValueError("verify_repeats must be an integer >= 0")
        if not 0 <= self.marginal_loss < 1:
            raise ValueError("marginal_loss must be in [0, 1)")
        if self.min_rate_pps <= 0:
            raise ValueError("min_rate_pps must be positive")

    @property
    def exploration_duration(self) -> float:
        """Seconds per exploratory trial: never longer than a full one."""
        d = self.initial_trial_duration
        return self.trial_duration if d <= 0 else min(d,
                                                      self.trial_duration)


@dataclasses.dataclass(frozen=True)
class SearchResult:
    rate_pps: float                    # sent rate of the result: the
    #                                    highest pass re-checks back
    achieved_pps: float                # the same: what was really sent
    forwarded_pps: float               # what the DUT forwarded there
    lower_pps: float
    upper_pps: float | None            # lowest failing sent rate
    trials: tuple[Trial, ...]
    converged: bool
    generator_limited: bool
    note: str = ""
    offered_pps: float = 0.0           # what that trial asked for

    log: tuple[str, ...] = ()          # where durations disagreed

    @property
    def trial_count(self) -> int:
        return len(self.trials)

    @property
    def trial_seconds(self) -> float:
        """Seconds of traffic the search sent (settling not included)."""
        return sum(t.duration for t in self.trials)

    @property
    def throughput_pps(self) -> float:
        """RFC 2544 throughput: what the DUT forwarded at the result."""
        return self.forwarded_pps


class _Budget(Exception):
    pass


class _Run:
    def __init__(self, measure: Measure, cfg: SearchConfig):
        self.measure = measure
        self.cfg = cfg
        self.trials: list[Trial] = []
        self.spent = 0                 # trials of this search's own
        self.log: list[str] = []
        # Cleared once a shortened trial passed where it was to fail.
        self.trust_short = True
        # Raised once a longer trial passed where a short one failed.
        self.sure_loss = SURE_LOSS

    def trial(self, rate: float, duration: float | None = None) -> Trial:
        if self.spent >= self.cfg.max_trials:
            raise _Budget
        t = self.measure(rate, duration or self.cfg.trial_duration)
        self.trials.append(t)
        self.spent += 1
        return t

    def say(self, text: str) -> None:
        LOG.info("%s", text)
        self.log.append(text)

    def sure(self, t: Trial) -> bool:
        """Whether a failure proves a full-length trial at its rate fails:
        it is one, or it lost more frames than a full-length trial may
        lose in all (which then loses them in its first seconds), by
        SURE_LOSS."""
        final = self.cfg.trial_duration
        # A marginal failure is not sure however short: a transient
        # burst of a few frames need not come back in the longer trial.
        return t.duration >= final or (not self.marginal(t) and t.lost > (
            self.sure_loss * self.cfg.loss_tolerance * t.achieved_pps *
            final))

    def sure_duration(self, t: Trial) -> float:
        """How long a trial at a short failure's rate must be to lose, at
        the same loss ratio, SURE x what a full-length trial may; a
        full-length one if that is most of one."""
        return self.sure_duration_at(t.loss_ratio)

    def sure_duration_at(self, loss_ratio: float) -> float:
        """The same for a loss ratio expected."""
        final = self.cfg.trial_duration
        ratio = max(loss_ratio, 1e-12)
        d = SURE * self.cfg.loss_tolerance * final / ratio
        d = max(d, self.cfg.exploration_duration)
        return final if d > LONGEST * final else d

    def marginal(self, t: Trial) -> bool:
        tol = self.cfg.loss_tolerance
        return (t.loss_ratio <= tol + self.cfg.marginal_loss
                and t.forwarded_pps >= t.achieved_pps * (1 - 10 * (
                    tol + self.cfg.marginal_loss)))

    def classify(self, rate: float, duration: float | None = None
                 ) -> tuple[bool, Trial]:
        """Pass or fail at ``rate``; a marginal failure gets one more go."""
        t = self.trial(rate, duration)
        if t.passed(self.cfg.loss_tolerance):
            return True, t
        if self.marginal(t) and self.spent < self.cfg.max_trials:
            again = self.trial(rate, duration)
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
        self.rises = 0                 # passes since the last failure
        self.surprises = 0             # trials against the estimate
        self.failed: list[Trial] = []  # every failure, overturned or not
        # Set when trials shorter than this are known to disagree with
        # ones this long: their forwarded rates then say nothing of the
        # drop curve at this length.
        self.curve_duration = 0.0

    def add(self, ok: bool, t: Trial) -> None:
        a = t.achieved_pps
        self.streak = 0 if ok else self.streak + 1
        self.rises = self.rises + 1 if ok else 0
        if ok:
            self.fails = [f for f in self.fails if f.achieved_pps > a]
            self.passes.append(t)
        else:
            self.passes = [p for p in self.passes if p.achieved_pps < a]
            self.fails.append(t)
            self.failed.append(t)

    def spread(self, res: float = 0.0) -> float:
        """How far the capacity moved between failures, relative: the
        most a failure forwarded under one that was sent more.  A DUT
        whose forwarding only falls with the load shows none."""
        fs = sorted(self.failed, key=lambda t: t.achieved_pps)
        if self.curve_duration:
            # Once lengths are known to matter, a failure that barely
            # failed says where a slowly growing loss crosses the
            # tolerance (a warm-up's), not what the capacity was.
            fs = [t for t in fs if t.forwarded_pps < t.achieved_pps * (
                1 - self.tol - GENTLE * res)]
        # Once lengths are known to matter, only trials of one length
        # compare: a longer trial forwards less than a short one through
        # a buffer, more through a warm-up, and neither is the capacity
        # moving.
        return max((1 - lo.forwarded_pps / hi.forwarded_pps
                    for i, lo in enumerate(fs) for hi in fs[i + 1:]
                    if hi.forwarded_pps > 0 and (
                        not self.curve_duration or
                        abs(hi.duration - lo.duration) <= 0.1 *
                        hi.duration)),
                   default=0.0)

    def moving(self, res: float) -> bool:
        """Whether two failures say the capacity moved between them."""
        return self.spread(res) >= MOVED * res

    @property
    def lo(self) -> Trial | None:
        return max(self.passes, key=lambda t: t.achieved_pps, default=None)

    @property
    def hi(self) -> Trial | None:
        return min(self.fails, key=lambda t: t.achieved_pps, default=None)

    def backed(self, n: int) -> Trial | None:
        """The highest pass with ``n`` passes at or above it (itself
        included): a rate the DUT sustained, or more, ``n`` times."""
        ps = sorted(self.passes, key=lambda t: t.achieved_pps, reverse=True)
        for p in ps:
            a = p.achieved_pps
            if sum(q.achieved_pps >= a or (
                    q.offered_pps >= a and not q.generator_limited)
                   for q in ps) >= n:
                return p
        return None

    def closes(self, lo: Trial | None, res: float) -> bool:
        hi = self.hi
        return (lo is not None and hi is not None and
                hi.achieved_pps - lo.achieved_pps <= res * hi.achieved_pps)

    def closed(self, res: float) -> bool:
        return self.closes(self.lo, res)

    def bracket(self, res: float) -> tuple[float, float | None]:
        """:func:`edge_bracket` of the failures: only the longest ones
        once shorter trials are known to say something else
        (``curve_duration``).  With none of those and a pass, (0, 0):
        nothing puts the edge anywhere above that pass."""
        fails = self.fails
        if self.curve_duration:
            fails = [t for t in fails if t.duration >= self.curve_duration]
            if not fails:
                if self.lo is not None:
                    return 0.0, 0.0
                fails = self.fails
        return edge_bracket([(t.achieved_pps, t.forwarded_pps)
                             for t in fails], self.tol, res)


def edge_bracket(fails: Sequence[tuple[float, float]], tol: float,
                 res: float) -> tuple[float, float | None]:
    """Where the drop curve through failed trials meets the tolerance.

    ``fails`` are (sent, forwarded) rates of failed trials.  Returns
    ``(low, high)``, both at most the lowest failure's sent rate:

    * one failure (or all within ``SPREAD`` resolutions of the lowest):
      ``high`` is None and ``low`` is the edge of a DUT that forwards its
      capacity at any overload, the lowest plausible edge;
    * two: the drop curve is taken as ``forwarded ** k`` linear in
      ``sent ** k`` (:func:`_edge`), and ``low``/``high`` are its edges
      for k = 1 (forwarding falls linearly) and k -> 0 (as a power of
      the overload): any curve between the two meets the tolerance
      between them;
    * three or more: the third point fixes ``k`` and both are its edge.
    """
    fs = sorted(fails)
    a1, f1 = fs[0]
    flat = min(max(f1, 0.0) / (1 - tol), a1)
    points = [fs[0]]
    for a, f in fs[1:]:
        if a >= points[-1][0] * (1 + SPREAD * res) and len(points) < 3:
            points.append((a, f))
    if len(points) < 2:
        return flat, None
    # Rates relative to the lowest failure: powers stay near 1.
    pts = [(a / a1, f / a1) for a, f in points]
    if len(pts) == 3 and all(f > 0 for _a, f in pts):
        k = _shape(pts)
        if k is not None:
            e = a1 * _edge(pts[0], pts[1], k, tol)
            e = min(max(e, flat), a1)
            return e, e
    ends = sorted(min(max(a1 * _edge(pts[0], pts[1], k, tol), flat), a1)
                  for k in (0.0, 1.0))
    return ends[0], ends[1]


def _bc(x: float, k: float) -> float:
    """Box-Cox: (x ** k - 1) / k, and log x at k = 0."""
    return math.log(x) if abs(k) < 1e-9 else (max(x, 0.0) ** k - 1) / k


# The drop-curve shapes a third failure may pick: k from -1 (steeper
# than any power of the overload) to 2 (a knee: forwarding holds, then
# falls fast).
SHAPES = [i / 10 for i in range(-10, 21)]


def _shape(pts: list[tuple[float, float]]) -> float | None:
    """The k for which three (sent, forwarded) points lie on one line of
    (sent ** k, forwarded ** k), or None if no k in SHAPES fits."""
    (a1, f1), (a2, f2), (a3, f3) = pts

    def gap(k):
        g = (_bc(f2, k) - _bc(f1, k)) / (_bc(a2, k) - _bc(a1, k))
        return g - (_bc(f3, k) - _bc(f1, k)) / (_bc(a3, k) - _bc(a1, k))

    gaps = [gap(k) for k in SHAPES]
    for i in range(len(SHAPES) - 1):
        if gaps[i] == 0:
            return SHAPES[i]
        if (gaps[i] < 0) != (gaps[i + 1] < 0):
            lo, hi, glo = SHAPES[i], SHAPES[i + 1], gaps[i]
            for _ in range(30):
                mid = (lo + hi) / 2
                gm = gap(mid)
                if (gm < 0) == (glo < 0):
                    lo, glo = mid, gm
                else:
                    hi = mid
            return (lo + hi) / 2
    return None


def _edge(p1: tuple[float, float], p2: tuple[float, float], k: float,
          tol: float) -> float:
    """Where the line of (sent ** k, forwarded ** k) through two failures
    meets forwarded = sent * (1 - tol), at or under the lower one; the
    flat estimate if forwarding does not fall with the load."""
    (a1, f1), (a2, f2) = p1, p2
    flat = max(f1, 0.0) / (1 - tol)
    if min(f1, f2) <= 0 and k <= 0:
        return a1                       # log(0): no bound from this shape
    slope = (_bc(f2, k) - _bc(f1, k)) / (_bc(a2, k) - _bc(a1, k))
    if slope >= 0 or flat >= a1:
        return min(flat, a1)

    def over(a):                        # > 0: a fails on the line
        return _bc(a * (1 - tol), k) - _bc(f1, k) - slope * (
            _bc(a, k) - _bc(a1, k))

    lo, hi = flat, a1
    if over(lo) >= 0:
        return lo
    for _ in range(50):
        mid = (lo + hi) / 2
        if over(mid) > 0:
            hi = mid
        else:
            lo = mid
    return lo


def _next_rate(b: _Bracket, res: float) -> tuple[float, bool | None]:
    """The next rate, and whether the estimate says it passes (None: no
    prediction)."""
    lo, hi = b.lo, b.hi
    top = hi.achieved_pps
    bottom = lo.achieved_pps if lo is not None else 0.0
    rate, expect = _aim(b, res, bottom, top)
    if lo is None:
        first = STREAK if _noisy(b, res) else 3
        if b.streak > first:
            # Trials meant to pass keep failing: the forwarded rate
            # overstates the edge (loss that is not from capacity, as on
            # a noisy software path).  Step down in growing steps
            # instead of creeping.
            rate = min(rate, top * (1 - min(0.5, res * 2 ** (
                b.streak - first))))
        if rate < top * FLOOR:
            return top * FLOOR, None
        return rate, expect
    edge = res / 8 * bottom
    inside = min(max(rate, bottom + edge), top - edge)
    return inside, expect if inside == rate else None


def _aim(b: _Bracket, res: float, bottom: float, top: float
         ) -> tuple[float, bool | None]:
    low, high = b.bracket(res)
    # The lowest pass, and the highest failure, that would close it.
    pass_close = top * (1 - CLOSE * res)
    fail_close = bottom * (1 + CLOSE * res)
    if bottom and high == 0.0:
        # No failure of this length says where the edge is: up from
        # the pass in doubling steps, never past the geometric middle.
        return min(bottom * (1 + res * 2 ** b.rises),
                   math.sqrt(bottom * top)), None
    if bottom and _gentle(b, res, 2 if b.curve_duration else 3):
        # Failures in a row that each barely failed (two, once shorter
        # trials have disagreed with longer ones; three otherwise): the
        # loss grows slowly past the edge (a warm-up's frames, lost
        # whatever the rate), and their forwarded rates put the edge
        # just under each of them in turn.  Halve the bracket instead.
        return (bottom + top) / 2, None
    if _noisy(b, res):
        # The capacity moves between trials (a neighbour's load, a noisy
        # host), so the forwarded rate of the last failure says little
        # about the next trial.  Step from the last trial instead: up
        # from a pass to where a failure closes the bracket, down from
        # a failure to where a pass does.
        near = low >= top * (1 - NOISE * res)
        if bottom and (b.rises or not near):
            return bottom / (1 - _step(b, res) * res * 2 ** max(
                b.rises - RISES, 0)), None
        if near:
            return _step_down(b, res), True
    if high is None:
        # One failure: the flat estimate is all it says.
        if not bottom:
            # A DUT that forwards its capacity fails just over it; a
            # collapsing one passes, which proves the collapse.
            rate = low * (1 + FAIL_AIM * res)
            if rate >= top * (1 - res):
                # The failure is next to the edge: a pass that closes
                # the bracket, but not as low as it may be (if a noisy
                # trial failed just under the edge, that would land a
                # resolution under it).
                return min(top * (1 - ONE_FAIL_PASS * res), max(
                    pass_close, low * (1 - PASS_MARGIN * res))), True
            return rate, None
        # Fail again, as high as the steepest drop expected needs: the
        # second point of the secants.
        rate = math.exp((math.log(max(low, bottom)) +
                         STEEPEST * math.log(top)) / (1 + STEEPEST))
        if rate <= bottom * (1 + 2 * res):
            rate = math.sqrt(bottom * top)
        return max(rate, fail_close), None
    if bottom and high <= bottom:
        # A pass above the whole bracket: the drop curve is not what the
        # secants say (or the capacity moved).  Step up from the pass,
        # in doubling steps after the first few, never past the middle
        # of the bracket.
        return min(bottom * (1 + CLOSE * res * 2 ** max(b.rises - 3, 0)),
                   (bottom + top) / 2), None
    low = max(low, bottom)
    if low >= top * (1 - NEAR * res):
        # A pass there closes it: just under the estimate, or as low as
        # still closes it if that is lower (the last failure may itself
        # have been a noisy trial under the edge).
        return max(pass_close, min(low * (1 - PASS_MARGIN * res),
                                   top * (1 - res / 8))), True
    if bottom and high <= fail_close:
        return fail_close, False       # a failure there closes it
    # Just under the upper end: exact for a power-law drop, and a
    # failure nearer the edge otherwise.
    rate = min(high * (1 - PASS_MARGIN * res), pass_close)
    return rate, True if low >= high * (1 - res / 8) else None


def _gentle(b: _Bracket, res: float, n: int) -> bool:
    """Whether the last ``n`` trials failed, each barely (forwarding
    within GENTLE resolutions, plus the tolerance, of what it sent)."""
    return b.streak >= n and len(b.failed) >= n and all(
        t.forwarded_pps >= t.achieved_pps * (1 - b.tol - GENTLE * res)
        for t in b.failed[-n:])


def _noisy(b: _Bracket, res: float) -> bool:
    """Whether the capacity is seen to move between trials: a trial
    went against the estimate, two failures disagree (the one sent less
    forwarded less), or a pass lies above the whole bracket the drop
    curve gives (no drop curve puts the edge there)."""
    if b.surprises or b.moving(res):
        return True
    if b.lo is None:
        return False
    high = b.bracket(res)[1]
    return high is not None and high <= b.lo.achieved_pps


def _recheck(b: _Bracket, res: float) -> float:
    """Where to re-check the highest pass, which closes the bracket."""
    lo, hi = b.lo.achieved_pps, b.hi.achieved_pps
    if not b.moving(res):
        return lo
    if hi > lo * (1 + res / 4):
        # Just above it: a pass there backs it as well as one at it
        # would, and a failure is one nearer the edge instead of a pass
        # thrown away.
        return lo * (1 + res / 8)
    # A failure just above it already: one step down from that
    # failure, where a pass is likelier, closes it (backed by the
    # highest pass).
    return _step_down(b, res)


def _step(b: _Bracket, res: float) -> float:
    """The staircase's step, in resolutions: as large as closes the
    bracket when the capacity moves by a resolution or more, half that
    when it moves less (a failure may be just under the edge)."""
    return STEP if b.moving(res) else NOISY_CLOSE


def _step_down(b: _Bracket, res: float) -> float:
    """Under the lowest failure, where a pass closes the bracket."""
    return b.hi.achieved_pps * (1 - _step(b, res) * res)


def _core(run: _Run, b: _Bracket, max_rate_pps: float, cfg: SearchConfig,
          duration: float, need: int, plan=None):
    """The search at one trial duration, from the bracket ``b`` (empty:
    it starts with the overload probe).  Returns ``(kind, trial)``:
    ``("closed", None)`` once ``need`` passes back a pass within the
    resolution of a failure, ``("max", trial)`` when the generator's
    maximum passed, ``("floor", None)`` under ``min_rate_pps``, and
    ``("stop", rate)`` when ``stop(b, rate, expect)`` says the next
    trial need not be run at this duration; ``plan(b, rate, expect)``
    may also move the trial or change its duration.  At the full-length
    duration, only full-length passes and sure failures enter ``b``: a
    shorter trial that passes, or fails short of sure, is run again at
    full length."""
    tol, res = cfg.loss_tolerance, cfg.resolution
    if not b.passes and not b.fails:
        probe = run.trial(max_rate_pps, min(cfg.probe_duration, duration))
        if probe.passed(tol):
            ok, t = run.classify(max_rate_pps, duration)
            if ok:
                # Both passed at the maximum: the DUT kept up with the
                # most the generator sent in either.
                return "max", max((probe, t), key=lambda x: x.achieved_pps)
            b.add(False, t)
        else:
            b.add(False, probe)
    while True:
        if b.closes(b.backed(need), res):
            hi = b.hi
            if duration < cfg.trial_duration or run.sure(hi):
                return "closed", None
            # The failure that closes the bracket is a shorter trial
            # (the probe) that proves nothing at full length: measure
            # its rate at full length.
            ok, t = run.classify(hi.achieved_pps, duration)
            if ok:
                run.say(f"a {hi.duration:g} s trial failed at "
                        f"{hi.achieved_pps:,.0f} pps, a {t.duration:g} s "
                        f"one passed: the longer one wins")
            b.fails.remove(hi)
            b.add(ok, t)
            continue
        lo, hi = b.lo, b.hi
        if hi is None:
            # Every failure was overturned by a later pass: go up.
            if lo.offered_pps >= max_rate_pps:
                return "max", lo
            rate = min(lo.achieved_pps * (1 + 4 * res), max_rate_pps)
            expect, verifying = None, False
        elif b.closed(res):
            # The highest pass closes the bracket, but too few
            # full-length passes back it: re-check it.
            rate, expect, verifying = _recheck(b, res), True, True
        else:
            rate, expect = _next_rate(b, res)
            verifying = False
        if rate < cfg.min_rate_pps:
            return "floor", None
        length = duration
        if plan is not None:
            planned = plan(b, rate, expect)
            if planned is None:
                return "stop", rate
            rate, length = planned
        ok, t = run.classify(rate, length)
        if duration >= cfg.trial_duration > length and (
                ok or not run.sure(t)):
            if ok:
                run.say(f"a {length:g} s trial passed at {rate:,.0f} pps "
                        f"where a failure was expected: only a "
                        f"{duration:g} s one can say")
                run.trust_short = False
                b.curve_duration = duration
            ok, t = run.classify(rate, duration)
            length = duration
        if expect is not None and ok != expect:
            b.surprises += 1
        lo = b.lo
        if not ok and lo is not None and \
                t.achieved_pps <= lo.achieved_pps:
            if verifying:
                b.passes.remove(lo)     # the re-check overturns it
            else:
                # A failure at or under a rate that passed contradicts
                # it: measure once more before either is thrown away.
                ok, t = run.classify(rate, length)
        b.add(ok, t)


def _explored(run: _Run, cfg: SearchConfig):
    """The exploration's plan for its next trial: ``(rate, duration)``,
    or None when exploring is done: a sure failure lies near the edge
    its forwarded rate gives, or the next trial is meant to pass and
    would close the bracket (it is then the full-length candidate).

    The trial after the overload probe is the one meant to fail just
    over the edge a DUT that forwards its capacity would have: it goes
    a little higher, and long enough for its failure to be sure (see
    ``_Run.sure``), so that it is the upper bound itself and not a
    short trial to be repeated longer."""
    res, tol = cfg.resolution, cfg.loss_tolerance
    short = cfg.exploration_duration

    def plan(b: _Bracket, rate: float, expect):
        hi = b.hi
        if hi is None:
            return rate, short
        top = hi.achieved_pps
        if run.sure(hi) and hi.forwarded_pps / (1 - tol) >= top * (
                1 - NEAR_SURE * res):
            return None
        if _held(b.fails) is not None:
            return None
        if expect and top - rate <= res * top:
            return None
        if tol and not b.passes and len(b.fails) == 1:
            low = b.bracket(res)[0]
            if low * (1 + FAIL_AIM * res) < top * (1 - res):
                rate = max(rate, low * (1 + AIM_SURE * res))
                loss = 1 - low * (1 - tol) / rate
                return rate, run.sure_duration_at(loss)
        return rate, short
    return plan


def _proving(run: _Run, cfg: SearchConfig):
    """The full-length phase's plan: a trial the failures' drop curve
    says fails is only as long as its failure needs to be sure, while
    shorter trials have not been caught passing where they should not."""
    res, tol = cfg.resolution, cfg.loss_tolerance
    final = cfg.trial_duration

    def plan(b: _Bracket, rate: float, expect):
        if not tol or not run.trust_short or b.hi is None or expect:
            return rate, final
        if b.lo is not None and rate <= b.lo.achieved_pps:
            return rate, final
        low = b.bracket(res)[0]
        loss = 1 - low * (1 - tol) / rate
        if loss < SHORTEN * tol:
            return rate, final
        return rate, run.sure_duration_at(loss)
    return plan


def search(measure: Measure, max_rate_pps: float,
           cfg: SearchConfig = SearchConfig(),
           seed: Sequence[Trial] = ()) -> SearchResult:
    """The highest rate ``verify_repeats + 1`` full-length passes back,
    within ``resolution`` of a sure failure (see the module's doc).

    ``seed``: trials already made (for another goal), judged here by
    this search's tolerance and durations; its result lists them first.
    """
    run = _Run(measure, cfg)
    tol, res = cfg.loss_tolerance, cfg.resolution
    final, short = cfg.trial_duration, cfg.exploration_duration
    need = cfg.verify_repeats + 1
    b = _Bracket(tol)
    run.trials.extend(seed)
    for t in seed:
        ok = t.passed(tol)
        if (ok and t.duration >= final) or (not ok and run.sure(t)):
            b.add(ok, t)
    note = ""
    try:
        if short < final:
            kind, found = _explore(run, b, max_rate_pps, cfg, seed)
        else:
            kind, found = _core(run, b, max_rate_pps, cfg, final, need)
        if kind == "max":
            return _result(run, found, None, True, True,
                           "no loss at the generator's maximum rate")
        if kind == "floor":
            note = "no passing rate above min_rate_pps"
    except _Budget:
        note = f"stopped after max_trials={cfg.max_trials}"
    done = b.closes(b.backed(need), res) and not note and run.sure(b.hi)
    return _result(run, b.backed(need) if done else b.lo, b.hi, done, False,
                   note)


def _candidate(run: _Run, seen: _Bracket, kind: str, found,
               cfg: SearchConfig) -> float | None:
    """Where the exploration puts its full-length candidate pass."""
    tol, res = cfg.loss_tolerance, cfg.resolution
    upper = seen.hi
    if kind == "stop":
        top = upper.achieved_pps
        flat = upper.forwarded_pps / (1 - tol)
        if run.sure(upper) and flat >= top * (1 - NEAR_SURE * res):
            # The sure failure's forwarded rate puts the edge near it:
            # a pass just under that edge, moved up to close the bracket
            # with the failure if that stays under the edge.
            found = flat * (1 - CAND_MARGIN * res)
            closing = top * (1 - CLOSE_SURE * res)
            if found < closing <= flat * (1 - res / 8):
                found = closing
        return min(found, top * (1 - FULL_MARGIN * res))
    if kind == "closed":
        # A short pass may have ridden the jitter: the candidate stays
        # under the middle of the short bracket, and as far under the
        # failure as the stop above does; a short pass the core put as
        # low as closes the bracket moves up to just under the sure
        # failure's own estimate of the edge.
        top = upper.achieved_pps
        middle = (seen.lo.achieved_pps + top) / 2
        candidate = min(seen.lo.achieved_pps, top * (1 - FULL_MARGIN * res),
                        middle * (1 - CAND_MARGIN * res))
        if run.sure(upper):
            candidate = max(candidate, min(
                top * (1 - FULL_MARGIN * res),
                upper.forwarded_pps / (1 - tol) * (1 - CAND_MARGIN * res)))
        return candidate
    return None


def _prove_failure(run: _Run, upper: Trial, candidate: float | None,
                   cfg: SearchConfig) -> tuple[bool, Trial]:
    """A short failure that is not sure, measured again until it is: as
    high as still closes the bracket with the candidate (the more it
    loses, the shorter it may be), then at full length if need be.  A
    longer trial that passes is confirmed at full length: a warm-up,
    or a short trial that rode the jitter, and a bound either way."""
    tol, res = cfg.loss_tolerance, cfg.resolution
    final = cfg.trial_duration
    rate = upper.achieved_pps
    longer = run.sure_duration(upper)
    if candidate is not None and tol:
        higher = candidate / (1 - CLOSE_SURE * res)
        if higher > rate:
            loss = 1 - (1 - upper.loss_ratio) * rate / higher
            rate, longer = higher, run.sure_duration_at(loss)
    ok, t = run.classify(rate, longer)
    if longer < final and (ok or not run.sure(t)):
        ok, t = run.classify(rate, final)
    return ok, t


def _explore(run: _Run, b: _Bracket, max_rate_pps: float,
             cfg: SearchConfig, seed: Sequence[Trial] = ()):
    """Short trials find the edge; full-length trials prove it.

    ``b`` ends with only what may bound the result: full-length passes,
    and failures that are *sure*: full-length, or short ones that lost
    more frames than a whole full-length trial may (its first seconds
    are that short trial: a DUT that starts every trial alike loses
    them there too, whatever its buffer or warm-up does later)."""
    tol, res = cfg.loss_tolerance, cfg.resolution
    final, short = cfg.trial_duration, cfg.exploration_duration
    seen = _Bracket(tol)
    for t in seed:
        seen.add(t.passed(tol), t)
    for again in range(2):
        kind, found = _core(run, seen, max_rate_pps, cfg, short, 1,
                            plan=_explored(run, cfg))
        if kind == "max":
            # Short trials kept up at the maximum: a full-length one
            # says.
            ok, t = run.classify(max_rate_pps, final)
            if ok:
                return "max", t
            run.say(f"{short:g} s trials passed at the generator's "
                    f"maximum, a {final:g} s trial failed there: the "
                    f"full-length one wins")
            # Shorter trials pass where longer ones fail here (a
            # buffer): a shortened trial would only pass again.
            run.trust_short = False
            b.add(False, t)
            return _prove(run, b, max_rate_pps, cfg)
        upper = seen.hi
        held = _held(seen.fails) if kind == "stop" else None
        if held is not None:
            return _prove_held(run, b, seen, max_rate_pps, cfg, *held)
        candidate = _candidate(run, seen, kind, found, cfg)
        if upper is None:
            break
        if run.sure(upper):
            b.add(False, upper)
            break
        ok, t = _prove_failure(run, upper, candidate, cfg)
        if not ok:
            b.add(False, t)
            break
        run.say(f"a {upper.duration:g} s trial failed at "
                f"{upper.achieved_pps:,.0f} pps, a {t.duration:g} s one "
                f"passed at {t.achieved_pps:,.0f}: the longer one wins")
        b.add(True, t)
        candidate = None
        # Short failures are suspect from now on: one that proved a
        # full-length failure by a hair may have proved it by jitter.
        run.sure_loss = SURE_LOSS_DOUBTED
        if again:
            # Twice: the short trials' failures say nothing of the
            # full-length edge here (a warm-up).
            run.trust_short = False
            break
        # Once may be a short trial that rode the jitter or a burst:
        # explore again above the full-length pass.
        seen.fails.remove(upper)
        # Nor is it evidence that the capacity moves.
        seen.failed.remove(upper)
        seen.add(True, t)
    if candidate is not None and b.hi is not None and b.hi is not upper:
        # The sure failure was measured anew, higher or longer: the
        # candidate may close the bracket with it from higher up too.
        hi = b.hi
        candidate = max(candidate, min(
            hi.achieved_pps * (1 - FULL_MARGIN * res),
            hi.forwarded_pps / (1 - tol) * (1 - CAND_MARGIN * res)))
        # A rate that came out a little high (the generator's rate
        # control) is closed with a candidate a little higher.
        closing = hi.achieved_pps * (1 - CLOSE_SURE * res)
        if candidate < closing <= candidate * (1 + NUDGE * res):
            candidate = closing
    if candidate is not None and (b.hi is None or
                                  candidate < b.hi.achieved_pps):
        ok, t = run.classify(candidate, final)
        if not ok:
            run.say(f"{short:g} s trials put the edge above "
                    f"{candidate:,.0f} pps, a {final:g} s trial failed "
                    f"there: the full-length one wins")
        b.add(ok, t)
    return _prove(run, b, max_rate_pps, cfg)


def _prove(run: _Run, b: _Bracket, max_rate_pps: float, cfg: SearchConfig):
    """The full-length phase, from the bracket so far."""
    if not run.trust_short:
        b.curve_duration = cfg.trial_duration
    return _core(run, b, max_rate_pps, cfg, cfg.trial_duration,
                 cfg.verify_repeats + 1, plan=_proving(run, cfg))


def _held(fails: Sequence[Trial]) -> tuple[float, float] | None:
    """``(forwarded pps, frames held)`` when the longest failure sent
    less than the shortest, yet forwarded less by DURATION_GAP or more:
    no drop curve does that, and a capacity that moves does not move so
    far, but a DUT that holds frames (a deep buffer, drained after the
    trial) does, since a short trial counts what it held as forwarded.
    Both then lie on ``rx = forwarded * duration + held``."""
    if len(fails) < 2:
        return None
    fs = sorted(fails, key=lambda t: t.duration)
    first, last = fs[0], fs[-1]
    if last.duration < 2 * first.duration or \
            last.achieved_pps > first.achieved_pps or \
            last.forwarded_pps >= first.forwarded_pps * (1 - DURATION_GAP):
        return None
    rate = (last.rx - first.rx) / (last.duration - first.duration)
    held = first.rx - rate * first.duration
    if rate <= 0 or held <= 0:
        return None
    return rate, held


def _prove_held(run: _Run, b: _Bracket, seen: _Bracket,
                max_rate_pps: float, cfg: SearchConfig, forwarded: float,
                held: float):
    """The full-length phase on a DUT that holds frames: its edge at the
    final duration is where ``forwarded * final + held`` frames are
    (1 - tolerance) of those sent; a failure there is sure only once
    the trial outlasts what it holds, which the same line says."""
    tol, res = cfg.loss_tolerance, cfg.resolution
    final = cfg.trial_duration
    edge = (forwarded + held / final) / (1 - tol)
    run.say(f"longer trials forwarded less ({held:,.0f} frames held, "
            f"{forwarded:,.0f} pps after): the edge at {final:g} s is "
            f"near {edge:,.0f} pps, not where short trials put it")
    rate = edge * (1 + AIM_SURE * res)
    if b.hi is None or rate < b.hi.achieved_pps:
        over = rate - forwarded
        length = final
        if tol and over > 0:
            length = (SURE * tol * rate * final + held) / over
            if length > LONGEST * final:
                length = final
            length = max(length, cfg.exploration_duration)
        ok, t = run.classify(rate, length)
        if not ok and not run.sure(t):
            ok, t = run.classify(rate, final)
        if ok and t.duration >= final:
            b.add(True, t)
        elif not ok:
            b.add(False, t)
    top = b.hi.achieved_pps if b.hi is not None else rate
    candidate = edge * (1 - CAND_MARGIN * res)
    closing = top * (1 - CLOSE_SURE * res)
    if candidate < closing <= edge * (1 - res / 8):
        candidate = closing
    if b.lo is None or candidate > b.lo.achieved_pps:
        ok, t = run.classify(candidate, final)
        b.add(ok, t)
    return _prove(run, b, max_rate_pps, cfg)


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
        generator_limited=limited, note=note, log=tuple(run.log),
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


@dataclasses.dataclass(frozen=True)
class SearchGoal:
    """A search goal in RFC 9971's terms.

    * ``loss_ratio``: the highest loss ratio a trial may have and pass
      (0 for NDR, RFC 2544's throughput; 0.005 for a 0.5% PDR);
    * ``exceed_ratio``: the share of ``duration_sum`` that may be spent
      in failing full-length trials; the lower bound needs the rest,
      (1 - exceed_ratio) x ``duration_sum``, in passing full-length
      trials at or above it (a simplification of RFC 9971's load
      classification: failures under the lower bound overturn it);
    * ``final_trial_duration``: seconds of a full-length trial, the only
      kind that may back a lower bound;
    * ``duration_sum``: seconds of full-length trials a lower bound
      needs; twice the final trial duration is RFC 2544's search with
      one verification pass;
    * ``name``: how reports call it (default: NDR or PDR x%).
    """

    loss_ratio: float = 0.0
    exceed_ratio: float = 0.0
    final_trial_duration: float = 60.0
    duration_sum: float = 120.0
    name: str = ""

    def __post_init__(self):
        for f in ("loss_ratio", "exceed_ratio", "final_trial_duration",
                  "duration_sum"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or \
                    not math.isfinite(v):
                raise ValueError(f"{f} must be a finite number")
        if not 0 <= self.loss_ratio < 1:
            raise ValueError("loss_ratio must be in [0, 1)")
        if not 0 <= self.exceed_ratio < 1:
            raise ValueError("exceed_ratio must be in [0, 1)")
        if self.final_trial_duration <= 0:
            raise ValueError("final_trial_duration must be positive")
        if self.duration_sum < self.final_trial_duration:
            raise ValueError("duration_sum must be at least "
                             "final_trial_duration")
        if not isinstance(self.name, str):
            raise ValueError("name must be text")

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        if self.loss_ratio == 0:
            return "NDR"
        return f"PDR {100 * self.loss_ratio:g}%"

    @property
    def passes_needed(self) -> int:
        """Full-length passes at or above a lower bound."""
        return max(1, math.ceil((1 - self.exceed_ratio) * self.duration_sum
                                / self.final_trial_duration - 1e-9))

    def config(self, base: SearchConfig) -> SearchConfig:
        """The single-goal search for this goal, the rest from ``base``."""
        return dataclasses.replace(
            base, loss_tolerance=self.loss_ratio,
            trial_duration=self.final_trial_duration,
            verify_repeats=self.passes_needed - 1)


@dataclasses.dataclass(frozen=True)
class GoalResult:
    """One goal's answer: its relevant bounds and conditional
    throughput (the forwarded rate at the lower bound)."""

    goal: SearchGoal
    result: SearchResult

    @property
    def lower_bound_pps(self) -> float:
        return self.result.lower_pps

    @property
    def upper_bound_pps(self) -> float | None:
        return self.result.upper_pps

    @property
    def conditional_throughput_pps(self) -> float:
        return self.result.forwarded_pps


def check_goals(goals: Sequence[SearchGoal]) -> None:
    """Refuse an empty list, or two goals with the same label."""
    if not goals:
        raise ValueError("goals must not be empty")
    labels = [g.label for g in goals]
    for i, label in enumerate(labels):
        if label in labels[:i]:
            raise ValueError(f"goals[{i}].name: {label!r} is used twice")


def search_goals(measure: Measure, max_rate_pps: float,
                 goals: Sequence[SearchGoal],
                 cfg: SearchConfig = SearchConfig()
                 ) -> tuple[GoalResult, ...]:
    """Every goal from shared trials, in the order given.

    The goals are searched from the highest loss ratio down (a PDR's
    edge lies at or above an NDR's), and each search starts from every
    trial made so far, judged by its own loss ratio and durations: a
    PDR's passes and failures near its edge are an NDR's failures near
    its own, so the NDR search often needs only its passes.
    ``max_trials`` counts for each goal."""
    check_goals(goals)
    done: dict[int, GoalResult] = {}
    trials: list[Trial] = []
    order = sorted(range(len(goals)), key=lambda i: (
        -goals[i].loss_ratio, goals[i].final_trial_duration))
    for i in order:
        gcfg = goals[i].config(cfg)
        r = search(measure, max_rate_pps, gcfg, seed=tuple(trials))
        trials.extend(r.trials[len(trials):])
        done[i] = GoalResult(goals[i], r)
    return tuple(done[i] for i in range(len(goals)))
