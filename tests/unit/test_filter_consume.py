"""RDTFilter inside Nova's scheduling loop, on Nova's own objects.

Nova's ``SchedulerManager._schedule`` filters the same ``HostState``
objects once per instance of a request and calls
``HostState.consume_from_request`` on the host it picked, which counts
that instance's RAM, CPUs and NUMA cells.  The filter must count its
ways the same way; and for a NUMA guest it must judge the host cell
Nova's own NUMA fit will pick, not any cell with room.
"""

import datetime
import itertools

import pytest

nova = pytest.importorskip("nova", reason="needs nova (the nova extra)")

from nova import objects  # noqa: E402
from nova.scheduler import filters as nova_filters  # noqa: E402
from nova.scheduler import host_manager  # noqa: E402
from nova.virt import hardware  # noqa: E402

from nova_rdt.allocation import hoststate  # noqa: E402
from nova_rdt.allocation import planner  # noqa: E402
from nova_rdt.allocation import spec  # noqa: E402
from nova_rdt.scheduler import claim  # noqa: E402
from nova_rdt.scheduler import filter as rdt_filter  # noqa: E402
from tests.unit.test_planner import published  # noqa: E402
from tests.unit.test_planner import state as bare_state  # noqa: E402

objects.register_all()

CELLS = {0: frozenset(range(0, 4)), 1: frozenset(range(4, 8))}


def state(**kw):
    """A host state as a compute of this release publishes it."""
    return published(bare_state(**kw))


def host_numa(free_pcpus=(4, 4), memory=(8192, 8192), shared=False):
    """Two host cells of 4 pCPUs (or 4 shared CPUs) each (cache ids 0
    and 1)."""
    return objects.NUMATopology(cells=[
        objects.NUMACell(
            id=c, socket=c,
            cpuset=set(range(c * 4, c * 4 + 4)) if shared else set(),
            pcpuset=set() if shared else set(range(c * 4, c * 4 + 4)),
            memory=memory[c], memory_usage=0, cpu_usage=0,
            pinned_cpus=set() if shared else set(
                range(c * 4, c * 4 + 4 - free_pcpus[c])),
            siblings=[{x} for x in range(c * 4, c * 4 + 4)],
            mempages=[objects.NUMAPagesTopology(
                size_kb=4, total=memory[c] * 256, used=0)],
            network_metadata=objects.NetworkMetadata(
                physnets=set(), tunneled=False))
        for c in (0, 1)])


def host(s, name="h", numa=None, instances=0):
    hs = host_manager.HostState(name, name, "cell")
    hs.stats = s.to_stats()
    hs.num_instances = instances
    hs.free_ram_mb = hs.total_usable_ram_mb = 65536
    hs.free_disk_mb = 1 << 20
    hs.vcpus_total = 16
    hs.numa_topology = numa
    hs.limits = {}
    hs.pci_stats = None
    hs.cpu_allocation_ratio = hs.ram_allocation_ratio = 1.0
    # As loaded from its ComputeNode: each test's hosts are new ones.
    hs.updated = _EPOCH + datetime.timedelta(seconds=next(_LOADS))
    return hs


_EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
_LOADS = itertools.count()


def request(extra, pinned_cells=None, vcpus=4):
    topo = None
    if pinned_cells:
        topo = objects.InstanceNUMATopology(cells=[
            objects.InstanceNUMACell(
                id=i, cpuset=set(), pcpuset=set(cpus), memory=512,
                cpu_policy="dedicated")
            for i, cpus in enumerate(pinned_cells)])
    return objects.RequestSpec(
        flavor=objects.Flavor(flavorid="f", vcpus=vcpus, memory_mb=512,
                              root_gb=1, ephemeral_gb=0, swap=0,
                              extra_specs=extra),
        numa_topology=topo, pci_requests=None, num_instances=1,
        requested_resources=[],
        instance_uuid="00000000-0000-0000-0000-000000000000")


def schedule(hosts, spec_obj, count):
    """Nova's loop: filter, pick the first passing host, consume it."""
    handler = nova_filters.HostFilterHandler()
    f = rdt_filter.RDTFilter()
    spec_obj.num_instances = count         # as the API sets it
    picked = []
    for index in range(count):
        spec_obj.instance_uuid = f"00000000-0000-0000-0000-{index:012d}"
        passing = list(handler.get_filtered_objects([f], hosts, spec_obj,
                                                    index))
        if not passing:
            break
        chosen = passing[0]
        chosen.consume_from_request(spec_obj)
        picked.append(chosen.host)
        hosts = passing
    return picked


FOUR = {"rdt:l3_cache_ways": "4"}


def test_a_multi_create_counts_its_earlier_instances():
    # 9 free ways per cache id: two 4-way instances, not three.
    hs = host(state())
    assert schedule([hs], request(FOUR), 3) == ["h", "h"]
    assert hs.num_instances == 2


def test_room_for_three_passes_three():
    three = {"rdt:l3_cache_ways": "3"}
    assert schedule([host(state())], request(three), 3) == ["h"] * 3


def test_the_next_instance_goes_elsewhere():
    a, b = host(state(), "a"), host(state(), "b")
    assert schedule([a, b], request(FOUR), 4) == ["a", "a", "b", "b"]
    assert schedule([host(state(), "c")], request(FOUR), 1) == ["c"]


def test_a_new_request_starts_from_the_published_state():
    hs = host(state(), instances=5)
    assert schedule([hs], request(FOUR), 2) == ["h", "h"]
    # The same HostState, a new RequestSpec: its instances count anew
    # (in Nova 34 a new request also gets new HostStates).
    again = request(FOUR)
    f = rdt_filter.RDTFilter()
    hs.stats = state(used=(0x3 | 0x3c, 0x3 | 0x3c)).to_stats()
    assert f.host_passes(hs, again)


def test_clos_are_counted_too():
    hs = host(state(clos_free=1))
    assert schedule([hs], request({"rdt:mb_percent": "50"}), 2) == ["h"]


def test_a_class_is_made_once_then_free():
    # The first member makes the group (the last CLOS, 4 ways); the
    # others join it and cost nothing.
    low = hoststate.ClassState("low", 4, None, False)
    hs = host(state(clos_free=1, classes={"low": low}))
    assert schedule([hs], request({"rdt:class": "low"}), 3) == ["h"] * 3
    s = state(clos_free=1, classes={"low": low})
    member = spec.parse({"rdt:class": "low"}, 4)
    after = claim.after_all(s, member, planner.Placement(4), [None])
    assert after.classes["low"].exists
    assert "no CLOS left" in claim.refusal(
        after, spec.parse(FOUR, 4), planner.Placement(4), None)


def test_sharers_of_one_request_stack_next_to_the_pmd_cos():
    # pmd_shared_ways=2 (base 0x600), 7 ways between: sharers of 3 ways
    # go 6-8, then 3-5; a third has 1 way left.
    s = state(used=(0x3 | 0x600, 0x3 | 0x600), pmd=(0x600, 0x600))
    share = {"rdt:l3_cache_ways": "3", "rdt:pmd_share": "true"}
    assert schedule([host(s)], request(share), 3) == ["h", "h"]


def test_numa_instances_count_on_the_cell_nova_gave_them():
    # 9 free ways per cache id hold two 4-way instances each; Nova
    # spreads pinned guests over the cells with most free pCPUs.
    hs = host(state(cells=CELLS), numa=host_numa((4, 4)))
    one = request(FOUR, pinned_cells=[{0}], vcpus=1)
    assert schedule([hs], one, 5) == ["h"] * 4
    assert [len(c.pinned_cpus) for c in hs.numa_topology.cells] == [2, 2]


def test_numa_multi_create_stops_where_nova_would_pick_a_full_cell():
    # Cache id 0 holds one 4-way instance, id 1 two.  Nova puts the first
    # on cell 0, the second on cell 1 and the third on cell 0 again (ties
    # go to the lower cell): full, so the host is refused, though cell 1
    # still has room.
    s = state(used=(0x3 | 0x600, 0x3), cells=CELLS)
    hs = host(s, numa=host_numa((4, 4)))
    one = request(FOUR, pinned_cells=[{0}], vcpus=1)
    assert schedule([hs], one, 3) == ["h", "h"]
    assert [len(c.pinned_cpus) for c in hs.numa_topology.cells] == [1, 1]


# -- the cell Nova picks ----------------------------------------------------

def nova_pick(hs, spec_obj):
    """The host cell the compute's claim will get: Nova's own fit."""
    fitted = hardware.numa_fit_instance_to_host(
        hs.numa_topology, spec_obj.numa_topology.obj_clone(),
        limits=hs.limits.get("numa_topology"), provider_mapping=None)
    return [c.id for c in fitted.cells]


def test_pinned_guest_judged_on_the_cell_nova_picks():
    """Case 9: ways only on cell 1's cache id, both cells with the pCPUs.
    Nova puts a pinned guest on the cell with more free pCPUs, whatever
    the ways."""
    s = state(used=(0x7ff, 0x3), cells=CELLS)
    spec_obj = request({"rdt:l3_cache_ways": "2"}, pinned_cells=[{0, 1}],
                       vcpus=2)
    f = rdt_filter.RDTFilter()
    # Cell 0 has more free pCPUs: Nova picks it, and it has no ways.
    hs = host(s, numa=host_numa((4, 3)))
    assert nova_pick(hs, spec_obj) == [0]
    assert not f.host_passes(hs, spec_obj)
    # Cell 1 has more: Nova picks it, and it has the ways.
    hs = host(s, "h2", numa=host_numa((3, 4)))
    assert nova_pick(hs, spec_obj) == [1]
    assert f.host_passes(hs, spec_obj)
    # Equal: memory decides, then cell order.
    hs = host(s, "h3", numa=host_numa((4, 4), memory=(4096, 8192)))
    assert nova_pick(hs, spec_obj) == [1]
    assert f.host_passes(hs, spec_obj)
    hs = host(s, "h4", numa=host_numa((4, 4)))
    assert nova_pick(hs, spec_obj) == [0]
    assert not f.host_passes(hs, spec_obj)


def test_cell_nova_cannot_use_does_not_count():
    # Cell 0 has the ways and more free pCPUs but too little memory for
    # the guest: Nova falls back to cell 1, which has no ways.
    s = state(used=(0x3, 0x7ff), cells=CELLS)
    spec_obj = request({"rdt:l3_cache_ways": "2"}, pinned_cells=[{0, 1}],
                       vcpus=2)
    hs = host(s, numa=host_numa((4, 3), memory=(256, 8192)))
    assert nova_pick(hs, spec_obj) == [1]
    assert not rdt_filter.RDTFilter().host_passes(hs, spec_obj)


def test_unpinned_numa_guest_judged_on_nova_cell_too():
    s = state(used=(0x7ff, 0x3), cells=CELLS)
    topo = objects.InstanceNUMATopology(cells=[objects.InstanceNUMACell(
        id=0, cpuset={0, 1}, pcpuset=set(), memory=512,
        cpu_policy="shared")])
    spec_obj = request({"rdt:l3_cache_ways": "2"}, vcpus=2)
    spec_obj.numa_topology = topo
    numa = host_numa(shared=True)
    numa.cells[1].cpu_usage = 2        # Nova spreads: cell 0 first
    hs = host(s, numa=numa)
    assert nova_pick(hs, spec_obj) == [0]
    assert not rdt_filter.RDTFilter().host_passes(hs, spec_obj)
    numa = host_numa(shared=True)
    numa.cells[0].cpu_usage = 2
    hs = host(s, "h2", numa=numa)
    assert nova_pick(hs, spec_obj) == [1]
    assert rdt_filter.RDTFilter().host_passes(hs, spec_obj)


def test_nova_choice_is_worked_out_once_per_numa_usage(monkeypatch):
    calls = []
    real = hardware.numa_fit_instance_to_host
    monkeypatch.setattr(hardware, "numa_fit_instance_to_host",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(rdt_filter, "_NOVA_CELLS", {})
    s = state(used=(0x7ff, 0x3), cells=CELLS)
    f = rdt_filter.RDTFilter()
    # One compute node loaded for three requests, and another host with
    # the same NUMA usage: one fit.
    for name in ("h", "h", "h", "other"):
        hs = host(s, name, numa=host_numa((4, 3)))
        assert not f.host_passes(hs, request(
            {"rdt:l3_cache_ways": "2"}, pinned_cells=[{0, 1}], vcpus=2))
    assert len(calls) == 1
    # Nova consumes the host: its usage changed, so it is fitted again.
    spec_obj = request({"rdt:l3_cache_ways": "2"}, pinned_cells=[{0, 1}],
                       vcpus=2)
    hs.consume_from_request(spec_obj)
    f.host_passes(hs, spec_obj)
    assert len(calls) == 3                   # consume's own fit, and ours
    # A host loaded again unchanged (its ``updated`` time as before) is
    # not even fingerprinted again.
    keys = []
    real_key = rdt_filter._topology_key
    monkeypatch.setattr(rdt_filter, "_topology_key",
                        lambda t: keys.append(1) or real_key(t))
    for _ in range(3):
        again = host(s, "same", numa=host_numa((4, 3)))
        again.updated = _EPOCH
        assert not f.host_passes(again, request(
            {"rdt:l3_cache_ways": "2"}, pinned_cells=[{0, 1}], vcpus=2))
    assert len(keys) == 1 and len(calls) == 3
    # Another ratio is another fit.
    hs = host(s, "h", numa=host_numa((4, 3)))
    hs.limits["numa_topology"] = objects.NUMATopologyLimits(
        cpu_allocation_ratio=2.0, ram_allocation_ratio=1.0)
    f.host_passes(hs, request({"rdt:l3_cache_ways": "2"},
                              pinned_cells=[{0, 1}], vcpus=2))
    assert len(calls) == 4


def test_pci_devices_steer_nova_and_the_filter_alike(monkeypatch):
    """Without PCI requests, Nova tries cells without PCI devices first:
    two hosts alike but for their devices get different cells."""
    from nova.pci import stats as pci_stats_mod
    monkeypatch.setattr(rdt_filter, "_NOVA_CELLS", {})
    s = state(used=(0x7ff, 0x3), cells=CELLS)       # ways on cell 1 only
    f = rdt_filter.RDTFilter()
    verdicts = {}
    for name, devices_on in (("with", 0), ("without", None)):
        hs = host(s, name, numa=host_numa((4, 4)))
        pools = [] if devices_on is None else [objects.PciDevicePool(
            product_id="p", vendor_id="v", numa_node=devices_on, count=2,
            tags={})]
        hs.pci_stats = pci_stats_mod.PciDeviceStats(
            hs.numa_topology,
            stats=objects.PciDevicePoolList(objects=pools))
        spec_obj = request({"rdt:l3_cache_ways": "2"},
                           pinned_cells=[{0, 1}], vcpus=2)
        fitted = hardware.numa_fit_instance_to_host(
            hs.numa_topology, spec_obj.numa_topology.obj_clone(),
            provider_mapping=None, pci_stats=hs.pci_stats)
        verdicts[name] = ([c.id for c in fitted.cells],
                          f.host_passes(hs, spec_obj))
    assert verdicts == {"with": ([1], True), "without": ([0], False)}
