"""A class group resctrl lost comes back where nova-rdt decided it.

Issue 33's faults-lab run ``emulator-killed/during-delete``: a sharer ran
at ways 3-4 with the PMD COS over them, the class group at way 10.  The
emulator was killed and came back empty; reconcile re-made the class
group at the lowest free way outside the sharer's (way 5), beside the
PMD COS, so the next 2-way sharer found no room next to it and RDTFilter
refused it.  The class's decided masks travel in its members' metadata:
the hook now records them, and reconcile re-makes the group with them
when they are still safe.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re

import pytest

from nova_rdt.host import records as records_mod
from nova_rdt.virt import config as rdt_config
from tests.unit import test_recovery_host as th
from tests.unit.test_recovery import _restart_emulator
from tests.unit.test_recovery import own_host  # noqa: F401 (a fixture)

UUID = "6f1a3c86-5b1e-4c55-9a3a-1b2c3d4e5f60"
#: Way 5 on both cache ids: not where the lowest-free-way rule puts a
#: 1-way class on this host (way 2, the first managed one).
DECIDED = {(0, "both"): 0x20, (1, "both"): 0x20}


class DecidingHost(th.Host):
    """The recovery tests' host, whose class members carry the class
    masks nova-compute decided, as its driver writes them."""

    def _xml(self, vm: th.Vm) -> bytes:
        m = rdt_config.LibvirtConfigGuestMetaNovaRdt()
        m.vcpus = {0}
        m.pmd_share = vm.share
        m.rdt_class = vm.rdt_class
        m.mb = []
        if vm.rdt_class:
            m.class_masks = dict(DECIDED)
        return (f"<domain type='kvm'><name>{vm.name}</name>"
                f"<uuid>{vm.uuid}</uuid><metadata>{m.to_xml()}</metadata>"
                f"</domain>").encode()


@pytest.fixture
def host(own_host):  # noqa: F811
    h = DecidingHost(own_host.workdir, own_host.emulator)
    yield h
    h.kill_all()
    own_host.emulator = h.emulator      # the one to stop


def test_class_group_comes_back_at_its_decided_ways(host):
    h = host
    a = h.start("a", share=True)
    b = h.start("b", rdt_class=th.CLASS)
    g = "nova-rdt-class-" + th.CLASS
    assert h.schemata(g)["L3"] == 0x20          # the hook used them
    _restart_emulator(h)
    report = h.reconcile()
    assert report.degraded == []
    assert report.rejoined == [b.uuid]
    # Before the fix: 0x4, the lowest free way.
    assert h.schemata(g)["L3"] == 0x20
    assert h.schemata(a.group)["L3"] == a.mask
    assert h.leaks() == []


def test_the_hook_records_the_decided_class_masks(host):
    b = host.start("b", rdt_class=th.CLASS)
    a = host.start("a", share=True)
    recs = {r.uuid: r for r in host.records().all()[0]}
    assert recs[b.uuid].planned_class_masks() == DECIDED
    assert recs[a.uuid].class_masks is None


def test_class_group_whose_ways_another_group_holds_goes_to_free_ones(host):
    h = host
    h.start("a", share=True)
    b = h.start("b", rdt_class=th.CLASS)
    _restart_emulator(h)
    # A foreign group took way 5 while the class group was gone.
    os.mkdir(os.path.join(h.root, "COS3"))
    with open(os.path.join(h.root, "COS3", "schemata"), "w") as f:
        f.write("L3:0=20;1=20\n")
    report = h.reconcile()
    assert report.rejoined == [b.uuid]
    mask = h.schemata("nova-rdt-class-" + th.CLASS)["L3"]
    assert mask != 0x20 and bin(mask).count("1") == 1
    assert mask & 0x20 == 0
    assert h.schemata("COS3")["L3"] == 0x20      # never touched
    os.rmdir(os.path.join(h.root, "COS3"))


# -- the record's field -------------------------------------------------------

def _record(**over) -> records_mod.Record:
    fields = dict(uuid=UUID, name="instance-1", pid=1, pid_start=None,
                  pmd_share=False, rdt_class="be", group=None)
    fields.update(over)
    return records_mod.Record(**fields)


def test_class_masks_round_trip(tmp_path):
    recs = records_mod.Records(str(tmp_path))
    rec = _record(class_masks=((0, "both", 0x400), (1, "both", 0x400)))
    recs.put(rec)
    assert recs.all() == ([rec], [])
    assert rec.planned_class_masks() == {(0, "both"): 0x400,
                                         (1, "both"): 0x400}


def test_a_record_without_class_masks_does_not_name_the_field(tmp_path):
    # Readable by a nova-rdt from before the field.
    recs = records_mod.Records(str(tmp_path))
    recs.put(_record())
    with open(os.path.join(recs.dir, f"{UUID}.json")) as f:
        assert "class_masks" not in json.load(f)
    assert recs.all()[0][0].planned_class_masks() is None


@pytest.mark.parametrize("masks,why", [
    ([], "is not the masks"),
    ([[0, "both"]], "is not [cache id"),
    ([[0, "l3", 1]], "is not [cache id"),
    ([[-1, "both", 1]], "cache id"),
    ([[0, "both", 0]], "mask"),
    ([[0, "both", 1 << 64]], "mask"),
    ([[0, "both", True]], "mask"),
    ("L3:0=1", "is not the masks"),
])
def test_bad_class_masks_are_refused(masks, why):
    with pytest.raises(records_mod.RecordError, match=re.escape(why)):
        records_mod.Record.from_dict(
            {**dataclasses.asdict(_record()), "class_masks": masks})


def test_class_masks_need_a_class():
    with pytest.raises(records_mod.RecordError, match="is not the masks"):
        _record(rdt_class=None, class_masks=((0, "both", 1),))
