"""The engine's data and the traffic-generator interface."""

from __future__ import annotations

import abc
import dataclasses

# The ONP app note's latency bins (µs), Figure 3-3: min-25, 25-50, ...,
# 750-1000 and >1000.
SEED_BINS_US = (25, 50, 75, 100, 150, 200, 250, 500, 750, 1000)
SEED_FRAME_SIZES = (64, 128, 256, 512, 1024, 1280, 1518)


@dataclasses.dataclass(frozen=True)
class Trial:
    """One fixed-rate trial, as the generator measured it."""

    offered_pps: float          # what was asked for
    duration: float             # seconds
    tx: int                     # frames the generator really sent
    rx: int                     # frames that came back
    # The generator's own ceiling was hit: it sent less than offered.
    generator_limited: bool = False

    @property
    def lost(self) -> int:
        return max(self.tx - self.rx, 0)

    @property
    def loss_ratio(self) -> float:
        return self.lost / self.tx if self.tx else 1.0

    @property
    def achieved_pps(self) -> float:
        """The rate really sent (the offered rate is only a request)."""
        return self.tx / self.duration if self.duration else 0.0

    @property
    def forwarded_pps(self) -> float:
        return self.rx / self.duration if self.duration else 0.0

    def passed(self, tolerance: float) -> bool:
        return self.tx > 0 and self.loss_ratio <= tolerance


@dataclasses.dataclass(frozen=True)
class LatencyResult:
    samples: int
    min_us: float | None
    avg_us: float | None
    max_us: float | None
    percentiles_us: dict[str, float]           # "50", "99", "99.9"
    bins: tuple[tuple[float, float | None, int], ...]   # (lo, hi, count)
    rate_pps: float = 0.0
    duration: float = 0.0
    lost: int = 0


class TrafficGenerator(abc.ABC):
    """What a traffic generator does for the engine."""

    name = "generator"

    @abc.abstractmethod
    def max_rate_pps(self, frame_size: int) -> float:
        """The highest rate this generator can offer (line rate, or the
        software sender's ceiling)."""

    @abc.abstractmethod
    def trial(self, frame_size: int, rate_pps: float,
              duration: float) -> Trial:
        """Send at ``rate_pps`` for ``duration`` seconds; count."""

    @abc.abstractmethod
    def latency(self, frame_size: int, rate_pps: float, duration: float,
                bins_us) -> LatencyResult:
        """Latency of probe frames while sending at ``rate_pps``."""

    def close(self) -> None:  # noqa: B027 (a default that does nothing)
        """Release what the generator holds (sessions, sockets)."""
