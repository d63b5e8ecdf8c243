"""The privileged daemon's own check of what it may write.

The daemon runs with CAP_DAC_OVERRIDE, so this check, not file modes, is
what keeps a compromised or buggy caller inside nova-rdt's groups.
"""

import errno
import os

import pytest

from nova_rdt.privsep import resctrl as pr
from nova_rdt.privsep import state as ps

PREFIX = "nova-rdt-"


@pytest.fixture(autouse=True)
def in_process(monkeypatch):
    # As Nova's PrivsepFixture: run the entry points here, not in a
    # helper daemon started through sudo.
    from nova_rdt import privsep
    monkeypatch.setattr(privsep.sys_admin_pctxt, "client_mode", False)


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "resctrl"
    for d in ("info/L3", "mon_groups/nova-rdt-m", "mon_groups/pqos-m",
              "nova-rdt-pmd/mon_groups/m1", "COS1/mon_groups/nova-rdt-x",
              "qemu-1-vm-vcpus_0/mon_groups/vcpus_0", "nova-rdt-class-a"):
        (r / d).mkdir(parents=True)
    for g in ("", "nova-rdt-pmd", "COS1", "qemu-1-vm-vcpus_0",
              "nova-rdt-class-a"):
        for f in ("schemata", "tasks", "cpus_list"):
            (r / g / f).write_text("")
    (tmp_path / "outside").write_text("")
    return str(r)


@pytest.mark.parametrize("rel, owner", [
    ("schemata", "root"),
    ("nova-rdt-pmd/schemata", "nova-rdt"),
    ("COS1/tasks", "foreign"),
    ("qemu-1-vm-vcpus_0/schemata", "libvirt"),
    ("mon_groups/nova-rdt-m/tasks", "nova-rdt"),
    ("mon_groups/pqos-m/tasks", "foreign"),
    ("nova-rdt-pmd/mon_groups/m1/tasks", "nova-rdt"),
    # A prefixed name inside a foreign group is still the foreign group's.
    ("COS1/mon_groups/nova-rdt-x/tasks", "foreign"),
    ("qemu-1-vm-vcpus_0/mon_groups/vcpus_0/tasks", "libvirt"),
])
def test_owner_from_structure(root, rel, owner):
    assert pr.resolve(root, PREFIX, os.path.join(root, rel))[0] == owner


@pytest.mark.parametrize("rel", [
    "nova-rdt-x/../COS1/schemata",
    "nova-rdt-pmd/../../outside",
    "../outside",
    "info/L3/cbm_mask",
    "nova-rdt-pmd/extra/dir/schemata",
    "nova-rdt-pmd/mon_groups/schemata",
])
def test_paths_that_leave_a_group_are_refused(root, rel):
    path = os.path.join(root, rel)
    try:
        owner, _ = pr.resolve(root, PREFIX, path)
    except pr.Refused as e:
        assert e.errno == errno.EPERM
        return
    # Resolved to a real target: it must not be one of ours by accident.
    assert owner != "nova-rdt", (rel, owner)


def test_writes_are_checked_per_file_and_owner(root):
    ok = os.path.join(root, "nova-rdt-pmd", "schemata")
    assert pr.write_schemata(root, PREFIX, ok, b"L3:0=f\n") == 7
    assert open(ok).read() == "L3:0=f\n"
    for path, fn in [
            (os.path.join(root, "COS1", "schemata"), pr.write_schemata),
            (os.path.join(root, "nova-rdt-pmd", "tasks"), pr.write_schemata),
            (os.path.join(root, "qemu-1-vm-vcpus_0", "tasks"),
             pr.write_tasks),
            (os.path.join(root, "nova-rdt-x", "..", "COS1", "cpus_list"),
             pr.write_cpus)]:
        with pytest.raises(pr.Refused):
            fn(root, PREFIX, path, b"1\n")
    assert open(os.path.join(root, "COS1", "schemata")).read() == ""


def test_mkdir_and_rmdir_only_our_groups(root):
    pr.make_group(root, PREFIX, os.path.join(root, "nova-rdt-new"))
    assert os.path.isdir(os.path.join(root, "nova-rdt-new"))
    pr.remove_group(root, PREFIX, os.path.join(root, "nova-rdt-new"))
    for rel in ("COS2", "mon_groups/pqos-2", "nova-rdt-x/../COS9", ""):
        with pytest.raises(pr.Refused):
            pr.make_group(root, PREFIX, os.path.join(root, rel))
    with pytest.raises(pr.Refused):
        pr.remove_group(root, PREFIX, os.path.join(root, "COS1"))
    # libvirt cannot remove the group of a domain that died with it.
    os.rmdir(os.path.join(root, "qemu-1-vm-vcpus_0", "mon_groups",
                          "vcpus_0"))
    for f in ("schemata", "tasks", "cpus_list"):
        os.unlink(os.path.join(root, "qemu-1-vm-vcpus_0", f))
    os.rmdir(os.path.join(root, "qemu-1-vm-vcpus_0", "mon_groups"))
    pr.remove_group(root, PREFIX, os.path.join(root, "qemu-1-vm-vcpus_0"))


def test_bad_prefix_is_refused(root):
    with pytest.raises(pr.Refused):
        pr.resolve(root, "../", os.path.join(root, "schemata"))


def test_ops_route_each_file_to_its_entry_point(root):
    ops = pr.PrivsepOps(root, PREFIX)
    ops.write(os.path.join(root, "nova-rdt-class-a", "cpus_list"), b"1\n")
    with pytest.raises(pr.Refused):
        ops.write(os.path.join(root, "nova-rdt-class-a", "mode"), b"x\n")


def test_record_removal_takes_only_a_uuid(tmp_path):
    recs = ps.PrivilegedRecords(str(tmp_path))
    os.makedirs(recs.dir)
    victim = tmp_path / "victim.json"
    victim.write_text("{}")
    with pytest.raises(ValueError):
        ps.remove_record(str(tmp_path), "../victim")
    assert victim.exists()
