"""The solver's input a compute publishes, and the claim the filter runs
on it (issue 38: one model for the scheduler and the compute)."""

from __future__ import annotations

import dataclasses
import json

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import pytest

from nova_rdt.allocation import hoststate
from nova_rdt.allocation import placement
from nova_rdt.allocation import planner
from nova_rdt.allocation import spec
from nova_rdt.scheduler import claim

IDS = (0, 1)


def _state(solver_host, book=None, classes=None, compaction=False,
           cdp=False, clos_free=8, class_defs=None):
    kinds = hoststate.CDP_TYPES if cdp else (hoststate.BOTH,)
    cache = {cid: hoststate.CacheIdState(
        cid, frozenset(range(cid * 4, cid * 4 + 4)), 11, 1 << 20, 1,
        {k: 0 for k in kinds}) for cid in IDS}
    s = hoststate.HostRdtState(cache=cache, cdp=cdp, clos_free=clos_free,
                               mb=None, monitoring=frozenset(),
                               classes=class_defs)
    return s.with_solver(solver_host, book or {}, classes or {},
                         compaction)


def _host(clos=8, pmd=False, sparse=False):
    return placement.Host(
        resources={"L3": placement.Resource(11, 1, sparse)},
        ids={"L3": IDS}, host_ways={"L3": {c: 0x3 for c in IDS}},
        pmd_base={"L3": {c: 0x600 for c in IDS}} if pmd else {},
        pmd_ids=frozenset(IDS) if pmd else None, clos=clos)


masks = st.integers(1, (1 << 11) - 1)
per_id = st.dictionaries(st.sampled_from(("L3CODE", "L3DATA")),
                         st.dictionaries(st.sampled_from(IDS), masks,
                                         max_size=2), max_size=2)


@st.composite
def solver_inputs(draw):
    host = placement.Host(
        resources={r: placement.Resource(draw(st.integers(4, 20)),
                                         draw(st.integers(1, 2)),
                                         draw(st.booleans()))
                   for r in ("L3CODE", "L3DATA")},
        ids={"L3CODE": IDS, "L3DATA": IDS},
        host_ways=draw(per_id), foreign=draw(per_id),
        pmd_base=draw(per_id),
        pmd_ids=draw(st.none() | st.frozensets(st.sampled_from(IDS))),
        clos=draw(st.integers(0, 15)))
    names = draw(st.lists(st.uuids().map(str), max_size=6, unique=True))
    book = {u: placement.Reservation(
        u, draw(per_id), draw(st.none() | per_id), draw(st.booleans()),
        draw(st.none() | st.sampled_from(("be", "gold"))),
        draw(st.booleans())) for u in names}
    groups = {n: placement.ClassGroup(n, draw(per_id),
                                      draw(st.none() | per_id))
              for n in draw(st.sets(st.sampled_from(("be", "gold"))))}
    return hoststate.SolverInput(host, book, groups, draw(st.booleans()),
                                 draw(st.booleans()))


@settings(max_examples=150, deadline=None)
@given(solver_inputs())
def test_the_published_input_reads_back_as_the_claims_own(s):
    back = hoststate.SolverInput.from_doc(s.to_doc())
    assert back.host == s.host
    assert back.classes == s.classes
    assert (back.compaction, back.monitor) == (s.compaction, s.monitor)
    # Reservations under names of their own, in the uuids' order: no
    # instance's uuid reaches the scheduler.
    assert [dataclasses.replace(r, uuid="") for _n, r in
            sorted(back.reservations.items(), key=lambda kv: int(kv[0][1:]))
            ] == [dataclasses.replace(r, uuid="")
                  for _u, r in sorted(s.reservations.items())]
    assert not set(back.reservations) & set(s.reservations)


def test_the_document_carries_the_input_and_no_rooms():
    book = {"vm": placement.Reservation("vm", {"L3": {0: 2}},
                                        {"L3": {0: 0xc}})}
    state = _state(_host(), book)
    stats = state.to_stats()
    back = hoststate.HostRdtState.from_stats(stats)
    assert back.solver == dataclasses.replace(
        state.solver, reservations={"r0": dataclasses.replace(
            book["vm"], uuid="r0")})
    doc = json.loads(stats["rdt"])
    assert doc["v"] == 4
    assert all(len(entry) == 4 for entry in doc["l3"])


def test_a_version_3_document_with_rooms_still_reads():
    """The previous release's compute: its rooms are skipped, its input
    and PMD rule read."""
    state = _state(_host(pmd=True))
    doc = json.loads(state.to_stats()["rdt"])
    doc["v"] = 3
    doc["l3"] = [[cid, cpus, used, [9], [9], None, [["c"]]]
                 for cid, cpus, used, _want in doc["l3"]]
    doc["cells"] = [[0, "0-3", [0]]]
    back = hoststate.HostRdtState.from_stats({"rdt": json.dumps(doc)})
    assert back.solver == state.solver
    assert back.cache[0].used == state.cache[0].used
    assert back.cells == {0: frozenset(range(4))}


@pytest.mark.parametrize("change", [
    lambda s: s.with_allocation({0: {"both": 0x30}}),
    lambda s: s.with_relocated({0: {"both": [(0x30, 0xc0)]}}),
])
def test_a_changed_state_is_no_longer_the_claims_input(change):
    state = _state(_host())
    assert change(state).solver is None


def test_every_defined_class_is_in_the_published_input():
    defs = {"be": hoststate.ClassState("be", 3, None, False)}
    state = _state(_host(), class_defs=defs)
    assert state.solver.classes["be"].ways == {"L3": {0: 3, 1: 3}}


def _req(extra, vcpus=2):
    return spec.parse(extra, vcpus, 1)


def _judge(state, extra):
    req = _req(extra)
    return claim.refusal(state, req, planner.Placement(2), None)


def test_the_claim_is_the_solvers_and_counts_what_it_took():
    state = _state(_host())
    ways = {"rdt:l3_cache_ways": "4"}
    assert _judge(state, ways) is None
    c = claim.claim(state, _req(ways), planner.Placement(2), None)
    state2 = claim.after(state, c)
    # Ways 2-5 taken on both ids: 5 free ways are left, in one run.
    assert _judge(state2, {"rdt:l3_cache_ways": "5"}) is None
    why = _judge(state2, {"rdt:l3_cache_ways": "6"})
    assert why.startswith("L3 cache id 0: no room for 6 ways of the new "
                          "instance; free runs 5@6")
    # A multi-create: two of them fit in the 9 free ways, three do not.
    assert claim.after_all(state, _req(ways), planner.Placement(2),
                           [None, None]) is not None
    assert claim.after_all(state, _req(ways), planner.Placement(2),
                           [None] * 3) is None


def test_the_clos_refusal_is_english():
    state = _state(_host(clos=1))
    c = claim.claim(state, _req({"rdt:l3_cache_ways": "2"}),
                    planner.Placement(2), None)
    full = claim.after(state, c)
    assert _judge(full, {"rdt:l3_cache_ways": "2"}) == (
        "no CLOS left for the new instance: the host's reservations and "
        "classes would need 2 CLOS, and 1 are available")


def test_a_class_member_makes_its_group_once():
    defs = {"be": hoststate.ClassState("be", 3, None, False)}
    state = _state(_host(clos=1), class_defs=defs)
    member = {"rdt:class": "be"}
    assert _judge(state, member) is None
    after = claim.after(state, claim.claim(state, _req(member),
                                           planner.Placement(2), None))
    assert after.classes["be"].exists
    # The group is there: a second member joins it, an instance with
    # ways of its own finds no CLOS.
    assert _judge(after, member) is None
    assert "no CLOS left" in _judge(after, {"rdt:l3_cache_ways": "2"})


def test_a_sharer_is_placed_by_the_pmd_rule_only_where_it_is_on():
    share = {"rdt:l3_cache_ways": "2", "rdt:pmd_share": "true"}
    on = claim.claim(_state(_host(pmd=True)), _req(share),
                     planner.Placement(2), None)
    off = claim.claim(_state(_host(pmd=False)), _req(share),
                      planner.Placement(2), None)
    assert on.new.pmd_share and not off.new.pmd_share
    # Next to the PMD base (0x600), not at the low end.
    assert on.plan.instances[hoststate.PROBE]["L3"][0] == 0x180
    assert off.plan.instances[hoststate.PROBE]["L3"][0] == 0xc


@pytest.mark.parametrize("plan", ["garbage", [1, 2], None, {"v": 9}])
def test_an_input_this_reader_does_not_know_leaves_the_rest(plan):
    """A newer compute's input: the state still reads (a live migration
    still gets its cache ids), without the input, and the filter refuses
    the host's rdt: requests, saying the scheduler is the older one."""
    state = _state(_host())
    doc = json.loads(state.to_stats()["rdt"])
    doc["plan"] = plan
    stats = {"rdt": json.dumps(doc)}
    back = hoststate.HostRdtState.from_stats(stats)
    assert back is not None and back.solver is None
    assert back.cache == state.cache
    pytest.importorskip("nova", reason="needs nova (the nova extra)")
    from nova_rdt.scheduler import filter as rdt_filter
    assert rdt_filter._read(stats["rdt"]) == rdt_filter._UNREADABLE
