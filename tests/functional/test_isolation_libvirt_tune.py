"""The lab's stand-in for libvirt's resctrl code on the FUSE emulator:
real mkdir, schemata and tasks writes, real kernel refusals, and nothing
half made."""

import os
import subprocess

import pytest

from nova_rdt.lab.isolation import libvirt_alloc as la
from nova_rdt.lab.isolation import libvirt_tune as lt
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.resctrl.schemata import Schemata

pytestmark = pytest.mark.fuse
MiB = 1024 * 1024
WAY = 30 * MiB // 20         # the E5-2658 v3's way


def tune(vcpus, ways, cache_id=0, monitor=None):
    mon = f"<monitor level='3' vcpus='{monitor}'/>" if monitor else ""
    return la.parse_tunes([
        f"<cachetune vcpus='{vcpus}'><cache id='{cache_id}' level='3' "
        f"type='both' size='{ways * WAY // 1024}' unit='KiB'/>{mon}"
        f"</cachetune>"])


@pytest.fixture
def threads():
    """Two live threads to stand for vCPUs (processes: a tid is a tid)."""
    procs = [subprocess.Popen(["sleep", "60"]) for _ in range(2)]
    yield {i: p.pid for i, p in enumerate(procs)}
    for p in procs:
        p.kill()
        p.wait()


@pytest.fixture
def fs(emulator_e5):
    fs = Resctrl(emulator_e5.mountpoint, sysfs_cpu=emulator_e5.sysfs_cpu)
    # As the lab's hook leaves it: the host keeps 4 ways.
    fs.write_schemata(fs.root_group(), Schemata.parse("L3:0=f;1=f"),
                      allow_root=True)
    return fs


def test_the_group_libvirt_would_make_with_the_vcpus_in_it(fs, threads):
    applied = lt.create(fs, "instance-00000001", 3, tune("0-1", 4, 1),
                        threads)
    name = "qemu-3-instance-00000001-vcpus_0-1"
    assert applied.groups == [name] and applied.made == (name,)
    g = fs.group(name)
    # The cache asked for gets the lowest free ways; the other keeps the
    # default group's mask.
    assert g.schemata().domains("L3") == {0: 0xf, 1: 0xf0}
    assert sorted(g.tasks()) == sorted(threads.values())
    assert g.owner == "libvirt"
    assert "group qemu-3-instance-00000001-vcpus_0-1, L3 1=0xf0 (4 ways)" \
        in applied.message()
    assert lt.remove(fs, applied) == [name]
    assert not os.path.exists(os.path.join(fs.root, name))
    # The tasks went back to the default group.
    assert set(threads.values()) <= set(fs.root_group().tasks())


def test_a_second_domain_gets_the_ways_the_first_left(fs, threads):
    a = lt.create(fs, "vm-a", 1, tune("0", 8), {0: threads[0]})
    b = lt.create(fs, "vm-b", 2, tune("0", 4), {0: threads[1]})
    ma = a.allocations[0].granted["L3"][0]
    mb = b.allocations[0].granted["L3"][0]
    assert (ma, mb) == (0xff0, 0xf000)
    lt.remove(fs, b)
    lt.remove(fs, a)


def test_a_full_cache_says_so_and_leaves_nothing(fs, threads):
    a = lt.create(fs, "vm-a", 1, tune("0", 16), {0: threads[0]})
    before = sorted(os.listdir(fs.root))
    with pytest.raises(lt.StandInError, match=(
            "vm-b: the allocation libvirt would have made could not be "
            "applied: Not enough room for allocation of 3145728 bytes for "
            "level 3 cache 0 scope type 'both'")):
        lt.create(fs, "vm-b", 2, tune("0", 2), {0: threads[1]})
    assert sorted(os.listdir(fs.root)) == before
    lt.remove(fs, a)


def test_a_thread_the_kernel_refuses_undoes_the_group(fs, threads):
    gone = subprocess.Popen(["true"])
    gone.wait()
    with pytest.raises(lt.StandInError, match="removed again: "
                                               "qemu-5-vm-vcpus_0-1"):
        lt.create(fs, "vm", 5, tune("0-1", 2),
                  {0: threads[0], 1: gone.pid})
    assert not os.path.exists(os.path.join(fs.root, "qemu-5-vm-vcpus_0-1"))
    assert threads[0] in fs.root_group().tasks()


def test_a_monitor_over_fewer_vcpus_is_a_monitor_group_in_it(fs, threads):
    applied = lt.create(fs, "vm", 4, tune("0-1", 2, monitor="1"), threads)
    parent = "qemu-4-vm-vcpus_0-1"
    mon = fs.group("qemu-4-vm-vcpus_1", parent)
    assert mon.tasks() == [threads[1]]
    assert applied.made == (parent, f"{parent}/mon_groups/qemu-4-vm-vcpus_1")
    assert lt.remove(fs, applied) == [parent]
    assert not os.path.exists(os.path.join(fs.root, parent))


def test_a_vcpu_qemu_did_not_report_is_refused(fs, threads):
    with pytest.raises(lt.StandInError, match=r"no thread for vCPU\(s\) 1"):
        lt.create(fs, "vm", 6, tune("0-1", 2), {0: threads[0]})
    assert not any(n.startswith("qemu-") for n in os.listdir(fs.root))
