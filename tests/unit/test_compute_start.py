"""nova-compute refuses settings that cannot be consistent at start,
naming the options, rather than run a host that refuses every boot
(issue 38).  A class a host's caches cannot hold is not one of them: one
nova.conf serves hosts of several sizes, and RDTFilter sends the class's
flavors where it fits."""

from __future__ import annotations

import pytest

nova = pytest.importorskip("nova", reason="needs nova (the nova extra)")

from nova import exception  # noqa: E402
from oslo_config import cfg  # noqa: E402

from nova_rdt.virt import rdt_compute  # noqa: E402


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
