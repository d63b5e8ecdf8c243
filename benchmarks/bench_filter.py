"""RDTFilter against Nova's own filters over the same 10,000 host states.

    .venv/bin/python benchmarks/bench_filter.py [--hosts 10000] [--repeat 3]

Times ``host_passes`` of RDTFilter, AggregateInstanceExtraSpecsFilter and
NUMATopologyFilter over one list of real ``nova.scheduler.host_manager.
HostState`` objects in one process, and prints µs per host and the ratios.
It also counts how often a host's published RDT state is parsed, to show
it happens once per change of a host's content, not once per request nor
once per host-state update.  ``bench_scheduler_pass`` times whole passes.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import random
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore")

from nova import objects  # noqa: E402
from nova.scheduler import host_manager  # noqa: E402
from nova.scheduler.filters import aggregate_instance_extra_specs  # noqa
from nova.scheduler.filters import numa_topology_filter  # noqa: E402

from nova_rdt.allocation import hoststate  # noqa: E402
from nova_rdt.allocation import placement  # noqa: E402
from nova_rdt.scheduler import filter as rdt_filter  # noqa: E402

objects.register_all()
WAY = 3407872
LOADED = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def rdt_stats(rng: random.Random) -> dict[str, str]:
    """A host's document, with the solver's input (the same host: one
    1-way instance per way drawn)."""
    cache = {}
    book = {}
    for cid in (0, 1):
        used = 0x3
        for _ in range(rng.randrange(0, 4)):    # a few instances' groups
            way = 1 << rng.randrange(2, 11)
            if not used & way:
                book[f"i{cid}-{way}"] = placement.Reservation(
                    f"i{cid}-{way}", {"L3": {cid: 1}}, {"L3": {cid: way}})
            used |= way
        cache[cid] = hoststate.CacheIdState(
            cid, frozenset(range(cid * 8, cid * 8 + 8)), 11, WAY, 1,
            {"both": used})
    s = hoststate.HostRdtState(
        cache=cache, cdp=False, clos_free=rng.randrange(0, 8),
        mb=hoststate.MbState("percent", 10, 10, 100, (0, 1)),
        monitoring=frozenset({"llc_occupancy"}), rmids=176,
        rmids_free=176 - rng.randrange(1, 30))
    s = s.with_solver(placement.Host(
        resources={"L3": placement.Resource(11)}, ids={"L3": (0, 1)},
        host_ways={"L3": {0: 0x3, 1: 0x3}},
        clos=s.clos_free + len(book)), book, {})
    return {"uptime": "1", **s.to_stats()}


def fill_host(hs, rng: random.Random) -> None:
    """The compute-side fields every benchmark host has: two NUMA cells
    of 8 pCPUs, some pinned, and Nova's allocation defaults."""
    hs.numa_topology = objects.NUMATopology(cells=[
        objects.NUMACell(
            id=c, cpuset=set(), pcpuset=set(range(c * 8, c * 8 + 8)),
            memory=16384, memory_usage=0, cpu_usage=0,
            pinned_cpus=set(rng.sample(range(c * 8, c * 8 + 8),
                                       rng.randrange(0, 6))),
            siblings=[{x} for x in range(c * 8, c * 8 + 8)],
            mempages=[objects.NUMAPagesTopology(
                size_kb=4, total=4194304, used=0)],
            network_metadata=objects.NetworkMetadata(
                physnets=set(), tunneled=False))
        for c in (0, 1)])
    hs.cpu_allocation_ratio = 1.0
    hs.ram_allocation_ratio = 1.0
    hs.allocation_candidates = [{"mappings": {}}]
    hs.limits = {}
    hs.pci_stats = None
    # What HostState.update() copies from the ComputeNode: the time of
    # its last save.
    hs.updated = LOADED


def host_states(n: int, seed: int = 7) -> list:
    rng = random.Random(seed)
    hosts = []
    for i in range(n):
        hs = host_manager.HostState(f"host{i}", f"node{i}", "cell1")
        hs.stats = rdt_stats(rng) if i % 10 else {"uptime": "1"}
        agg = objects.Aggregate(id=i % 50, name=f"agg{i % 50}",
                                hosts=[hs.host],
                                metadata={"rdt": "true" if i % 3 else
                                          "false", "ssd": "true"})
        hs.aggregates = [agg]
        fill_host(hs, rng)
        hosts.append(hs)
    return hosts


def request_spec(ways: int):
    flavor = objects.Flavor(
        flavorid="rdt", name="rdt", vcpus=4, memory_mb=1024,
        extra_specs={"rdt:l3_cache_ways": str(ways),
                     "hw:cpu_policy": "dedicated",
                     "aggregate_instance_extra_specs:rdt": "true"})
    topo = objects.InstanceNUMATopology(cells=[objects.InstanceNUMACell(
        id=0, cpuset=set(), pcpuset={0, 1, 2, 3}, memory=1024,
        cpu_policy="dedicated")])
    return objects.RequestSpec(
        flavor=flavor, numa_topology=topo, pci_requests=None,
        image=objects.ImageMeta(properties=objects.ImageMetaProps()),
        instance_uuid="00000000-0000-0000-0000-000000000001")


def time_filter(f, hosts, spec_obj, repeat: int) -> tuple[float, int]:
    runs = []
    passed = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        passed = sum(1 for h in hosts if f.host_passes(h, spec_obj))
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs) / len(hosts) * 1e6, passed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--numa-hosts", type=int, default=None,
                    help="hosts for NUMATopologyFilter (default: all)")
    args = ap.parse_args(argv)

    hosts = host_states(args.hosts)
    spec_obj = request_spec(3)
    parses = {"n": 0}
    real = rdt_filter._read

    def counting(raw):
        parses["n"] += 1
        return real(raw)
    rdt_filter._read = counting

    rdt = rdt_filter.RDTFilter()
    # First pass: every host's state is parsed and cached.
    cold, _ = time_filter(rdt, hosts, spec_obj, 1)
    first = parses["n"]
    warm, rdt_pass = time_filter(rdt, hosts, spec_obj, args.repeat)
    other = request_spec(2)                 # a second request, same states
    time_filter(rdt, hosts, other, 1)
    after_requests = parses["n"]
    for h in hosts:                         # an update, same content
        h.stats = json.loads(json.dumps(h.stats))
    time_filter(rdt, hosts, spec_obj, 1)
    after_update = parses["n"]
    for h in hosts:                         # an update, new content
        if hoststate.STATS_KEY in h.stats:
            st = hoststate.HostRdtState.from_stats(h.stats)
            h.stats = {**h.stats, **dataclasses.replace(
                st, clos_free=(st.clos_free + 1) % 8).to_stats()}
            h.updated += datetime.timedelta(seconds=60)   # saved again
    time_filter(rdt, hosts, spec_obj, 1)
    after_change = parses["n"]

    agg, agg_pass = time_filter(
        aggregate_instance_extra_specs.AggregateInstanceExtraSpecsFilter(),
        hosts, spec_obj, args.repeat)
    numa_hosts = hosts[:args.numa_hosts] if args.numa_hosts else hosts
    numa, numa_pass = time_filter(numa_topology_filter.NUMATopologyFilter(),
                                  numa_hosts, spec_obj, args.repeat)

    n = len(hosts)
    print(f"hosts: {n}, repeats: {args.repeat} (median), python "
          f"{sys.version.split()[0]}")
    print(f"{'filter':38} {'us/host':>9} {'passed':>8}")
    print(f"{'RDTFilter (warm: state cached)':38} {warm:9.2f} {rdt_pass:8}")
    print(f"{'RDTFilter (cold: parses every host)':38} {cold:9.2f}")
    print(f"{'AggregateInstanceExtraSpecsFilter':38} {agg:9.2f} "
          f"{agg_pass:8}")
    print(f"{'NUMATopologyFilter':38} {numa:9.2f} {numa_pass:8}"
          f"{'' if len(numa_hosts) == n else f' (over {len(numa_hosts)})'}")
    print(f"ratio RDTFilter/AggregateInstanceExtraSpecsFilter: "
          f"{warm / agg:.2f} (cold {cold / agg:.2f}); target <= 2")
    print(f"ratio RDTFilter/NUMATopologyFilter: {warm / numa:.4f}")
    print(f"state parses: first pass {first}, after {args.repeat} more "
          f"passes and a second request {after_requests}, after an "
          f"update with the same content {after_update}, after one with "
          f"new content {after_change}")
    rdt_hosts = sum(1 for h in hosts if hoststate.STATS_KEY in h.stats)
    ok = (first == rdt_hosts and after_requests == first
          and after_update == first and after_change == 2 * first)
    print("parsed once per change of content:", "yes" if ok else "NO")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
