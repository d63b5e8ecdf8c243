"""MB in MBps, which libvirt cannot set, applied by the real hook.

An emulated Gold 6252 mounted with ``-o mba_MBps``: the driver gives such
a flavor a ``<cachetune>`` and carries the MBps values in nova-rdt's
metadata; on ``started`` the hook writes them into libvirt's group.
"""

from __future__ import annotations

import pytest

from nova_rdt.host import prep as hostprep
from nova_rdt.resctrl.capabilities import UNTHROTTLED_MBPS
from tests.integration import hooklab
from tests.integration.conftest import finish_lab
from tests.integration.conftest import lab_skip_reason
from tests.integration.conftest import start_lab

WAY_KIB = 3328


@pytest.fixture(scope="module")
def lab(libvirt_cache):
    reason = lab_skip_reason(libvirt=True)
    if reason:
        pytest.skip(reason)
    lab = start_lab(profile="gold-6252-mbps", ovs=False,
                    libvirt_cache_dir=libvirt_cache,
                    hook={"reserved_host_ways": 3})
    try:
        lab.start()
        hostprep.prepare(hooklab.fs(lab), reserved_ways=3, pmd_ways=1)
    except BaseException:
        finish_lab(lab)
        raise
    yield lab
    finish_lab(lab)


def test_hook_writes_mbps_into_libvirts_group(lab, guests):
    guests.append("bw")
    lab.libvirt.define(hooklab.managed_domain(
        lab, "bw", cache_kib=2 * WAY_KIB,
        mb=[(0, 2000, "MBps"), (1, 1500, "MBps")]))
    lab.libvirt.start_domain("bw")
    group = hooklab.group_of(lab, "bw")
    s = hooklab.eventually(
        lambda: (lambda s: s if s.get("MB", 0) == 2000 else None)(
            hooklab.schemata(lab, group)))
    assert s.get("MB", 1) == 1500
    assert bin(s.get("L3", 0)).count("1") == 2
    # The root group keeps the kernel's MBps default.
    assert hooklab.schemata(lab).get("MB", 0) > 2000
    assert hooklab.hook_errors(lab) == []


def test_pmd_cos_is_not_throttled_on_an_mbps_mount(lab):
    # 100 would mean 100 MBps here, not "full".
    pmd = hooklab.schemata(lab, "nova-rdt-pmd")
    assert pmd.get("MB", 0) == pmd.get("MB", 1) == UNTHROTTLED_MBPS
