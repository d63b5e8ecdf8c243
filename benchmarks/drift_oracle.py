"""How few trials a re-checking search could need on a drifting DUT.

    .venv/bin/python -m benchmarks.drift_oracle [--grid 0.25] [--runs 20000]

The ``drift`` row of ``bench_rfc2544_search`` draws the DUT's capacity
afresh, uniformly within +-2% of its nominal value, for every trial.  A
search that re-checks its result (nova-rdt's) may stop only when a
failed trial lies within the resolution (1%) above two passes.  This
script computes, on an idealised version of that row (rates in % of the
nominal capacity, a trial at ``x`` passes when that trial's capacity is
at least ``x``; no tolerance, jitter or loss bursts), two reference
figures for the trials needed after the overload probe:

* **the oracle**: a search that *knows* the nominal capacity and the
  +-2% law and plays optimally (value iteration over its bracket, with
  trials at multiples of ``--grid`` below its lowest failure: a trial
  at or above it can only overturn that failure).  A search that knows
  less cannot do better on average, so this is close to a floor for the
  row's mean trials: 4.39 on the 0.25% grid, 4.36 on the 0.1% grid (a
  finer grid gives the oracle more rates to choose from).
* **a staircase**: one trial just under the overload probe's forwarded
  rate, then down a step from every failure and up a smaller step from
  every pass, re-checking just above a pass that closes the bracket.  It
  knows nothing of the law, as a real search must not, and never has to
  tell a drifting DUT from a collapsing one.

With ``--grid 0.1`` the oracle takes a few minutes.
"""

from __future__ import annotations

import argparse
import random
import statistics

DRIFT = 2.0        # the capacity moves within +-DRIFT % of nominal
WIDTH = 1.0        # the resolution, %
NONE = -1


def oracle(grid: float) -> float:
    """Mean trials after the probe of the optimal search that knows the
    nominal capacity (value iteration; trials below the lowest failure)."""
    span = DRIFT + 1.5
    n = int(round(2 * span / grid))
    xs = [-span + i * grid for i in range(n + 1)]
    inf = n + 1                      # no failure yet but the probe's
    w = int(round(WIDTH / grid))

    def p_pass(i: int) -> float:
        return min(1.0, max(0.0, (DRIFT - xs[i]) / (2 * DRIFT)))

    def done(h: int, p2: int) -> bool:
        return h != inf and p2 != NONE and h - p2 <= w

    # State: lowest failure h, the two highest passes under it p1 >= p2.
    states = [(h, p1, p2) for h in [*range(n + 1), inf]
              for p1 in [NONE, *range(min(h, n + 1))]
              for p2 in ([NONE] if p1 == NONE else [NONE, *range(p1 + 1)])]
    value = {s: 0.0 if done(s[0], s[2]) else 50.0 for s in states}

    def passed(s, x):
        h, p1, p2 = s
        if x >= p1:
            return (h, x, p1)
        return (h, p1, max(p2, x))

    def failed(s, x):
        ps = [p for p in s[1:] if p != NONE and p < x] + [NONE, NONE]
        return (x, ps[0], ps[1])

    for _ in range(500):
        change = 0.0
        for s in states:
            if done(s[0], s[2]):
                continue
            best = min((1 + p_pass(x) * value[passed(s, x)]
                        + (1 - p_pass(x)) * value[failed(s, x)]
                        for x in range(min(s[0], n + 1))), default=50.0)
            change = max(change, abs(best - value[s]))
            value[s] = best
        if change < 1e-9:
            break
    return value[(inf, NONE, NONE)]


def staircase(runs: int, seed: int = 0, down: float = 0.95,
              up: float = 0.75, first: float = -0.5) -> float:
    """Mean trials after the probe of a staircase that knows nothing of
    the drift's law, on ``runs`` simulated searches."""
    rng = random.Random(seed)
    counts = []
    for _ in range(runs):
        passes: list[float] = []
        fails: list[float] = []
        probe = rng.uniform(-DRIFT, DRIFT)   # the probe's forwarded rate
        x, trials = probe + first, 0
        while True:
            trials += 1
            if x <= rng.uniform(-DRIFT, DRIFT):
                # The newest trial wins: a pass overturns failures under it.
                passes.append(x)
                fails = [f for f in fails if f > x]
            else:
                fails.append(x)
                passes = [p for p in passes if p < x]
            h = min(fails, default=None)
            ps = sorted(passes, reverse=True)
            if h is not None and len(ps) >= 2 and h - ps[1] <= WIDTH:
                break
            if h is not None and ps and h - ps[0] <= WIDTH:
                x = ps[0] + WIDTH / 8 if h > ps[0] + WIDTH / 4 else h - down
            elif x in passes:
                x += up
            else:
                x = (h if h is not None else x) - down
        counts.append(trials)
    return statistics.mean(counts)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", type=float, default=0.25,
                    help="the oracle's rate grid, %% (default 0.25)")
    ap.add_argument("--runs", type=int, default=20000,
                    help="simulated searches for the staircase")
    args = ap.parse_args(argv)
    if not 0.05 <= args.grid <= 0.5 or args.runs < 1:
        ap.error("--grid must be in [0.05, 0.5] and --runs at least 1")
    print(f"Capacity drawn afresh within +-{DRIFT:g}% every trial, "
          f"resolution {WIDTH:g}%: mean trials, the probe included.")
    print(f"  oracle (knows the nominal capacity and the law), grid "
          f"{args.grid:g}%: {1 + oracle(args.grid):.2f}")
    print(f"  staircase (knows neither), {args.runs} runs: "
          f"{1 + staircase(args.runs):.2f}")


if __name__ == "__main__":
    main()
