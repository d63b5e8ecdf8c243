"""A whole scheduler filtering pass, with and without RDTFilter.

    .venv/bin/python -m benchmarks.bench_scheduler_pass \
        [--hosts 1000,10000] [--rounds 5]

Times Nova's ``HostFilterHandler().get_filtered_objects`` with Nova's
default ``[filter_scheduler] enabled_filters``, with and without
NUMATopologyFilter, and with and without RDTFilter (last, as the docs
configure it), over real ``nova.scheduler.host_manager.HostState`` objects
with nova-rdt's request (3 ways, dedicated CPUs, one guest NUMA node).
Four cases, each prepared outside the timed pass:

* ``fresh``: every host gets a new stats dict whose strings are new
  objects with the same content, as Nova's HostManager gives every
  request (ComputeNode reloaded from the database, HostState.update());
* ``changed``: every host publishes new content;
* ``half``: every other host publishes new content;
* ``plain``: the same hosts, fresh, and a flavor without ``rdt:`` keys.

Configurations alternate within each of ``--rounds`` rounds (with and
without RDTFilter in ABBA order), so drift hits all alike; the collector
runs before, not inside, each timed pass, as with timeit; figures are
medians of the process's CPU time (``--clock wall``
for wall time).  In the same run, RDTFilter and Nova's
AggregateInstanceExtraSpecsFilter are each timed alone, the same way over
the same fresh hosts, as the reference.  The last line is::

    scheduler-pass: hosts=N rdt_vs_aies_fresh=R pass_ratio_fresh_no_numa=R
    pass_ratio_changed_no_numa=R

(on one line) for the largest host count: RDTFilter's µs per host over
AggregateInstanceExtraSpecsFilter's, and the whole pass with RDTFilter over
the same pass without it, without NUMATopologyFilter.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import gc
import json
import logging
import random
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore")

from nova import objects  # noqa: E402
import nova.conf  # noqa: E402
from nova.scheduler import filters as sched_filters  # noqa: E402
from nova.scheduler import host_manager  # noqa: E402

from benchmarks import bench_filter  # noqa: E402
from nova_rdt.allocation import hoststate  # noqa: E402
from nova_rdt.allocation import placement  # noqa: E402
from nova_rdt.scheduler import filter as rdt_filter  # noqa: E402

objects.register_all()
CONF = nova.conf.CONF
WAY = 3407872                    # gold-6252: 11 ways of 3.25 MiB
CASES = ("fresh", "changed", "half", "plain")


def rdt_state(rng: random.Random) -> hoststate.HostRdtState:
    """A 2-socket host with a few instances' groups and a class, as its
    compute publishes it: with its claim's solver input."""
    cache = {}
    book = {}
    for cid in (0, 1):
        used = 0x3                               # the host's reserved ways
        for _ in range(rng.randrange(0, 4)):     # a few instances' groups
            way = 1 << rng.randrange(2, 11)
            if not used & way:
                book[f"i{cid}-{way}"] = placement.Reservation(
                    f"i{cid}-{way}", {"L3": {cid: 1}}, {"L3": {cid: way}})
            used |= way
        cache[cid] = hoststate.CacheIdState(
            cid, frozenset(range(cid * 8, cid * 8 + 8)), 11, WAY, 1,
            {"both": used})
    state = hoststate.HostRdtState(
        cache=cache, cdp=False, clos_free=rng.randrange(0, 8),
        mb=hoststate.MbState("percent", 10, 10, 100, (0, 1)),
        monitoring=frozenset({"llc_occupancy", "mbm_total_bytes",
                              "mbm_local_bytes"}),
        rmids=176, rmids_free=176 - rng.randrange(1, 30),
        cells={0: frozenset(range(0, 8)), 1: frozenset(range(8, 16))},
        classes={"low_priority": hoststate.ClassState(
            "low_priority", 1, 10, False)})
    return state.with_solver(placement.Host(
        resources={"L3": placement.Resource(11)}, ids={"L3": (0, 1)},
        host_ways={"L3": {0: 0x3, 1: 0x3}},
        clos=state.clos_free + len(book)), book, {})


def changed(state: hoststate.HostRdtState, k: int) -> hoststate.HostRdtState:
    """The same host after the k-th change (instances came and went)."""
    clos = (state.clos_free + k) % 8
    solver = state.solver
    host = dataclasses.replace(
        solver.host, clos=solver.host.clos - state.clos_free + clos)
    return dataclasses.replace(state, clos_free=clos,
                               rmids_free=state.rmids_free - k % 5,
                               solver=dataclasses.replace(solver, host=host))


def _fresh(stats: dict) -> dict:
    """A new dict of new, equal strings: what a DB reload yields."""
    return json.loads(json.dumps(stats))


class Hosts:
    def __init__(self, n: int, seed: int = 7):
        rng = random.Random(seed)
        now = datetime.datetime.now(datetime.UTC)
        self.hosts = []
        self.states: list[hoststate.HostRdtState | None] = []
        self.version = [0] * n
        for i in range(n):
            hs = host_manager.HostState(f"host{i}", f"node{i}", "cell1")
            state = rdt_state(rng) if i % 10 else None   # 10% plain hosts
            self.states.append(state)
            hs.stats = self._stats(i, state, 0)
            hs.service = {"disabled": False, "forced_down": False,
                          "last_seen_up": now, "created_at": now,
                          "host": hs.host, "binary": "nova-compute"}
            hs.supported_instances = [("x86_64", "kvm", "hvm")]
            hs.hypervisor_type = "QEMU"
            hs.hypervisor_version = 8002000
            agg = objects.Aggregate(
                id=i % 50, name=f"agg{i % 50}", hosts=[hs.host],
                metadata={"rdt": "true" if i % 3 else "false",
                          "ssd": "true"})
            hs.aggregates = [agg]
            bench_filter.fill_host(hs, rng)
            self.hosts.append(hs)

    @staticmethod
    def _stats(i: int, state, k: int) -> dict:
        stats = {"num_instances": str(i % 7), "io_workload": "0"}
        if state is not None:
            stats.update(changed(state, k).to_stats())
        return stats

    def prepare(self, case: str) -> None:
        """Give every host the stats a request of ``case`` would see."""
        now = datetime.datetime.now(datetime.UTC)
        for i, hs in enumerate(self.hosts):
            hs.service["last_seen_up"] = now          # heartbeats go on
            if case == "changed" or (case == "half" and i % 2):
                self.version[i] += 1
                hs.stats = self._stats(i, self.states[i], self.version[i])
                # The compute saved its node: HostState.update() copies
                # the new updated_at.
                hs.updated = bench_filter.LOADED + datetime.timedelta(
                    seconds=60 * self.version[i])
            else:
                hs.stats = _fresh(hs.stats)


def request_spec(rdt: bool):
    extra = {"hw:cpu_policy": "dedicated",
             "aggregate_instance_extra_specs:rdt": "true"}
    if rdt:
        extra["rdt:l3_cache_ways"] = "3"
    flavor = objects.Flavor(flavorid="f", name="f", vcpus=4, memory_mb=1024,
                            root_gb=1, ephemeral_gb=0, swap=0,
                            extra_specs=extra)
    topo = objects.InstanceNUMATopology(cells=[objects.InstanceNUMACell(
        id=0, cpuset=set(), pcpuset={0, 1, 2, 3}, memory=1024,
        cpu_policy="dedicated")])
    return objects.RequestSpec(
        flavor=flavor, numa_topology=topo, pci_requests=None,
        image=objects.ImageMeta(properties=objects.ImageMetaProps()),
        instance_group=None, ignore_hosts=None, force_hosts=None,
        force_nodes=None, scheduler_hints={},
        instance_uuid="00000000-0000-0000-0000-000000000001")


def filter_objects(numa: bool, rdt: bool) -> list:
    names = list(CONF.filter_scheduler.enabled_filters)
    if numa:
        names.append("NUMATopologyFilter")
    classes = {c.__name__: c for c in
               sched_filters.HostFilterHandler().get_matching_classes(
                   ["nova.scheduler.filters.all_filters"])}
    objs = [classes[n]() for n in names]
    if rdt:
        objs.append(rdt_filter.RDTFilter())
    return objs


@contextlib.contextmanager
def _quiet_gc():
    """As timeit does: collect first, no collection inside the timing, so
    the garbage of preparing a case is not charged to whichever pass
    happens to trigger the collector."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class ParseCounter:
    def __init__(self):
        self.n = 0
        self._real = rdt_filter._read
        counter = self

        def read(raw):
            counter.n += 1
            return counter._real(raw)
        rdt_filter._read = read


def run(n: int, rounds: int, numa_modes, out) -> dict:
    hosts = Hosts(n)
    handler = sched_filters.HostFilterHandler()
    counter = parse_counter()
    filters = {(numa, rdt): filter_objects(numa, rdt)
               for numa in numa_modes for rdt in (False, True)}
    rdt_alone = rdt_filter.RDTFilter()
    aies = [c for c in sched_filters.HostFilterHandler().get_matching_classes(
        ["nova.scheduler.filters.all_filters"])
        if c.__name__ == "AggregateInstanceExtraSpecsFilter"][0]()
    times: dict = {}
    parses: dict = {}
    passed: dict = {}
    ref = {"rdt": [], "aies": []}
    # Warm: every RDTFilter has seen every host once, as a running
    # scheduler has.
    for f in filters.values():
        list(handler.get_filtered_objects(f, hosts.hosts,
                                          request_spec(True)))
    rdt_alone_spec = request_spec(True)
    for h in hosts.hosts:
        rdt_alone.host_passes(h, rdt_alone_spec)
    for r in range(rounds):
        for case in CASES:
            for numa in numa_modes:
                # ABBA: which of the pair runs first alternates by round.
                pair = (False, True) if r % 2 == 0 else (True, False)
                for rdt in pair:
                    # The pair sees one content: new for the first pass
                    # (by case), the same in new objects for the second,
                    # so RDTFilter's passes see exactly the case's change.
                    hosts.prepare(case if rdt == pair[0] else "fresh")
                    spec_obj = request_spec(case != "plain")
                    before = counter.n
                    with _quiet_gc():
                        t0 = CLOCK()
                        result = handler.get_filtered_objects(
                            filters[numa, rdt], hosts.hosts, spec_obj)
                        dt = CLOCK() - t0
                    key = (case, numa, rdt)
                    times.setdefault(key, []).append(dt)
                    parses[key] = counter.n - before
                    passed[key] = len(result or [])
        # The reference: each filter alone, the same way, same hosts.
        for name, f in (("rdt", rdt_alone), ("aies", aies)):
            hosts.prepare("fresh")
            spec_obj = request_spec(True)
            with _quiet_gc():
                t0 = CLOCK()
                for h in hosts.hosts:
                    f.host_passes(h, spec_obj)
                ref[name].append((CLOCK() - t0) / n * 1e6)
        print(f"  hosts={n}: round {r + 1}/{rounds} done", file=sys.stderr)
    med = {k: statistics.median(v) for k, v in times.items()}
    rdt_us = statistics.median(ref["rdt"])
    aies_us = statistics.median(ref["aies"])
    print(f"\nhosts: {n}, rounds: {rounds} (medians), python "
          f"{sys.version.split()[0]}; RDT hosts "
          f"{sum(s is not None for s in hosts.states)}", file=out)
    print(f"{'case':8} {'NUMA filter':11} {'without RDTFilter':>18} "
          f"{'with RDTFilter':>15} {'ratio':>6} {'RDT us/host':>12} "
          f"{'parses':>7} {'passed':>7}", file=out)
    for case in CASES:
        for numa in numa_modes:
            a, b = med[case, numa, False], med[case, numa, True]
            print(f"{case:8} {'with' if numa else 'without':11} "
                  f"{a * 1e3:15.1f} ms {b * 1e3:12.1f} ms {b / a:6.2f} "
                  f"{(b - a) / n * 1e6:12.2f} {parses[case, numa, True]:7} "
                  f"{passed[case, numa, True]:7}", file=out)
    print(f"reference, fresh hosts, each filter alone: RDTFilter "
          f"{rdt_us:.2f} us/host, AggregateInstanceExtraSpecsFilter "
          f"{aies_us:.2f} us/host, ratio {rdt_us / aies_us:.2f}", file=out)
    return {
        "rdt_vs_aies_fresh": rdt_us / aies_us,
        "pass_ratio_fresh_no_numa":
            med["fresh", False, True] / med["fresh", False, False],
        "pass_ratio_changed_no_numa":
            med["changed", False, True] / med["changed", False, False],
    }


PARSES: ParseCounter | None = None


def parse_counter() -> ParseCounter:
    """The one counter of the filter's parses (it wraps the filter's
    reader once, however many runs there are)."""
    global PARSES
    if PARSES is None:
        PARSES = ParseCounter()
    return PARSES


# CPU time of this process by default: on a shared machine, wall time
# also counts the time other processes held the cores.
CLOCK = time.process_time


def main(argv=None) -> int:
    global CLOCK
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", default="1000,10000",
                    help="comma-separated host counts (default 1000,10000)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-numa-filter-only", action="store_true",
                    help="skip the passes with NUMATopologyFilter (quick)")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="process CPU time (default) or wall time")
    args = ap.parse_args(argv)
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    try:
        counts = [int(x) for x in args.hosts.split(",")]
    except ValueError:
        ap.error(f"--hosts {args.hosts!r}: expected numbers such as "
                 f"1000,10000")
    if args.rounds < 1 or any(c < 1 for c in counts):
        ap.error("--rounds and --hosts must be positive")
    CONF([], project="nova", default_config_files=[])
    # Nova's filters log each refused host; that is not what is timed.
    logging.getLogger().setLevel(logging.ERROR)
    parse_counter()
    numa_modes = (False,) if args.no_numa_filter_only else (False, True)
    print(f"clock: {args.clock}; enabled_filters: "
          f"{','.join(CONF.filter_scheduler.enabled_filters)} "
          f"[+NUMATopologyFilter] [+RDTFilter]")
    result = {}
    for n in counts:
        result = run(n, args.rounds, numa_modes, sys.stdout)
    print(f"scheduler-pass: hosts={counts[-1]} "
          f"rdt_vs_aies_fresh={result['rdt_vs_aies_fresh']:.2f} "
          f"pass_ratio_fresh_no_numa="
          f"{result['pass_ratio_fresh_no_numa']:.2f} "
          f"pass_ratio_changed_no_numa="
          f"{result['pass_ratio_changed_no_numa']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
