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


@pytest.mark.parametrize("policy", ["none", "rdt", "all"])
def test_the_compute_reads_its_own_options_at_each_use(conf, policy):
    """[rdt] options HookSettings does not carry are read when used: a
    change holds without a restart, as Nova's own driver options do."""
    conf.set_override("monitor_default", policy, group="rdt")
    conf.set_override("missing_rdt_policy", "ignore", group="rdt")
    try:
        opts = rdt_compute.ComputeOptions.now()
        assert (opts.monitor_default, opts.missing_rdt_policy) == \
            (policy, "ignore")
        assert rdt_compute.RdtCompute.monitor_default(None) is \
            (policy == "all")
        assert rdt_compute.RdtCompute.monitor_default(object()) is \
            (policy != "none")
    finally:
        conf.clear_override("monitor_default", group="rdt")
        conf.clear_override("missing_rdt_policy", group="rdt")
    assert rdt_compute.ComputeOptions.now().missing_rdt_policy == "reject"
