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
    # RFC 9971 search goals, served from shared trials; the first one's
    # result is the frame's throughput (latency is measured there).
    # Empty: one goal from ``search`` (its loss_tolerance).
    goals: tuple[search_mod.SearchGoal, ...] = ()

    def __post_init__(self):
        if not self.frame_sizes:
            raise ValueError("frame_sizes is empty")
        if self.goals:
            search_mod.check_goals(self.goals)
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
    goals: tuple[search_mod.GoalResult, ...] = ()


@dataclasses.dataclass(frozen=True)
class Report:
    label: str
    generator: str
    config: RunConfig
    started: float
    finished: float
    frames: tuple[FrameResult, ...]


def goal_dict(g: search_mod.GoalResult) -> dict:
    """A goal and its result, as events and reports give them."""
    return {"goal": g.goal.label, "loss_ratio": g.goal.loss_ratio,
            "exceed_ratio": g.goal.exceed_ratio,
            "final_trial_duration": g.goal.final_trial_duration,
            "duration_sum": g.goal.duration_sum,
            "conditional_throughput_pps": g.conditional_throughput_pps,
            "lower_bound_pps": g.lower_bound_pps,
            "upper_bound_pps": g.upper_bound_pps,
            "converged": g.result.converged,
            "trials": g.result.trial_count,
            "trial_seconds": g.result.trial_seconds,
            "note": g.result.note, "log": list(g.result.log)}


def run(gen: TrafficGenerator, cfg: RunConfig,
        progress: Progress | None = None) -> Report:
    say = progress or (lambda event: None)
    # A trial's verdict on the console: the first goal's.
    tol = cfg.goals[0].loss_ratio if cfg.goals else \
        cfg.search.loss_tolerance
    started = time.time()
    results = []
    for size in cfg.frame_sizes:
        say({"event": "frame", "frame_size": size})
        count = [0]

        def measure(rate, duration, size=size, count=count):
            t = gen.trial(size, rate, duration)
            count[0] += 1
            say({"event": "trial", "frame_size": size, "trial": count[0],
                 "offered_pps": rate, "duration": duration,
                 "achieved_pps": t.achieved_pps,
                 "forwarded_pps": t.forwarded_pps,
                 "generator_limited": t.generator_limited,
                 "loss_ratio": t.loss_ratio,
                 "passed": t.passed(tol)})
            return t

        goals = ()
        if cfg.goals:
            goals = search_mod.search_goals(measure, gen.max_rate_pps(size),
                                            cfg.goals, cfg.search)
            # The frame's trial log is every trial the goals shared.
            every = max((g.result for g in goals),
                        key=lambda r: r.trial_count)
            found = dataclasses.replace(goals[0].result,
                                        trials=every.trials)
        else:
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
             "trial_seconds": found.trial_seconds, "log": list(found.log),
             "goals": [goal_dict(g) for g in goals],
             "avg_latency_us": lat.avg_us if lat else None})
        results.append(FrameResult(size, found, lat, goals))
    return Report(cfg.label, gen.name, cfg, started, time.time(),
                  tuple(results))
