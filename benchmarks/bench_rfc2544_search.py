"""Trials to find throughput: nova-rdt's search, bisection and MLRsearch.

    .venv/bin/python -m benchmarks.bench_rfc2544_search [--runs 100]
        [--seed-offset 0] [--main-only] [--model NAME ...]

Three searches run against the same simulated DUTs, seed for seed, with
the same loss tolerance and resolution, and stop at the same bracket
width: nova-rdt's :func:`~nova_rdt.rfc2544.search.search`, plain RFC 2544
bisection (:func:`~nova_rdt.rfc2544.search.bisection`), and FD.io CSIT's
MLRsearch from PyPI (``pip install 'nova-rdt[bench]'``; its rows say
why they are missing when it is).  Every DUT has a capacity jitter of 0.1%
per trial and a 5% chance per trial of a transient loss burst.  The DUT
models (``nova_rdt.rfc2544.simdut.MODELS``):

* ``benign``: capacity 5-97% of 10GbE line rate at 64 B; forwards its
  capacity at any overload (the textbook DUT);
* ``collapse``: the same, in receive livelock: at line rate it forwards
  2-10x less than its capacity, falling linearly with the load;
* ``gen-ceiling``: the generator claims line rate but really sends only
  1.5-8x the DUT's capacity, with 0.1% rate-control error (standard
  deviation);
* ``collapse+ceiling``: both at once (2-10x collapse at that ceiling);
* ``livelock``: the forwarded rate past capacity falls as the overload to
  a power of 0.5-2 (3-100x under capacity at 10x overload);
* ``livelock+ceiling``: that livelock behind the 1.5-8x generator ceiling;
* ``drift``: a benign DUT whose capacity moves within +-2% of its
  nominal value between trials, independently from one trial to the
  next.

A drifting DUT has no single right answer.  A search is right when its
result is within the resolution of the capacity the DUT had *while that
search measured it*: between its edge at the lowest capacity of the
search's trials (a rate it sustained in all of them) and its edge at
their median capacity (one it sustained in half of them); above that,
the result rode a lucky trial.  Each searcher is judged on its own
trials, from a DUT built afresh from the same seed, whose drift moves on
by each trial's duration for all of them alike.  One definition serves
every speed of drift: where the capacity wanders slowly, a search meets
a narrow part of the range and its band is narrow; where it moves
independently between trials, the band comes close to the range from
-2% to the nominal capacity.  ``--whole-range`` judges on that range's
band instead, the same for every search whatever its trials met: on the
``drift`` row over seeds 0-2999, this search is then right in 98.9% of
runs, bisection in 90.3%, MLRsearch in 92.8% (98.4% re-checked); where
the capacity persists, that band is wrong for every search, which finds
the capacity the DUT had.

The ``drift`` row takes the issue's words ("drifts by +-2% between
trials") at their hardest: nothing carries over from one trial to the
next, so each trial is a fresh draw.  Real dataplanes mostly drift more
slowly than that (heat, a turbo budget, a neighbour's phases change over
tens of seconds to minutes, while interrupt coalescing and housekeeping
bursts average out within a 10 s trial), so the full run also sweeps the
drift's relaxation time (``simdut.drifting``'s ``drift_time_s``: a
random walk reflected at +-2%) from 0 (the ``drift`` row) to 600 s,
with every searcher, and says which of the issue's bars hold at each.
Two of them pull apart along it.  Where the capacity moves independently
(0-10 s), single passes are often lucky ones, MLRsearch's accuracy falls
to 95-96%, and a search that re-checks its result pays for the
re-checks that fail: this one needs about 0.62-0.69x bisection's
trials, not 0.6x.  Where it moves slowly (30 s and more), one pass is as
good as two: this one needs 0.49-0.58x, but MLRsearch without re-checks
is right 98-99% of the time in 3.2-3.8 trials, fewer than any search
that re-checks its result can take (see below).  Against MLRsearch held
to the same re-check, this search needs fewer trials at every speed.

That 0.6x (5.64 trials on the ``drift`` row) is not out of reach for
want of information: ``benchmarks.drift_oracle`` puts a search that knows
the nominal capacity and the +-2% law at 4.4 trials, and a staircase that
knows neither at 5.1.  The staircase is never asked what this search
must answer: whether a pass just above the one-failure estimate proves a
collapse (the edge is far above) or rode a capacity that jumped up for
one trial.  Variants that spend a trial on that question (a step up from
such a pass before the collapse probe, the pass trial before the
failure, 0.95-resolution steps down and 0.75 up, a step up from the
highest pass when the collapse probe's bracket starts near it) reached
5.5-6.2 trials on ``drift`` over seeds 0-99, 1000-1099 and 2000-2099,
over 5.64 on two of the three, and cost every collapsing row 0.9-1.5
trials: none was kept.  On the band of the drift's whole range
(``--whole-range``) this search is right in 98-99% of ``drift`` runs on
those ranges: two passes at or above a result still ride lucky trials
about once in a hundred runs.

A run is *within the resolution* when its result (the sent rate that
two full-length passes back, for this search; the highest pass, for
bisection; the relevant lower bound, for MLRsearch) is within the
resolution of the true rate.  The first table is the issue's set-up (tolerance
0.1%, resolution 1%, 10 s trials): per searcher and model, the share of
runs within the resolution, then the mean number of trials.  Then every
tolerance and resolution of the grid, and the checks of that set-up
(the exit status is 1 when one fails).

MLRsearch runs with one goal as close to ours as its API allows: the
same loss ratio and relative width, exceed ratio 0, full-length trials
from the first (no shorter preceding targets, which would only add
trials), no warm-up, and the generator's claimed maximum as its
``max_load``.  Its measurer hands it the frames really sent and
forwarded, as ours gets them.  It runs twice: with a duration sum of one
trial (``MLRsearch 1.2.1``: a single trial decides, as in RFC 2544, and
nothing is re-checked), and with a duration sum of two trials
(``MLRsearch 1.2.1, re-checked``: its lower bound must pass two
full-length trials, the guarantee this search gives; MLRsearch then
needs one preceding target, run at the same 10 s trials).  The issue's
bar (fewer trials than MLRsearch wherever its accuracy is within 2
points) is checked against both.  Against the first it cannot hold
where MLRsearch is accurate: a search that re-checks its result needs
at least four trials (the probe, a failure near the edge, a pass and its
re-check), and MLRsearch takes 3.1 on ``benign``.  It holds there only
while MLRsearch's accuracy stays more than 2 points under this search's
(over seeds 0-999 it is 96%; on 4 of the 10 ranges 0-99, 1000-1099, ...,
9000-9099 it is 98% or more, and on those the ``benign`` row misses that
bar).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys

from nova_rdt.rfc2544 import search
from nova_rdt.rfc2544 import simdut

LINE_64B = 14_880_952
# The set-up: the table the checks are made on.
MAIN = (0.001, 0.01)
GRID = [(tol, res) for tol in (0.0, 0.001) for res in (0.005, 0.01)]
TRIAL_S = 10.0
# The fewest trials a search that re-checks its result can take on these
# models: it may stop only with a failure within the resolution above
# two passes, and its first trial, at the generator's maximum, is more
# than the resolution above the edge (capacities reach 97% of line rate,
# 2% more with drift: only a capacity drawn within 0.04% of the top of
# both ranges comes within 1% of line rate, far rarer than one run in a
# thousand).  MLRsearch without re-checks may stop after one pass under
# such a failure: three trials.
FLOOR = 4
# The drift's relaxation times the full run sweeps, seconds (0: a fresh
# draw every trial, the ``drift`` row).
DRIFT_TIMES = (0.0, 10.0, 30.0, 60.0, 120.0, 600.0)


def _mlrsearch():
    """(search function, None), or (None, why it cannot run)."""
    try:
        import MLRsearch
    except ImportError as e:
        return None, (f"MLRsearch is not installed ({e}); "
                      f"pip install 'nova-rdt[bench]'")

    class Measurer(MLRsearch.AbstractMeasurer):
        def __init__(self, measure):
            self._measure = measure
            self.count = 0

        def measure(self, intended_duration, intended_load):
            self.count += 1
            t = self._measure(intended_load, intended_duration)
            return MLRsearch.MeasurementResult(
                intended_duration=intended_duration,
                intended_load=intended_load,
                offered_count=t.tx, forwarding_count=t.rx)

    def mlr(measure, max_rate, cfg, trials=1):
        # More than one trial's duration needs a preceding target: a
        # coarser pass with the same 10 s trials.
        goal = MLRsearch.SearchGoal(
            loss_ratio=cfg.loss_tolerance, exceed_ratio=0.0,
            relative_width=cfg.resolution,
            initial_trial_duration=cfg.trial_duration,
            final_trial_duration=cfg.trial_duration,
            duration_sum=trials * cfg.trial_duration,
            preceding_targets=0 if trials == 1 else 1,
            expansion_coefficient=2, fail_fast=False)
        config = MLRsearch.Config(
            goals=[goal], min_load=max_rate / 1e4, max_load=max_rate,
            search_duration_max=1200.0, warmup_duration=None)
        m = Measurer(measure)
        out = MLRsearch.MultipleLossRatioSearch(config=config).search(
            measurer=m, debug=lambda _msg: None)
        lower = out[goal].relevant_lower_bound
        return float(lower) if lower is not None else 0.0, m.count

    return mlr, None


def _ours(fn):
    def run(measure, max_rate, cfg):
        r = fn(measure, max_rate, cfg)
        return r.rate_pps, r.trial_count
    return run


# Searcher names, and the short ones the wide tables use.
OURS, BISECTION = "nova-rdt search", "bisection"
MLR, MLR2 = "MLRsearch 1.2.1", "MLRsearch 1.2.1, re-checked"
SHORT = {OURS: "nova-rdt", BISECTION: "bisection", MLR: "MLRsearch",
         MLR2: "MLR x2"}


def searchers():
    """[(name, function or None, why it is missing)]."""
    mlr, why = _mlrsearch()
    twice = mlr and functools.partial(mlr, trials=2)
    return [(OURS, _ours(search.search), None),
            (BISECTION, _ours(search.bisection), None),
            (MLR, mlr, why), (MLR2, twice, why)]


def score(model, fn, cfg, runs: int, offset: int = 0, maker=None,
          whole_range: bool = False) -> tuple[float, float]:
    """(mean trials, share of runs within the resolution), seeds
    ``offset`` .. ``offset + runs - 1``, each on a fresh DUT (from
    ``maker``, default the model's), judged on the capacities the
    search met or (``whole_range``) on the drift's whole range."""
    make = maker or simdut.MODELS[model]
    counts, ok = [], 0
    res = cfg.resolution
    for seed in range(offset, offset + runs):
        dut = make(seed, LINE_64B)
        rate, count = fn(dut.measure, LINE_64B, cfg)
        counts.append(count)
        band = dut.range_band if whole_range else dut.truth_band
        lo, hi = band(cfg.loss_tolerance)
        ok += lo * (1 - res) <= rate <= hi * (1 + res)
    return statistics.mean(counts), ok / runs


def checks(table, models) -> list[tuple[bool, str]]:
    """The issue's must-show, on the main set-up's scores."""
    out = []
    for m in models:
        bar = 1.0 if m in simdut.COLLAPSING else 0.6
        out += _checks(m, {name: row[m] for name, row in table.items()},
                       bar)
    return out


def _checks(m, cells, bar) -> list[tuple[bool, str]]:
    """``cells``: searcher name -> (mean trials, share right)."""
    out = []
    (a, oka), (b, _okb) = cells[OURS], cells[BISECTION]
    out.append((oka >= 0.99, f"{m}: {oka:.0%} within the resolution "
                             f"(at least 99%)"))
    out.append((a <= bar * b, f"{m}: {a:.2f} mean trials, "
                              f"{a / b:.2f}x bisection's {b:.2f} "
                              f"(at most {bar:g}x)"))
    for peer in (MLR, MLR2):
        if peer not in cells:
            continue
        c, okc = cells[peer]
        if okc >= oka - 0.02:
            why = ""
            if c < FLOOR <= a:
                why = (f"; no search that re-checks its result can take "
                       f"fewer than {FLOOR} trials on this model")
            out.append((a < c, f"{m}: {a:.2f} mean trials against "
                               f"{peer}'s {c:.2f} (its accuracy "
                               f"{okc:.0%} is within 2 points of "
                               f"{oka:.0%}: fewer needed{why})"))
        else:
            out.append((True, f"{m}: {peer}'s accuracy {okc:.0%} "
                              f"is more than 2 points under "
                              f"{oka:.0%} ({c:.2f} mean trials "
                              f"against {a:.2f})"))
    return out


def sweep(live, cfg, runs: int, offset: int, whole_range: bool = False
          ) -> list[str]:
    """The drift's relaxation times, on the main set-up: one line each,
    every searcher's (mean trials, % right), and the bars' verdicts."""
    lines = []
    for t in DRIFT_TIMES:
        maker = functools.partial(simdut.drifting, drift_time_s=t)
        cells = {name: score("drift", fn, cfg, runs, offset, maker,
                             whole_range) for name, fn in live}
        row = f"{t:7g} s"
        for name, _fn in live:
            mean, ok = cells[name]
            row += f" {mean:9.2f} {100 * ok:5.1f}"
        verdicts = _checks(f"{t:g} s", cells, 0.6)
        row += "  " + " ".join("ok" if ok else "MISS"
                               for ok, _text in verdicts)
        lines.append(row)
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100,
                    help="seeds per model and set-up (default 100)")
    ap.add_argument("--model", action="append", choices=list(simdut.MODELS),
                    help="only this DUT model (repeatable)")
    ap.add_argument("--seed-offset", type=int, default=0, metavar="N",
                    help="first seed (default 0): another range of seeds "
                         "checks that a result is not an artefact of these")
    ap.add_argument("--whole-range", action="store_true",
                    help="judge a drifting DUT on the band of the drift's "
                         "whole range (edge at -2%% to the nominal edge) "
                         "instead of the capacities each search met")
    ap.add_argument("--main-only", action="store_true",
                    help="only the issue's set-up, not the whole grid "
                         "and the drift sweep")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.seed_offset < 0:
        ap.error("--runs must be at least 1 and --seed-offset at least 0")
    models = args.model or list(simdut.MODELS)
    found = searchers()
    for name, fn, why in found:
        if fn is None:
            print(f"skipped: {name}: {why}")
    live = [(name, fn) for name, fn, _why in found if fn is not None]

    def cfg_for(tol, res):
        return search.SearchConfig(loss_tolerance=tol, resolution=res,
                                   trial_duration=TRIAL_S)

    tol, res = MAIN
    cfg = cfg_for(tol, res)
    table = {name: {m: score(m, fn, cfg, args.runs, args.seed_offset,
                             whole_range=args.whole_range)
                    for m in models}
             for name, fn in live}
    seeds = f"seeds ({args.seed_offset}-{args.seed_offset + args.runs - 1})"
    print(f"\nTolerance {tol:.1%}, resolution {res:.0%}, {TRIAL_S:g} s "
          f"trials, {args.runs} {seeds} per model: share of runs within "
          f"the resolution / mean trials.\n")
    print("| searcher | " + " | ".join(models) + " |")
    print("|---|" + "---|" * len(models))
    for name, _fn in live:
        cells = [f"{ok:.0%} / {mean:.1f}" for mean, ok in
                 (table[name][m] for m in models)]
        print(f"| {name} | " + " | ".join(cells) + " |")

    if not args.main_only:
        print(f"\nEvery set-up ({args.runs} {seeds}): mean trials and % "
              f"within the resolution; ratio = ours / bisection.\n")
        head = f"{'model':>16} {'tol':>6} {'res':>5}"
        for name, _fn in live:
            head += f" {SHORT[name]:>9} {'ok%':>5}"
        print(head + f" {'ratio':>6}")
        for m in models:
            for t, r in GRID:
                c = cfg_for(t, r)
                row = f"{m:>16} {t:6.1%} {r:5.1%}"
                got = [(name, score(m, fn, c, args.runs, args.seed_offset,
                                    whole_range=args.whole_range))
                       for name, fn in live]
                for _name, (mean, ok) in got:
                    row += f" {mean:9.2f} {100 * ok:5.0f}"
                print(row + f" {got[0][1][0] / got[1][1][0]:6.2f}")

        print(f"\nThe drift's relaxation time (0: a fresh draw every "
              f"trial, the drift row), the issue's set-up, {args.runs} "
              f"{seeds}: mean trials and % within the resolution, then "
              f"the bars as in the checks below (within 99%, at most "
              f"0.6x bisection, then fewer than each MLRsearch as "
              f"accurate).\n")
        head = f"{'time':>9}"
        for name, _fn in live:
            head += f" {SHORT[name]:>9} {'ok%':>5}"
        print(head + "  bars")
        for line in sweep(live, cfg, args.runs, args.seed_offset,
                          args.whole_range):
            print(line)

    print("\nChecks on the issue's set-up:")
    failed = 0
    for ok, text in checks(table, models):
        failed += not ok
        print(f"  {'ok  ' if ok else 'MISS'} {text}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
