"""RDTFilter's cached path against the compute's claim, and its cases.

The filter keeps what it read per host, keyed on the published string,
and answers with the claim the compute runs (:mod:`claim`) on the
published solver input; the answer must always be the claim's on the
document it was last given.
"""

import datetime
import json

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import pytest

nova = pytest.importorskip("nova", reason="needs nova (the nova extra)")

from nova import exception  # noqa: E402
from nova import objects  # noqa: E402
from nova.scheduler import host_manager  # noqa: E402

from nova_rdt.allocation import hoststate  # noqa: E402
from nova_rdt.allocation import placement as placement_mod  # noqa: E402
from nova_rdt.allocation import planner  # noqa: E402
from nova_rdt.allocation import spec  # noqa: E402
from nova_rdt.resctrl import cbmrules  # noqa: E402
from nova_rdt.scheduler import claim  # noqa: E402
from nova_rdt.scheduler import filter as rdt_filter  # noqa: E402
from tests.unit.test_planner import published  # noqa: E402
from tests.unit.test_planner import state as bare_state  # noqa: E402

objects.register_all()

LOW = hoststate.ClassState("low", 2, 10, False)


def state(**kw):
    """A host state as a compute of this release publishes it."""
    return published(bare_state(**kw))



# -- random hosts and requests -------------------------------------------

# Mostly with the root's ways held, as on a prepared host; sometimes none
# held, so a guest's ways can add up to the whole cache.
_used = st.one_of(st.integers(0, (1 << 11) - 1).map(lambda m: m | 0x3),
                  st.sampled_from([0, 0x400, 0x1]),
                  # A few groups: long free runs, short ones, on either
                  # side of a PMD base at the top.
                  st.tuples(st.integers(0, (1 << 11) - 1),
                            st.integers(0, (1 << 11) - 1)).map(
                      lambda t: t[0] & t[1] | 0x3))


@st.composite
def hosts(draw):
    n = draw(st.integers(1, 4))
    used = tuple(draw(st.lists(_used, min_size=n, max_size=n)))
    cdp = draw(st.booleans())
    # Host cells: none published, one per cache id, or two cells on one
    # L3 (sub-NUMA clustering), so guest nodes there add up.
    layout = draw(st.sampled_from(["none", "per-id", "snc"]))
    cells = {}
    if layout == "per-id":
        cells = {c: frozenset(range(c * 4, c * 4 + 4)) for c in range(n)}
    elif layout == "snc":
        cells = {2 * c + h: frozenset(range(c * 4 + 2 * h, c * 4 + 2 * h + 2))
                 for c in range(n) for h in (0, 1)}
    classes = draw(st.sampled_from([
        None, {}, {"low": LOW},
        {"low": hoststate.ClassState("low", 2, 10, True)},
        {"low": hoststate.ClassState("low", 9, None, False)},
        {"low": hoststate.ClassState("low", 1, 5, False)}]))
    monitoring = draw(st.sampled_from([
        (), ("llc_occupancy",), ("mbm_total_bytes",),
        ("llc_occupancy", "mbm_local_bytes")]))
    # The PMD COS: off, or on some cache ids, wanting a base at the top
    # and sharers (any ways, so holes too), held in the used masks as
    # the PMD group holds its span; sometimes not, as a state in flux.
    pmd = None
    if draw(st.integers(0, 2)):
        pmd = tuple(draw(st.one_of(st.none(), _want)) for _ in range(n))
        if draw(st.integers(0, 3)):
            used = tuple(u | cbmrules.span(w or 0)
                         for u, w in zip(used, pmd))
    return state(used=used, clos_free=draw(st.integers(0, 2)), cdp=cdp,
                 mb=draw(st.booleans()), min_ways=draw(st.integers(1, 2)),
                 rmids_free=draw(st.integers(0, 2)), cells=cells,
                 classes=classes, monitoring=monitoring,
                 sparse=draw(st.integers(0, 3)) == 0, pmd=pmd)


_want = st.one_of(
    st.just(0), st.sampled_from([0x600, 0x400, 0x700]),
    st.integers(0, (1 << 11) - 1).map(lambda m: m & ~0x3))


# -- through the filter, with a cache that must not go stale ------------

def spec_obj(r_specs, vcpus=4, cells=None):
    topo = None
    if cells:
        topo = objects.InstanceNUMATopology(cells=[
            objects.InstanceNUMACell(
                id=i, cpuset=set(), pcpuset=set(cpus), memory=512,
                cpu_policy="dedicated")
            for i, cpus in enumerate(cells)])
    return objects.RequestSpec(flavor=objects.Flavor(
        flavorid="f", vcpus=vcpus, extra_specs=r_specs), numa_topology=topo)


def host_state(stats):
    hs = host_manager.HostState("h", "n", "cell")
    hs.stats = stats
    return hs


@settings(max_examples=150, deadline=None)
@given(seq=st.lists(st.tuples(hosts(), st.booleans()), min_size=1,
                    max_size=5),
       ways=st.integers(1, 6), share=st.booleans())
def test_cached_path_equals_a_fresh_read_and_claim(seq, ways, share):
    """A host updated again and again, with fresh equal dicts or new
    content: the filter's answer is always the claim's on the content it
    was last given, and that content reads back as the state published."""
    f = rdt_filter.RDTFilter()
    hs = host_state({})
    extra = {"rdt:l3_cache_ways": str(ways)}
    if share:
        extra["rdt:pmd_share"] = "true"
    for s, same in seq:
        stats = dict(hs.stats) if same and hs.stats else s.to_stats()
        if not same:
            assert hoststate.HostRdtState.from_stats(stats) == s
        hs.stats = dict(stats)                  # Nova: a new dict each time
        why = claim.refusal(hoststate.HostRdtState.from_stats(stats),
                            spec.parse(extra, 4), planner.Placement(4),
                            None)
        assert f.host_passes(hs, spec_obj(extra)) == (why is None), why


# -- parses: once per change of content ----------------------------------

def _compute_node(stats, updated_at):
    return objects.ComputeNode(
        host="parse-h", hypervisor_hostname="parse-n", vcpus=8,
        memory_mb=8192, local_gb=100, vcpus_used=0, memory_mb_used=0,
        local_gb_used=0, free_ram_mb=8192, free_disk_gb=100,
        current_workload=0, running_vms=0, cpu_info="{}",
        disk_available_least=100, hypervisor_type="QEMU",
        hypervisor_version=1, numa_topology=None, stats=dict(stats),
        updated_at=updated_at, cpu_allocation_ratio=1.0,
        ram_allocation_ratio=1.0, disk_allocation_ratio=1.0,
        uuid="00000000-0000-0000-0000-00000000000a", supported_hv_specs=[],
        pci_device_pools=None, host_ip="10.0.0.1", metrics="[]")


def _host_state_from_db(stats, updated_at):
    """What Nova 34's HostManager._get_host_states does per request: a
    new HostState, updated from a ComputeNode loaded again."""
    cn = _compute_node(json.loads(json.dumps(stats)), updated_at)
    hs = host_manager.HostState(cn.host, cn.hypervisor_hostname, "cell")
    hs.update(compute=cn)
    return hs


def test_reloaded_compute_nodes_and_new_host_states_parse_once(
        monkeypatch):
    """Equal content and updated_at on every request: one read; a real
    change: one more."""
    parses = []
    real = rdt_filter._read
    monkeypatch.setattr(rdt_filter, "_read",
                        lambda raw: parses.append(raw) or real(raw))
    f = rdt_filter.RDTFilter()
    when = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    stats = {"num_instances": "0", **state().to_stats()}
    for _ in range(3):
        hs = _host_state_from_db(stats, when)
        assert hs.stats is not stats
        assert f.host_passes(hs, spec_obj({"rdt:l3_cache_ways": "4"}))
    assert len(parses) == 1
    full = {"num_instances": "1", **state(used=(0x7ff, 0x7ff)).to_stats()}
    for _ in range(2):
        hs = _host_state_from_db(full, when + datetime.timedelta(seconds=60))
        assert not f.host_passes(hs, spec_obj({"rdt:l3_cache_ways": "4"}))
    assert len(parses) == 2


# -- the cases, one by one -----------------------------------------------

def passes(s, extra, cells=None, numa=None):
    hs = host_state(s.to_stats())
    hs.numa_topology = numa
    hs.limits = {}
    hs.pci_stats = None
    return rdt_filter.RDTFilter().host_passes(hs, spec_obj(extra, 4, cells))


def test_class_is_scheduled_where_it_can_be_honoured():
    cls = {"rdt:class": "low"}
    assert passes(state(classes={"low": LOW}), cls)             # can make
    assert not passes(state(classes={}), cls)                   # undefined
    assert not passes(state(classes={"other": hoststate.ClassState(
        "other", 2, 10, False)}), cls)
    # No free CLOS: only an existing group will do.
    assert not passes(state(classes={"low": LOW}, clos_free=0), cls)
    made = bare_state(clos_free=0, classes={
        "low": hoststate.ClassState("low", 2, 10, True)})
    group = placement_mod.ClassGroup("low", {"L3": {0: 2, 1: 2}},
                                     {"L3": {0: 0xc, 1: 0xc}})
    assert passes(published(made, classes={"low": group}), cls)
    # Too few contiguous free ways on one cache id, or no RMID.
    assert not passes(state(used=(0x3, 0x7fd), classes={"low": LOW}), cls)
    assert not passes(state(rmids_free=0, classes={"low": LOW}), cls)
    # An MB value the kernel would refuse on this host (min 10%).
    assert not passes(state(classes={
        "low": hoststate.ClassState("low", 1, 5, False)}), cls)


def test_class_problem_says_why():
    member = spec.parse({"rdt:class": "low"}, 4)
    why = claim.refusal(state(used=(0x3, 0x7fd), classes={"low": LOW}),
                        member, planner.Placement(4), None)
    assert "low" in why and "cache id 1" in why
    assert "not defined" in claim.refusal(state(classes={}), member,
                                          planner.Placement(4), None)
    assert "mb=5 is outside" in claim.refusal(state(classes={
        "low": hoststate.ClassState("low", 1, 5, False)}), member,
        planner.Placement(4), None)


def test_class_members_are_refused_by_the_driver_plan_too():
    with pytest.raises(planner.CannotHonour, match="not defined"):
        planner.demand(spec.parse({"rdt:class": "low"}, 4), 4, None,
                       state(classes={}), {}, False)
    d = planner.demand(spec.parse({"rdt:class": "low"}, 4), 4, None,
                       state(classes={"low": LOW}), {}, False)
    assert not d.needs_clos


def test_monitoring_needs_cmt_and_an_rmid():
    mon = {"rdt:monitor": "true"}
    assert passes(state(), mon)
    assert not passes(state(monitoring=("mbm_total_bytes",)), mon)
    assert not passes(state(monitoring=()), mon)
    assert not passes(state(rmids_free=0), mon)
    # Every new group takes an RMID on a monitoring host.
    assert not passes(state(rmids_free=0), {"rdt:l3_cache_ways": "2"})
    assert passes(state(monitoring=()), {"rdt:l3_cache_ways": "2"})
    assert passes(state(monitoring=()), {"rdt:monitor": "false"})


def test_rmids_are_counted_and_taken_by_allocations():
    s = state(rmids_free=1)
    two = spec.parse({"rdt:l3_cache_ways": "2"}, 4)
    after = claim.after(s, claim.claim(s, two, planner.Placement(4), None))
    assert after.rmids_free == 0
    assert "RMID" in claim.refusal(after, two, planner.Placement(4), None)


CELLS = {0: frozenset(range(0, 4)), 1: frozenset(range(4, 8))}


def _host_numa(free_pcpus, cells=CELLS):
    """Host cells of pCPUs, ``free_pcpus[c]`` of cell c's still free."""
    return objects.NUMATopology(cells=[
        objects.NUMACell(
            id=c, cpuset=set(), pcpuset=set(cpus), memory=4096,
            memory_usage=0, cpu_usage=0,
            pinned_cpus=set(sorted(cpus)[:len(cpus) - free]),
            siblings=[{x} for x in sorted(cpus)], mempages=[],
            network_metadata=objects.NetworkMetadata(
                physnets=set(), tunneled=False))
        for (c, cpus), free in zip(sorted(cells.items()), free_pcpus)])


def test_numa_guest_node_needs_ways_on_its_host_cells_cache_id():
    # Cache id 0 full, id 1 roomy: a 1-node guest fits where Nova puts
    # it on cell 1; two nodes need both cells, so both cache ids.
    s = state(used=(0x7ff, 0x3), cells=CELLS)
    assert passes(s, {"rdt:l3_cache_ways": "4"}, cells=[{0, 1}],
                  numa=_host_numa([2, 4]))
    assert not passes(s, {"rdt:l3_cache_ways": "4"}, cells=[{0, 1}],
                      numa=_host_numa([4, 2]))
    assert not passes(s, {"rdt:l3_cache_ways": "2"},
                      cells=[{0, 1}, {2, 3}], numa=_host_numa([4, 4]))
    # Without NUMA the vCPUs float: every cache id is needed.
    assert not passes(s, {"rdt:l3_cache_ways": "2"})


SNC = {0: frozenset({0, 1}), 1: frozenset({2, 3}),
       2: frozenset({4, 5}), 3: frozenset({6, 7})}


def test_two_host_cells_on_one_l3_add_up():
    s = state(used=(0x7f, 0x7ff), cells=SNC)        # id 0: 4 free ways
    two = [{0, 1}, {2, 3}]
    # Nova puts the nodes on cells 0 and 1, both on cache id 0.
    numa = _host_numa([2, 2, 1, 1], SNC)
    assert passes(s, {"rdt:l3_cache_ways": "2"}, cells=two, numa=numa)
    assert not passes(s, {"rdt:l3_cache_ways": "3"}, cells=two, numa=numa)


def test_pinned_guest_node_is_judged_on_the_cell_nova_can_pin():
    # Ways are free only on cache id 0; where cell 0's pCPUs are all
    # pinned, Nova (and NUMATopologyFilter) can only choose cell 1.
    s = state(used=(0x3, 0x7ff), cells=CELLS)
    want = {"rdt:l3_cache_ways": "2"}
    assert passes(s, want, cells=[{0, 1}], numa=_host_numa([4, 4]))
    assert not passes(s, want, cells=[{0, 1}], numa=_host_numa([0, 4]))
    assert passes(s, want, cells=[{0, 1}], numa=_host_numa([2, 0]))


def test_guest_nodes_on_one_l3_cannot_take_the_whole_cache():
    snc = {0: frozenset({0, 1}), 1: frozenset({2, 3})}
    s = state(used=(0,), cells=snc)                 # 11 free ways
    two = [{0, 1}, {2, 3}]
    numa = _host_numa([2, 2], snc)
    assert passes(s, {"rdt:l3_cache_ways": "5"}, cells=two, numa=numa)
    # 5 + 6 = 11 ways fit the free run, but would be the whole cache.
    eleven = {"rdt:l3_cache_ways": "5", "rdt:l3_cache_ways.1": "6"}
    assert not passes(s, eleven, cells=two, numa=numa)
    assert "whole cache" in claim.refusal(
        s, spec.parse(eleven, 4, 2), planner.Placement.even(4, 2),
        ((0, None), (1, None)))


def test_a_guest_node_without_covered_vcpus_needs_no_ways():
    s = state(used=(0x3, 0x7ff), cells=CELLS)
    # Only vCPU 0 (guest node 0) is covered; node 1 sits on cell 1,
    # whose cache id is full.
    numa = _host_numa([4, 4])
    assert passes(s, {"rdt:l3_cache_ways": "2", "rdt:vcpus": "0"},
                  cells=[{0, 1}, {2, 3}], numa=numa)
    assert not passes(s, {"rdt:l3_cache_ways": "2"}, cells=[{0, 1}, {2, 3}],
                      numa=numa)


def test_filter_all_agrees_with_host_passes_and_skips_rebuilds():
    f = rdt_filter.RDTFilter()
    hosts = [host_state(s.to_stats()) for s in (
        state(), state(used=(0x7ff, 0x3)), state(clos_free=0))]
    hosts.append(host_state({"uptime": "1"}))
    for i, hs in enumerate(hosts):
        hs.host = hs.nodename = f"fa{i}"
    want = spec_obj({"rdt:l3_cache_ways": "4"})
    assert list(f.filter_all(hosts, want)) == \
        [h for h in hosts if f.host_passes(h, want)] == hosts[:1]
    assert list(f.filter_all(hosts, spec_obj({}))) == hosts
    # Filtered for a request's first instance, a bad spec says its key.
    assert f.run_filter_for_index(0)
    with pytest.raises(exception.NoValidHost, match="rdt:l3_cache_ways"):
        f.filter_all(hosts, spec_obj({"rdt:l3_cache_ways": "lots"}))
    rebuild = spec_obj({"rdt:l3_cache_ways": "4"})
    rebuild.scheduler_hints = {"_nova_check_type": ["rebuild"]}
    assert list(f.filter_all(hosts, rebuild)) == hosts


def test_no_host_left_says_why_without_hosts_counts_or_masks(caplog):
    """A request's first instance that no host can take: Nova's
    NoValidHost with the most common refusal, but no host name, host
    count or free-way layout (the fault is the tenant's to read); the
    operator's log has every host's reason."""
    f = rdt_filter.RDTFilter()
    hosts = [host_state(s.to_stats()) for s in (
        state(used=(0x7ff, 0x3)), state(used=(0x7ff, 0x3)),
        state(clos_free=0))]
    hosts.append(host_state({"uptime": "1"}))
    for i, hs in enumerate(hosts):
        hs.host = hs.nodename = f"secret-host-{i}"
    f.run_filter_for_index(0)
    with caplog.at_level("INFO"):
        with pytest.raises(exception.NoValidHost) as ctx:
            f.filter_all(hosts, spec_obj({"rdt:l3_cache_ways": "4"}))
    message = str(ctx.value)
    assert message == (
        "No valid host was found. RDTFilter: no host can give this "
        "flavor's rdt: request: L3 cache id 0: no room for 4 ways of "
        "the new instance")
    assert len(message) <= 255
    logged = caplog.text
    for i in range(4):
        assert f"secret-host-{i}" in logged
    assert "free runs none" in logged and "no CLOS left" in logged


def test_a_long_reason_fits_novas_fault():
    assert len(rdt_filter._short("x" * 400)) == rdt_filter._REASON_MAX
    assert rdt_filter._short("short") == "short"


def test_later_instances_of_a_multi_create_keep_novas_no_valid_host():
    """Later instances of a multi-create hold claims that only Nova's
    own NoValidHost path gives back: the filter just passes no host."""
    f = rdt_filter.RDTFilter()
    hosts = [host_state(state(clos_free=0).to_stats())]
    want = spec_obj({"rdt:l3_cache_ways": "4"})
    want.num_instances = 3
    f.run_filter_for_index(1)
    assert f.filter_all(hosts, want) == []
    f.run_filter_for_index(0)
    with pytest.raises(exception.NoValidHost):
        f.filter_all(hosts, want)
