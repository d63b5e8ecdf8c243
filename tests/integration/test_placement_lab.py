"""nova-rdt decides where every way goes, with the real libvirtd (issue 33).

An emulated gold-6252 (11 ways on each of 2 cache ids, 16 CLOS): the
host keeps ways 0-1, the PMD COS's base is ways 9-10
(``pmd_shared_ways=2``), real OVS-DPDK runs its PMD on core 1 (one
traffic port gives it a queue to poll), so the PMD
rule holds on cache id 1 only (the emulator numbers CPUs across the
sockets, as Xeons do: core 1 is on socket 1); on id 0 the base's ways
are handed out and the PMD COS holds the host's.  The installed hook
runs on libvirt's events, with a class ``be:l3_ways=1``.

Each boot is driven as nova-compute's driver drives it
(:mod:`tests.integration.placelab`): the placer decides and reserves,
the domain carries ``<cachetune>`` sizes and the decided masks, libvirt
starts it paused wherever its best fit says, the decided masks are
written, and only then does it run.  After every step the raw resctrl
files are checked: every mask valid, the instances the ones decided and
pairwise disjoint, the PMD COS one run over exactly its base and the
sharers on the PMD's cache id, no vCPU that asked for isolation in the
root group.
"""

from __future__ import annotations

import pytest

from nova_rdt.allocation import placement
from nova_rdt.allocation import rdtclass
from tests.integration import hooklab
from tests.integration import placelab
from tests.integration.conftest import prepared_lab

WAY_KIB = 36608 // 11
BASE = 0x600
PMD_ID = 1          # the cache id of the PMD core
OTHER = 0           # no PMD runs here


@pytest.fixture(scope="module")
def lab(libvirt_cache):
    yield from prepared_lab(
        libvirt_cache, reserved_ways=2, pmd_ways=2, ovs=True, sync_pmd=True,
        profile="gold-6252", start_kw={"traffic_ports": 1},
        hook={"pmd_cos": True, "reserved_host_ways": 2,
              "pmd_shared_ways": 2, "classes": ["be:l3_ways=1"]})


@pytest.fixture
def compute(lab):
    c = placelab.Compute(lab, rdtclass.parse_all(("be:l3_ways=1",)),
                         reserved_host_ways=2, pmd_shared_ways=2,
                         base=BASE, way_kib=WAY_KIB)
    assert placelab.pmd_cache_ids(lab) == {PMD_ID}
    c.settle("empty")
    yield c
    print("\n".join(c.steps))
    c.delete_all()


def test_case1_sharers_start_one_after_another_next_to_the_pmd_cos(
        compute):
    """libvirt's best fit would put a 2-way sharer on ways 2-3, far from
    the base at 9-10; nova-rdt puts each sharer right below the span."""
    c = compute
    c.boot("s2", 2, share=True)
    c.boot("s3", 3, share=True)
    # 2+3+4 ways cannot sit next to the base on the PMD's cache id (7
    # free ways); on the other no PMD runs, and the 4-way fits there.
    c.boot("s4", 4, ids=(OTHER,), share=True)
    c.boot("s2b", 2, ids=(PMD_ID,), share=True)
    assert [c.masks(n)[PMD_ID] for n in ("s2", "s3", "s2b")] \
        == [0x180, 0x070, 0x00c]
    assert hooklab.schemata(c.lab, placelab.PMD).get("L3", PMD_ID) == 0x7fc
    assert c.masks("s4") == {OTHER: 0x780}
    # Every way of both ids is now taken: refused because impossible.
    with pytest.raises(placement.NoPlacement):
        c.claim("x", 1, ids=(OTHER,))
    with pytest.raises(placement.NoPlacement):
        c.claim("y", 1, ids=(PMD_ID,), share=True)


def test_case2_the_class_moves_out_of_the_way_of_sharers(compute):
    """A plain 6-way VM (ways 2-7), a class member (the hook makes the
    class group on way 8, the only one left), the plain VM deleted: the
    class sits between the free ways and the base.  It is nova-rdt's own
    group, so the first sharer's plan moves it, the move is written
    before the sharer runs, and sharers start."""
    c = compute
    c.boot("plain", 6)
    c.boot("member", 0, rdt_class="be")
    before = hooklab.schemata(c.lab, "nova-rdt-class-be").get("L3", PMD_ID)
    assert before == 0x100          # the only way left beside the base
    c.delete("plain")
    plan = c.boot("sh4", 4, share=True)
    assert plan.moved_classes == ("be",)
    moved = hooklab.schemata(c.lab, "nova-rdt-class-be").get("L3", PMD_ID)
    assert moved != before and c.masks("sh4")[PMD_ID] == 0x1e0
    c.boot("sh2", 2, share=True)
    assert c.masks("sh2")[PMD_ID] == 0x018
    assert hooklab.schemata(c.lab, placelab.PMD).get("L3", PMD_ID) == 0x7f8


def test_case5_starts_in_another_order_than_claims(compute):
    """Free runs of 3 and 4 on the cache id without PMD (9 free ways);
    A=3, B=2, C=2 claimed in that order, started B, C, A.  libvirt alone
    would put B in the 3-run (its smallest fit), C in the 4-run, and then
    have no room for A ("Not enough room for allocation")."""
    c = compute
    c.boot("f1", 3, ids=(OTHER,))
    c.boot("f2", 2, ids=(OTHER,))
    c.delete("f1")
    assert c.masks("f2") == {OTHER: 0x060}    # free: 2-4 and 7-10
    for name, ways in (("A", 3), ("B", 2), ("C", 2)):
        c.claim(name, ways, ids=(OTHER,))
    assert [c.decided(n)[OTHER] for n in "ABC"] == [0x01c, 0x180, 0x600]
    for name in "BCA":
        c.start(name)
    assert [c.masks(n)[OTHER] for n in "ABC"] == [0x01c, 0x180, 0x600]


def test_case7_a_stopped_sharer_in_the_middle_starts_again(compute):
    c = compute
    c.boot("s1", 2, ids=(PMD_ID,), share=True)
    c.boot("s2", 2, ids=(PMD_ID,), share=True)
    c.boot("s3", 1, ids=(PMD_ID,), share=True)
    c.boot("p", 2, ids=(PMD_ID,))
    held = c.masks("s2")
    assert [c.masks(n)[PMD_ID] for n in ("s1", "s2", "s3", "p")] \
        == [0x180, 0x060, 0x010, 0x00c]
    c.stop("s2")
    # Its group is gone (checked), its ways stay reserved: nothing else
    # can take them, sharer or not.
    for share in (False, True):
        with pytest.raises(placement.NoPlacement):
            c.placer.claim("intruder", "intruder", {"L3": {PMD_ID: 1}},
                           pmd_share=share)
    c.start("s2")
    assert c.masks("s2") == held
    assert hooklab.schemata(c.lab, placelab.PMD).get("L3", PMD_ID) == 0x7f0
    # Deleted, its hole is a sharer's to take, and the new one starts.
    c.delete("s2")
    c.boot("s4", 2, ids=(PMD_ID,), share=True)
    assert c.masks("s4") == held


def test_case13_a_domain_without_decided_masks_is_placed_by_the_hook(
        compute):
    """A sharer defined by an older nova-rdt carries no decided masks:
    the hook places it next to the PMD COS (libvirt's fit, ways 2-3,
    would stretch the PMD COS over the whole cache and leave no room for
    anyone).  nova-compute's restart then reserves its ways, and others
    still start beside it."""
    c = compute
    c.start_by_hand("old", 2, share=True,
                    expect={PMD_ID: 0x180, OTHER: 0x00c})
    assert hooklab.schemata(c.lab, placelab.PMD).get("L3", PMD_ID) == 0x780
    c.adopt("old")
    c.boot("plain", 2)
    c.boot("sharer", 2, share=True)
    assert c.masks("sharer")[PMD_ID] == 0x060
    assert hooklab.schemata(c.lab, placelab.PMD).get("L3", PMD_ID) == 0x7e0


def test_case13_by_hand_while_the_compute_runs(compute):
    c = compute
    c.start_by_hand("hand", 2, share=True,
                    expect={PMD_ID: 0x180, OTHER: 0x00c})
    c.boot("plain", 2)
    c.boot("sharer", 2, share=True)
