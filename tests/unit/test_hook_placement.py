"""The hook's side of decided placement, on the FUSE emulator (gold-6252:
11 ways on each of 2 cache ids, host ways 0-1, PMD base 9-10).

libvirt's allocator puts a domain at the lowest free ways that fit; the
hook then writes the masks nova-rdt decided (carried in the domain's
metadata) when they are safe, and places a domain that carries none
itself (issue 33, case 13: one sharer used to fill the host).
"""

from __future__ import annotations

import dataclasses
import os

import pytest

from nova_rdt import naming
from nova_rdt.hook import hookinput
from nova_rdt.host import prep
from nova_rdt.host.agent import Agent
from nova_rdt.host.records import Records
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

    def start(self, name, ways, chosen, share=False, decided=None,
              uuid=None):
        """libvirt starts ``name`` with ``ways`` on both cache ids at its
        ``chosen`` mask; the hook's 'started' follows."""
        m = _meta(ways, share, decided)
        return self.launch(name, m, f"L3:0={chosen:x};1={chosen:x}\n",
                           uuid)[1]

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
    from nova_rdt.resctrl import capabilities as caps_mod
    from nova_rdt.resctrl import capcache
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
    capcache.CACHE.clear()     # prepare read them: count the event's
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


def _meta(ways, share, decided=None):
    """nova-rdt's metadata of a one-vCPU domain with ``ways`` on both
    cache ids (and ``decided`` masks there, when given)."""
    m = rdt_config.LibvirtConfigGuestMetaNovaRdt()
    m.vcpus = {0}
    m.pmd_share = share
    m.cache = [(0, "both", ways), (1, "both", ways)]
    if decided is not None:
        m.masks = {(0, "both"): decided, (1, "both"): decided}
    return m


def _event(op, name, uuid, ways, share, decided=None):
    m = _meta(ways, share, decided)
    xml = (f"<domain type='kvm'><name>{name}</name><uuid>{uuid}</uuid>"
           f"<metadata>{m.to_xml()}</metadata></domain>").encode()
    return hookinput.parse([name, op, "begin", "-"], xml)


def _stop(host, name, group):
    """libvirt stops ``name``: its group goes, then 'release'."""
    os.rmdir(os.path.join(host.root, group))
    rec = next(r for r in Records(host.settings.state_path).all()[0]
               if r.name == name)
    Agent(host.settings).handle(_event("release", name, rec.uuid, 2, True))


@pytest.mark.parametrize("decided", [None, 0x180])
def test_prepare_takes_a_sharers_ways_out_of_the_pmd_cos(host, decided):
    """Issue 38: s1 and s2 share next to the base, p1 fills the cache, s1
    stops.  The PMD COS stays one run over s1's ways; libvirt's allocator
    counts them as used, so a 2-way sharer started by hand found "Not
    enough room".  'prepare' (before libvirt allocates) leaves them out
    of the PMD COS, whether the domain carries its plan or not."""
    s1 = host.start("s1", 2, chosen=0x00c, share=True)
    host.start("s2", 3, chosen=0x01c, share=True)
    host.start("p1", 2, chosen=0x00c)
    assert host.l3(PMD) == {0: 0x7f0, 1: 0x7f0}
    _stop(host, "s1", s1)
    assert host.l3(PMD) == {0: 0x7f0, 1: 0x7f0}

    uuid = "5739af97-f801-4ee1-ace0-5bcd858b3407"
    agent = Agent(host.settings)
    agent.handle(_event("prepare", "s3", uuid, 2, True, decided))
    assert host.l3(PMD) == {0: 0x600, 1: 0x600}
    # The start failed after all (libvirt runs 'release'): the PMD COS
    # covers its sharers again.
    agent.handle(_event("release", "s3", uuid, 2, True, decided))
    assert host.l3(PMD) == {0: 0x7f0, 1: 0x7f0}

    agent.handle(_event("prepare", "s3", uuid, 2, True, decided))
    s3 = host.start("s3", 2, chosen=0x180, share=True, decided=decided,
                    uuid=uuid)
    assert host.l3(s3) == {0: 0x180, 1: 0x180}
    assert host.l3(PMD) == {0: 0x7f0, 1: 0x7f0}


def test_prepare_leaves_the_pmd_cos_alone_when_the_ways_are_free(host):
    host.start("s1", 2, chosen=0x00c, share=True)
    before = host.schemata(PMD)
    Agent(host.settings).handle(_event(
        "prepare", "s2", "5739af97-f801-4ee1-ace0-5bcd858b3407", 2, True))
    assert host.schemata(PMD) == before


def test_prepare_walks_resctrl_once(host, monkeypatch):
    """'prepare' runs in the foreground of a start: one walk of resctrl
    for the decision and the PMD COS's write."""
    from nova_rdt.resctrl.groups import Resctrl

    s1 = host.start("s1", 2, chosen=0x00c, share=True)
    host.start("s2", 3, chosen=0x01c, share=True)
    _stop(host, "s1", s1)
    walks, groups = [], Resctrl.groups
    monkeypatch.setattr(Resctrl, "groups",
                        lambda self, *a, **kw: walks.append(1)
                        or groups(self, *a, **kw))
    Agent(host.settings).handle(_event(
        "prepare", "s3", "5739af97-f801-4ee1-ace0-5bcd858b3407", 2, True))
    assert host.l3(PMD) == {0: 0x600, 1: 0x600}
    assert len(walks) == 1
