"""The hook's side of decided placement, on the FUSE emulator (gold-6252:
11 ways on each of 2 cache ids, host ways 0-1, PMD base 9-10).

libvirt's allocator puts a domain at the lowest free ways that fit; the
hook then writes the masks nova-rdt decided (carried in the domain's
metadata) when they are safe, and places a domain that carries none
itself (issue 33, case 13: one sharer used to fill the host).
"""

from __future__ import annotations

import dataclasses

import pytest

from nova_rdt import naming
from nova_rdt.host import prep
from nova_rdt.virt import config as rdt_config
from tests.hook_host import HookHost
from tests.hook_host import emulator_fixture

PREFIX = "nova-rdt-"
PMD = naming.pmd_group(PREFIX)


emulator = emulator_fixture("gold-6252")


class Host(HookHost):
    """The emulated gold-6252; libvirt's allocator's choice is given."""

    def __init__(self, workdir, emu):
        super().__init__(workdir, emu, "L3:0=7ff;1=7ff\n")

    def start(self, name, ways, chosen, share=False, decided=None):
        """libvirt starts ``name`` with ``ways`` on both cache ids at its
        ``chosen`` mask; the hook's 'started' follows."""
        m = rdt_config.LibvirtConfigGuestMetaNovaRdt()
        m.vcpus = {0}
        m.pmd_share = share
        m.cache = [(0, "both", ways), (1, "both", ways)]
        if decided is not None:
            m.masks = {(0, "both"): decided, (1, "both"): decided}
        return self.launch(name, m, f"L3:0={chosen:x};1={chosen:x}\n")[1]

    def l3(self, name=""):
        return self.schemata(name).domains("L3")


@pytest.fixture
def host(emulator, tmp_path):
    h = Host(str(tmp_path), emulator)
    h.clear()
    prep.prepare(h.fs, 2, 2)
    yield h
    h.clear()


def test_decided_masks_replace_libvirts_choice(host):
    group = host.start("vm1", 2, chosen=0x00c, share=True, decided=0x180)
    assert host.l3(group) == {0: 0x180, 1: 0x180}
    # The PMD COS spans its base and the sharer, one run.
    assert host.l3(PMD) == {0: 0x780, 1: 0x780}


def test_hostile_decided_masks_are_not_written(host):
    plain = host.start("vm1", 2, chosen=0x00c, decided=0x00c)
    # A second domain whose metadata claims the first one's ways.
    thief = host.start("vm2", 2, chosen=0x030, decided=0x00c)
    assert host.l3(plain) == {0: 0x00c, 1: 0x00c}
    assert host.l3(thief) == {0: 0x030, 1: 0x030}
    # ...or more ways than its <cachetune> got (the metadata says 3,
    # libvirt allocated 1).
    greedy = host.start("vm3", 3, chosen=0x040, decided=0x1c0)
    assert host.l3(greedy) == {0: 0x040, 1: 0x040}


def test_a_domain_without_a_plan_is_placed_by_the_hook(host):
    """Case 13: a sharer defined by hand lands at libvirt's choice, ways
    2-3, far from the PMD base.  The PMD COS used to stretch over 2-10 to
    reach it, and libvirt then found no room for anyone; the hook now
    moves it next to the base."""
    sharer = host.start("byhand", 2, chosen=0x00c, share=True)
    assert host.l3(sharer) == {0: 0x180, 1: 0x180}
    assert host.l3(PMD) == {0: 0x780, 1: 0x780}
    # Ways 2-6 stay free for the next domain, of any kind.
    plain = host.start("next", 5, chosen=0x07c)
    assert host.l3(plain) == {0: 0x07c, 1: 0x07c}


def test_a_sharers_decided_mask_never_takes_the_pmd_base(host):
    """The PMD base (ways 9-10) is the PMD threads' own: metadata that
    puts a sharer there is not written, whatever the PMD COS's mask."""
    group = host.start("vm1", 2, chosen=0x00c, share=True, decided=0x600)
    assert host.l3(group) == {0: 0x00c, 1: 0x00c}
    # Next to it is a sharer's place.
    group = host.start("vm2", 2, chosen=0x030, share=True, decided=0x180)
    assert host.l3(group) == {0: 0x180, 1: 0x180}


def test_a_start_walks_resctrl_once(emulator, tmp_path, monkeypatch):
    """The hook reads resctrl's groups once per 'started' (the holder of
    the vCPUs, the decided masks' checks, a placement here, the class
    group, the PMD COS all read that one walk, with the event's own
    writes laid over it), and the capabilities once per mount."""
    from nova_rdt.host import context
    from nova_rdt.resctrl import capabilities as caps_mod
    from nova_rdt.resctrl.groups import Resctrl
    from nova_rdt.virt import config as rdt_config

    h = Host(str(tmp_path), emulator)
    h.settings = dataclasses.replace(h.settings, classes=("be:l3_ways=1",))
    h.clear()
    prep.prepare(h.fs, 2, 2)
    counts = {"walks": 0, "discover": 0}
    groups, discover = Resctrl.groups, caps_mod.discover

    def counted_groups(self, *a, **kw):
        counts["walks"] += 1
        return groups(self, *a, **kw)

    def counted_discover(*a, **kw):
        counts["discover"] += 1
        return discover(*a, **kw)

    monkeypatch.setattr(Resctrl, "groups", counted_groups)
    monkeypatch.setattr(caps_mod, "discover", counted_discover)
    context._CAPS.clear()
    try:
        h.start("vm1", 2, chosen=0x00c, share=True, decided=0x180)
        assert counts == {"walks": 1, "discover": 1}
        h.start("vm2", 2, chosen=0x030, share=True)        # plan-less
        assert counts == {"walks": 2, "discover": 1}
        m = rdt_config.LibvirtConfigGuestMetaNovaRdt()
        m.vcpus = {0}
        m.rdt_class = "be"
        h.launch("vm3", m, None)                 # makes the class group
        assert counts == {"walks": 3, "discover": 1}
        assert h.l3("nova-rdt-class-be")
    finally:
        h.clear()
