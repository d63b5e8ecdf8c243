"""The placement planner under random life cycles (issue 33, "refused
only when impossible").

Random sequences of boot (sharing, non-sharing, class member; from one
way to the whole free cache, on one cache id or all), live migration in
and out (to the planner: a reservation arriving, one leaving), delete,
stop (the
reservation is kept: nothing changes), start (a re-place of the same
uuid, which must keep its masks) and compute restart (a re-plan from the
kept reservations, which must change nothing), on the emulator's shapes.
After every step the fixtures' independent checker asserts every rule:
each reservation holds exactly its ways, every mask is valid, groups are
pairwise disjoint apart from the PMD rule, the PMD COS is a valid mask
over exactly the base and the sharers (their span, their union under
sparse masks) and nobody else, and the CLOS spent fit the host.  Each
refusal is checked against a brute force over every valid mask of the
demand, the others fixed: none may exist.
"""

from __future__ import annotations

import dataclasses
import itertools

from hypothesis import event
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import pytest

from nova_rdt.allocation import placement as pl
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl import cbmrules
from tests import placement_fixtures as fx

SHAPES = {
    "gold-6252-pmd0": fx.gold_6252(pmd_ways=0),
    "gold-6252-pmd2": fx.gold_6252(pmd_ways=2),
    # PMD cores on cache id 0 only (issue 33 case 10).
    "gold-6252-pmd2-id0": fx.gold_6252(pmd_ways=2, pmd_ids={0}),
    "gold-6252-pmd-off": fx.gold_6252(pmd_ways=2, pmd_ids=None),
    # The real part: 2 CLOS left, so most sequences end in CLOS refusals.
    "e5-2658-v3": fx.e5_2658_v3(),
    # Its ways and min_cbm_bits with CLOS to spare, to exercise positions.
    "e5-2658-v3-ways": fx.e5_2658_v3(clos=14),
    "gold-6252-cdp": fx.gold_6252_cdp(),
    "amd-epyc": fx.amd_epyc(),
    # Synthetic: sparse masks whose lowest run must hold 2 ways.
    "sparse-min2": fx.shape(12, pmd_ways=2, min_bits=2, sparse=True),
    # The L2 CAT part (its L3, the cache nova-rdt places).
    "xeon-w-11865mre": fx.xeon_w_11865mre(),
}


def _classes(host):
    low = min(r.min_bits for r in host.resources.values())
    return {"gold": max(2, low), "silver": max(1, low)}


def _draw_boot(data, host, uuid):
    kind = data.draw(st.sampled_from(["share", "plain", "plain", "class"]))
    if kind == "class":
        return dict(uuid=uuid, ways={}, share=data.draw(st.booleans()),
                    cls=data.draw(st.sampled_from(sorted(_classes(host)))))
    res0 = next(iter(host.resources))
    ids = host.ids[res0]
    where = data.draw(st.sampled_from([ids] + [(i,) for i in ids]))
    ways = {}
    for res in host.resources:
        top = min(fx.managed(host, res, cid) for cid in where)
        n = data.draw(st.integers(1, top))
        ways[res] = {cid: n for cid in where}
    return dict(uuid=uuid, ways=ways, share=kind == "share",
                movable=data.draw(st.booleans()))


def _masks(book):
    return {u: {r: dict(m) for r, m in book.plan.instances[u].items()}
            for u in book.reservations}


def _boot(book, spec, compaction=False):
    new = pl.Reservation(spec["uuid"], spec["ways"],
                         pmd_share=spec.get("share", False),
                         rdt_class=spec.get("cls"),
                         movable=spec.get("movable", True))
    before = _masks(book)
    try:
        plan = book.boot(new.uuid, new.ways, share=new.pmd_share,
                         cls=new.rdt_class, movable=new.movable,
                         compaction=compaction)
    except pl.NoPlacement as e:
        assert not isinstance(e, pl.InvalidState), e
        event("refused: CLOS" if "CLOS" in str(e) else "refused: ways")
        return new, False
    kind = "class" if new.rdt_class else "sharer" if new.pmd_share \
        else "plain"
    event(f"placed: {kind}")
    for uuid, masks in before.items():
        if uuid not in plan.moved:
            assert fx.same_masks(plan.instances[uuid], masks), uuid
    return new, True


def _book(host):
    book = fx.Book(host)
    for name, n in _classes(host).items():
        book.define(name, {r: {c: n for c in host.ids[r]}
                           for r in host.resources})
    return book


def _life(data, host, steps):
    book = _book(host)
    stopped: set[str] = set()
    for step in range(steps):
        ops = ["boot", "boot", "migrate-in", "restart"]
        if book.reservations:
            ops += ["delete", "stop", "start", "migrate-out"]
        op = data.draw(st.sampled_from(ops))
        event(f"op: {op}")
        # To the planner a live migration in is a reservation made for an
        # instance that arrives (checked, then reserved in
        # pre_live_migration) and one out is a release: the same rules
        # as a boot and a delete, with names of their own in the events.
        if op in ("boot", "migrate-in"):
            spec = _draw_boot(data, host, f"vm{step}")
            plan, before = book.plan, dict(book.reservations)
            new, ok = _boot(book, spec)
            if ok:
                assert book.plan.moved == ()
            else:
                # Refused: a brute force finds no valid position either.
                assert book.plan is plan
                assert not fx.placeable(host, before, book.classes, plan,
                                        new), (new, plan)
        elif op in ("delete", "migrate-out"):
            uuid = data.draw(st.sampled_from(sorted(book.reservations)))
            before = _masks(book)
            plan = book.delete(uuid)
            stopped.discard(uuid)
            for other, masks in before.items():
                if other != uuid:
                    assert fx.same_masks(plan.instances[other], masks)
        elif op == "stop":
            # A stopped instance keeps its reservation: no plan changes.
            stopped.add(data.draw(st.sampled_from(sorted(book.reservations))))
        elif op == "start":
            uuid = data.draw(st.sampled_from(sorted(book.reservations)))
            before = _masks(book)
            book.start(uuid)
            stopped.discard(uuid)
            assert _masks(book) == before
        else:
            # A compute restart replans from the kept reservations.
            again = pl.release(host, book.reservations, book.classes, "")
            # The same masks everywhere (what moved last time is history).
            assert (again.instances, again.classes, again.pmd) == (
                book.plan.instances, book.plan.classes, book.plan.pmd)
    return book


@pytest.mark.parametrize("name", sorted(SHAPES))
@settings(max_examples=100)
@given(data=st.data())
def test_random_life_cycles_keep_every_rule(name, data):
    _life(data, SHAPES[name], data.draw(st.integers(1, 24)))


# -- compaction --------------------------------------------------------------

COMPACT_SHAPES = {
    "gold-6252-pmd0": fx.gold_6252(pmd_ways=0),
    "gold-6252-pmd2": fx.gold_6252(pmd_ways=2),
    "gold-6252-pmd-off": fx.gold_6252(pmd_ways=0, pmd_ids=None),
    "gold-6252-cdp": fx.gold_6252_cdp(),
    # Sparse masks (amd-epyc's 16 ways), one cache id to keep the
    # exhaustive repacking quick.
    "sparse-16": fx.shape(16, ids=(0,), pmd_ways=2, sparse=True),
}


@pytest.mark.parametrize("name", sorted(COMPACT_SHAPES))
@settings(max_examples=50)
@given(data=st.data())
def test_compaction_moves_only_movable_ones_and_only_when_needed(name, data):
    """Each boot is tried without compaction, then with it: compaction
    changes nothing when the demand fits, never moves an immovable
    reservation (a class only to make room, as without compaction),
    reports exactly the reservations it moved,
    and refuses only when no repacking of the movable ones makes room
    (checked exhaustively)."""
    host = COMPACT_SHAPES[name]
    book = _book(host)
    for step in range(data.draw(st.integers(1, 16))):
        if book.reservations and data.draw(st.booleans()):
            book.delete(data.draw(st.sampled_from(sorted(book.reservations))))
            continue
        spec = _draw_boot(data, host, f"vm{step}")
        new = pl.Reservation(spec["uuid"], spec["ways"],
                             pmd_share=spec.get("share", False),
                             rdt_class=spec.get("cls"),
                             movable=spec.get("movable", True))
        try:
            plain = pl.place(host, book.reservations, book.classes, new)
        except pl.NoPlacement:
            plain = None
        before = _masks(book)
        classes = dict(book.plan.classes)
        try:
            plan = pl.place(host, book.reservations, book.classes, new,
                            compaction=True)
        except pl.NoPlacement:
            assert plain is None
            assert not fx.repackable(host, book.reservations, book.classes,
                                     book.plan, new), new
            continue
        if plain is not None:
            assert plan == plain and plan.moved == ()
        changed = {u for u, m in before.items()
                   if not fx.same_masks(plan.instances[u], m)}
        assert set(plan.moved) == changed
        assert all(book.reservations[u].movable for u in changed)
        for cname, masks in classes.items():
            # A class moves only to make room, and says so.
            assert plan.classes[cname] == masks \
                or cname in plan.moved_classes
        book.apply(plan, new)


@settings(max_examples=200)
@given(data=st.data())
def test_compaction_moves_the_fewest_on_a_small_cache(data):
    """On one cache id of 8 ways, no smaller set of moves than the one
    compaction reports makes room (exhaustive)."""
    host = fx.shape(8, ids=(0,), reserved=1,
                    pmd_ways=data.draw(st.sampled_from([0, 1])))
    book = fx.Book(host)
    for step in range(data.draw(st.integers(1, 14))):
        if book.reservations and not data.draw(st.integers(0, 2)):
            book.delete(data.draw(st.sampled_from(sorted(book.reservations))))
            continue
        # Mostly small ones: they fragment the cache.
        n = data.draw(st.one_of(st.integers(1, 2), st.integers(
            1, fx.managed(host, "L3", 0))))
        new = pl.Reservation(f"vm{step}", {"L3": {0: n}},
                             pmd_share=data.draw(st.booleans()),
                             movable=data.draw(st.booleans()))
        try:
            plan = pl.place(host, book.reservations, book.classes, new,
                            compaction=True)
        except pl.NoPlacement:
            continue
        movable = sorted(u for u, r in book.reservations.items()
                         if r.movable)
        for k in range(len(plan.moved)):
            for fewer in itertools.combinations(movable, k):
                assert not fx.repackable(host, book.reservations,
                                         book.classes, book.plan, new,
                                         set(fewer)), (plan.moved, fewer)
        book.apply(plan, new)


# -- sparse masks: what libvirt makes is one run (issue 38, cause 4) -------

@st.composite
def fragmented(draw):
    """A sparse cache id cut into random segments: free, an instance's
    (sharing with the PMDs or not, movable or not) or a class's."""
    cbm_len = draw(st.integers(8, 16))
    pmd_ways = draw(st.sampled_from([0, 2]))
    host = fx.shape(cbm_len, ids=(0,), pmd_ways=pmd_ways,
                    min_bits=draw(st.sampled_from([1, 1, 2])), sparse=True,
                    pmd_ids=draw(st.sampled_from([{0}, None])))
    rule = host.resources["L3"]
    way, top = 2, cbm_len - pmd_ways
    book, classes = {}, {}
    while way < top:
        n = draw(st.integers(rule.min_bits, 4))
        if way + n > top:
            break
        kind = draw(st.sampled_from(["free", "free", "vm", "vm", "class"]))
        masks = {"L3": {0: cbm.Run(way, n).mask}}
        if kind == "vm":
            uuid = f"vm{len(book)}"
            book[uuid] = pl.Reservation(
                uuid, {"L3": {0: n}}, masks,
                pmd_share=host.pmd_ids is not None and draw(st.booleans()),
                movable=draw(st.booleans()))
        elif kind == "class" and len(classes) < 2:
            name = f"c{len(classes)}"
            classes[name] = pl.ClassGroup(name, {"L3": {0: n}}, masks)
            book[f"m-{name}"] = pl.Reservation(f"m-{name}", {},
                                               rdt_class=name)
        way += n
    # Mostly a few ways: as many as the pieces hold together, not in one.
    n = draw(st.one_of(st.integers(2, 5),
                       st.integers(1, fx.managed(host, "L3", 0))))
    new = pl.Reservation("new", {"L3": {0: n}},
                         pmd_share=draw(st.booleans()))
    return host, book, classes, new


@settings(max_examples=600)
@given(case=fragmented(), compaction=st.booleans())
def test_sparse_instances_get_a_run_or_a_refusal_that_says_why(case,
                                                               compaction):
    """On a sparse cache with its free ways in pieces, the new instance
    is placed on one run (the checker asserts every instance's mask is
    one), what moves is a movable instance (again on a run) or a class;
    a refusal happens only when no window of its size exists with the
    others where they are (and, with compaction, no repacking of the
    movable ones makes one), and when the free ways number enough it
    says that libvirt needs a contiguous run."""
    host, book, classes, new = case
    now = pl.release(host, book, classes, "")
    try:
        plan = pl.place(host, book, classes, new, compaction=compaction)
    except pl.NoPlacement as e:
        assert not isinstance(e, pl.InvalidState), e
        event("refused")
        assert not fx.placeable(host, book, classes, now, new)
        if compaction:
            assert not fx.repackable(host, book, classes, now, new)
        why = str(e)
        if "ways free, but no contiguous run" in why:
            event("refused: no run")
            free = int(why.split(": ")[2].split(" ")[0])
            assert free >= new.ways["L3"][0]
        return
    event("moved" if plan.moved else "moved a class"
          if plan.moved_classes else "placed")
    fx.check_plan(host, {**book, "new": new}, classes, plan)
    assert cbm.is_contiguous(plan.instances["new"]["L3"][0])
    for uuid in plan.moved:
        assert book[uuid].movable
    if not compaction:
        assert plan.moved == ()


@settings(max_examples=200)
@given(free=st.integers(0, (1 << 16) - 1))
def test_longest_run_is_libvirts_largest_group(free):
    """libvirt's allocator can make a group of n ways in ``free`` iff
    some window of n ways lies in it."""
    longest = cbmrules.longest_run(free)
    fits = [n for n in range(1, 17)
            if any(cbm.Run(s, n).mask & free == cbm.Run(s, n).mask
                   for s in range(17 - n))]
    assert longest == max(fits, default=0)


def test_the_shapes_are_the_profiles():
    """The property tests run on the emulator's numbers."""
    gold = SHAPES["gold-6252-pmd2"]
    assert gold.resources["L3"] == pl.Resource(11, 1, False)
    assert gold.ids["L3"] == (0, 1) and gold.clos == 14
    e5 = SHAPES["e5-2658-v3"]
    assert e5.resources["L3"] == pl.Resource(20, 2, False)
    assert e5.clos == 2
    amd = SHAPES["amd-epyc"]
    assert amd.resources["L3"] == pl.Resource(16, 0, True)
    assert amd.ids["L3"] == (0, 1, 2, 3)
    cdp = SHAPES["gold-6252-cdp"]
    assert set(cdp.resources) == {"L3CODE", "L3DATA"} and cdp.clos == 6
    assert dataclasses.replace(gold, pmd_ids=None).pmd_ids is None
