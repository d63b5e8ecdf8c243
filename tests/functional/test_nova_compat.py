"""``tox -e nova-compat`` in small: a few of Nova's own libvirt functional
tests, from the installed wheel, with nova-rdt's driver swapped in by
tests/nova_compat/plugin.py.  The full run is ``tox -e nova-compat``
(463 tests; too long for every CI run).

The subset holds the two cases the issue found: a pass-through spy on
``LibvirtDriver._get_guest_config`` (test_machine_type), and a compute
started under Nova's SysFsPoisonFixture with resctrl unprobeable
(test_rt_servers).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.nova_compat import plugin

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SUBSET = [
    "nova.tests.functional.libvirt.test_machine_type::"
    "LibvirtMachineTypeTest::test_hw_machine_type_config_update_workflow",
    "nova.tests.functional.libvirt.test_machine_type::"
    "LibvirtMachineTypeTest::test_init_host_register_machine_type",
    "nova.tests.functional.libvirt.test_rt_servers::"
    "RealTimeServersTest::test_success",
]


def test_spies_on_overridden_methods_are_retargeted():
    overridden = {"_get_guest_config", "init_host"}
    for base in ("nova.virt.libvirt.LibvirtDriver.",
                 "nova.virt.libvirt.driver.LibvirtDriver."):
        assert plugin.retarget(base + "_get_guest_config", overridden) == \
            "nova_rdt.virt.driver.LibvirtRDTDriver._get_guest_config"
        # Not overridden: the base class's method is what runs anyway.
        assert plugin.retarget(base + "spawn", overridden) == base + "spawn"
    assert plugin.retarget("nova.virt.libvirt.host.Host.get_connection",
                           overridden) == \
        "nova.virt.libvirt.host.Host.get_connection"
    assert plugin.swap("libvirt.LibvirtDriver") == "rdt.LibvirtRDTDriver"
    assert plugin.swap("fake.SmallFakeDriver") == "fake.SmallFakeDriver"


def test_a_subset_of_novas_libvirt_tests_passes_with_the_driver(tmp_path):
    pytest.importorskip("nova.tests.functional.libvirt.base",
                        reason="Nova's functional tests are not installed")
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-p", "no:warnings", "-p", "tests.nova_compat.plugin", "--pyargs",
         *SUBSET],
        cwd=REPO, capture_output=True, text=True, timeout=900,
        env={**os.environ, "NOVA_RDT_COMPAT_DRIVER": "rdt"})
    tail = res.stdout[-3000:]
    assert res.returncode == 0, tail
    assert f"{len(SUBSET)} passed" in tail, tail
    # Every compute ran nova-rdt's driver, and only it.
    line = next(ln for ln in res.stdout.splitlines()
                if ln.startswith("nova-compat: drivers loaded:"))
    assert line.split(": ", 2)[2].startswith("LibvirtRDTDriver x"), line
    assert "," not in line, line
