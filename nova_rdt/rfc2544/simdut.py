"""A simulated device under test with a known, noisy capacity.

Each trial the DUT's capacity wanders by ``jitter`` (relative, normal),
and with probability ``spurious`` a transient burst of up to ``burst``
frames is lost whatever the rate: the two kinds of noise that make real
searches near the edge unstable.

The ways real set-ups break the naive picture can be switched on:

* ``collapse``: receive livelock (Mogul and Ramakrishnan's model).  Every
  arriving frame costs receive work whether it is forwarded or dropped,
  so above capacity the forwarded rate *falls* linearly with the offered
  load, instead of staying at capacity.  ``collapse`` is how many times
  less than its capacity the DUT forwards at ``collapse_at`` (default:
  the generator's real maximum), as OVS-DPDK on AF_PACKET, kernel
  forwarding or a VM's virtio path do.
* ``collapse_exponent``: livelock that deepens with the overload: past
  capacity the DUT forwards ``capacity * (capacity / sent) ** p``.  With
  ``p`` from 0.5 to 2 it forwards 3 to 100 times under its capacity at
  10x overload, so the forwarded rate of one failed trial says little
  about the edge.  It replaces ``collapse`` when both are given.
* ``gen_ceiling_pps``: the generator cannot send what it is asked for
  above this rate, though ``max_rate_pps`` claims ``line_rate``; and
  ``rate_error`` (relative, normal) is its rate control's error.
* ``drift``: the capacity moves between trials within this share of its
  nominal value, on top of ``jitter`` (which is measurement noise, not
  a change of capacity).  With ``drift_time_s`` 0, before every trial it
  moves anywhere in that range, independently of the trial before (a
  neighbour whose load changes as often as the trials do).  With
  ``drift_time_s`` > 0 it wanders there continuously, as heat, a turbo
  budget or a neighbour's phases make it: a random walk reflected at
  the range's ends (uniform over the range in the long run) whose
  relaxation time is ``drift_time_s`` (two trials that far apart share
  about e**-1 of their offset); it moves on by each trial's duration, so
  a 1 s probe barely moves it and a 10 s trial does.
* ``buffer_s``: a deep buffer, this many seconds of capacity.  Overload
  fills it before any frame is lost, and what it holds drains after
  the trial (within the settling pause), so a short trial passes at a
  rate a full-length one fails.
* ``warmup_s`` and ``warmup_share``: for the first ``warmup_s`` seconds
  of every trial the capacity is only ``warmup_share`` of itself (flow
  caches filling, MAC learning, a guest's forwarder waking), so a short
  trial fails at a rate a full-length one passes.

``truth(tolerance, duration=...)`` is the offered rate at which the
expected loss over a trial of that duration equals the tolerance, for
whichever model is on (the duration matters only with a buffer or a
warm-up); ``truth_band`` is the range a right answer may lie in (one
point without drift).
"""

from __future__ import annotations

import math
import random
import statistics

from nova_rdt.rfc2544 import latency as latency_mod
from nova_rdt.rfc2544.model import LatencyResult
from nova_rdt.rfc2544.model import TrafficGenerator
from nova_rdt.rfc2544.model import Trial


class SimulatedDut(TrafficGenerator):
    name = "simulated"

    def __init__(self, capacity_pps: float, line_rate_pps: float,
                 jitter: float = 0.001, spurious: float = 0.05,
                 burst: int = 50, seed: int = 0,
                 base_latency_us: float = 8.0, collapse: float = 1.0,
                 collapse_at_pps: float | None = None,
                 gen_ceiling_pps: float | None = None,
                 rate_error: float = 0.0, collapse_exponent: float = 0.0,
                 drift: float = 0.0, drift_time_s: float = 0.0,
                 buffer_s: float = 0.0, warmup_s: float = 0.0,
                 warmup_share: float = 1.0):
        for name, value in (("capacity_pps", capacity_pps),
                            ("line_rate_pps", line_rate_pps)):
            if not (isinstance(value, (int, float)) and math.isfinite(value)
                    and value > 0):
                raise ValueError(f"{name} must be a positive number")
        if not (math.isfinite(collapse) and collapse >= 1):
            raise ValueError("collapse must be a number >= 1")
        if not (math.isfinite(collapse_exponent) and collapse_exponent >= 0):
            raise ValueError("collapse_exponent must be a number >= 0")
        if not (math.isfinite(drift) and 0 <= drift < 1):
            raise ValueError("drift must be a number in [0, 1)")
        if not (math.isfinite(drift_time_s) and drift_time_s >= 0):
            raise ValueError("drift_time_s must be a number >= 0")
        for name, value in (("buffer_s", buffer_s),
                            ("warmup_s", warmup_s)):
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a number >= 0")
        if not (math.isfinite(warmup_share) and 0 < warmup_share <= 1):
            raise ValueError("warmup_share must be a number in (0, 1]")
        self.buffer_s = float(buffer_s)
        self.warmup_s = float(warmup_s)
        self.warmup_share = float(warmup_share)
        self.capacity = float(capacity_pps)
        self.line_rate = float(line_rate_pps)
        self.jitter = jitter
        self.spurious = spurious
        self.burst = burst
        self.rng = random.Random(seed)
        self.base_latency_us = base_latency_us
        self.ceiling = min(self.line_rate, gen_ceiling_pps or math.inf)
        self.rate_error = rate_error
        self.exponent = float(collapse_exponent)
        self.drift = float(drift)
        self.drift_time = float(drift_time_s)
        # Where the walk starts: anywhere in the range.
        self.offset = (self.rng.uniform(-self.drift, self.drift)
                       if self.drift and self.drift_time else 0.0)
        self.faced: list[float] = []   # the capacity of every trial
        # Receive-livelock slope: forwarded = cap - k * (sent - cap).
        at = collapse_at_pps or self.ceiling
        self.k = ((1 - 1 / collapse) / (at / self.capacity - 1)
                  if collapse > 1 and at > self.capacity else 0.0)
        self.trials = 0

    def forwarded(self, sent_pps: float, capacity: float | None = None
                  ) -> float:
        """What the DUT forwards when ``sent_pps`` arrive (no noise)."""
        cap = self.capacity if capacity is None else capacity
        if sent_pps <= cap:
            return sent_pps
        if self.exponent:
            return cap * (cap / sent_pps) ** self.exponent
        return max(cap - self.k * cap * (sent_pps / cap - 1), 0.0)

    def lost(self, sent_pps: float, duration: float,
             capacity: float | None = None) -> float:
        """Frames a trial loses (no noise): what the warm-up and the
        steady state do not forward, less what the buffer holds."""
        cap = self.capacity if capacity is None else capacity
        warm = min(self.warmup_s, duration)
        forwarded = (self.forwarded(sent_pps, cap * self.warmup_share) * warm
                     + self.forwarded(sent_pps, cap) * (duration - warm))
        return max(0.0, sent_pps * duration - forwarded
                   - self.buffer_s * cap)

    def truth(self, tolerance: float, capacity: float | None = None,
              duration: float = 60.0) -> float:
        """The rate where the loss of a ``duration``-second trial equals
        ``tolerance`` (or the generator's ceiling, if the DUT is faster
        than that)."""
        cap = self.capacity if capacity is None else capacity

        def passes(rate):
            # Plus a hair: the rate's parts may sum over it.
            return self.lost(rate, duration, cap) <= \
                tolerance * rate * duration + 1e-6

        lo, hi = 0.0, 2 * cap / (1 - tolerance) + 1
        while passes(hi):
            lo, hi = hi, 2 * hi
        for _ in range(200):
            mid = (lo + hi) / 2
            if passes(mid):
                lo = mid
            else:
                hi = mid
        return min(lo, self.ceiling)

    def truth_band(self, tolerance: float, duration: float = 60.0
                   ) -> tuple[float, float]:
        """The rates a right answer may lie between: ``truth`` itself
        without drift.  With drift, the capacity a search should find is
        the one the DUT had while that search measured it: from
        ``truth`` at the lowest capacity of its trials (a rate the DUT
        sustained in every one) to ``truth`` at their median capacity
        (one it sustained in half of them).  A rate above that was a
        lucky trial: the DUT lost frames there in most of the search's
        trials.  Before any trial, the band of the whole range: from
        its lowest capacity to the nominal one."""
        if not self.faced:
            return self.range_band(tolerance, duration)
        return (self.truth(tolerance, min(self.faced), duration),
                self.truth(tolerance, statistics.median(self.faced),
                           duration))

    def range_band(self, tolerance: float, duration: float = 60.0
                   ) -> tuple[float, float]:
        """The band of the drift's whole range, whatever the trials met:
        from ``truth`` at its lowest capacity to ``truth`` at the
        nominal one (``truth`` itself without drift)."""
        return (self.truth(tolerance, self.capacity * (1 - self.drift),
                           duration),
                self.truth(tolerance, duration=duration))

    def max_rate_pps(self, frame_size: int) -> float:
        return self.line_rate

    def measure(self, rate_pps: float, duration: float) -> Trial:
        self.trials += 1
        sent = min(rate_pps, self.ceiling)
        if self.rate_error:
            sent *= 1 + self.rng.gauss(0, self.rate_error)
        tx = int(max(sent, 0.0) * duration)
        cap = self.capacity * (1 + self.rng.gauss(0, self.jitter))
        if self.drift:
            if self.drift_time:
                off = self.offset
                # The walk's deviation per root second whose slowest
                # mode over the range (width w = 2 * drift) decays in
                # drift_time: tau = 2 w**2 / (pi**2 sigma**2).
                sigma = 2 * self.drift * math.sqrt(2) / (
                    math.pi * math.sqrt(self.drift_time))
                self.offset = _fold(off + self.rng.gauss(
                    0, sigma * math.sqrt(duration)), self.drift)
            else:
                off = self.rng.uniform(-self.drift, self.drift)
            self.faced.append(self.capacity * (1 + off))
            cap *= 1 + off
        if self.buffer_s or self.warmup_s:
            # Less a hair: a sum of the rate's parts may round over it.
            lost = min(tx, max(0, math.ceil(
                self.lost(tx / duration, duration, cap) - 1e-6)))
        else:
            lost = max(0, tx - int(self.forwarded(tx / duration, cap)
                                   * duration))
        if self.rng.random() < self.spurious:
            lost += self.rng.randint(1, self.burst)
        return Trial(rate_pps, duration, tx, max(tx - lost, 0),
                     generator_limited=tx < 0.98 * rate_pps * duration)

    def trial(self, frame_size, rate_pps, duration) -> Trial:
        return self.measure(rate_pps, duration)

    def latency(self, frame_size, rate_pps, duration, bins_us
                ) -> LatencyResult:
        # Queueing grows as the rate nears capacity (M/D/1-like).
        load = min(rate_pps / self.capacity, 0.999)
        mean = self.base_latency_us * (1 + load / (2 * (1 - load)))
        samples = [self.rng.expovariate(1 / mean) + self.base_latency_us / 2
                   for _ in range(2000)]
        return latency_mod.summarize(samples, bins_us, rate_pps, duration)


def _fold(x: float, bound: float) -> float:
    """``x`` reflected into [-bound, bound] (as often as it takes: the
    exact step of a reflected random walk, however long)."""
    y = (x + bound) % (4 * bound)
    return (y if y <= 2 * bound else 4 * bound - y) - bound


# The benchmark's and the tests' DUT models: name -> a maker of
# (dut, max_rate) from a seed.  ``line`` is what the generator claims.
def _draw(seed: int):
    return random.Random(seed)


def benign(seed: int, line: float) -> SimulatedDut:
    """Forwards its capacity at any overload; the generator sends all."""
    cap = _draw(seed).uniform(0.05, 0.97) * line
    return SimulatedDut(cap, line, seed=seed)


def collapse(seed: int, line: float) -> SimulatedDut:
    """Receive livelock: at line rate it forwards 2-10x under capacity."""
    r = _draw(seed)
    cap = r.uniform(0.05, 0.97) * line
    return SimulatedDut(cap, line, seed=seed, collapse=r.uniform(2, 10))


def ceiling(seed: int, line: float) -> SimulatedDut:
    """The generator claims line rate but sends only 1.5-8x capacity."""
    r = _draw(seed)
    g = r.uniform(1.5, 8)
    cap = r.uniform(0.05, 0.97) * line / g
    return SimulatedDut(cap, line, seed=seed, gen_ceiling_pps=g * cap,
                        rate_error=0.001)


def both(seed: int, line: float) -> SimulatedDut:
    """Both at once: a 1.5-8x generator ceiling, and 2-10x collapse at
    that ceiling."""
    r = _draw(seed)
    g = r.uniform(1.5, 8)
    cap = r.uniform(0.05, 0.97) * line / g
    return SimulatedDut(cap, line, seed=seed, gen_ceiling_pps=g * cap,
                        rate_error=0.001, collapse=r.uniform(2, 10))


def livelock(seed: int, line: float) -> SimulatedDut:
    """Livelock that deepens with the overload: the forwarded rate falls
    as the overload to a power of 0.5-2 (3-100x under capacity at 10x
    overload)."""
    r = _draw(seed)
    cap = r.uniform(0.05, 0.97) * line
    return SimulatedDut(cap, line, seed=seed,
                        collapse_exponent=r.uniform(0.5, 2))


def livelock_ceiling(seed: int, line: float) -> SimulatedDut:
    """That livelock behind a generator that sends only 1.5-8x the
    DUT's capacity while it claims line rate."""
    r = _draw(seed)
    g = r.uniform(1.5, 8)
    cap = r.uniform(0.05, 0.97) * line / g
    return SimulatedDut(cap, line, seed=seed, gen_ceiling_pps=g * cap,
                        rate_error=0.001,
                        collapse_exponent=r.uniform(0.5, 2))


def drifting(seed: int, line: float, drift_time_s: float = 0.0
             ) -> SimulatedDut:
    """Forwards its capacity at any overload, but that capacity moves
    within +-2% of its nominal value between trials: independently from
    one trial to the next, or (``drift_time_s`` > 0) wandering with that
    relaxation time."""
    cap = _draw(seed).uniform(0.05, 0.97) * line
    return SimulatedDut(cap, line, seed=seed, drift=0.02,
                        drift_time_s=drift_time_s)


def buffered(seed: int, line: float) -> SimulatedDut:
    """Forwards its capacity at any overload, behind a deep buffer of
    0.2-2 s of that capacity: a short trial passes well over the rate a
    full-length one fails."""
    r = _draw(seed)
    cap = r.uniform(0.05, 0.97) * line
    return SimulatedDut(cap, line, seed=seed, buffer_s=r.uniform(0.2, 2))


def warming(seed: int, line: float) -> SimulatedDut:
    """Forwards its capacity at any overload, but only 60-90% of it for
    the first 0.5-3 s of every trial: a short trial fails under the rate
    a full-length one passes."""
    r = _draw(seed)
    cap = r.uniform(0.05, 0.97) * line
    return SimulatedDut(cap, line, seed=seed, warmup_s=r.uniform(0.5, 3),
                        warmup_share=r.uniform(0.6, 0.9))


MODELS = {"benign": benign, "collapse": collapse, "gen-ceiling": ceiling,
          "collapse+ceiling": both, "livelock": livelock,
          "livelock+ceiling": livelock_ceiling, "drift": drifting,
          "buffer": buffered, "warm-up": warming}
# The models whose forwarded rate falls past capacity.
COLLAPSING = ("collapse", "collapse+ceiling", "livelock", "livelock+ceiling")
# The models where a short trial says something else than a full-length
# one at the same rate.
DURATION_BOUND = ("buffer", "warm-up")


def trials_for(width: float) -> int:
    """Bisection trials to narrow [0, 1] to ``width``: for reference."""
    return math.ceil(math.log2(1 / width))
