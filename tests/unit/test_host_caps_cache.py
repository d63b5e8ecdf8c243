"""The hook's capabilities cache: one read per mount *and* CPU topology.

The lab's in-process Nova and its host agent see one resctrl mount
through two sysfs CPU trees; a cache keyed on the mount alone gave the
agent the compute's cache ids, and the ONP lab's PMD COS went to the
cache id without the PMD core (3/6 relations held)."""

from nova_rdt.resctrl import capabilities as caps_mod
from nova_rdt.resctrl.groups import Resctrl


def test_one_mount_seen_through_two_cpu_trees_is_read_twice(tmp_path,
                                                            monkeypatch):
    read = []

    def discover(root, sysfs_cpu):
        read.append(sysfs_cpu)
        return f"caps of {sysfs_cpu}"

    monkeypatch.setattr(caps_mod, "discover", discover)
    root = str(tmp_path)
    a = Resctrl(root, sysfs_cpu=str(tmp_path / "cpu-a"))
    b = Resctrl(root, sysfs_cpu=str(tmp_path / "cpu-b"))
    # Each tree gives its own answer, whatever was read before.
    assert a.capabilities() == f"caps of {tmp_path / 'cpu-a'}"
    assert b.capabilities() == f"caps of {tmp_path / 'cpu-b'}"
    assert a.capabilities() == f"caps of {tmp_path / 'cpu-a'}"
    assert set(read) == {str(tmp_path / "cpu-a"), str(tmp_path / "cpu-b")}
