"""The runtime controller against static and manual layouts, in simulation.

    .venv/bin/python -m benchmarks.bench_controller [--periods 3600]
        [--seeds 5]

Pure simulation; nothing here touches resctrl.  The policies and the
governor are the controller's own code (:mod:`nova_rdt.controller`), fed
simulated MBM and an SLO signal each period, exactly as the daemon feeds
them real counters.

The model (all of it; judge the figures by it):

* One host with memory bandwidth ``CAPACITY`` (GB/s).  A core streaming
  unthrottled moves ``CORE_BW``; Intel MBA in percent mode delays each
  core's requests, so a throttled core moves ``CORE_BW * mb / 100``
  (linear; real MBA is coarser at low settings, which would flatter no
  one in particular, so it is left out).  MB is per core: a class at 10%
  with three busy members uses three times 10%.
* A protected instance with time-varying demand: a slow wave (a
  20-minute "day") plus short bursts.  Its latency is queueing delay at
  the memory controller, ``base / (1 - rho)`` with ``rho`` the offered
  load over capacity (capped at 0.98): latency grows with the bandwidth
  others use.  The SLO is ``4 x base`` (violated above rho = 0.75).
  When demand exceeds capacity, everyone's bandwidth is scaled down
  alike.
* Best-effort neighbours, each one core streaming (STREAM, memtester)
  while busy and idle otherwise, with exponentially distributed busy and
  idle phases: three in class ``low_priority`` (the seeds' STREAM
  neighbours), two in class ``batch`` (bursty jobs that arrived later).
  Their traffic does not depend on their cache ways (streaming), so in
  this model way changes cost changes and buy nothing.
* The controller sees each period's MBM per group and the protected
  instance's p99, both with 5% noise, and its writes take effect from
  the next period (one period of detection lag, as on a real host).

Layouts compared:

* ``static``: every class unthrottled, as booted.
* ``manual``: the seeds' layout (000/002): the operator saw the STREAM
  neighbours and put ``low_priority`` at MB 10%; ``batch`` stays as
  booted.  This is the reference for best-effort bandwidth.
* ``manual-all``: every class at MB 10% for ever (shown for honesty:
  the fewest violations a fixed layout gets, at the least bandwidth).
* each controller policy (``slack`` from the SLO signal,
  ``bandwidth-share`` from MBM alone, with the capacity known).

A *violation* is a period whose true latency is above the SLO.
*Best-effort bandwidth* is what the neighbours actually moved, summed
over the run.  *Changes* are schemata writes.  The last line is
``controller: best=<policy> violations=<n> static=<n> manual=<n>
be_bandwidth_vs_manual=<ratio>``, where best is the policy with the
fewest violations among those giving best effort at least 1.5 times the
manual layout's bandwidth (or the fewest violations overall if none
does).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random

from nova_rdt.controller import governor as gov_mod
from nova_rdt.controller import model as m
from nova_rdt.controller import policy as pol

CAPACITY = 100.0          # GB/s the memory controllers deliver
CORE_BW = 12.0            # GB/s one streaming core moves unthrottled
BASE_LATENCY = 1.0        # protected p99 on an idle host (any unit)
SLO = 4.0 * BASE_LATENCY
RHO_CAP = 0.98
NOISE = 0.05
CLASSES = {"low_priority": 3, "batch": 2}
# Mean busy / idle phase lengths, in periods, per class.
PHASES = {"low_priority": (300.0, 300.0), "batch": (120.0, 400.0)}
STATIC_WAYS = 2
FIXED = {
    "static": {"low_priority": 100, "batch": 100},
    "manual": {"low_priority": 10, "batch": 100},
    "manual-all": {"low_priority": 10, "batch": 10},
}


@dataclasses.dataclass
class Result:
    layout: str
    violations: int = 0
    be_gb: float = 0.0
    changes: int = 0
    worst_latency: float = 0.0


def protected_demand(t: int, rng: random.Random) -> float:
    wave = 0.5 + 0.5 * math.sin(2 * math.pi * t / 1200.0)
    burst = 10.0 if rng.random() < 0.05 else 0.0
    return 25.0 + 30.0 * wave + burst + rng.gauss(0, 1.5)


def neighbour_schedule(periods: int, rng: random.Random) -> dict:
    """Busy (True) or idle per period, per neighbour, per class."""
    out = {}
    for cls, n in CLASSES.items():
        busy_mean, idle_mean = PHASES[cls]
        rows = []
        for _ in range(n):
            row: list[bool] = []
            busy = rng.random() < busy_mean / (busy_mean + idle_mean)
            while len(row) < periods:
                length = max(1, int(rng.expovariate(
                    1.0 / (busy_mean if busy else idle_mean))))
                row.extend([busy] * length)
                busy = not busy
            rows.append(row[:periods])
        out[cls] = rows
    return out


def simulate(layout: str, periods: int, seed: int) -> Result:
    rng = random.Random(seed)
    demand = [protected_demand(t, rng) for t in range(periods)]
    sched = neighbour_schedule(periods, rng)
    noise = random.Random(seed + 1000)
    res = Result(layout)
    mb = dict(FIXED.get(layout, FIXED["static"]))
    ways = {c: STATIC_WAYS for c in CLASSES}
    policy = governor = None
    units = m.MbUnits(m.PERCENT, min=10, gran=10, max=100)
    if layout not in FIXED:
        bounds = m.Bounds(mb_min=10, mb_step=10, ways_min=1)
        kwargs = {"capacity": CAPACITY * 1e9} \
            if layout == "bandwidth-share" else {}
        policy = pol.make(layout, **kwargs)
        governor = gov_mod.Governor(bounds, units, min_cbm_bits=1,
                                    min_interval=2.0, raise_hold=3)
    for t in range(periods):
        be = {c: sum(CORE_BW * mb[c] / 100.0 for busy in sched[c]
                     if busy[t]) for c in CLASSES}
        prot = demand[t]
        offered = prot + sum(be.values())
        scale = min(1.0, CAPACITY / offered) if offered > 0 else 1.0
        rho = min(offered / CAPACITY, RHO_CAP)
        latency = BASE_LATENCY / (1.0 - rho)
        res.worst_latency = max(res.worst_latency, latency)
        if latency > SLO:
            res.violations += 1
        res.be_gb += sum(be.values()) * scale
        if policy is None:
            continue

        def seen(x: float) -> float:
            return x * (1.0 + noise.uniform(-NOISE, NOISE))

        obs = m.Observation(
            now=float(t),
            classes=tuple(m.ClassState(
                c, mb[c], 100, ways[c], STATIC_WAYS,
                bandwidth=seen(be[c] * scale) * 1e9)
                for c in CLASSES),
            protected=(m.ProtectedState(
                "protected", bandwidth=seen(prot * scale) * 1e9,
                slo=seen(latency), slo_target=SLO),))
        for a in governor.filter(obs, policy.decide(obs, governor.bounds,
                                                    units)):
            if a.applied:
                mb[a.cls], ways[a.cls] = a.mb, a.ways
                res.changes += 1
    return res


LAYOUTS = ("static", "manual", "manual-all", "slack", "bandwidth-share")
POLICIES = ("slack", "bandwidth-share")


def run(periods: int, seeds: int) -> dict[str, Result]:
    total = {name: Result(name) for name in LAYOUTS}
    for seed in range(seeds):
        for name in LAYOUTS:
            r = simulate(name, periods, seed)
            t = total[name]
            t.violations += r.violations
            t.be_gb += r.be_gb
            t.changes += r.changes
            t.worst_latency = max(t.worst_latency, r.worst_latency)
    return total


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="bench_controller",
                                description=__doc__.splitlines()[0])
    p.add_argument("--periods", type=int, default=3600,
                   help="controller periods (seconds) per run")
    p.add_argument("--seeds", type=int, default=5,
                   help="independent runs (neighbour schedules) summed")
    args = p.parse_args(argv)
    if args.periods < 10 or args.seeds < 1:
        p.error("--periods must be >= 10 and --seeds >= 1")
    results = run(args.periods, args.seeds)
    manual = results["manual"]
    n = args.periods * args.seeds
    print(f"{args.seeds} runs x {args.periods} periods; SLO p99 <= "
          f"{SLO:g} x idle latency; capacity {CAPACITY:g} GB/s")
    print(f"{'layout':<16}{'violations':>11}{'viol %':>8}"
          f"{'BE GB/s':>9}{'BE/manual':>10}{'changes':>9}{'worst p99':>10}")
    for name in LAYOUTS:
        r = results[name]
        ratio = r.be_gb / manual.be_gb if manual.be_gb else float("inf")
        print(f"{name:<16}{r.violations:>11}"
              f"{100.0 * r.violations / n:>7.1f}%"
              f"{r.be_gb / n:>9.2f}{ratio:>10.2f}{r.changes:>9}"
              f"{r.worst_latency:>10.1f}")
    generous = [results[p] for p in POLICIES
                if results[p].be_gb >= 1.5 * manual.be_gb]
    best = min(generous or [results[p] for p in POLICIES],
               key=lambda r: (r.violations, -r.be_gb))
    ratio = best.be_gb / manual.be_gb if manual.be_gb else float("inf")
    print(f"controller: best={best.layout} violations={best.violations} "
          f"static={results['static'].violations} "
          f"manual={manual.violations} be_bandwidth_vs_manual={ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
