"""One capabilities discovery per resctrl mount, on the FUSE emulator.

A spawn's compute side walks resctrl several times (the claim, the room
made before libvirt allocates, the decided masks enforced after), and
the hook's event more; each walk used to discover the capabilities
again.  Here a whole claim -> make_room -> enforce runs on one mount
with :func:`capabilities.discover` counted: once.  Then the same mount
point is remounted with CDP and without, the kernel's (and FUSE's)
device, inode and mount ID numbers coming back the same: each remount
is read again, and seen.
"""

from __future__ import annotations

import os

import pytest

from nova_rdt.emulator import mount as emu_mount
from nova_rdt.host import prep
from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.hostview import HostView
from nova_rdt.resctrl.schemata import Schemata
from nova_rdt.virt import placer as placer_mod

PREFIX = "nova-rdt-"


@pytest.fixture
def counted(monkeypatch):
    """Calls of capabilities.discover and walks of the groups."""
    counts = {"discover": 0, "walks": 0}
    discover, groups = caps_mod.discover, Resctrl.groups

    def counted_discover(*a, **kw):
        counts["discover"] += 1
        return discover(*a, **kw)

    def counted_groups(self, *a, **kw):
        counts["walks"] += 1
        return groups(self, *a, **kw)

    monkeypatch.setattr(caps_mod, "discover", counted_discover)
    monkeypatch.setattr(Resctrl, "groups", counted_groups)
    return counts


@pytest.fixture
def remount(tmp_path):
    """``remount(profile)``: the emulator of ``profile`` at one mount
    point, the previous one unmounted first."""
    reason = emu_mount.fuse_unavailable_reason()
    if reason:
        pytest.skip(f"FUSE emulator unavailable: {reason}")
    state = str(tmp_path / "emu")
    os.makedirs(state)
    current: list[emu_mount.Emulator] = []

    def mount(profile: str) -> emu_mount.Emulator:
        if current:
            current.pop().stop()
        emu = emu_mount.Emulator(profile, state_dir=state)
        emu.start()
        current.append(emu)
        return emu

    yield mount
    if current:
        current.pop().stop()


def _spawn(fs: Resctrl) -> dict:
    """What nova-compute does for one spawn with 3 ways on both cache
    ids: claim, room before libvirt allocates, libvirt's group (made
    here at ways libvirt might pick), the decided masks enforced."""
    placer = placer_mod.Placer(fs, {}, 2, 0, pmd_cos=False)
    plan = placer.claim("uA", "instance-0000000a", {"L3": {0: 3, 1: 3}})
    placer.make_room("uA")
    group = "qemu-1-instance-0000000a-vcpus_0"
    os.mkdir(os.path.join(fs.root, group))
    with open(os.path.join(fs.root, group, "schemata"), "w") as f:
        f.write("L3:0=700;1=700\n")
    assert placer.enforce("uA") == group
    return {"plan": plan.instances["uA"],
            "kept": fs.group(group).schemata().domains("L3")}


def test_a_spawn_discovers_the_capabilities_once(remount, counted):
    emu = remount("gold-6252")
    fs = Resctrl(emu.mountpoint, prefix=PREFIX, sysfs_cpu=emu.sysfs_cpu)
    prep.prepare(fs, 2, 0)
    spawned = _spawn(fs)
    assert spawned["kept"] == spawned["plan"]["L3"]
    # Another Resctrl of the same mount (nova-compute makes them as it
    # goes), and `host show`'s view.
    other = Resctrl(emu.mountpoint, prefix=PREFIX, sysfs_cpu=emu.sysfs_cpu)
    assert other.capabilities() is fs.capabilities()
    assert not HostView.collect(other).caps.cdp
    assert counted["walks"] >= 4           # claim, make_room, enforce, view
    assert counted["discover"] == 1


def test_a_remount_with_another_profile_is_seen(remount, counted):
    emu = remount("gold-6252")
    fs = Resctrl(emu.mountpoint, prefix=PREFIX, sysfs_cpu=emu.sysfs_cpu)
    plain = fs.capabilities()
    assert not plain.cdp and fs.capabilities() is plain
    assert counted["discover"] == 1

    remount("gold-6252-cdp")               # umount; mount -o cdp
    cdp = fs.capabilities()
    assert cdp.cdp and set(cdp.cache) == {"L3CODE", "L3DATA"}
    # The kernel halves the CLOSIDs of a cache with CDP.
    assert cdp.cache["L3CODE"].num_closids * 2 == \
        plain.cache["L3"].num_closids
    assert HostView.collect(fs).caps is cdp
    assert counted["discover"] == 2

    remount("gold-6252")                   # and back: options as at first
    again = fs.capabilities()
    assert not again.cdp and set(again.cache) == {"L3"}
    assert again.cache["L3"].num_closids == plain.cache["L3"].num_closids
    assert fs.capabilities() is again
    assert counted["discover"] == 3


def test_the_exporter_sees_a_remount_at_its_next_scrape(remount, counted):
    """The exporter kept its own 60 s cache of the capabilities and
    reported the old mount's for up to a minute after a remount."""
    from nova_rdt.exporter.sample import Sampler

    emu = remount("gold-6252")
    sampler = Sampler(Resctrl(emu.mountpoint, prefix=PREFIX,
                              sysfs_cpu=emu.sysfs_cpu))
    assert not sampler.sample().caps.cdp
    assert not sampler.sample().caps.cdp
    assert counted["discover"] == 1
    remount("gold-6252-cdp")
    assert sampler.sample().caps.cdp
    assert counted["discover"] == 2


def test_a_spawn_after_a_remount_uses_the_new_mount(remount, counted):
    """The placer of a compute whose resctrl was remounted with CDP
    claims on CDP's resources (code and data), not on the old L3."""
    emu = remount("gold-6252")
    fs = Resctrl(emu.mountpoint, prefix=PREFIX, sysfs_cpu=emu.sysfs_cpu)
    prep.prepare(fs, 2, 0)
    _spawn(fs)
    remount("gold-6252-cdp")
    prep.prepare(fs, 2, 0)
    placer = placer_mod.Placer(fs, {}, 2, 0, pmd_cos=False)
    plan = placer.claim("uB", "instance-0000000b",
                        {"L3CODE": {0: 2, 1: 2}, "L3DATA": {0: 2, 1: 2}})
    assert set(plan.instances["uB"]) == {"L3CODE", "L3DATA"}
    root = Schemata.parse(open(os.path.join(fs.root, "schemata")).read())
    assert "L3CODE" in root.resources()
    assert counted["discover"] == 2


def test_a_planning_walk_can_leave_the_tasks_unread(remount, monkeypatch):
    """The root's ``tasks`` lists every thread on the host, and only
    ``host show`` shows the counts: a walk that plans reads the same
    groups and masks without them."""
    from nova_rdt.resctrl.groups import Group

    emu = remount("gold-6252")
    fs = Resctrl(emu.mountpoint, prefix=PREFIX, sysfs_cpu=emu.sysfs_cpu)
    prep.prepare(fs, 2, 0)
    _spawn(fs)
    read = []
    tasks = Group.tasks

    def counted_tasks(self):
        read.append(self.display_name)
        return tasks(self)

    monkeypatch.setattr(Group, "tasks", counted_tasks)
    full = HostView.collect(fs)
    assert "/" in read and full.groups[0].task_count > 0
    read.clear()
    lean = HostView.collect(fs, tasks=False)
    assert read == []
    assert [(g.name, g.schemata) for g in lean.groups] == \
        [(g.name, g.schemata) for g in full.groups]
    assert all(g.task_count is None for g in lean.groups)
    assert lean.free_runs("L3", 0) == full.free_runs("L3", 0)
    assert "TASKS" in lean.render()
