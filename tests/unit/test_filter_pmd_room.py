"""The room a host publishes per cache id is what the compute decides.

``CacheIdState.room`` is the filter's closed form; :func:`planner.decide`
asks the compute's own placement planner.  For every size, for sharers
and others, on contiguous and sparse caches, with and without the PMD
rule, they must agree; and the published document must carry the rule
from resctrl as it is.
"""

import dataclasses

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import pytest

from nova_rdt import naming
from nova_rdt.allocation import hoststate
from nova_rdt.allocation import planner
from nova_rdt.allocation import spec
from nova_rdt.emulator import topology
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.hostview import HostView
from nova_rdt.resctrl.schemata import Schemata
from tests.kernel_fixtures import make_kernel
from tests.kernel_fixtures import materialize
from tests.unit.test_planner import state

N = 11


@st.composite
def caches(draw, n=None):
    n = n or draw(st.integers(4, 12))
    full = cbm.full_mask(n)
    host = cbm.full_mask(draw(st.integers(1, 2)))
    want = None
    if draw(st.booleans()):
        # A base at the top, sharers anywhere: holes and gaps both.
        want = draw(st.sampled_from([0, cbm.Run(n - 2, 2).mask]))
        for _ in range(draw(st.integers(0, 2))):
            start = draw(st.integers(0, n - 1))
            want |= cbm.Run(start, draw(st.integers(1, 2))).mask
        want &= ~host & full
    # Other groups: a few runs (VMs, classes, foreign groups), or any
    # ways at all.
    others = 0
    for _ in range(draw(st.integers(0, 3))):
        start = draw(st.integers(0, n - 1))
        others |= cbm.Run(start, draw(st.integers(1, n - start))).mask
    if draw(st.integers(0, 3)) == 0:
        others = draw(st.integers(0, full))
    used = host | (others & ~host)
    if want is not None:
        used &= ~hoststate.span(want) | want      # nobody else in the span
        if draw(st.integers(0, 3)):
            used |= hoststate.span(want)          # the PMD group's mask
    min_ways = draw(st.integers(1, 2))
    # Groups the compute may move (class groups, instances under
    # compaction): runs of the other groups' ways, outside the span.
    movable = []
    if draw(st.integers(0, 2)):
        region = used & ~host & ~hoststate.span(want or 0)
        for r in cbm.runs(region):
            if r.length >= min_ways and draw(st.integers(0, 2)):
                ln = draw(st.integers(min_ways, r.length))
                start = draw(st.integers(r.start, r.start + r.length - ln))
                movable.append(cbm.Run(start, ln).mask)
    return hoststate.CacheIdState(
        0, frozenset({0}), n, 1 << 20, min_ways,
        {hoststate.BOTH: used}, sparse=draw(st.integers(0, 2)) == 0,
        pmd=want is not None, pmd_want={hoststate.BOTH: want} if want
        else {}, movable={hoststate.BOTH: tuple(movable)} if movable
        else {})


def _host(c):
    return hoststate.HostRdtState(cache={0: c}, cdp=False, clos_free=3,
                                  mb=None, monitoring=frozenset())


@settings(max_examples=400, deadline=None)
@given(c=caches())
def test_room_is_exactly_what_the_placement_planner_finds(c):
    s = _host(c)
    for sharer in (False, True):
        room = c.room(hoststate.BOTH, sharer)
        for ways in range(c.min_ways, c.cbm_len):
            d = planner.Demand(frozenset({0}), {0: {hoststate.BOTH: ways}},
                               {}, False)
            try:
                masks = planner.decide(s, d, sharer)
            except planner.CannotHonour:
                assert ways > room, (sharer, ways, room)
                continue
            assert ways <= room, (sharer, ways, room)
            mask = masks[0][hoststate.BOTH]
            assert cbm.popcount(mask) == ways
            moving = 0
            for m in c.movable.get(hoststate.BOTH, ()):
                moving |= m
            assert mask & c.used[hoststate.BOTH] & ~moving & ~(
                c.pmd_cover(hoststate.BOTH)
                & ~c.pmd_want.get(hoststate.BOTH, 0)) == 0


@settings(max_examples=300, deadline=None)
@given(c=caches(), ways=st.integers(1, 6), share=st.booleans(),
       n=st.integers(1, 3))
def test_moves_are_carried_into_the_next_instance(c, ways, share, n):
    """A multi-create's later instances are judged on the host after the
    earlier ones and the moves they needed: each step's masks are
    pairwise disjoint with every fixed group, and the moved groups keep
    their sizes."""
    s = _host(c)
    r = spec.parse({"rdt:l3_cache_ways": str(ways),
                    "rdt:pmd_share": "true" if share else "false"}, 4, 1)
    p = planner.Placement(4)
    sizes = sorted(cbm.popcount(m)
                   for m in c.movable.get(hoststate.BOTH, ()))
    for _ in range(n):
        try:
            after = planner.taken(s, r, p)
        except planner.CannotHonour:
            return
        ca = after.cache[0]
        assert sorted(cbm.popcount(m) for m in
                      ca.movable.get(hoststate.BOTH, ())) == sizes
        moved = ca.movable.get(hoststate.BOTH, ())
        for i, m in enumerate(moved):
            assert m & ca.used[hoststate.BOTH] == m
            for o in moved[i + 1:]:
                assert m & o == 0
        # The new group's ways are now used: the room shrank by them.
        assert ca.room(hoststate.BOTH, share) <= \
            s.cache[0].room(hoststate.BOTH, share)
        s = after


@st.composite
def pmd_hosts(draw):
    """Two cache ids of one geometry, one host cell each, the PMD rule on
    either or both."""
    n = draw(st.integers(4, 12))
    sparse = draw(st.integers(0, 3)) == 0
    min_ways = draw(st.integers(1, 2))
    cache = {}
    for cid in (0, 1):
        c = draw(caches(n))
        cache[cid] = dataclasses.replace(c, id=cid, cpus=frozenset({cid}),
                                         sparse=sparse, min_ways=min_ways)
    return hoststate.HostRdtState(
        cache=cache, cdp=False, clos_free=draw(st.integers(0, 3)), mb=None,
        monitoring=frozenset(),
        cells=draw(st.sampled_from([{}, {0: frozenset({0}),
                                         1: frozenset({1})}])))


@settings(max_examples=400, deadline=None)
@given(s=pmd_hosts(), ways=st.integers(1, 6), share=st.booleans(),
       nodes=st.sampled_from([None, 1, 2]),
       eligible=st.sampled_from([None, 0, 1]))
def test_filter_fast_path_agrees_for_sharers(s, ways, share, nodes,
                                             eligible):
    r = spec.parse({"rdt:l3_cache_ways": str(ways),
                    "rdt:pmd_share": "true" if share else "false"}, 4,
                   nodes or 1)
    p = planner.Placement.even(4, nodes)
    only = None
    if eligible is not None and p.guest is not None:
        only = (frozenset({eligible}),) * len(p.guest)
    exact = planner.fits_anywhere(s, r, p, only)
    fast = planner.HostSummary.of(s).fits(r, p, {}, only)
    assert fast == (exact is None), exact


def test_a_sharer_goes_next_to_the_span_or_into_a_hole():
    # gold-6252, pmd_shared_ways=2: root 0x3, base 0x600.  A plain VM at
    # ways 2-5 leaves runs 6-8 (next to the span: 3 ways) for sharers.
    c = state(used=(0x3 | 0x3c | 0x600,), pmd=(0x600,)).cache[0]
    assert (c.room("both"), c.room("both", sharer=True)) == (3, 3)
    # A class group at way 7 cuts the sharers off at way 8, while a
    # plain VM still has ways 5-6.
    c = state(used=(0x3 | 0x1c | 0x80 | 0x600,), pmd=(0x600,)).cache[0]
    assert (c.room("both"), c.room("both", sharer=True)) == (2, 1)
    # A sharer at ways 2-3 and the base at 9-10: the span 2-10 holds a
    # hole at 4-8 (sharers there left).  A sharer gets the hole, nobody
    # else gets anything.
    c = state(used=(0x3 | 0x7fc,), pmd=(0x60c,)).cache[0]
    assert c.pmd_cover("both") == 0x7fc
    assert (c.room("both"), c.room("both", sharer=True)) == (0, 5)
    # No rule on this cache id (no PMD cores here): sharers are anyone.
    c = state(used=(0x3 | 0x600,), pmd=(None,)).cache[0]
    assert c.room("both", sharer=True) == c.room("both") == 7
    # Sparse masks: the span is the wanted ways; an instance still needs
    # one run, since libvirt allocates only contiguous runs.
    c = state(used=(0x3 | 0x24 | 0x600,), pmd=(0x600,), sparse=True,
              min_ways=2).cache[0]
    assert c.room("both") == c.room("both", sharer=True) == 3


def test_an_empty_host_takes_sharers_of_every_size():
    """Case 1: pmd_shared_ways=2 on an empty gold-6252 (libvirt's fit
    put sharers at the bottom, away from the base at the top)."""
    s = state(used=(0x3 | 0x600, 0x3 | 0x600), pmd=(0x600, 0x600))
    for ways in range(1, 8):
        r = spec.parse({"rdt:l3_cache_ways": str(ways),
                        "rdt:pmd_share": "true"}, 4, 1)
        assert planner.fits_anywhere(s, r, planner.Placement(4)) is None
        assert planner.HostSummary.of(s).fits(r, planner.Placement(4), {})
    r = spec.parse({"rdt:l3_cache_ways": "8", "rdt:pmd_share": "true"}, 4)
    assert not planner.HostSummary.of(s).fits(r, planner.Placement(4), {})


def test_the_span_rule_only_on_the_pmd_cache_ids():
    """Case 10: PMD cores on cache id 0 only; a sharer pinned to socket 1
    is placed as anyone there."""
    cells = {0: frozenset(range(4)), 1: frozenset(range(4, 8))}
    # id 0: a plain VM next to the base leaves sharers no room; id 1
    # has no PMD cores and 6 free ways.
    s = state(used=(0x3 | 0x1c0 | 0x600, 0x3 | 0x600), cells=cells,
              pmd=(0x600, None))
    share = spec.parse({"rdt:l3_cache_ways": "4", "rdt:pmd_share": "true"},
                       4, 1)
    one = planner.Placement.even(4, 1)
    summary = planner.HostSummary.of(s)
    assert summary.verdict(share, one, {}) == summary.SOME
    assert not summary.fits(share, one, {}, (frozenset({0}),))
    assert summary.fits(share, one, {}, (frozenset({1}),))
    assert planner.fits_anywhere(s, share, one, (frozenset({1}),)) is None


def test_with_allocation_widens_the_span_for_a_sharer_only():
    s = state(used=(0x3 | 0x600,), pmd=(0x600,))
    plain = s.with_allocation({0: {"both": 0xc}})
    assert plain.cache[0].pmd_want == {"both": 0x600}
    shared = s.with_allocation({0: {"both": 0x30}}, pmd_share=True)
    c = shared.cache[0]
    # The span now reaches down to the sharer at 4-5; ways 6-8 are holes
    # that only sharers may take.
    assert c.pmd_want == {"both": 0x630}
    assert c.used["both"] == 0x3 | 0x7f0
    assert (c.room("both"), c.room("both", sharer=True)) == (2, 3)
    back = hoststate.HostRdtState.from_stats(shared.to_stats())
    assert back == shared
    # Monitor-only: an RMID, no CLOS.
    mon = s.with_allocation({}, clos=0, rmids=1)
    assert (mon.clos_free, mon.rmids_free) == (s.clos_free,
                                               s.rmids_free - 1)


# -- from resctrl ----------------------------------------------------------

PREFIX = naming.DEFAULT_PREFIX


def _view(tmp_path, profile="gold-6252", pmd_mask=0x600, pmd_cpus=None,
          groups=()):
    """A prepared emulated host: root 0x3, the PMD group and ``groups``
    (name -> L3 mask on both ids), as the kernel model holds them."""
    k, _, _ = make_kernel(profile)

    def write(group, line):
        path = f"{group}/schemata" if group else "schemata"
        k.write(path, f"L3:0={line:x};1={line:x}\n".encode())

    write("", 0x3)
    if pmd_mask is not None:
        name = naming.pmd_group(PREFIX)
        k.mkdir(name)
        write(name, pmd_mask)
        if pmd_cpus:
            k.write(f"{name}/cpus_list",
                    ",".join(map(str, sorted(pmd_cpus))).encode())
    for name, mask in groups:
        k.mkdir(name)
        write(name, mask)
    root = materialize(k, str(tmp_path / "r"))
    cpu = topology.write_tree(k.profile, str(tmp_path / "cpu"))
    return HostView.collect(Resctrl(root, sysfs_cpu=cpu, prefix=PREFIX))


def test_from_resctrl_learns_the_pmd_group(tmp_path):
    view = _view(tmp_path, groups=[("qemu-1-a-vcpus_0", 0x100),
                                      ("qemu-2-b-vcpus_0", 0xc)])
    s = hoststate.from_resctrl(view, prefix=PREFIX)
    for c in s.cache.values():
        # No CPUs in the PMD group yet: the rule holds on every id, over
        # its whole mask.
        assert c.pmd and c.pmd_want == {"both": 0x600}
        # The plain VM at way 8 cuts sharers off the span; anyone else
        # has ways 4-7.
        assert c.room("both", sharer=True) == 0
        assert c.room("both") == 4
    # Knowing the base (pmd_shared_ways=2), the group at way 8 inside the
    # PMD COS's mask 0x700 is a sharer, not a hole.
    view = _view(tmp_path / "b", pmd_mask=0x700,
                    groups=[("qemu-1-a-vcpus_0", 0x100)])
    base = Schemata({"L3": {0: 0x600, 1: 0x600}})
    s = hoststate.from_resctrl(view, prefix=PREFIX, pmd_base=base)
    assert s.cache[0].pmd_want == {"both": 0x700}
    # pmd_cos off: the PMD group's ways are just used.
    s = hoststate.from_resctrl(view, prefix=PREFIX, pmd_cos=False)
    assert not s.cache[0].pmd and s.cache[0].room("both", True) == 6


def test_from_resctrl_knows_holes_only_with_the_base(tmp_path):
    # A sharer at 7-8 left; the PMD COS still spans 7-10.
    view = _view(tmp_path, pmd_mask=0x780)
    base = Schemata({"L3": {0: 0x600, 1: 0x600}})
    s = hoststate.from_resctrl(view, prefix=PREFIX, pmd_base=base)
    c = s.cache[0]
    assert c.pmd_want == {"both": 0x600}
    # The compute plans the PMD COS as its base: ways 2-8 are anyone's.
    assert (c.room("both"), c.room("both", sharer=True)) == (7, 7)
    # Without the base, the whole mask is the PMD COS's.
    c = hoststate.from_resctrl(view, prefix=PREFIX).cache[0]
    assert (c.room("both"), c.room("both", sharer=True)) == (5, 5)


def test_from_resctrl_rule_only_where_pmd_cpus_run(tmp_path):
    view = _view(tmp_path, pmd_cpus={0})
    s = hoststate.from_resctrl(view, prefix=PREFIX)
    on = {cid for cid, c in s.cache.items() if c.pmd}
    assert on == {cid for cid, c in s.cache.items() if 0 in c.cpus}
    assert len(on) == 1


def test_from_resctrl_pmd_group_holding_the_hosts_ways_spans_nothing(
        tmp_path):
    # pmd_shared_ways=0 and no sharer: the PMD COS holds the root's ways.
    view = _view(tmp_path, pmd_mask=0x3)
    s = hoststate.from_resctrl(view, prefix=PREFIX, pmd_cos=True)
    c = s.cache[0]
    assert c.pmd and not c.pmd_want
    assert c.room("both", sharer=True) == c.room("both") == 9


@pytest.mark.parametrize("version", [2, 3])
def test_older_documents_still_read(version):
    s = state(used=(0x3 | 0x600, 0x3), pmd=(0x600, None), sparse=True)
    raw = s.to_stats()["rdt"]
    if version == 2:
        import json
        doc = json.loads(raw)
        cdp, mb, geo = json.loads(doc["shape"])
        doc["shape"] = json.dumps([cdp, mb, [g[:4] for g in geo]],
                                  separators=(",", ":"))
        doc["l3"] = [[e[0], e[1], e[2], e[3]] for e in doc["l3"]]
        doc["v"] = 2
        raw = json.dumps(doc, separators=(",", ":"))
    back = hoststate.HostRdtState.from_stats({"rdt": raw})
    assert back is not None
    summary = planner.HostSummary.parse(raw)
    assert summary is not None
    r = spec.parse({"rdt:l3_cache_ways": "4"}, 4)
    assert summary.fits(r, planner.Placement(4), {}) == (
        planner.fits_anywhere(back, r, planner.Placement(4)) is None)
    if version == 2:
        # No PMD rule and no sparse flag in a version-2 document.
        assert not back.cache[0].pmd and not back.cache[0].sparse
    else:
        assert back == s


def test_from_resctrl_with_an_empty_base_knows_sharers_and_holes(tmp_path):
    # pmd_shared_ways=0: the PMD COS is its sharers' span.  Sharers at 4
    # and 8 (the one between left): a 3-way hole at 5-7, ways 2-3 and
    # 9-10 free next to the span.
    view = _view(tmp_path, pmd_mask=0x1f0,
                 groups=[("qemu-1-a-vcpus_0", 0x10),
                         ("qemu-2-b-vcpus_0", 0x100)])
    s = hoststate.from_resctrl(view, prefix=PREFIX, pmd_cos=True,
                               pmd_base=Schemata({}))
    c = s.cache[0]
    assert c.pmd_want == {"both": 0x110}
    assert c.pmd_cover("both") == 0x1f0
    assert (c.room("both"), c.room("both", sharer=True)) == (2, 3)
    # And the filter's fast path says so.
    r = spec.parse({"rdt:l3_cache_ways": "3", "rdt:pmd_share": "true"}, 4)
    assert planner.HostSummary.of(s).fits(r, planner.Placement(4), {})
    assert planner.fits_anywhere(s, r, planner.Placement(4)) is None
    r = spec.parse({"rdt:l3_cache_ways": "3"}, 4)
    assert not planner.HostSummary.of(s).fits(r, planner.Placement(4), {})
