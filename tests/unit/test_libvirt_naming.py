"""libvirt's names for a domain's resctrl groups, and matching them back.

libvirt 9.0 names a privileged QEMU domain's group
``<machine name>-vcpus_<list>``, the machine name being
``qemu-<id>-<domain name made hostname-safe>`` cut at 64 characters
(virDomainDriverGenerateMachineName).  tests/integration/
test_lab_libvirt.py checks the rule against this host's real libvirtd.
"""

from __future__ import annotations

import re
import string

from hypothesis import example
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import pytest

from nova_rdt import naming
from tests import libvirt_model as libvirt_alloc

HOSTNAME = set(string.ascii_letters + string.digits + "-.")
UUID = "6f1a3c86-5b1e-4c55-9a3a-1b2c3d4e5f60"

# Expectations from libvirt's own tests/virsystemdtest.c (TEST_MACHINE,
# privileged, no embed root): (domain name, id, machine name).
LIBVIRT_CASES = [
    ("demo", 1, "qemu-1-demo"),
    ("demo-name", 2, "qemu-2-demo-name"),
    ("demo!name", 3, "qemu-3-demoname"),
    (".demo", 4, "qemu-4-demo"),
    ("bull\U0001f4a9", 5, "qemu-5-bull"),
    ("demo..name", 6, "qemu-6-demo.name"),
    ("1234567890" * 5 + "123456789", 7,
     "qemu-7-123456789012345678901234567890123456789012345678901234567"),
    ("1234567890" * 6, 8,
     "qemu-8-123456789012345678901234567890123456789012345678901234567"),
    ("kstest-network-device-default-httpks_"
     "(c9eed63e-981e-48ec-acdc-56b3f8c5f678)", 100,
     "qemu-100-kstest-network-device-default-httpksc9eed63e-981e-48ec"),
    ("kstest-network-device-default-httpks_"
     "(c9eed63e-981e-48ec--cdc-56b3f8c5f678)", 10,
     "qemu-10-kstest-network-device-default-httpksc9eed63e-981e-48ec-c"),
    ("demo.-.test.", 11, "qemu-11-demo.test"),
    ("|.-m", 1, "qemu-1-m"),
    ("Auto-esx7.0-rhel7.9-special-characters~!@#$%^&*_=+,?><:;|.\"[]()`\\-m",
     1, "qemu-1-Auto-esx7.0-rhel7.9-special-characters.m"),
]


@pytest.mark.parametrize("name, domid, machine", LIBVIRT_CASES)
def test_libvirts_own_expectations(name, domid, machine):
    assert naming.libvirt_machine_name(domid, name) == machine
    group = f"{machine}-vcpus_0-3"
    assert naming.libvirt_group_machine(group) == (domid, machine)
    assert naming.is_libvirt_group_of(group, name)


def test_what_this_hosts_libvirtd_made():
    # Seen on libvirt 9.0 here (test_lab_libvirt.py): "_" dropped without
    # ending a "-" run, runs collapsed, leading ones dropped, cut at 64.
    name = "_.nova_rdt..long--name-_-x.-instance-" + UUID
    assert naming.libvirt_machine_name(2, name) == \
        "qemu-2-novardt.long-name-x.instance-6f1a3c86-5b1e-4c55-9a3a-1b2c"


@pytest.mark.parametrize("name, machine", [
    ("instance-00000001", "qemu-3-instance-00000001"),
    (f"instance-{UUID}", f"qemu-3-instance-{UUID}"),     # 45 > 20: kept
    ("my_vm", "qemu-3-myvm"),
    ("a-_-b", "qemu-3-a-b"),
    ("___", "qemu-3"),           # nothing kept: the prefix's "-" trimmed
    ("", "qemu-3"),
    ("x" * 100, "qemu-3-" + "x" * 57),
    ("x" * 56 + "-y", "qemu-3-" + "x" * 56),   # cut at "-", then trimmed
])
def test_rule_examples(name, machine):
    assert naming.libvirt_machine_name(3, name) == machine


def test_the_cut_counts_the_id():
    name = "n" * 70
    for domid in (1, 22, 333, 4444):
        m = naming.libvirt_machine_name(domid, name)
        assert len(m) == 64 and m.startswith(f"qemu-{domid}-n")


def test_unprivileged_names_carry_the_user():
    assert naming.libvirt_machine_name(4, "vm", privileged=False,
                                       user="nova") == "qemu-nova-4-vm"
    with pytest.raises(ValueError, match="user name"):
        naming.libvirt_machine_name(4, "vm", privileged=False)


@pytest.mark.parametrize("domid", [-1, True, "1", 1.0, None])
def test_bad_ids_are_refused(domid):
    with pytest.raises(ValueError, match="domain id"):
        naming.libvirt_machine_name(domid, "vm")


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10 ** 7), st.text(st.characters(), max_size=120))
@example(0, "-.-._.-a")
@example(9, "a" * 56 + "._")
def test_any_name_gives_a_hostname_word(domid, name):
    m = naming.libvirt_machine_name(domid, name)
    prefix = f"qemu-{domid}"
    assert m.startswith(prefix)
    assert len(m) <= naming.LIBVIRT_MACHINE_NAME_MAX
    assert set(m) <= HOSTNAME
    assert m[-1] not in "-."
    assert not re.search(r"[.-][.-]", m)
    rest = m[len(prefix):]
    assert rest == "" or (rest[0] == "-" and rest[1] not in "-.")
    # what is kept is the name's hostname characters, in order
    kept = re.sub(r"[.-]", "", rest)
    assert kept == "".join(c for c in name if c in HOSTNAME - set(".-"))[
        :len(kept)]
    # and libvirt's group of it is matched back to it, under its id only
    group = f"{m}-vcpus_0"
    assert naming.libvirt_group_machine(group) == (domid, m)
    assert naming.is_libvirt_group_of(group, name)
    # the lab's stand-in for libvirt names it the same way
    assert libvirt_alloc.machine_name(domid, name) == m


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10 ** 5),
       st.text(st.sampled_from(string.ascii_letters + string.digits),
               min_size=1, max_size=10).flatmap(
           lambda w: st.lists(st.text(st.sampled_from(
               string.ascii_letters + string.digits), min_size=1,
               max_size=10), max_size=5).map(
               lambda ws: w + "".join("-" + x for x in ws))))
def test_valid_short_names_are_unchanged(domid, name):
    prefix = f"qemu-{domid}-"
    if len(prefix) + len(name) <= naming.LIBVIRT_MACHINE_NAME_MAX:
        assert naming.libvirt_machine_name(domid, name) == prefix + name


@pytest.mark.parametrize("group", [
    "COS1", "nova-rdt-pmd", "qemu-x-vm-vcpus_0", "qemu-1-vm", "info",
    "qemu-1-vm_x-vcpus_0", "qemu-1--vm-vcpus_0", "qemu-1-vm.-x-vcpus_0",
    "qemu-1-vm--vcpus_0", "mon_groups/qemu-1-vm-vcpus_0",
])
def test_names_libvirt_never_makes_are_not_its_groups(group):
    assert naming.libvirt_group_machine(group) is None
    assert not naming.is_libvirt_group_of(group, "vm")


def test_a_group_is_one_domains():
    g = f"qemu-12-instance-{UUID}-vcpus_0-1"
    assert naming.is_libvirt_group_of(g, f"instance-{UUID}")
    assert not naming.is_libvirt_group_of(g, f"instance-{UUID}"[:20])
    assert not naming.is_libvirt_group_of(g, f"instance-{UUID}x")
    # an id in the domain name is not the group's id
    assert not naming.is_libvirt_group_of("qemu-1-2-vm-vcpus_0", "vm")
    assert naming.is_libvirt_group_of("qemu-1-2-vm-vcpus_0", "2-vm")


def test_machines_answer_per_domain_name():
    long = "Tenant_A..web--frontend_" + "x" * 46
    groups = ["COS1", "nova-rdt-pmd", f"qemu-7-instance-{UUID}-vcpus_0-1",
              f"qemu-123-{naming.libvirt_machine_name(123, long)[9:]}"
              "-vcpus_0", "qemu-8-a-vcpus_0", "qemu-8-a-vcpus_1"]
    m = naming.LibvirtMachines(groups)
    assert len(m) == 3
    assert f"instance-{UUID}" in m
    assert long in m
    assert "a" in m and "A" not in m and "b" not in m
    assert f"instance-{UUID}"[:20] not in m
    assert m.group_of("a") in ("qemu-8-a-vcpus_0", "qemu-8-a-vcpus_1")
    assert m.group_of(None) is None and None not in m
    assert not naming.LibvirtMachines(["COS1"])


def test_a_domains_group_is_known_by_its_machine_name_only():
    """libvirt names a domain's group after its machine name (its id and
    a cut of its name): the group of a long name is found, a cut of the
    name alone is not that domain's group."""
    names = {"a": f"instance-{UUID}",
             "b": "instance-6f1a3c86-5b1e-4c55-9a3a-1b2c3d4e5f61",
             "c": "Tenant_A..web--frontend_" + "x" * 46}
    assert not any(n in naming.LibvirtMachines(["COS1"])
                   for n in names.values())
    made = naming.LibvirtMachines([
        f"qemu-4-instance-{UUID}-vcpus_0",
        f"{naming.libvirt_machine_name(1234, names['c'])}-vcpus_0",
        # the old 20-character cut of b's name is not b's group
        f"qemu-5-{names['b'][:20]}-vcpus_0"])
    assert [u for u, n in names.items() if n not in made] == ["b"]

