"""What real libvirtd does on the emulated resctrl (Host lab, issue 4).

The emulated host is a 2-socket Gold 6252 (11 ways of 3328 KiB, 16 CLOS,
MBA) whose default group was shrunk to the lower 3 ways, as host
preparation does; the upper 8 ways are libvirt's to allocate.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import pytest

from nova_rdt import naming
from nova_rdt.lab import LabError
from nova_rdt.lab import diskless_domain_xml
from nova_rdt.lab.libvirtd import VirshError
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.schemata import Schemata
from tests.integration.conftest import finish_lab
from tests.integration.conftest import lab_skip_reason
from tests.integration.conftest import start_lab

WAY_KIB = 3328


@pytest.fixture(scope="module")
def lab(libvirt_cache):
    reason = lab_skip_reason(libvirt=True)
    if reason:
        pytest.skip(reason)
    lab = start_lab(profile="gold-6252", ovs=False,
                    libvirt_cache_dir=libvirt_cache)
    try:
        lab.start()
        fs = Resctrl(lab.resctrl_root, sysfs_cpu=lab.sysfs_cpu_root)
        fs.write_schemata(fs.root_group(), Schemata.parse("L3:0=7;1=7\n"),
                          allow_root=True)
    except BaseException:
        finish_lab(lab)
        raise
    yield lab
    finish_lab(lab)


def _groups(lab) -> set[str]:
    return {name for name in os.listdir(lab.resctrl_root)
            if name not in ("info", "mon_groups", "mon_data")
            and os.path.isdir(os.path.join(lab.resctrl_root, name))}


def _read(lab, group: str, name: str) -> str:
    with open(os.path.join(lab.resctrl_root, group, name)) as f:
        return f.read()


def _domain(lab, name: str, cache_kib: int | None = None,
            bandwidth: int | None = None) -> str:
    tune = ""
    if cache_kib:
        tune += (f"<cachetune vcpus='0'><cache id='0' level='3' type='both' "
                 f"size='{cache_kib}' unit='KiB'/></cachetune>")
    if bandwidth:
        tune += (f"<memorytune vcpus='0'><node id='0' "
                 f"bandwidth='{bandwidth}'/></memorytune>")
    return diskless_domain_xml(name, domain_type=lab.libvirt.domain_type,
                               cputune=tune)


def test_virsh_capabilities_show_the_emulated_host(lab):
    caps = ET.fromstring(lab.libvirt.capabilities())
    banks = caps.findall("./host/cache/bank")
    assert [(b.get("id"), b.get("level"), b.get("size"), b.get("unit"))
            for b in banks] == [("0", "3", "36608", "KiB"),
                                ("1", "3", "36608", "KiB")]
    for bank in banks:
        control = bank.find("control")
        assert control.get("granularity") == str(WAY_KIB)
        assert control.get("unit") == "KiB"
        assert control.get("type") == "both"
        assert control.get("maxAllocs") == "16"
    nodes = caps.findall("./host/memory_bandwidth/node")
    assert [n.get("id") for n in nodes] == ["0", "1"]
    for node in nodes:
        control = node.find("control")
        assert (control.get("granularity"), control.get("min"),
                control.get("maxAllocs")) == ("10", "10", "8")


def test_allocation_and_cleanup(lab, guests):
    before = _groups(lab)
    guests.append("alloc")
    lab.libvirt.define(_domain(lab, "alloc", cache_kib=2 * WAY_KIB,
                               bandwidth=50))
    lab.libvirt.start_domain("alloc", paused=True)

    created = _groups(lab) - before
    assert len(created) == 1, created
    group = created.pop()
    assert group.startswith("qemu-") and "-alloc-vcpus_0" in group

    schemata = Schemata.parse(_read(lab, group, "schemata"))
    cache0 = schemata.get("L3", 0)
    assert bin(cache0).count("1") == 2
    # libvirt takes the lowest bits of the best-fitting free run: the
    # first two ways above the 3 the host keeps.
    assert cache0 == 0b11000
    assert schemata.get("L3", 1) == 0b111    # unnamed ids copy the default
    assert schemata.get("MB", 0) == 50

    tids = lab.libvirt.vcpu_tids("alloc")
    assert sorted(int(t) for t in _read(lab, group, "tasks").split()) \
        == [tids[0]]
    with open(f"/proc/{tids[0]}/comm") as f:
        assert f.read().startswith("CPU 0/")

    lab.libvirt.destroy("alloc")
    assert group not in _groups(lab)
    assert _groups(lab) == before


def test_full_cache_fails_with_not_enough_room(lab, guests):
    before = _groups(lab)
    guests.extend(["big", "late"])
    lab.libvirt.define(_domain(lab, "big", cache_kib=8 * WAY_KIB))
    lab.libvirt.start_domain("big")
    after_big = _groups(lab)
    assert len(after_big - before) == 1

    lab.libvirt.define(_domain(lab, "late", cache_kib=WAY_KIB))
    with pytest.raises(VirshError) as err:
        lab.libvirt.start_domain("late")
    assert "Not enough room for allocation" in err.value.stderr
    assert not any("-late-" in g for g in _groups(lab))
    assert _groups(lab) == after_big
    assert "late" not in lab.libvirt.domains(running_only=True)


def test_harness_records_its_costs(lab):
    for step in ("emulator", "namespace", "libvirtd", "start"):
        assert lab.timings[step] > 0, step
    assert lab.emulated
    with pytest.raises(LabError, match="ovs=False"):
        lab.start_ovs()


# Longer than libvirt's 64-character machine name, with "_" (dropped), a
# "-_-" (one run of "-" once "_" is dropped), ".." and "--" runs, and a
# leading "_." (dropped, then a leading run).
LONG_NAME = ("_.nova_rdt..long--name-_-x.-instance-"
             "6f1a3c86-5b1e-4c55-9a3a-1b2c3d4e5f60")


def test_long_names_are_libvirts_machine_names(lab, guests):
    before = _groups(lab)
    guests.append(LONG_NAME)
    lab.libvirt.define(_domain(lab, LONG_NAME, cache_kib=WAY_KIB))
    lab.libvirt.start_domain(LONG_NAME, paused=True)
    created = _groups(lab) - before
    assert len(created) == 1, created
    group = created.pop()
    domid = int(lab.libvirt.virsh("domid", LONG_NAME).strip())
    print(f"libvirt's group for {LONG_NAME!r}: {group}")
    # "_" dropped without ending a "-" run ("name-x", not "name--x"),
    # and the whole machine name cut to 64 characters.
    machine = (f"qemu-{domid}-novardt.long-name-x.instance-6f1a3c86-5b1e-"
               f"4c55-9a3a-1b2c3d4e5f60"[:64]).rstrip("-.")
    assert group == f"{machine}-vcpus_0"
    assert naming.libvirt_machine_name(domid, LONG_NAME) == machine
    assert naming.is_libvirt_group_of(group, LONG_NAME)
    assert not naming.is_libvirt_group_of(group, LONG_NAME[:20])
