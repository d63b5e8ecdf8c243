"""nova-compute refuses settings it cannot honour at start, naming the
option, rather than run a host that refuses every boot (issue 38)."""

from __future__ import annotations

import pytest

nova = pytest.importorskip("nova", reason="needs nova (the nova extra)")

from nova import exception  # noqa: E402
from oslo_config import cfg  # noqa: E402

from nova_rdt.emulator import topology  # noqa: E402
from nova_rdt.host.settings import HookSettings  # noqa: E402
from nova_rdt.resctrl.groups import Resctrl  # noqa: E402
from nova_rdt.virt import rdt_compute  # noqa: E402
from tests.kernel_fixtures import make_kernel  # noqa: E402
from tests.kernel_fixtures import materialize  # noqa: E402


@pytest.fixture
def conf():
    c = cfg.CONF
    yield c
    c.clear_override("pmd_cos", group="rdt")
    c.clear_override("pmd_shared_ways", group="rdt")


def test_shared_ways_without_the_pmd_cos_refuse_the_start(conf):
    conf.set_override("pmd_cos", False, group="rdt")
    conf.set_override("pmd_shared_ways", 2, group="rdt")
    with pytest.raises(exception.InvalidConfiguration,
                       match=r"pmd_shared_ways=2 needs \[rdt\] pmd_cos"):
        rdt_compute.RdtCompute(host=None).init_host()


def test_a_class_no_cache_can_hold_refuses_the_start(tmp_path):
    """gold-6252 leaves 7 of its 11 ways for instances past 2 host and 2
    PMD ways: an 8-way class could never be made.  Refused before
    anything is written."""
    k, _, _ = make_kernel("gold-6252")
    root = materialize(k, str(tmp_path / "resctrl"))
    cpu = topology.write_tree(k.profile, str(tmp_path / "cpu"))
    settings = HookSettings(resctrl_root=root, sysfs_cpu_root=cpu,
                            pmd_cos=True, pmd_shared_ways=2,
                            classes=("big:l3_ways=8",))
    with open(f"{root}/schemata") as f:
        before = f.read()
    with pytest.raises(exception.InvalidConfiguration,
                       match=r"class 'big': l3_ways=8 is more than the 7"):
        rdt_compute.RdtCompute(host=None)._start(
            Resctrl(root, sysfs_cpu=cpu), settings)
    with open(f"{root}/schemata") as f:
        assert f.read() == before
