"""The placement planner (nova_rdt.allocation.placement): each rule, and
the cases of issue 33 at the planner's level.

Shapes are the emulator's profiles (tests/placement_fixtures.py): on
gold-6252 with reserved_host_ways=2 and pmd_shared_ways=2 the host holds
ways 0-1, the PMD base ways 9-10, and ways 2-8 are handed out.  Every
plan a Book applies goes through the fixtures' independent rule checker.
"""

from __future__ import annotations

import dataclasses

import pytest

from nova_rdt.allocation import placement as pl
from nova_rdt.resctrl import cbm
from tests import placement_fixtures as fx

L3 = "L3"
BOTH = (0, 1)


def run(start, n):
    return cbm.Run(start, n).mask


def ways(n, ids=BOTH, res=(L3,)):
    return fx.per(n, res, ids)


# -- the plan's shape ------------------------------------------------------

def test_empty_host_the_pmd_cos_is_its_base_or_the_host_ways():
    assert fx.Book(fx.gold_6252(pmd_ways=2)).plan.pmd == \
        {L3: {0: run(9, 2), 1: run(9, 2)}}
    # No base and no sharer: a CBM may not be empty, share the host's.
    assert fx.Book(fx.gold_6252(pmd_ways=0)).plan.pmd == \
        {L3: {0: 0b11, 1: 0b11}}


def test_pmd_cos_off_no_pmd_masks_and_sharers_place_as_any_vm():
    book = fx.Book(fx.gold_6252(pmd_ways=2, pmd_ids=None))
    plan = book.boot("s", ways(2), share=True)
    assert plan.pmd == {}
    # The base is not the PMDs' when the PMD COS is off: 2-3, libvirt's
    # lowest-first choice.
    assert book.masks("s") == {0: run(2, 2), 1: run(2, 2)}


def test_ids_the_demand_does_not_name_get_no_mask():
    book = fx.Book(fx.gold_6252())
    book.boot("a", ways(3, ids=(1,)))
    assert book.plan.instances["a"] == {L3: {1: run(2, 3)}}


def test_a_vm_without_ways_costs_no_clos_and_holds_nothing():
    book = fx.Book(fx.gold_6252(clos=0))
    plan = book.boot("mb-only", {})
    assert plan.instances["mb-only"] == {} and fx.clos_used(plan) == 0


# -- validity ------------------------------------------------------------

def test_min_bits_refuses_a_one_way_mask_on_e5_2658_v3():
    book = fx.Book(fx.e5_2658_v3())
    with pytest.raises(pl.NoPlacement, match="at least 2 ways"):
        book.boot("a", ways(1))
    book.boot("b", ways(2))
    assert book.masks("b") == {0: run(4, 2), 1: run(4, 2)}


def test_more_ways_than_the_cache_is_refused_naming_the_size():
    with pytest.raises(pl.NoPlacement, match="the cache has 11 ways"):
        fx.Book(fx.gold_6252()).boot("a", ways(12))


def test_host_and_foreign_ways_are_never_given_out():
    foreign = {L3: {0: run(5, 2), 1: 0}}
    book = fx.Book(fx.gold_6252(pmd_ways=0, pmd_ids=None, foreign=foreign))
    book.boot("a", ways(3))
    book.boot("b", ways(3))
    # id 0: free runs 2-4 and 7-10; id 1: one run 2-10.
    assert book.masks("a") == {0: run(2, 3), 1: run(2, 3)}
    assert book.masks("b") == {0: run(7, 3), 1: run(5, 3)}
    with pytest.raises(pl.NoPlacement) as e:
        book.boot("c", ways(2))
    assert "L3 cache id 0: no room for 2 ways of instance c" in str(e.value)
    assert "free runs 1@10(400)" in str(e.value)


def test_a_demand_on_a_resource_the_host_does_not_place_is_refused():
    with pytest.raises(pl.NoPlacement, match="L3CODE cache id 0"):
        fx.Book(fx.gold_6252()).boot("a", {"L3CODE": {0: 2}})
    with pytest.raises(pl.NoPlacement, match="L3 cache id 5"):
        fx.Book(fx.gold_6252()).boot("a", {L3: {5: 2}})


def test_a_class_nobody_defined_is_refused():
    with pytest.raises(pl.NoPlacement, match="class 'nope'"):
        fx.Book(fx.gold_6252()).boot("a", {}, cls="nope")


# -- non-sharers -----------------------------------------------------------

def test_non_sharer_takes_the_smallest_free_run_that_fits():
    book = fx.Book(fx.gold_6252(pmd_ways=0, pmd_ids=None))
    for uuid, n in (("a", 2), ("b", 3), ("c", 1), ("d", 3)):
        book.boot(uuid, ways(n, ids=(0,)))
    book.delete("a")             # free: 2-3 (2 ways), 9-10 (2 ways)
    book.delete("c")             # free: 2-3, 7 (1 way), 9-10
    book.boot("e", ways(1, ids=(0,)))
    assert book.masks("e") == {0: run(7, 1)}
    book.boot("f", ways(2, ids=(0,)))
    assert book.masks("f") == {0: run(2, 2)}


def test_non_sharer_avoids_the_ways_next_to_the_span_when_it_can():
    book = fx.Book(fx.gold_6252())
    book.boot("a", ways(3))
    # Free run 2-8 touches the base at 9-10: the low end, not 6-8.
    assert book.masks("a") == {0: run(2, 3), 1: run(2, 3)}
    book.boot("b", ways(3))
    assert book.masks("b") == {0: run(5, 3), 1: run(5, 3)}
    # Way 8 is the only choice left: taken.
    book.boot("c", ways(1))
    assert book.masks("c") == {0: run(8, 1), 1: run(8, 1)}


def test_non_sharer_never_takes_a_hole_inside_the_span():
    book = fx.Book(fx.gold_6252())
    book.boot("s1", ways(2), share=True)          # 7-8
    book.boot("s2", ways(2), share=True)          # 5-6
    book.delete("s1")
    assert book.plan.pmd[L3][0] == run(5, 6)      # 7-8 absorbed
    with pytest.raises(pl.NoPlacement, match="outside the PMD COS 0x7e0"):
        book.boot("a", ways(4))
    book.boot("b", ways(3))
    assert book.masks("b") == {0: run(2, 3), 1: run(2, 3)}


# -- sharers ---------------------------------------------------------------

def test_sharers_grow_the_span_from_the_base():
    book = fx.Book(fx.gold_6252())
    book.boot("s1", ways(2), share=True)
    book.boot("s2", ways(1), share=True)
    assert book.masks("s1") == {0: run(7, 2), 1: run(7, 2)}
    assert book.masks("s2") == {0: run(6, 1), 1: run(6, 1)}
    assert book.plan.pmd == {L3: {0: run(6, 5), 1: run(6, 5)}}


def test_a_sharer_fills_a_hole_in_the_span_first():
    book = fx.Book(fx.gold_6252())
    book.boot("s1", ways(2), share=True)          # 7-8
    book.boot("s2", ways(1), share=True)          # 6
    book.delete("s1")                             # hole 7-8
    book.boot("s3", ways(2), share=True)
    assert book.masks("s3") == {0: run(7, 2), 1: run(7, 2)}
    assert book.plan.pmd[L3][0] == run(6, 5)


def test_a_sharer_too_big_for_the_hole_goes_next_to_the_span():
    book = fx.Book(fx.gold_6252())
    book.boot("s1", ways(2), share=True)          # 7-8
    book.boot("s2", ways(2), share=True)          # 5-6
    book.delete("s1")                             # hole 7-8 stays
    book.boot("s3", ways(3), share=True)
    assert book.masks("s3") == {0: run(2, 3), 1: run(2, 3)}
    assert book.plan.pmd[L3][0] == run(2, 9)


def test_without_a_base_the_first_sharer_goes_to_the_top_of_its_run():
    book = fx.Book(fx.gold_6252(pmd_ways=0))
    book.boot("s", ways(2), share=True)
    assert book.masks("s") == {0: run(9, 2), 1: run(9, 2)}
    assert book.plan.pmd[L3][0] == run(9, 2)
    book.boot("a", ways(6))
    assert book.masks("a") == {0: run(2, 6), 1: run(2, 6)}
    book.boot("t", ways(1), share=True)
    assert book.masks("t") == {0: run(8, 1), 1: run(8, 1)}


def test_a_sharer_is_refused_when_the_span_would_cover_another_group():
    book = fx.Book(fx.gold_6252())
    book.boot("a", ways(6))                       # 2-7
    book.boot("b", ways(1))                       # 8
    book.delete("a")
    with pytest.raises(pl.NoPlacement) as e:
        book.boot("s", ways(1), share=True)
    msg = str(e.value)
    assert "L3 cache id 0: no room for 1 way of instance s" in msg
    assert "free runs 6@2(fc)" in msg and "PMD COS (0x600)" in msg


# -- classes and CLOS -------------------------------------------------------

def test_a_class_is_placed_with_its_first_member_and_shared_after():
    book = fx.Book(fx.gold_6252())
    book.define("gold", ways(2))
    plan = book.boot("m1", {}, cls="gold")
    assert plan.classes == {"gold": {L3: {0: run(2, 2), 1: run(2, 2)}}}
    assert plan.instances["m1"] == {} and fx.clos_used(plan) == 1
    plan = book.boot("m2", {}, cls="gold")
    assert plan.classes["gold"] == {L3: {0: run(2, 2), 1: run(2, 2)}}
    assert fx.clos_used(plan) == 1


def test_an_emptied_class_leaves_the_plan_and_its_ways_are_free():
    book = fx.Book(fx.gold_6252())
    book.define("gold", ways(2))
    book.boot("m1", {}, cls="gold")
    book.boot("m2", {}, cls="gold")
    assert "gold" in book.delete("m1").classes
    plan = book.delete("m2")
    assert plan.classes == {} and fx.clos_used(plan) == 0
    book.boot("a", ways(7))
    assert book.masks("a") == {0: run(2, 7), 1: run(2, 7)}


def test_a_class_is_exclusive_even_for_a_sharing_member():
    book = fx.Book(fx.gold_6252())
    book.define("gold", ways(1))
    plan = book.boot("m", {}, cls="gold", share=True)
    assert plan.pmd[L3][0] == run(9, 2)
    assert plan.classes["gold"][L3][0] == run(2, 1)


def test_clos_refusal_names_clos_and_counts_groups_not_members():
    book = fx.Book(fx.gold_6252(clos=2))
    book.define("gold", ways(1))
    book.boot("a", ways(1))
    book.boot("m1", {}, cls="gold")
    book.boot("m2", {}, cls="gold")
    with pytest.raises(pl.NoPlacement, match=r"CLOS.* 3 CLOS.* 2 are"):
        book.boot("b", ways(1))


def test_case3_a_class_not_made_yet_costs_a_clos():
    """Issue 33 case 3: with one CLOS free, a class VM and a 1-way VM
    cannot both be accepted, in either order."""
    def boot(book, kind):
        if kind == "class":
            return book.boot("c", {}, cls="gold")
        return book.boot("p", ways(1))

    for first, second in (("class", "plain"), ("plain", "class")):
        book = fx.Book(fx.gold_6252(clos=1))
        book.define("gold", ways(1))
        boot(book, first)
        with pytest.raises(pl.NoPlacement, match="CLOS"):
            boot(book, second)
    # A second member of a class that exists costs nothing.
    book = fx.Book(fx.gold_6252(clos=1))
    book.define("gold", ways(1))
    book.boot("c1", {}, cls="gold")
    book.boot("c2", {}, cls="gold")


# -- placed reservations keep their masks -----------------------------------

def test_placing_never_moves_the_placed_ones():
    book = fx.Book(fx.gold_6252())
    book.boot("a", ways(2))
    book.boot("s", ways(2), share=True)
    before = {u: dict(r.masks) for u, r in book.reservations.items()}
    book.boot("b", ways(2))
    for uuid, masks in before.items():
        assert fx.same_masks(book.plan.instances[uuid], masks)
    assert book.plan.moved == ()


def test_a_re_place_of_the_same_uuid_keeps_its_masks():
    book = fx.Book(fx.gold_6252())
    book.boot("a", ways(2))
    book.boot("b", ways(3))
    book.delete("a")             # b at 4-6 is not where a fresh 3 goes
    masks = book.masks("b")
    book.start("b")
    assert book.masks("b") == masks == {0: run(4, 3), 1: run(4, 3)}


def test_a_re_place_with_other_ways_is_placed_afresh():
    book = fx.Book(fx.gold_6252())
    book.boot("a", ways(2))
    book.boot("b", ways(3))
    book.delete("a")
    r = dataclasses.replace(book.reservations["b"], ways=ways(2),
                            masks=None)
    plan = book.apply(pl.place(book.host, book.reservations, book.classes,
                               r), r)
    assert plan.instances["b"] == {L3: {0: run(2, 2), 1: run(2, 2)}}


def test_given_masks_that_broke_a_rule_are_placed_afresh_for_new():
    book = fx.Book(fx.gold_6252())
    book.boot("a", ways(2))                       # 2-3
    bad = pl.Reservation("b", ways(2), masks=ways(run(2, 2)))
    plan = pl.place(book.host, book.reservations, book.classes, bad)
    assert plan.instances["b"] == {L3: {0: run(4, 2), 1: run(4, 2)}}


def test_placed_masks_that_break_a_rule_are_an_invalid_state():
    book = fx.Book(fx.gold_6252())
    book.boot("a", ways(2))
    book.reservations["b"] = pl.Reservation("b", ways(2),
                                            masks=ways(run(3, 2)))
    with pytest.raises(pl.InvalidState, match="instance b .* overlaps"):
        book.boot("c", ways(1))
    # A non-sharer inside the span of a sharer placed before it.
    book = fx.Book(fx.gold_6252())
    book.reservations["s"] = pl.Reservation(
        "s", ways(1), masks=ways(run(2, 1)), pmd_share=True)
    book.reservations["x"] = pl.Reservation("x", ways(1),
                                            masks=ways(run(5, 1)))
    with pytest.raises(pl.InvalidState, match="PMD COS"):
        book.boot("c", ways(1))


def test_masks_on_ids_a_reservation_asks_nothing_of_are_ignored():
    """libvirt copies the root's mask onto ids a domain names no ways on;
    read back from resctrl, they are no placement."""
    book = fx.Book(fx.gold_6252())
    book.reservations["a"] = pl.Reservation(
        "a", ways(2, ids=(0,)), masks={L3: {0: run(2, 2), 1: 0b11}})
    plan = book.boot("b", ways(2))
    assert plan.instances["a"] == {L3: {0: run(2, 2)}}


def test_release_of_an_unknown_uuid_changes_nothing():
    book = fx.Book(fx.gold_6252())
    book.define("gold", ways(1))
    book.boot("a", ways(2))
    book.boot("s", ways(2), share=True)
    book.boot("m", {}, cls="gold")
    again = pl.release(book.host, book.reservations, book.classes, "nope")
    assert again == book.plan


def test_release_shrinks_the_span_to_the_base_and_remaining_sharers():
    book = fx.Book(fx.gold_6252())
    book.boot("s1", ways(2), share=True)
    book.boot("s2", ways(2), share=True)
    assert book.delete("s2").pmd[L3][0] == run(7, 4)
    assert book.delete("s1").pmd[L3][0] == run(9, 2)
    book = fx.Book(fx.gold_6252(pmd_ways=0))
    book.boot("s1", ways(2), share=True)
    assert book.delete("s1").pmd[L3][0] == 0b11


# -- sparse masks and CDP --------------------------------------------------

def test_sparse_sharers_join_the_pmd_union_not_a_span():
    book = fx.Book(fx.amd_epyc())
    book.boot("a", ways(3, ids=(0,)))             # 2-4
    book.boot("s", ways(2, ids=(0,)), share=True)
    assert book.masks("s") == {0: run(5, 2)}
    assert book.plan.pmd[L3][0] == run(14, 2) | run(5, 2)
    book.delete("a")
    book.boot("b", ways(5, ids=(0,)))             # 7-11
    assert book.masks("b") == {0: run(7, 5)}


def test_sparse_instances_still_need_a_run_libvirt_can_find():
    """Issue 38, cause 4: libvirt allocates an instance from its
    <cachetune> size and finds only contiguous free runs, so scattered
    free ways are no room for an instance even where the kernel takes
    sparse masks; compaction makes a run instead."""
    book = fx.Book(fx.amd_epyc(pmd_ways=0, pmd_ids=None))
    for uuid, n in (("a", 2), ("b", 3), ("c", 3), ("d", 4), ("e", 2)):
        book.boot(uuid, ways(n, ids=(0,)))        # 2-3 4-6 7-9 10-13 14-15
    book.delete("a")
    book.delete("c")
    with pytest.raises(pl.NoPlacement, match="free runs 2@2"):
        book.boot("f", ways(4, ids=(0,)))
    plan = book.boot("f", ways(4, ids=(0,)), compaction=True)
    assert plan.moved and cbm.is_contiguous(book.masks("f")[0])


def test_sparse_class_groups_take_scattered_ways():
    """A class group is nova-rdt's (mkdir, then its masks written), not
    libvirt's: it may take scattered ways where the kernel allows."""
    book = fx.Book(fx.amd_epyc(pmd_ways=0, pmd_ids=None))
    for uuid, n in (("a", 2), ("b", 3), ("c", 3), ("d", 4), ("e", 2)):
        book.boot(uuid, ways(n, ids=(0,)))        # 2-3 4-6 7-9 10-13 14-15
    book.delete("a")
    book.delete("c")
    book.define("be", ways(4, ids=(0,)))
    book.boot("m", {}, cls="be")
    mask = book.plan.classes["be"][L3][0]
    assert mask == run(7, 3) | run(2, 1)


def test_sparse_with_min_bits_keeps_the_lowest_run_long_enough():
    host = fx.shape(12, ids=(0,), min_bits=2, sparse=True, pmd_ids=None)
    book = fx.Book(host)
    for uuid, n in (("a", 2), ("b", 2), ("c", 2), ("d", 2), ("e", 2)):
        book.boot(uuid, ways(n, ids=(0,)))        # 2-3 ... 10-11
    book.delete("b")                              # free 4-5
    book.delete("d")                              # free 8-9
    book.define("be", ways(3, ids=(0,)))
    book.boot("x", {}, cls="be")
    mask = book.plan.classes["be"][L3][0]
    assert cbm.popcount(mask) == 3 and cbm.runs(mask)[0].length >= 2


def test_cdp_places_code_and_data_independently():
    book = fx.Book(fx.gold_6252_cdp())
    code, data = "L3CODE", "L3DATA"
    book.boot("a", {code: {0: 1, 1: 1}, data: {0: 4, 1: 4}})
    book.boot("s", {code: {0: 2, 1: 2}, data: {0: 1, 1: 1}}, share=True)
    assert book.masks("a", code) == {0: run(2, 1), 1: run(2, 1)}
    assert book.masks("a", data) == {0: run(2, 4), 1: run(2, 4)}
    assert book.masks("s", code) == {0: run(7, 2), 1: run(7, 2)}
    assert book.masks("s", data) == {0: run(8, 1), 1: run(8, 1)}
    assert book.plan.pmd == {code: {0: run(7, 4), 1: run(7, 4)},
                             data: {0: run(8, 3), 1: run(8, 3)}}
    # The code side is nearly empty, the data side full: refused on data.
    with pytest.raises(pl.NoPlacement, match="L3DATA cache id 0"):
        book.boot("b", {code: {0: 1}, data: {0: 4}})


# -- the cases -------------------------------------------------------

@pytest.mark.parametrize("n", range(1, 8))
def test_case1_every_sharer_size_fits_an_empty_gold_6252(n):
    """Issue 33 case 1: pmd_shared_ways=2, the base at the top; sharers of
    every size up to the whole free run start on an empty host."""
    book = fx.Book(fx.gold_6252(pmd_ways=2))
    book.boot("s", ways(n), share=True)
    assert book.masks("s") == {0: run(9 - n, n), 1: run(9 - n, n)}
    assert book.plan.pmd == {L3: {0: run(9 - n, n + 2),
                                  1: run(9 - n, n + 2)}}


def test_case1_sharers_of_2_3_and_4_ways_one_after_another():
    """Seven ways are free per cache id, so 2+3+4 fit only spread over the
    two ids: the 2-way on both, the 3-way on id 0, the 4-way on id 1."""
    book = fx.Book(fx.gold_6252(pmd_ways=2))
    book.boot("s2", ways(2), share=True)
    book.boot("s3", ways(3, ids=(0,)), share=True)
    book.boot("s4", ways(4, ids=(1,)), share=True)
    assert book.masks("s2") == {0: run(7, 2), 1: run(7, 2)}
    assert book.masks("s3") == {0: run(4, 3)}
    assert book.masks("s4") == {1: run(3, 4)}
    assert book.plan.pmd == {L3: {0: run(4, 7), 1: run(3, 8)}}
    # And a 2-way sharer still fits on id 0, a plain 1-way on id 1.
    book.boot("s5", ways(2, ids=(0,)), share=True)
    assert book.masks("s5") == {0: run(2, 2)}
    book.boot("p", ways(1, ids=(1,)))
    assert book.masks("p") == {1: run(2, 1)}


def test_case1_sharers_of_2_then_3_then_4_the_4_only_where_it_fits():
    book = fx.Book(fx.gold_6252(pmd_ways=2))
    book.boot("s2", ways(2), share=True)
    book.boot("s3", ways(3), share=True)
    new = pl.Reservation("s4", ways(4), pmd_share=True)
    with pytest.raises(pl.NoPlacement, match="no room for 4 ways"):
        pl.place(book.host, book.reservations, book.classes, new)
    assert not fx.placeable(book.host, book.reservations, book.classes,
                            book.plan, new)


@pytest.mark.parametrize("n", range(1, 7))
def test_case2_a_class_group_left_behind_does_not_block_sharers(n):
    """Issue 33 case 2 (the PMD COS on, pmd_shared_ways=0): a plain 6-way
    VM, then a class member's group, then the plain VM deleted; sharers
    of 1 to 6 ways are still placed."""
    book = fx.Book(fx.gold_6252(pmd_ways=0))
    book.define("gold", ways(1))
    book.boot("plain", ways(6))                   # 2-7
    book.boot("member", {}, cls="gold")           # 8: the run 8-10
    assert book.plan.classes["gold"][L3] == {0: run(8, 1), 1: run(8, 1)}
    book.delete("plain")
    book.boot("s", ways(n), share=True)
    # Free runs 2-7 and 9-10: the smallest that fits, its top end.
    expect = run(11 - n, n) if n <= 2 else run(8 - n, n)
    assert book.masks("s") == {0: expect, 1: expect}


def test_case2_with_a_base_the_class_next_to_it_moves_for_a_sharer():
    """With pmd_shared_ways=2 the cache is full after the 6-way VM (2-7)
    and the class (8, the only way left).  Once the VM is gone, no sharer
    could reach the base past the class with the class where it is (the
    brute force, which moves nothing, agrees); the class group is
    nova-rdt's own, so it is placed again, away from the span, and said
    so -- without compaction, which moves instances only."""
    book = fx.Book(fx.gold_6252(pmd_ways=2))
    book.define("gold", ways(1))
    book.boot("plain", ways(6))
    book.boot("member", {}, cls="gold")
    assert book.plan.classes["gold"][L3][0] == run(8, 1)
    book.delete("plain")
    for n in range(1, 7):
        new = pl.Reservation(f"s{n}", ways(n), pmd_share=True)
        assert not fx.placeable(book.host, book.reservations, book.classes,
                                book.plan, new)
        plan = pl.place(book.host, book.reservations, book.classes, new)
        assert plan.moved == () and plan.moved_classes == ("gold",)
        cls = plan.classes["gold"][L3][0]
        mine = plan.instances[f"s{n}"][L3][0]
        assert cls & mine == 0 and cls & plan.pmd[L3][0] == 0
        assert bin(cls).count("1") == 1
    book.boot("p", ways(6))                       # non-sharers still fit


def test_case7_a_stopped_sharer_in_the_middle_starts_again():
    """Issue 33 case 7: sharers s1, s2, s3 and a plain VM filling the
    rest; s2 stops (its reservation kept) and starts again on its ways."""
    book = fx.Book(fx.gold_6252(pmd_ways=2))
    book.boot("s1", ways(2), share=True)          # 7-8
    book.boot("s2", ways(2), share=True)          # 5-6
    book.boot("s3", ways(1), share=True)          # 4
    book.boot("p", ways(2))                       # 2-3
    held = book.masks("s2")
    assert held == {0: run(5, 2), 1: run(5, 2)}
    # Stopped: nothing is released, so nothing can take s2's ways.
    extra = pl.Reservation("x", ways(1))
    with pytest.raises(pl.NoPlacement):
        pl.place(book.host, book.reservations, book.classes, extra)
    assert not fx.placeable(book.host, book.reservations, book.classes,
                            book.plan, extra)
    # A compute restart replans from the kept reservations: unchanged.
    assert pl.release(book.host, book.reservations, book.classes,
                      "none") == book.plan
    book.start("s2")
    assert book.masks("s2") == held
    assert book.plan.pmd == {L3: {0: run(4, 7), 1: run(4, 7)}}


def test_case7_a_deleted_sharer_leaves_a_hole_only_a_sharer_takes():
    book = fx.Book(fx.gold_6252(pmd_ways=2))
    book.boot("s1", ways(2), share=True)
    book.boot("s2", ways(2), share=True)
    book.boot("s3", ways(1), share=True)
    book.boot("p", ways(2))
    book.delete("s2")
    assert book.plan.pmd[L3][0] == run(4, 7)
    with pytest.raises(pl.NoPlacement):
        book.boot("x", ways(2))
    book.boot("s4", ways(2), share=True)
    assert book.masks("s4") == {0: run(5, 2), 1: run(5, 2)}


def _case8_book(movable=True):
    """Free ways 2-4 and 8-10 around a 3-way VM m at 5-7 (no PMD COS)."""
    book = fx.Book(fx.gold_6252(pmd_ways=0, pmd_ids=None))
    book.boot("x", ways(3, ids=(0,)))
    book.boot("m", ways(3, ids=(0,)), movable=movable)
    book.delete("x")
    assert book.masks("m") == {0: run(5, 3)}
    return book


def test_case8_two_runs_of_three_refuse_four_ways_without_compaction():
    """Issue 33 case 8."""
    book = _case8_book()
    with pytest.raises(pl.NoPlacement) as e:
        book.boot("n", ways(4, ids=(0,)))
    assert str(e.value) == ("L3 cache id 0: no room for 4 ways of instance "
                            "n; free runs 3@2(1c), 3@8(700)")


def test_case8_compaction_moves_one_neighbour_and_says_so():
    book = _case8_book()
    plan = book.boot("n", ways(4, ids=(0,)), compaction=True)
    assert plan.moved == ("m",)
    assert cbm.popcount(book.masks("n")[0] | book.masks("m")[0]) == 7
    assert cbm.is_contiguous(book.masks("n")[0])


def test_case8_compaction_never_moves_an_immovable_neighbour():
    book = _case8_book(movable=False)
    with pytest.raises(pl.NoPlacement,
                       match="moving what may move makes no room"):
        book.boot("n", ways(4, ids=(0,)), compaction=True)


def test_compaction_moves_the_fewest_and_only_movable_ones():
    book = fx.Book(fx.gold_6252(pmd_ways=0, pmd_ids=None))
    book.boot("p", ways(2, ids=(0,)), movable=False)   # 2-3
    book.boot("f1", ways(2, ids=(0,)))                 # 4-5
    book.boot("q", ways(2, ids=(0,)))                  # 6-7
    book.boot("f2", ways(1, ids=(0,)))                 # 8
    book.delete("f1")                                  # free 4-5, 9-10
    plan = book.boot("n", ways(4, ids=(0,)), compaction=True)
    assert plan.moved == ("q",)
    assert book.masks("p") == {0: run(2, 2)}
    assert book.masks("f2") == {0: run(8, 1)}
    assert book.masks("n") == {0: run(4, 4)}
    assert book.masks("q") == {0: run(9, 2)}


def test_compaction_moves_one_neighbour_away_from_the_base_for_a_sharer():
    host = fx.shape(8, ids=(0,), reserved=1, pmd_ways=1)   # host 0, base 7
    book = fx.Book(host)
    book.boot("a", {L3: {0: 1}})                       # 1
    book.boot("p", {L3: {0: 1}}, movable=False)        # 2
    book.boot("b", {L3: {0: 2}})                       # 3-4
    book.boot("c", {L3: {0: 1}})                       # 5
    book.boot("d", {L3: {0: 1}})                       # 6
    book.delete("a")                                   # free: 1
    plan = book.boot("s", {L3: {0: 1}}, share=True, compaction=True)
    assert plan.moved == ("d",)
    assert book.masks("d") == {0: run(1, 1)}
    assert book.masks("s") == {0: run(6, 1)}
    assert plan.pmd[L3][0] == run(6, 2)


def test_compaction_moves_nothing_when_the_demand_fits():
    book = fx.Book(fx.gold_6252())
    book.boot("a", ways(2))
    plain = pl.place(book.host, book.reservations, book.classes,
                     pl.Reservation("b", ways(3)))
    packed = pl.place(book.host, book.reservations, book.classes,
                      pl.Reservation("b", ways(3)), compaction=True)
    assert plain == packed and packed.moved == ()


def test_compaction_refuses_when_the_free_ways_are_too_few():
    book = fx.Book(fx.gold_6252(pmd_ways=0, pmd_ids=None))
    book.boot("a", ways(6, ids=(0,)))
    with pytest.raises(pl.NoPlacement,
                       match="moving what may move makes no room"):
        book.boot("b", ways(4, ids=(0,)), compaction=True)


def test_compaction_slides_a_sharer_along_the_base_for_a_plain_vm():
    book = fx.Book(fx.gold_6252(pmd_ways=2))
    book.boot("a", ways(2))                            # 2-3
    book.boot("s1", ways(2), share=True)               # 7-8
    book.boot("b", ways(2))                            # 4-5
    book.boot("s2", ways(1), share=True)               # 6
    book.delete("s1")                                  # span 6-10: hole 7-8
    book.delete("a")                                   # free 2-3
    with pytest.raises(pl.NoPlacement):
        book.boot("c", ways(3))
    plan = book.boot("c", ways(3), compaction=True)
    # Moving b alone leaves 2-5 outside the span, too small for 2+3;
    # moving s2 alone leaves 2-3 and 6-7.  Both move: s2 next to the base,
    # b into the old span.
    assert plan.moved == ("b", "s2")
    assert book.masks("s2") == {0: run(8, 1), 1: run(8, 1)}
    assert book.masks("c") == {0: run(2, 3), 1: run(2, 3)}
    assert book.masks("b") == {0: run(5, 2), 1: run(5, 2)}
    assert plan.pmd[L3][0] == run(8, 3)


def test_case10_sharers_off_pmd_cache_ids_place_as_any_vm():
    """Issue 33 case 10: PMD cores only on cache id 0.  On id 1 a sharer
    is placed as any instance; the PMD COS holds the host's ways there."""
    book = fx.Book(fx.gold_6252(pmd_ways=2, pmd_ids={0}))
    book.boot("a", ways(6, ids=(1,)))
    assert book.masks("a") == {1: run(2, 6)}
    book.boot("s", ways(2, ids=(1,)), share=True)
    assert book.masks("s") == {1: run(8, 2)}
    assert book.plan.pmd == {L3: {0: run(9, 2), 1: 0b11}}
    # The same on a host whose PMD cores span both ids is a real refusal:
    # way 8 alone is next to the base.
    both = fx.Book(fx.gold_6252(pmd_ways=2))
    both.boot("a", ways(6, ids=(1,)))
    with pytest.raises(pl.NoPlacement, match="L3 cache id 1"):
        both.boot("s", ways(2, ids=(1,)), share=True)


# -- check: a start applies the claim's plan, never decides again ----------

def test_check_keeps_the_placed_masks_and_decides_nothing():
    host = fx.gold_6252()
    a = pl.Reservation("a", ways(2), {L3: {0: run(2, 2), 1: run(2, 2)}})
    s = pl.Reservation("s", ways(2), {L3: {0: run(7, 2), 1: run(7, 2)}},
                       pmd_share=True)
    later = pl.Reservation("later", ways(3))            # not placed
    cls = pl.ClassGroup("be", ways(1))                  # no group yet
    plan = pl.check(host, {"a": a, "s": s, "later": later}, {"be": cls})
    assert plan.instances == {"a": a.masks, "s": s.masks}
    assert plan.classes == {} and plan.moved == plan.moved_classes == ()
    assert plan.pmd == {L3: {0: run(7, 4), 1: run(7, 4)}}


def test_check_refuses_masks_that_break_a_rule_now():
    host = fx.gold_6252()
    a = pl.Reservation("a", ways(2), {L3: {0: run(2, 2), 1: run(2, 2)}})
    # Where place() would put b elsewhere, check says why it cannot stay.
    b = pl.Reservation("b", ways(2), {L3: {0: run(3, 2), 1: run(5, 2)}})
    with pytest.raises(pl.InvalidState, match="cache id 0"):
        pl.check(host, {"a": a, "b": b}, {})
    # A non-sharer inside the PMD span.
    c = pl.Reservation("c", ways(1), {L3: {0: run(9, 1), 1: run(9, 1)}})
    with pytest.raises(pl.InvalidState):
        pl.check(host, {"c": c}, {})


# -- sparse masks: libvirt's groups are still one run (issue 38, cause 4) --

def _sparse_one_id(**kw):
    """A 16-way sparse L3 (amd-epyc's rules) with one cache id, the host
    at ways 0-1 and no PMD COS."""
    return fx.shape(16, ids=(0,), sparse=True, pmd_ids=None, **kw)


def _fragmented():
    """Free ways 2-3 and 7-9 (5 ways, no run of 4) between fixed VMs."""
    book = fx.Book(fx.amd_epyc(pmd_ways=0, pmd_ids=None))
    for uuid, n in (("a", 2), ("b", 3), ("c", 3), ("d", 4), ("e", 2)):
        book.boot(uuid, ways(n, ids=(0,)))        # 2-3 4-6 7-9 10-13 14-15
    book.delete("a")
    book.delete("c")
    return book


def test_sparse_refusal_says_libvirt_needs_a_contiguous_run():
    book = _fragmented()
    with pytest.raises(pl.NoPlacement) as e:
        book.boot("f", ways(4, ids=(0,)))
    assert str(e.value) == (
        "L3 cache id 0: no room for 4 ways of instance f: 5 ways free, "
        "but no contiguous run of 4: libvirt allocates a contiguous run; "
        "free runs 2@2(c), 3@7(380)")
    # The scheduler's question gets the same answer: the longest run.
    assert pl.room(book.host, book.reservations, book.classes, L3, 0) == 3
    # Nothing movable: compaction says so too.
    for uuid in ("b", "d", "e"):
        book.reservations[uuid] = dataclasses.replace(
            book.reservations[uuid], movable=False)
    with pytest.raises(pl.NoPlacement) as e:
        book.boot("f", ways(4, ids=(0,)), compaction=True)
    assert "no contiguous run of 4: libvirt allocates" in str(e.value)
    assert str(e.value).endswith("moving what may move makes no room "
                                 "either")


def test_sparse_compaction_moves_a_neighbour_into_one_run():
    book = _fragmented()
    assert pl.room(book.host, book.reservations, book.classes, L3, 0,
                   compaction=True) == 5
    plan = book.boot("f", ways(4, ids=(0,)), compaction=True)
    assert plan.moved == ("b",)
    # Moved instances keep one run: their group is libvirt's to make
    # again at their next start.
    for uuid in ("b", "f"):
        assert cbm.is_contiguous(book.masks(uuid)[0]), book.masks(uuid)


def test_sparse_a_class_in_the_way_goes_scattered_to_leave_a_run():
    """The class group is nova-rdt's own, so it moves without
    compaction; on a sparse cache it takes the scattered ways (2, 9-10)
    so that the instance gets the run libvirt needs (5-8).  Tried
    before the instance, its windows all split 5-10."""
    host = _sparse_one_id()
    cls = pl.ClassGroup("be", ways(3, ids=(0,)), {L3: {0: run(5, 3)}})
    book = {
        "x": pl.Reservation("x", ways(2, ids=(0,)), {L3: {0: run(3, 2)}},
                            movable=False),
        "y": pl.Reservation("y", ways(4, ids=(0,)), {L3: {0: run(11, 4)}},
                            movable=False),
        "m": pl.Reservation("m", {}, rdt_class="be"),
    }
    new = pl.Reservation("n", ways(4, ids=(0,)))
    plan = pl.place(host, book, {"be": cls}, new)
    assert plan.instances["n"] == {L3: {0: run(5, 4)}}
    assert plan.classes["be"] == {L3: {0: run(9, 2) | run(2, 1)}}
    assert plan.moved_classes == ("be",)
    fx.check_plan(host, {**book, "n": new}, {"be": cls}, plan)


def test_sparse_a_restart_does_not_keep_a_scattered_place():
    """A kept mask libvirt could not make again (scattered, written by
    something else) is placed afresh on a run."""
    host = _sparse_one_id()
    scattered = {L3: {0: run(2, 2) | run(6, 2)}}
    r = pl.Reservation("r", ways(4, ids=(0,)), scattered)
    plan = pl.place(host, {"r": r}, {}, r)
    assert plan.instances["r"] == {L3: {0: run(2, 4)}}
    # As a placed neighbour it stays where it is (resctrl holds it).
    plan = pl.place(host, {"r": r}, {}, pl.Reservation("n", ways(2, (0,))))
    assert plan.instances["r"] == scattered
    assert plan.instances["n"] == {L3: {0: run(4, 2)}}


def test_non_sparse_refusal_is_unchanged():
    """Where the kernel wants one run anyway, the free runs say it all."""
    book = _case8_book()
    with pytest.raises(pl.NoPlacement) as e:
        book.boot("n", ways(4, ids=(0,)))
    assert "contiguous" not in str(e.value)
