"""Planning, host-state stats and host preparation: pure logic, fast."""


from hypothesis import given
from hypothesis import strategies as st
import pytest

from nova_rdt import naming
from nova_rdt.allocation import hostlayout
from nova_rdt.allocation import hoststate
from nova_rdt.allocation import placement
from nova_rdt.allocation import planner
from nova_rdt.allocation import spec
from nova_rdt.emulator import topology
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.hostview import HostView
from tests.kernel_fixtures import make_kernel
from tests.kernel_fixtures import materialize

WAY = 3407872          # gold-6252: 35.75 MiB / 11 ways


def state(used=(0x3, 0x3), cbm_len=11, clos_free=7, cdp=False, mb=True,
          min_ways=1, rmids_free=170, cells=None, classes=None,
          monitoring=("llc_occupancy", "mbm_total_bytes"), sparse=False,
          pmd=None):
    """A host state; ``pmd``: per cache id, the PMD COS's wanted ways
    where its rule holds (None: it does not hold there)."""
    cache = {}
    for cid, u in enumerate(used):
        kinds = hoststate.CDP_TYPES if cdp else (hoststate.BOTH,)
        want = pmd[cid] if pmd is not None else None
        cache[cid] = hoststate.CacheIdState(
            cid, frozenset(range(cid * 4, cid * 4 + 4)), cbm_len, WAY,
            min_ways, {k: u for k in kinds}, sparse=sparse,
            pmd=want is not None,
            pmd_want={k: want for k in kinds} if want else {})
    return hoststate.HostRdtState(
        cache=cache, cdp=cdp, clos_free=clos_free,
        mb=hoststate.MbState("percent", 10, 10, 100, tuple(cache))
        if mb else None,
        monitoring=frozenset(monitoring), rmids=176 if monitoring else 0,
        rmids_free=rmids_free if monitoring else 0, cells=cells or {},
        classes=classes)


def published(s, book=None, classes=None, compaction=False,
              monitor=False):
    """``s`` as a compute publishes it: with the solver input of a host
    whose every used way is fixed (the root's, or groups nova-rdt does
    not move), the PMD COS's wanted ways its base, and ``clos_free``
    CLOS beside those ``book`` and ``classes`` hold."""
    res = {k: naming.RESOURCE_OF_KIND[k] for k in s.cache_types}
    any_c = next(iter(s.cache.values()), None)
    ids = tuple(sorted(s.cache))
    pmd_ids = frozenset(cid for cid, c in s.cache.items() if c.pmd)
    host = placement.Host(
        resources={r: placement.Resource(any_c.cbm_len, any_c.min_ways,
                                         any_c.sparse)
                   for r in res.values()} if any_c else {},
        ids={r: ids for r in res.values()} if any_c else {},
        host_ways={r: {cid: c.used[k] & ~(c.pmd_cover(k)
                                          & ~c.pmd_want.get(k, 0))
                       for cid, c in s.cache.items()}
                   for k, r in res.items()} if any_c else {},
        pmd_base={r: {cid: c.pmd_want.get(k, 0)
                      for cid, c in s.cache.items() if c.pmd}
                  for k, r in res.items()} if pmd_ids else {},
        pmd_ids=pmd_ids or None,
        clos=s.clos_free + len(book or {}) + len(classes or {}))
    return s.with_solver(host, book or {}, classes or {}, compaction,
                         monitor)


def judge(s, r, placement_=None, fit=None):
    """Why the compute's claim refuses ``r`` on ``s`` as published."""
    from nova_rdt.scheduler import claim
    return claim.refusal(published(s) if s.solver is None else s, r,
                         placement_ or P, fit)


P = planner.Placement(4)                # 4 vCPUs, no NUMA topology


def req(**specs):
    return spec.parse({f"rdt:{k}": str(v) for k, v in specs.items()},
                      vcpus=4, numa_nodes=int(specs.pop("_nodes", 1))
                      if "_nodes" in specs else 1)


def test_unpinned_instance_needs_every_cache_id():
    s = state()
    d = planner.demand(req(l3_cache_ways=4), 4, None, s, {}, False)
    assert d.cache == {0: {"both": 4}, 1: {"both": 4}}
    # The smallest free run, at its low end: above the host's ways.
    from nova_rdt.scheduler import claim
    c = claim.claim(published(s), req(l3_cache_ways=4), P, None)
    assert c.plan.instances[hoststate.PROBE] == {"L3": {0: 0x3c, 1: 0x3c}}


def test_pinned_cell_uses_the_l3_of_its_pcpus():
    s = state()
    cell = planner.GuestCell(0, frozenset({0, 1}), 1,
                             {0: frozenset({5}), 1: frozenset({6})})
    d = planner.demand(req(l3_cache_ways=3), 2, [cell], s, {}, False)
    assert d.cache == {1: {"both": 3}}


def test_only_listed_vcpus_are_covered_and_placed():
    s = state()
    cell = planner.GuestCell(0, frozenset(range(4)), 0,
                             {0: frozenset({0}), 1: frozenset({1}),
                              2: frozenset({4}), 3: frozenset({5})})
    d = planner.demand(req(l3_cache_ways=2, vcpus="2-3"), 4, [cell], s, {},
                       True)
    assert d.vcpus == {2, 3} and d.cache == {1: {"both": 2}} and d.monitor


def test_size_must_be_whole_ways_and_whole_cache_is_refused():
    s = state()
    with pytest.raises(planner.CannotHonour, match="whole number"):
        planner.demand(req(l3_cache_size="3MiB"), 4, None, s, {}, False)
    d = planner.demand(req(l3_cache_size=f"{2 * WAY // 1024}KiB"), 4, None,
                       s, {}, False)
    assert d.cache[0] == {"both": 2}
    with pytest.raises(planner.CannotHonour, match="whole cache"):
        planner.demand(req(l3_cache_ways=11), 4, None, s, {}, False)


def test_fragmented_free_ways_do_not_fit_even_if_the_total_would():
    # root 0x3, foreign groups at ways 4, 7 and 10: free runs 2,2,2.
    frag = 0x3 | 1 << 4 | 1 << 7 | 1 << 10
    s = state(used=(frag, frag))
    assert judge(s, req(l3_cache_ways=3)) == (
        "L3 cache id 0: no room for 3 ways of the new instance; free runs "
        "2@2(c), 2@5(60), 2@8(300)")
    assert judge(s, req(l3_cache_ways=2)) is None


def test_clos_exhaustion_and_capabilities():
    assert "CLOS" in judge(state(clos_free=0), req(l3_cache_ways=1))
    assert "MBA" in judge(state(mb=False), req(mb_percent=50))
    assert "CDP" in judge(state(), req(l3_code_ways=1, l3_data_ways=1))
    assert "CDP" in judge(state(cdp=True), req(l3_cache_ways=1))
    assert judge(state(cdp=True),
                 req(l3_code_ways=1, l3_data_ways=2)) is None


def test_mb_is_rounded_up_like_the_kernel():
    d = planner.demand(req(mb_percent=15), 4, None, state(), {}, False)
    assert d.mb == {0: 20, 1: 20} and d.needs_clos and not d.cache


def test_class_members_take_no_clos_and_no_monitor():
    d = planner.demand(req(**{"class": "low_priority"}), 4, None, state(),
                       {}, True)
    assert not d.needs_clos and not d.monitor


def test_numa_guest_nodes_take_ways_where_novas_fit_puts_them():
    two = spec.parse({"rdt:l3_cache_ways.0": "5", "rdt:l3_cache_ways.1": "2"},
                     4, 2)
    cells = {0: frozenset(range(4)), 1: frozenset(range(4, 8))}
    s = state(used=(0x3, 0x7f), cells=cells)     # id 1 has 4 free ways
    even = planner.Placement.even(4, 2)
    assert judge(s, two, even, ((0, None), (1, None))) is None
    assert "cache id 1: no room for 5 ways" in judge(
        s, two, even, ((1, None), (0, None)))
    s = state(used=(0x7f, 0x7f), cells=cells)
    assert "no room for 5 ways" in judge(s, two, even,
                                         ((0, None), (1, None)))


@given(st.lists(st.integers(1, 4), min_size=1, max_size=8))
def test_claims_in_sequence_never_overlap(asks):
    from nova_rdt.scheduler import claim
    s = published(state())
    taken = {0: 0, 1: 0}
    for ways in asks:
        try:
            c = claim.claim(s, req(l3_cache_ways=ways), P, None)
        except planner.CannotHonour as e:
            run = min(max((r.length for r in cbm.runs(
                0x7ff & ~(taken[cid] | 0x3))), default=0) for cid in taken)
            assert run < ways or "CLOS" in str(e)
            continue
        for cid, mask in c.plan.instances[hoststate.PROBE]["L3"].items():
            assert mask & (taken[cid] | 0x3) == 0
            assert cbm.is_contiguous(mask)
            taken[cid] |= mask
        s = claim.after(s, c)


def test_stats_round_trip_and_traits():
    s = state(cdp=True)
    back = hoststate.HostRdtState.from_stats(s.to_stats())
    assert back == s
    assert back.traits() == {hoststate.TRAIT_CAT, hoststate.TRAIT_CDP,
                             hoststate.TRAIT_MBA, hoststate.TRAIT_CMT,
                             hoststate.TRAIT_MBM}
    assert hoststate.HostRdtState.from_stats({"rdt": "{bad"}) is None
    assert hoststate.HostRdtState.from_stats({"rdt": '{"v": 99}'}) is None
    assert hoststate.HostRdtState.from_stats({"uptime": "x"}) is None


def _fs(tmp_path, profile="gold-6252"):
    k, _, _ = make_kernel(profile)
    return k


def test_state_from_an_emulated_host(tmp_path):
    k, _, _ = make_kernel("gold-6252")
    k.mkdir("/libvirt-like")
    root = materialize(k, str(tmp_path / "r"))
    cpu = topology.write_tree(k.profile, str(tmp_path / "cpu"))
    s = hoststate.from_resctrl(HostView.collect(Resctrl(root,
                                                        sysfs_cpu=cpu)))
    assert sorted(s.cache) == [0, 1]
    assert s.cache[0].cbm_len == 11 and s.cache[0].way_size == WAY
    # The root still holds every way: nothing can be allocated yet.
    assert s.cache[0].used["both"] == 0x7ff
    assert s.clos_free == 6
    assert s.mb.units == "percent" and s.mb.gran == 10


@pytest.mark.parametrize("profile,reserved,pmd,ok", [
    ("gold-6252", 2, 0, True), ("gold-6252", 2, 3, True),
    ("gold-6252", 11, 0, False), ("gold-6252", 6, 5, False),
    ("e5-2658-v3", 1, 0, False),       # min_cbm_bits 2
    ("e5-2658-v3", 4, 2, True), ("gold-6252-cdp", 2, 2, True),
])
def test_host_prep_plan(tmp_path, profile, reserved, pmd, ok):
    k, _, _ = make_kernel(profile)
    root = materialize(k, str(tmp_path / "r"))
    cpu = topology.write_tree(k.profile, str(tmp_path / "cpu"))
    caps = Resctrl(root, sysfs_cpu=cpu).capabilities()
    if not ok:
        with pytest.raises(hostlayout.HostPrepError, match=r"\[rdt\]"):
            hostlayout.plan(caps, reserved, pmd)
        return
    layout = hostlayout.plan(caps, reserved, pmd)
    n = k.profile.l3.cbm_len
    for _res, doms in layout.root.lines.items():
        assert set(doms.values()) == {cbm.full_mask(reserved)}
    if pmd:
        top = cbm.Run(n - pmd, pmd).mask
        assert all(set(d.values()) == {top}
                   for r, d in layout.pmd.lines.items() if r != "MB")
    assert layout.managed_ways == n - reserved - pmd


def test_incoming_masks_round_trip_and_bad_documents_read_as_none():
    masks = {"u1": {0: {"both": 0xf0}, 1: {"both": 0x3c}},
             "u2": {0: {"code": 0x3, "data": 0xc}}}
    stats = {hoststate.INCOMING_STAT: hoststate.incoming_stat(masks)}
    assert hoststate.incoming_masks(stats, "u1") == {
        (0, "both"): 0xf0, (1, "both"): 0x3c}
    assert hoststate.incoming_masks(stats, "u2") == {
        (0, "code"): 0x3, (0, "data"): 0xc}
    assert hoststate.incoming_masks(stats, "u3") == {}
    assert hoststate.incoming_stat({}) == ""
    # An older destination, or a document that does not parse: nothing,
    # and the destination's hook places the domain itself.
    for raw in (None, "", "[", "[1]", '{"u1": 5}', '{"u1": [[0, "both"]]}',
                '{"u1": [[0, "both", "zz"]]}'):
        assert hoststate.incoming_masks(
            {hoststate.INCOMING_STAT: raw}, "u1") == {}
    assert hoststate.incoming_masks(
        {hoststate.INCOMING_STAT: '{"u1": [[0, "L2", "3"]]}'}, "u1") == {}
