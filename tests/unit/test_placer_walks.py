"""A start's room is made from one walk of resctrl: the moves a claim
decided are written and laid over that walk, not read again, before the
PMD COS is resolved (gold-6252 on the FUSE emulator, a 2-way PMD base)."""

from __future__ import annotations

import pytest

from nova_rdt.allocation import rdtclass
from nova_rdt.resctrl.hostview import HostView
from nova_rdt.virt import placer as placer_mod
from tests.hook_host import emulator_fixture
from tests.unit.test_placer_rooms import PMD
from tests.unit.test_placer_rooms import fs  # noqa: F401

emulator = emulator_fixture("gold-6252")


@pytest.fixture
def counted(fs):  # noqa: F811
    walks = []

    def collect(f):
        walks.append(1)
        return HostView.collect(f)

    classes = rdtclass.parse_all(["be:l3_ways=2"])
    placer = placer_mod.Placer(fs, classes, 2, 2, pmd_cos=True,
                               collect=collect)
    return placer, walks, fs


def test_make_room_with_a_move_walks_once(counted):
    placer, walks, rfs = counted
    # The class sits at the ways next to the PMD base, where a sharer
    # must go: the sharer's claim moves it.
    rfs.create_group("nova-rdt-class-be")
    rfs.write_schemata(rfs.group("nova-rdt-class-be"),
                      placer_mod.hostplan.schemata_of(
                          {"L3": {0: 0x180, 1: 0x180}}))
    placer.claim("m1", "instance-00000009", {}, rdt_class="be")
    plan = placer.claim("s1", "instance-0000000a", {"L3": {0: 2, 1: 2}},
                        pmd_share=True)
    assert plan.moved_classes == ("be",)
    walks.clear()
    placer.make_room("s1")
    assert walks == [1]
    moved = rfs.group("nova-rdt-class-be").schemata().domains("L3")
    assert moved == {c: m for c, m in plan.classes["be"]["L3"].items()}
    # The PMD COS leaves the sharer's decided ways free for libvirt.
    pmd = rfs.group(PMD).schemata().domains("L3")
    decided = placer.masks_of("s1")["L3"]
    assert all(pmd[c] & decided[c] == 0 for c in decided), (pmd, decided)
