"""A simulated device under test with a known, noisy capacity.

Each trial the DUT's capacity wanders by ``jitter`` (relative, normal),
and with probability ``spurious`` a transient burst of up to
``burst`` frames is lost whatever the rate: the two kinds of noise that
make real searches near the edge unstable.  ``truth(tolerance)`` is the
rate at which the expected loss equals the tolerance.
"""

from __future__ import annotations

import math
import random

from nova_rdt.rfc2544.model import LatencyResult
from nova_rdt.rfc2544.model import TrafficGenerator
from nova_rdt.rfc2544.model import Trial
from nova_rdt.rfc2544 import latency as latency_mod


class SimulatedDut(TrafficGenerator):
    name = "simulated"

    def __init__(self, capacity_pps: float, line_rate_pps: float,
                 jitter: float = 0.001, spurious: float = 0.05,
                 burst: int = 50, seed: int = 0,
                 base_latency_us: float = 8.0):
        self.capacity = capacity_pps
        self.line_rate = line_rate_pps
        self.jitter = jitter
        self.spurious = spurious
        self.burst = burst
        self.rng = random.Random(seed)
        self.base_latency_us = base_latency_us
        self.trials = 0

    def truth(self, tolerance: float) -> float:
        return min(self.capacity / (1 - tolerance), self.line_rate)

    def max_rate_pps(self, frame_size: int) -> float:
        return self.line_rate

    def measure(self, rate_pps: float, duration: float) -> Trial:
        self.trials += 1
        tx = int(min(rate_pps, self.line_rate) * duration)
        cap = self.capacity * (1 + self.rng.gauss(0, self.jitter))
        lost = max(0, tx - int(cap * duration))
        if self.rng.random() < self.spurious:
            lost += self.rng.randint(1, self.burst)
        return Trial(rate_pps, duration, tx, max(tx - lost, 0),
                     generator_limited=rate_pps > self.line_rate)

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


def trials_for(width: float) -> int:
    """Bisection trials to narrow [0, 1] to ``width``: for reference."""
    return math.ceil(math.log2(1 / width))
