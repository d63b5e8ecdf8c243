"""Latency statistics and histogram bins: pure."""

from __future__ import annotations

from collections.abc import Sequence
import math

from nova_rdt.rfc2544.model import LatencyResult

PERCENTILES = (50.0, 90.0, 99.0, 99.9)


def check_bins(bins_us: Sequence[float]) -> tuple[float, ...]:
    edges = tuple(float(b) for b in bins_us)
    if not edges or any(b <= 0 for b in edges) or \
            any(b >= c for b, c in zip(edges, edges[1:])):
        raise ValueError(f"latency bins must be positive and increasing: "
                         f"{list(bins_us)}")
    return edges


def histogram(samples_us: Sequence[float], bins_us: Sequence[float]
              ) -> tuple[tuple[float, float | None, int], ...]:
    """Counts per bin: [0, b0), [b0, b1), ..., [bn, inf) as the seed's
    min-25, 25-50, ..., >1000 µs."""
    edges = check_bins(bins_us)
    counts = [0] * (len(edges) + 1)
    for s in samples_us:
        i = 0
        while i < len(edges) and s >= edges[i]:
            i += 1
        counts[i] += 1
    lows = (0.0,) + edges
    highs = edges + (None,)
    return tuple(zip(lows, highs, counts))


def percentile(sorted_us: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of sorted samples."""
    if not sorted_us:
        raise ValueError("no samples")
    k = max(0, min(len(sorted_us) - 1,
                   math.ceil(p / 100 * len(sorted_us) - 1e-9) - 1))
    return sorted_us[k]


def summarize(samples_us: Sequence[float], bins_us: Sequence[float],
              rate_pps: float = 0.0, duration: float = 0.0,
              lost: int = 0) -> LatencyResult:
    s = sorted(samples_us)
    if not s:
        return LatencyResult(0, None, None, None, {},
                             histogram([], bins_us), rate_pps, duration, lost)
    return LatencyResult(
        samples=len(s), min_us=s[0], avg_us=sum(s) / len(s), max_us=s[-1],
        percentiles_us={f"{p:g}": percentile(s, p) for p in PERCENTILES},
        bins=histogram(s, bins_us), rate_pps=rate_pps, duration=duration,
        lost=lost)


def from_bins(bins: Sequence[tuple[float, float | None, int]],
              min_us: float | None, avg_us: float | None,
              max_us: float | None, rate_pps: float = 0.0,
              duration: float = 0.0, lost: int = 0) -> LatencyResult:
    """A result from a generator that reports bins, not samples
    (IxNetwork).  Percentiles are the upper edge of the bin that holds
    them (the open last bin: the maximum), so they never understate."""
    total = sum(n for _lo, _hi, n in bins)
    pct = {}
    if total:
        for p in PERCENTILES:
            rank = math.ceil(p / 100 * total - 1e-9)
            seen = 0
            for _lo, hi, n in bins:
                seen += n
                if seen >= rank:
                    edge = hi if hi is not None else max_us
                    pct[f"{p:g}"] = min(edge, max_us) if max_us else edge
                    break
    return LatencyResult(total, min_us, avg_us, max_us, pct, tuple(bins),
                         rate_pps, duration, lost)
