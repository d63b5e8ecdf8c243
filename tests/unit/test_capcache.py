"""The capabilities cache: one discovery per mount, a new mount read again.

The cache is driven with a stand-in discovery and mount identity here;
tests/unit/test_caps_per_mount.py runs it on the FUSE emulator.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from nova_rdt.resctrl import capcache
from nova_rdt.resctrl import errors
from nova_rdt.resctrl import mounts
from nova_rdt.resctrl.groups import Resctrl


class Host:
    """Mounts by name: ``mounted[root]`` is the key mount_key would give."""

    def __init__(self):
        self.mounted: dict[str, object] = {}
        self.read: list[tuple[str, str]] = []
        self.fail: Exception | None = None
        self.during = None         # called inside a discovery

    def identify(self, root, sysfs_cpu):
        return self.mounted.get(root)

    def discover(self, root, sysfs_cpu):
        self.read.append((root, sysfs_cpu))
        if self.during:
            self.during()
        if self.fail:
            raise self.fail
        return ("caps", root, self.mounted.get(root), len(self.read))


@pytest.fixture
def host():
    return Host()


def cache(host, size=capcache.DEFAULT_SIZE):
    return capcache.CapabilityCache(size, host.identify, host.discover)


def test_one_discovery_per_mount(host):
    c = cache(host)
    host.mounted = {"/a": "mount-a", "/b": "mount-b"}
    first = c.get("/a", "/cpu")
    assert c.get("/a", "/cpu") is first
    assert c.get("/b", "/cpu") is not first
    assert c.get("/b", "/cpu") is c.get("/b", "/cpu")
    assert host.read == [("/a", "/cpu"), ("/b", "/cpu")]
    assert c.discoveries == 2


def test_a_remount_is_read_again(host):
    c = cache(host)
    host.mounted["/a"] = "mount-1"
    before = c.get("/a", "/cpu")
    host.mounted["/a"] = "mount-2"            # umount; mount -o cdp
    after = c.get("/a", "/cpu")
    assert after != before and after[2] == "mount-2"
    assert c.get("/a", "/cpu") is after
    assert len(host.read) == 2


def test_no_mount_is_read_at_every_call(host):
    """A copied tree or a test's directory: nothing names its contents."""
    c = cache(host)
    c.get("/copy", "/cpu")
    c.get("/copy", "/cpu")
    assert len(host.read) == 2 and len(c) == 0


def test_fresh_reads_again_and_keeps_it(host):
    c = cache(host)
    host.mounted["/a"] = "m"
    c.get("/a", "/cpu")
    again = c.get("/a", "/cpu", fresh=True)
    assert len(host.read) == 2
    assert c.get("/a", "/cpu") is again


def test_a_failed_discovery_is_not_kept(host):
    c = cache(host)
    host.mounted["/a"] = "m"
    host.fail = errors.NotMounted("no resctrl filesystem at /a", path="/a")
    with pytest.raises(errors.NotMounted):
        c.get("/a", "/cpu")
    host.fail = None
    c.get("/a", "/cpu")
    c.get("/a", "/cpu")
    assert len(host.read) == 2 and len(c) == 1


def test_a_remount_during_discovery_is_not_filed_under_the_old_mount(host):
    c = cache(host)
    host.mounted["/a"] = "mount-1"

    def remount():
        host.mounted["/a"] = "mount-2"
    host.during = remount
    c.get("/a", "/cpu")
    host.during = None
    assert len(c) == 0
    c.get("/a", "/cpu")
    c.get("/a", "/cpu")
    assert len(host.read) == 2


def test_bounded_least_recently_used_goes(host):
    c = cache(host, size=2)
    host.mounted = {r: f"m{r}" for r in ("/a", "/b", "/c")}
    c.get("/a", "/cpu")
    c.get("/b", "/cpu")
    c.get("/a", "/cpu")                       # /a used last: /b goes
    c.get("/c", "/cpu")
    assert len(c) == 2
    c.get("/a", "/cpu")
    assert [r for r, _ in host.read] == ["/a", "/b", "/c"]
    c.get("/b", "/cpu")
    assert [r for r, _ in host.read] == ["/a", "/b", "/c", "/b"]


def test_size_must_be_positive(host):
    with pytest.raises(ValueError, match="at least 1"):
        capcache.CapabilityCache(0, host.identify, host.discover)


def test_threads_asking_at_once_share_one_discovery(host):
    """The exporter's threads (or nova-compute's green threads) asking
    for a mount not yet read wait for one discovery."""
    c = cache(host)
    host.mounted["/a"] = "m"
    host.during = lambda: time.sleep(0.05)
    start = threading.Barrier(8)
    got = []

    def ask():
        start.wait()
        got.append(c.get("/a", "/cpu"))
    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(host.read) == 1
    assert len(got) == 8 and all(g is got[0] for g in got)


def test_every_resctrl_shares_the_cache(host, monkeypatch):
    """nova-compute makes Resctrl objects as it goes: the cache is the
    process's, not an object's."""
    monkeypatch.setattr(capcache, "CACHE", cache(host))
    host.mounted["/r"] = "m"
    a, b = Resctrl("/r", sysfs_cpu="/cpu"), Resctrl("/r", sysfs_cpu="/cpu")
    assert a.capabilities() is b.capabilities()
    assert len(host.read) == 1
    b.capabilities(fresh=True)
    assert len(host.read) == 2


# -- mount_key: what names a mount ---------------------------------------

LINE = ("{id} 25 0:43 / {point} rw,relatime shared:417 - resctrl resctrl "
        "rw{opts}\n")


@pytest.fixture
def mount(tmp_path, monkeypatch):
    """``tmp_path/resctrl`` listed as a resctrl mount, options settable."""
    root = tmp_path / "resctrl"
    (root / "info").mkdir(parents=True)
    cpu = tmp_path / "cpu"
    cpu.mkdir()
    (cpu / "online").write_text("0-3\n")
    info = tmp_path / "mountinfo"
    monkeypatch.setattr(mounts, "MOUNTINFO", str(info))

    def listed(opts="", mount_id=712):
        info.write_text(LINE.format(id=mount_id, point=mounts.escape(
            str(root)), opts=opts))
    listed()
    return root, cpu, listed


def test_the_key_is_the_same_while_nothing_changes(mount):
    root, cpu, _ = mount
    key = capcache.mount_key(str(root), str(cpu))
    assert key is not None
    assert capcache.mount_key(str(root), str(cpu)) == key
    assert key.mount.fstype == "resctrl"


def test_remounting_with_cdp_changes_the_key(mount):
    """Same device, inode and mount ID as before (the kernel reuses
    them): the options tell."""
    root, cpu, listed = mount
    key = capcache.mount_key(str(root), str(cpu))
    listed(",cdp")
    assert capcache.mount_key(str(root), str(cpu)) != key


def test_a_new_info_directory_changes_the_key(mount):
    """The emulator's remount with another profile: options, mount ID,
    device and inode numbers all as before; info's time is new."""
    root, cpu, _ = mount
    key = capcache.mount_key(str(root), str(cpu))
    st = os.stat(root / "info")
    os.utime(root / "info", ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert capcache.mount_key(str(root), str(cpu)) != key


def test_cpu_hotplug_and_another_cpu_tree_change_the_key(mount, tmp_path):
    root, cpu, _ = mount
    key = capcache.mount_key(str(root), str(cpu))
    (cpu / "online").write_text("0-2\n")
    offline = capcache.mount_key(str(root), str(cpu))
    assert offline != key
    other = tmp_path / "cpu-b"
    other.mkdir()
    (other / "online").write_text("0-2\n")
    assert capcache.mount_key(str(root), str(other)) not in (key, offline)


def test_no_key_without_a_mount_or_its_info(mount, tmp_path):
    root, cpu, _ = mount
    assert capcache.mount_key(str(tmp_path), str(cpu)) is None
    os.rmdir(root / "info")
    assert capcache.mount_key(str(root), str(cpu)) is None
