"""Issue 16, names that become paths: ownership from the structure.

A plain directory tree copied from the emulator's kernel model stands in
for the mount (no FUSE needed): what is checked here is which paths the
library agrees to touch, before any system call.
"""

from __future__ import annotations

import json
import os

import pytest

from nova_rdt import naming
from nova_rdt.host import records as records_mod
from nova_rdt.resctrl import errors
from nova_rdt.resctrl.groups import Group
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.schemata import Schemata
from tests.kernel_fixtures import make_kernel
from tests.kernel_fixtures import materialize

UUID = "6f1a3c86-5b1e-4c55-9a3a-1b2c3d4e5f60"


@pytest.fixture
def tree(tmp_path):
    k, _, _ = make_kernel("gold-6252")
    for name in ("COS1", "nova-rdt-x", "qemu-1-dom1-vcpus_0"):
        k.mkdir(name)
    root = materialize(k, str(tmp_path / "resctrl"))
    return root


def test_dot_dot_in_a_name_is_nobodys_group(tree):
    fs = Resctrl(tree)
    with pytest.raises(errors.InvalidGroupName):
        fs.group("nova-rdt-x/../COS1")
    g = Group(fs, "nova-rdt-x/../COS1")
    assert g.owner == "foreign"
    with pytest.raises(errors.NotOwned):
        fs.delete_group(g)
    with pytest.raises(errors.NotOwned):
        fs.delete_group(g, allow_libvirt=True)
    with pytest.raises(errors.NotOwned):
        fs.write_schemata(g, Schemata({"L3": {0: 1}}))
    assert os.path.isdir(os.path.join(tree, "COS1"))


def test_libvirt_looking_path_to_a_foreign_group_is_refused(tree):
    fs = Resctrl(tree)
    g = Group(fs, "qemu-1-dom1-vcpus_0/../COS1")
    assert g.owner == "foreign"
    with pytest.raises(errors.NotOwned):
        fs.delete_group(g, allow_libvirt=True)
    with pytest.raises(errors.InvalidGroupName):
        fs.group("qemu-1-dom1-vcpus_0/../COS1")


def test_a_symlink_with_our_prefix_is_not_ours(tree):
    os.symlink(os.path.join(tree, "COS1"), os.path.join(tree, "nova-rdt-l"))
    fs = Resctrl(tree)
    assert Group(fs, "nova-rdt-l").owner == "foreign"
    with pytest.raises(errors.GroupNotFound):
        fs.group("nova-rdt-l")
    with pytest.raises(errors.NotOwned):
        fs.write_schemata(Group(fs, "nova-rdt-l"), Schemata({"L3": {0: 1}}))


def test_the_library_never_writes_outside_the_mount(tree, tmp_path):
    outside = tmp_path / "outside"
    outside.write_text("keep\n")
    fs = Resctrl(tree)
    for path in (str(outside), os.path.join(tree, "..", "outside"),
                 os.path.join(tree, "nova-rdt-x", "..", "..", "outside")):
        with pytest.raises(errors.NotOwned):
            fs.write(path, "x\n")
    assert outside.read_text() == "keep\n"


def test_a_symlinked_file_is_not_followed(tree, tmp_path):
    outside = tmp_path / "outside"
    outside.write_text("keep\n")
    target = os.path.join(tree, "nova-rdt-x", "schemata")
    os.unlink(target)
    os.symlink(str(outside), target)
    fs = Resctrl(tree)
    with pytest.raises(errors.ResctrlError):
        fs.write_schemata(fs.group("nova-rdt-x"), Schemata({"L3": {0: 1}}))
    assert outside.read_text() == "keep\n"


@pytest.mark.parametrize("name", ["nova-rdt-x\n", "nova-rdt-x/y", "..",
                                  "nova-rdt-\x00", "info", "mon_groups",
                                  "nova-rdt-" + "x" * 200, "", "nova-rdt-é"])
def test_check_name_refuses_what_is_not_one_component(tree, name):
    with pytest.raises(errors.InvalidGroupName):
        Resctrl(tree).check_name(name)


@pytest.mark.parametrize("parent", ["../", "..", "nova-rdt-x/..",
                                    "nova-rdt-x\n", "info"])
def test_monitor_group_parents_are_components(tree, parent):
    with pytest.raises(errors.InvalidGroupName):
        Resctrl(tree).create_mon_group("nova-rdt-m", parent=parent)
    with pytest.raises(errors.InvalidGroupName):
        Resctrl(tree).group("nova-rdt-m", parent=parent)


def test_monitor_groups_only_inside_our_groups(tree):
    fs = Resctrl(tree)
    for parent in ("qemu-1-dom1-vcpus_0", "COS1"):
        with pytest.raises(errors.NotOwned):
            fs.create_mon_group("nova-rdt-m", parent=parent)
    # A monitor group belongs to its control group's owner, as the
    # privileged daemon decides it.
    assert Group(fs, "vcpus_0", "qemu-1-dom1-vcpus_0").owner == "libvirt"
    assert Group(fs, "nova-rdt-m", "COS1").owner == "foreign"
    assert Group(fs, "x", "nova-rdt-x").owner == "nova-rdt"
    assert Group(fs, "nova-rdt-m", "").owner == "nova-rdt"


@pytest.mark.parametrize("prefix", ["q", "qe", "qemu", "qemu-", "qemu-1",
                                    "qemu-12-", "qemu-1-dom", "v", "vcpus",
                                    "vcpus_", "info", "a/b", "x\n", "",
                                    ".", "x" * 65])
def test_prefixes_that_capture_others_groups_are_refused(tree, prefix):
    with pytest.raises(ValueError):
        naming.check_prefix(prefix)
    with pytest.raises(ValueError):
        Resctrl(tree, prefix=prefix)


@pytest.mark.parametrize("prefix", ["nova-rdt-", "qemux", "quux-", "COS",
                                    "qemu-x-"])
def test_ordinary_prefixes_are_accepted(prefix):
    assert naming.check_prefix(prefix) == prefix


# -- records: every field is hostile input -----------------------------

def _record(**kw):
    rec = {"uuid": UUID, "name": "instance-1", "pid": 1, "pid_start": None,
           "pmd_share": False, "rdt_class": None,
           "group": "qemu-1-instance-1-vcpus_0"}
    rec.update(kw)
    return rec


@pytest.mark.parametrize("change,why", [
    ({"group": "qemu-1-dom1-vcpus_0/../COS1"}, "group"),
    ({"group": "COS1"}, "group"),
    ({"group": "nova-rdt-pmd"}, "group"),
    ({"group": 5}, "group"),
    ({"group": "qemu-1-x-vcpus_0\n"}, "group"),
    ({"uuid": "not-a-uuid"}, "uuid"),
    ({"uuid": UUID.upper()}, "uuid"),
    ({"pid": "1"}, "pid"), ({"pid": True}, "pid"), ({"pid": 0}, "pid"),
    ({"pid": 10 ** 30}, "pid"), ({"pid_start": -1}, "pid_start"),
    ({"pmd_share": "yes"}, "pmd_share"),
    ({"rdt_class": "Bad Class"}, "rdt_class"),
    ({"name": "../x"}, "name"), ({"name": ""}, "name"),
    ({"instance_name": "a\nb"}, "instance_name"),
    ({"surprise": 1}, "unknown fields"),
])
def test_records_refuse_every_bad_field(change, why):
    with pytest.raises(records_mod.RecordError, match=why):
        records_mod.Record.from_dict(_record(**change))


@pytest.mark.parametrize("drop", ["uuid", "pid", "group"])
def test_records_name_missing_fields(drop):
    data = _record()
    del data[drop]
    with pytest.raises(records_mod.RecordError, match="missing"):
        records_mod.Record.from_dict(data)


def test_records_all_names_each_bad_file_and_goes_on(tmp_path):
    recs = records_mod.Records(str(tmp_path))
    recs.put(records_mod.Record.from_dict(_record()))
    d = tmp_path / "domains"
    other = "6f1a3c86-5b1e-4c55-9a3a-1b2c3d4e5f61"
    (d / f"{other}.json").write_text(json.dumps(_record(uuid=other,
                                                        group=5)))
    (d / "junk.json").write_text("{")
    (d / "6f1a3c86-5b1e-4c55-9a3a-1b2c3d4e5f62.json").write_text(
        "[" * 5000)
    (d / "6f1a3c86-5b1e-4c55-9a3a-1b2c3d4e5f63.json").write_text(
        json.dumps(_record()))        # uuid does not match the file
    good, bad = recs.all()
    assert [r.uuid for r in good] == [UUID]
    assert len(bad) == 4
    assert any(f"{other}.json: group 5" in b for b in bad)
    assert any("junk.json: the file name" in b for b in bad)
    assert any("does not match" in b for b in bad)


# -- reconcile: one bad record is named, the rest still done -----------

def _dead_pid():
    import subprocess
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_reconcile_names_each_bad_record_and_goes_on(tree, tmp_path):
    from nova_rdt.host.agent import Agent
    from nova_rdt.host.settings import HookSettings

    os.mkdir(os.path.join(tree, "qemu-2-gone-vcpus_0"))    # no tasks file
    state = tmp_path / "state"
    d = state / "domains"
    d.mkdir(parents=True)
    pid = _dead_pid()
    uuids = [f"6f1a3c86-5b1e-4c55-9a3a-00000000000{i}" for i in range(5)]
    files = {
        uuids[0]: _record(uuid=uuids[0], pid=pid,
                          group="qemu-1-dom1-vcpus_0/../COS1"),
        uuids[1]: _record(uuid=uuids[1], pid=pid, group=5),
        uuids[2]: _record(uuid=uuids[2], pid=pid,
                          group="qemu-2-gone-vcpus_0"),
        uuids[3]: _record(uuid=uuids[3], pid=pid, group=None),
        "not-a-uuid": _record(pid=pid),
    }
    for name, data in files.items():
        (d / f"{name}.json").write_text(json.dumps(data))
    settings = HookSettings(resctrl_root=tree, state_path=str(state),
                            sysfs_cpu_root=str(tmp_path / "cpu"))
    report = Agent(settings).reconcile()
    bad = "\n".join(report.unreadable_records)
    for name in (uuids[0], uuids[1], uuids[2], "not-a-uuid"):
        assert f"{name}.json" in bad, bad
    assert report.dropped_records == [uuids[3]]
    assert os.path.isdir(os.path.join(tree, "COS1"))
    assert os.path.isdir(os.path.join(tree, "qemu-1-dom1-vcpus_0"))
    # The record that could not be handled is kept for the next run.
    assert (d / f"{uuids[2]}.json").exists()
    assert not (d / f"{uuids[3]}.json").exists()
