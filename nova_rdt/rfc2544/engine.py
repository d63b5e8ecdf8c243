"""Runs RFC 2544 against a generator: per frame size, throughput then
latency at the throughput found."""

from __future__ import annotations

from collections.abc import Callable
import dataclasses
import time

from nova_rdt.rfc2544 import latency as latency_mod
from nova_rdt.rfc2544 import search as search_mod
from nova_rdt.rfc2544.model import SEED_BINS_US
from nova_rdt.rfc2544.model import SEED_FRAME_SIZES
from nova_rdt.rfc2544.model import LatencyResult
from nova_rdt.rfc2544.model import TrafficGenerator

Progress = Callable[[dict], None]


@dataclasses.dataclass(frozen=True)
class RunConfig:
    frame_sizes: tuple[int, ...] = SEED_FRAME_SIZES
    search: search_mod.SearchConfig = search_mod.SearchConfig()
    latency_duration: float = 10.0
    latency_bins_us: tuple[float, ...] = SEED_BINS_US
    # Latency is measured at this share of the throughput found (1.0 as
    # RFC 2544 says; lower keeps a noisy software path off its edge).
    latency_load: float = 1.0
    label: str = ""

    def __post_init__(self):
        if not self.frame_sizes:
            raise ValueError("frame_sizes is empty")
        latency_mod.check_bins(self.latency_bins_us)
        if not 0 < self.latency_load <= 1:
            raise ValueError("latency_load must be in (0, 1]")
        if self.latency_duration <= 0:
            raise ValueError("latency_duration must be positive")


@dataclasses.dataclass(frozen=True)
class FrameResult:
    frame_size: int
    throughput: search_mod.SearchResult
    latency: LatencyResult | None


@dataclasses.dataclass(frozen=True)
class Report:
    label: str
    generator: str
    config: RunConfig
    started: float
    finished: float
    frames: tuple[FrameResult, ...]


def run(gen: TrafficGenerator, cfg: RunConfig,
        progress: Progress | None = None) -> Report:
    say = progress or (lambda event: None)
    started = time.time()
    results = []
    for size in cfg.frame_sizes:
        say({"event": "frame", "frame_size": size})
        count = [0]

        def measure(rate, duration, size=size, count=count):
            t = gen.trial(size, rate, duration)
            count[0] += 1
            say({"event": "trial", "frame_size": size, "trial": count[0],
                 "offered_pps": rate, "achieved_pps": t.achieved_pps,
                 "forwarded_pps": t.forwarded_pps,
                 "generator_limited": t.generator_limited,
                 "loss_ratio": t.loss_ratio,
                 "passed": t.passed(cfg.search.loss_tolerance)})
            return t

        found = search_mod.search(measure, gen.max_rate_pps(size),
                                  cfg.search)
        lat = None
        if found.rate_pps > 0:
            rate = found.rate_pps * cfg.latency_load
            say({"event": "latency", "frame_size": size, "rate_pps": rate})
            lat = gen.latency(size, rate, cfg.latency_duration,
                              cfg.latency_bins_us)
        say({"event": "result", "frame_size": size,
             # RFC 2544 throughput: forwarded at the highest passing rate.
             "throughput_pps": found.throughput_pps,
             "achieved_pps": found.achieved_pps,
             "offered_pps": found.offered_pps,
             "upper_pps": found.upper_pps,
             "generator_limited": found.generator_limited,
             "converged": found.converged, "note": found.note,
             "trials": found.trial_count,
             "avg_latency_us": lat.avg_us if lat else None})
        results.append(FrameResult(size, found, lat))
    return Report(cfg.label, gen.name, cfg, started, time.time(),
                  tuple(results))
