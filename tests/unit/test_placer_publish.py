"""What the compute publishes is what it will decide.

A real :class:`~nova_rdt.virt.placer.Placer` on the FUSE emulator
(gold-6252: 11 ways on each of 2 cache ids, host ways 0-1).  After each
step, for every size, the claim RDTFilter runs on the published document
(its solver input, read back) must answer as the compute's own (a
dry-run claim): a pass where the compute refuses
is a late refusal and a reschedule, a refusal where it accepts is a
"No valid host" while there is room.
"""

from __future__ import annotations

import os

import pytest

from nova_rdt.allocation import hoststate
from nova_rdt.allocation import metadata as meta_mod
from nova_rdt.allocation import placement
from nova_rdt.allocation import planner
from nova_rdt.allocation import rdtclass
from nova_rdt.allocation import spec
from nova_rdt.resctrl.hostview import HostView
from nova_rdt.scheduler import claim
from nova_rdt.virt import placer as placer_mod
from tests.hook_host import emulator_fixture
from tests.hook_host import prepared_fs

PREFIX = "nova-rdt-"
emulator = emulator_fixture("gold-6252")


@pytest.fixture
def fs(emulator):
    return prepared_fs(emulator, PREFIX, 2, 0)


def _group(fs, name, mask):
    os.mkdir(os.path.join(fs.root, name))
    with open(os.path.join(fs.root, name, "schemata"), "w") as f:
        f.write(f"L3:0={mask:x};1={mask:x}\n")


def _running(placer, fs, n, mask, movable=True):
    """Instance ``n`` running at ``mask``: libvirt's group and its book
    entry, as after its start."""
    domain = f"instance-{n:08x}"
    _group(fs, f"qemu-{n}-{domain}-vcpus_0", mask)
    ways = bin(mask).count("1")
    placer._book[f"u{n}"] = placer_mod.Entry(domain, placement.Reservation(
        f"u{n}", {"L3": {0: ways, 1: ways}}, {"L3": {0: mask, 1: mask}},
        movable=movable))


def _assert_agree(placer, fs, classes=None):
    state = hoststate.from_resctrl(HostView.collect(fs), classes=classes,
                                   prefix=PREFIX, pmd_cos=False)
    published = hoststate.HostRdtState.from_stats(
        placer.effective(state, solve=True).to_stats())
    for n in range(1, 12):
        req = spec.parse({"rdt:l3_cache_ways": str(n)}, 2, 1)
        passes = claim.refusal(published, req, planner.Placement(2),
                               None) is None
        try:
            placer.claim(f"probe{n}", f"probe-{n}", {"L3": {0: n, 1: n}},
                         dry_run=True)
            accepts = True
        except placement.NoPlacement:
            accepts = False
        assert passes == accepts, (n, passes, accepts)


def test_a_class_move_decided_and_not_written_is_published(fs):
    classes = rdtclass.parse_all(["be:l3_ways=2"])
    placer = placer_mod.Placer(fs, classes, 2, 0, pmd_cos=False)
    _running(placer, fs, 1, 0x00c)
    _group(fs, "nova-rdt-class-be", 0x0c0)
    placer._book["m1"] = placer_mod.Entry(
        "instance-00000009", placement.Reservation("m1", {}, None,
                                                   rdt_class="be"))
    _assert_agree(placer, fs, classes)
    # 5 ways fit only with the class moved; the move waits for A's start.
    plan = placer.claim("uA", "instance-0000000a", {"L3": {0: 5, 1: 5}})
    assert plan.moved_classes == ("be",)
    _assert_agree(placer, fs, classes)


def test_a_compaction_move_decided_and_not_written_is_published(fs):
    placer = placer_mod.Placer(fs, {}, 2, 0, pmd_cos=False, compaction=True)
    _running(placer, fs, 1, 0x00c)
    _running(placer, fs, 2, 0x0c0)
    _assert_agree(placer, fs)
    plan = placer.claim("uA", "instance-0000000a", {"L3": {0: 5, 1: 5}})
    assert plan.moved
    _assert_agree(placer, fs)


def test_a_latency_instance_is_not_offered_as_movable(fs):
    placer = placer_mod.Placer(fs, {}, 2, 0, pmd_cos=False, compaction=True)
    _running(placer, fs, 1, 0x00c)
    _running(placer, fs, 2, 0x0c0, movable=False)
    _assert_agree(placer, fs)


def test_a_class_of_stopped_members_keeps_its_place_after_a_restart(fs):
    """Adopted from a stopped member's metadata: the class's decided
    masks are reserved and published, as before the restart."""
    classes = rdtclass.parse_all(["be:l3_ways=2"])
    placer = placer_mod.Placer(fs, classes, 2, 0, pmd_cos=False)
    md = meta_mod.RdtMetadata(
        vcpus=frozenset({0}), pmd_share=False, rdt_class="be",
        monitor=False, slo=None, cache=[], mb=[], masks={},
        class_masks={(0, "both"): 0x300, (1, "both"): 0x300})
    placer.adopt("m1", "instance-00000009", md)
    assert placer.class_masks("be") == {"L3": {0: 0x300, 1: 0x300}}
    _assert_agree(placer, fs, classes)


def test_a_class_with_no_place_yet_is_published_where_it_will_go(fs):
    """Its members stopped, its place never decided (an older
    nova-rdt's metadata): it still costs its CLOS and ways."""
    classes = rdtclass.parse_all(["be:l3_ways=2"])
    placer = placer_mod.Placer(fs, classes, 2, 0, pmd_cos=False)
    placer._book["m1"] = placer_mod.Entry(
        "instance-00000009", placement.Reservation("m1", {}, None,
                                                   rdt_class="be"))
    _assert_agree(placer, fs, classes)
