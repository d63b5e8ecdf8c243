"""Which starts the driver serialises (``RdtCompute.decides``, by
:meth:`Placer.lays_out`): every start that puts ways where a plan said.

Seen in the two-compute cloud under load: a class member started beside
a sharer's start.  libvirt's allocator took the first free run for the
sharer, the ways planned for the class; the hook, making the class group
then, found them taken and put it over the sharer's decided ways, and
the sharer's start failed.  A class member's start is therefore
serialised with the others, though it brings no ways of its own.
"""

from __future__ import annotations

import pytest

from nova_rdt.allocation import placement
from nova_rdt.allocation import rdtclass
from nova_rdt.virt import placer as placer_mod
from tests.hook_host import emulator_fixture
from tests.unit.test_placer_publish import fs  # noqa: F401

emulator = emulator_fixture("gold-6252")


@pytest.fixture
def placer(fs):  # noqa: F811
    classes = rdtclass.parse_all(["be:l3_ways=2"])
    return placer_mod.Placer(fs, classes, 2, 0, pmd_cos=False)


def test_a_class_member_and_an_instance_with_ways_are_laid_out(placer):
    placer.claim("member", "instance-00000001", {}, rdt_class="be")
    placer.claim("ways", "instance-00000002", {"L3": {0: 2, 1: 2}})
    assert placer.lays_out("member")
    assert placer.lays_out("ways")


def test_nothing_planned_is_not_laid_out(placer):
    # Monitor-only: libvirt's monitor group, no ways and no class.
    placer._book["mon"] = placer_mod.Entry(
        "instance-00000003", placement.Reservation("mon", {}, None),
        monitor=True)
    assert not placer.lays_out("mon")
    assert not placer.lays_out("unknown")
