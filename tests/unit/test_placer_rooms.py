"""nova-compute's writes of the PMD COS honour the hook's rooms.

A domain started by hand (``virsh start``) gets its room in the hook's
'prepare': the ways it keeps free until libvirt has allocated them
(:mod:`nova_rdt.host.rooms`).  The hook's own PMD COS syncs leave them
out; so must nova-compute's, which rewrites the PMD COS when a sharer it
placed leaves.  Otherwise a release in nova-compute between that
'prepare' and libvirt's allocation covers the room again, and libvirt
says "Not enough room" though room was made: the race the hook fixed,
from the compute's side.

gold-6252 on the FUSE emulator: host ways 0-1, a 2-way PMD base (9-10),
sharers s1 (7-8, next to it) and s2 (4-5).  s1 leaves: the PMD COS must
stay one run, so it keeps covering 7-8 (0x7f0) -- unless a room keeps
7-8 free.
"""

from __future__ import annotations

import os

import pytest

from nova_rdt import naming
from nova_rdt.allocation import placement
from nova_rdt.host import records as records_mod
from nova_rdt.host import rooms as rooms_mod
from nova_rdt.virt import placer as placer_mod
from tests.hook_host import emulator_fixture
from tests.hook_host import prepared_fs

PREFIX = "nova-rdt-"
PMD = naming.pmd_group(PREFIX)
emulator = emulator_fixture("gold-6252")


@pytest.fixture
def fs(emulator):
    return prepared_fs(emulator, PREFIX, 2, 2)


def _sharer(placer, fs, n, mask):
    """Sharer ``n`` running at ``mask``: libvirt's group and its book
    entry, as after its start."""
    domain = f"instance-{n:08x}"
    os.mkdir(os.path.join(fs.root, f"qemu-{n}-{domain}-vcpus_0"))
    with open(os.path.join(fs.root, f"qemu-{n}-{domain}-vcpus_0",
                           "schemata"), "w") as f:
        f.write(f"L3:0={mask:x};1={mask:x}\n")
    ways = bin(mask).count("1")
    placer._book[f"s{n}"] = placer_mod.Entry(domain, placement.Reservation(
        f"s{n}", {"L3": {0: ways, 1: ways}}, {"L3": {0: mask, 1: mask}},
        pmd_share=True))


def _stop(fs, n):
    os.rmdir(os.path.join(fs.root, f"qemu-{n}-instance-{n:08x}-vcpus_0"))


def _pmd(fs):
    return fs.group(PMD).schemata().domains("L3")


def _placer(fs, rooms):
    placer = placer_mod.Placer(fs, {}, 2, 2, pmd_cos=True, rooms=rooms)
    _sharer(placer, fs, 1, 0x180)
    _sharer(placer, fs, 2, 0x030)
    placer._write_pmd(*_pmd_inputs(placer, fs))
    assert _pmd(fs) == {0: 0x7f0, 1: 0x7f0}
    return placer


def _pmd_inputs(placer, fs):
    from nova_rdt.resctrl.hostview import HostView
    view = HostView.collect(fs)
    owners, host, _r, _g = placer._inputs(view)
    return view, owners, host, {}


def _room(uuid, name, mask):
    inv = rooms_mod.Invocation.current()
    return rooms_mod.Room(
        uuid=uuid, name=name, schemata=f"L3:0={mask:x};1={mask:x}",
        boot_id=rooms_mod.boot_id(), pid=inv.pid, pid_start=inv.start,
        made=rooms_mod.now_ticks()[0])


S3 = "5b6f0a52-6f0c-4d53-9a43-a6c5c0e6a2b1"


def test_without_a_room_the_pmd_cos_keeps_its_run(fs):
    placer = _placer(fs, list)
    _stop(fs, 1)
    assert placer.release("s1")
    assert _pmd(fs) == {0: 0x7f0, 1: 0x7f0}


def test_a_room_of_the_hook_is_left_out_when_a_sharer_leaves(fs):
    rooms: list[rooms_mod.Room] = []
    placer = _placer(fs, lambda: list(rooms))
    _stop(fs, 1)
    # A hand-started sharer's 'prepare', between s1's stop and nova-
    # compute's release of it, keeps s1's old ways free for libvirt.
    rooms.append(_room(S3, "instance-00000003", 0x180))
    assert placer.release("s1")
    pmd = _pmd(fs)
    assert all(mask & 0x180 == 0 for mask in pmd.values()), pmd
    assert all(mask & 0x600 == 0x600 for mask in pmd.values()), pmd


def test_the_room_of_a_domain_whose_group_exists_is_over(fs):
    """A room its 'started' left behind (a failure there) must not keep
    the sharer out of the PMD COS it shares: once libvirt made the
    domain's group, the ways are the group's."""
    rooms: list[rooms_mod.Room] = []
    placer = _placer(fs, lambda: list(rooms))
    # s2 (booked under a uuid, as rooms are named) runs in the group
    # libvirt made; its room was never dropped.
    placer._book[S3] = placer._book.pop("s2")
    rooms.append(_room(S3, "instance-00000002", 0x030))
    _stop(fs, 1)
    assert placer.release("s1")
    assert _pmd(fs) == {0: 0x7f0, 1: 0x7f0}


def test_unreadable_rooms_are_logged_and_the_write_goes_on(fs, caplog):
    def unreadable():
        raise PermissionError(13, "Permission denied")
    placer = _placer(fs, unreadable)
    _stop(fs, 1)
    assert placer.release("s1")
    assert _pmd(fs) == {0: 0x7f0, 1: 0x7f0}
    assert "rooms are unreadable" in caplog.text


def test_the_rooms_in_effect_are_read_from_the_state_path(tmp_path):
    """What nova-compute hands the placer: a fresh room of this boot,
    written by a live hook, counts; with no room the records are not
    even read."""
    state = str(tmp_path / "state")
    pending = rooms_mod.Pending(state, str(tmp_path / "run"), 10.0)
    records = records_mod.Records(state)
    assert pending.pending_starts(records) == []
    room = _room(S3, "instance-00000009", 0x30)
    pending.store.put(room)
    assert pending.pending_starts(records) == [room]
