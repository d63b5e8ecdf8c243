"""A host with L2 CAT, with the real libvirtd and the installed hook.

The emulated Xeon W-11865MRE: one 12-way L3 (4 CLOS) and eight 20-way
L2 caches, one per core.  Issue 33's case 4: class members must land in
their class group, which holds L3 ways only; libvirt's own groups, made
from ``<cachetune>`` at level 3, get the root's L2 masks copied in.
"""

from __future__ import annotations

import os

import pytest

from nova_rdt.resctrl import cbm
from tests.integration import hooklab
from tests.integration.conftest import prepared_lab

CLASS_GROUP = "nova-rdt-class-low_priority"
L2_ALL = {i: 0xFFFFF for i in range(8)}
WAY_KIB = 24 * 1024 // 12


@pytest.fixture(scope="module")
def lab(libvirt_cache):
    yield from prepared_lab(
        libvirt_cache, reserved_ways=2, profile="xeon-w-11865mre",
        hook={"reserved_host_ways": 2,
              "classes": ["low_priority:l3_ways=1"]})


def _qemu_tids(lab, name: str) -> set[int]:
    with open(os.path.join(lab.libvirt.dirs["run"], "qemu",
                           f"{name}.pid")) as f:
        pid = int(f.read())
    return {int(t) for t in os.listdir(f"/proc/{pid}/task")}


def _class_tasks(lab) -> set[int]:
    if not os.path.isdir(os.path.join(lab.resctrl_root, CLASS_GROUP)):
        return set()
    return set(hooklab.fs(lab).group(CLASS_GROUP).tasks())


def test_class_members_and_a_cachetune_domain(lab, guests):
    root = hooklab.schemata(lab)
    assert root.domains("L3") == {0: 0x3}
    assert root.domains("L2") == L2_ALL      # host preparation left L2
    for name in ("low1", "low2"):
        guests.append(name)
        lab.libvirt.define(hooklab.managed_domain(
            lab, name, rdt_class="low_priority"))
        lab.libvirt.start_domain(name)
    want = _qemu_tids(lab, "low1") | _qemu_tids(lab, "low2")
    hooklab.eventually(lambda: _class_tasks(lab) >= want)
    cls = hooklab.schemata(lab, CLASS_GROUP)
    assert cbm.popcount(cls.domains("L3")[0]) == 1
    assert cls.domains("L3")[0] & 0x3 == 0
    assert cls.domains("L2") == L2_ALL       # the kernel's default
    assert hooklab.hook_errors(lab) == []

    # libvirt's allocator on an L2 host: one L3 way of the free ones,
    # and the default group's L2 masks for the level it was not given.
    guests.append("plain")
    lab.libvirt.define(hooklab.managed_domain(lab, "plain",
                                              cache_kib=WAY_KIB))
    lab.libvirt.start_domain("plain")
    group = hooklab.group_of(lab, "plain")
    s = hooklab.schemata(lab, group)
    l3 = s.domains("L3")[0]
    assert cbm.popcount(l3) == 1 and l3 & (0x3 | cls.domains("L3")[0]) == 0
    assert s.domains("L2") == L2_ALL
    assert _qemu_tids(lab, "plain") & set(hooklab.fs(lab).group(group)
                                          .tasks())
    assert hooklab.hook_errors(lab) == []
