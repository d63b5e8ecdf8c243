"""Trials to find throughput: nova-rdt's search against plain bisection.

    .venv/bin/python -m benchmarks.bench_rfc2544_search [--runs 200]

Both searches run against the same simulated DUTs with the same loss
tolerance and resolution, and stop at the same bracket width.  Every DUT
has a capacity jitter of 0.1% per trial and a 5% chance per trial of a
transient loss burst.  The DUT models (``nova_rdt.rfc2544.simdut.MODELS``):

* ``benign``: capacity 5-97% of 10GbE line rate at 64 B; forwards its
  capacity at any overload (the textbook DUT);
* ``collapse``: the same, in receive livelock: at line rate it forwards
  2-10x less than its capacity;
* ``gen-ceiling``: the generator claims line rate but really sends only
  1.5-8x the DUT's capacity, with 0.1% rate-control error (standard deviation);
* ``collapse+ceiling``: both at once (2-10x collapse at that ceiling).

Prints, per model, tolerance and resolution: mean trials, how often the
result (the sent rate of the highest pass) is within the resolution of
the true rate, for each search, and the ratio of mean trials.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from nova_rdt.rfc2544 import search
from nova_rdt.rfc2544 import simdut

LINE_64B = 14_880_952


def score(model, fn, cfg, runs: int) -> tuple[float, float]:
    """(mean trials, share of runs within the resolution)."""
    counts, ok = [], 0
    tol, res = cfg.loss_tolerance, cfg.resolution
    for seed in range(runs):
        dut = simdut.MODELS[model](seed, LINE_64B)
        r = fn(dut.measure, LINE_64B, cfg)
        counts.append(r.trial_count)
        truth = dut.truth(tol)
        ok += abs(r.rate_pps - truth) <= res * truth
    return statistics.mean(counts), ok / runs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--model", action="append", choices=list(simdut.MODELS),
                    help="only this DUT model (repeatable)")
    args = ap.parse_args(argv)
    print(f"{'model':>16} {'tolerance':>9} {'resolution':>10} {'ours':>6} "
          f"{'ok %':>6} {'bisect':>7} {'ok %':>6} {'ratio':>6}")
    worst = 0.0
    for model in args.model or simdut.MODELS:
        for tol in (0.0, 0.001):
            for res in (0.005, 0.01):
                cfg = search.SearchConfig(loss_tolerance=tol, resolution=res)
                a, oka = score(model, search.search, cfg, args.runs)
                b, okb = score(model, search.bisection, cfg, args.runs)
                worst = max(worst, a / b)
                print(f"{model:>16} {tol:9.3%} {res:10.2%} {a:6.2f} "
                      f"{100 * oka:6.1f} {b:7.2f} {100 * okb:6.1f} "
                      f"{a / b:6.2f}")
    print(f"worst ratio of mean trials: {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
