"""Trials to find throughput: nova-rdt's search against plain bisection.

    .venv/bin/python -m benchmarks.bench_rfc2544_search [--runs 200]

Both searches run against the same simulated DUTs (capacity drawn from
5-97% of 10GbE line rate at 64 B, capacity jitter 0.1% per trial, a
5% chance per trial of a transient loss burst) with the same loss
tolerance and resolution, and stop at the same bracket width.  Prints
mean trials, how often each result is within the resolution of the true
rate, and the ratio of mean trials.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys

from nova_rdt.rfc2544 import search
from nova_rdt.rfc2544.simdut import SimulatedDut

LINE_64B = 14_880_952


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args(argv)
    print(f"{'tolerance':>9} {'resolution':>10} {'ours':>6} {'ok %':>6} "
          f"{'bisect':>7} {'ok %':>6} {'ratio':>6}")
    for tol in (0.0, 0.001):
        for res in (0.005, 0.01):
            cfg = search.SearchConfig(loss_tolerance=tol, resolution=res)
            counts = {"ours": [], "bisect": []}
            ok = {"ours": 0, "bisect": 0}
            for seed in range(args.runs):
                cap = random.Random(seed).uniform(0.05, 0.97) * LINE_64B
                for name, fn in (("ours", search.search),
                                 ("bisect", search.bisection)):
                    dut = SimulatedDut(cap, LINE_64B, seed=seed)
                    r = fn(dut.measure, LINE_64B, cfg)
                    counts[name].append(r.trial_count)
                    truth = dut.truth(tol)
                    ok[name] += abs(r.rate_pps - truth) <= res * truth
            a, b = (statistics.mean(counts[k]) for k in ("ours", "bisect"))
            print(f"{tol:9.3%} {res:10.2%} {a:6.2f} "
                  f"{100 * ok['ours'] / args.runs:6.1f} {b:7.2f} "
                  f"{100 * ok['bisect'] / args.runs:6.1f} {a / b:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
