"""The ONP layout (app note Table 3-1) made by libvirt + the nova-rdt hook.

An emulated 2-socket E5-2658 v3 (20 ways, 4 CLOS) with 4 OS ways, real
OVS-DPDK with a PMD on core 1, and two 8-way forwarding VMs that share
with the PMDs.  Table 3-1 has OvS 0xffff0 over VM0 0xff000 and VM1
0x00ff0, with the OS on 0x0000f.
"""

from __future__ import annotations

import pytest

from nova_rdt.host import agent as agent_mod
from tests.integration import hooklab
from tests.integration.conftest import prepared_lab

WAY_KIB = 30720 // 20
PMD = "nova-rdt-pmd"


@pytest.fixture(scope="module")
def lab(libvirt_cache):
    yield from prepared_lab(
        libvirt_cache, reserved_ways=4, ovs=True, sync_pmd=True,
        start_kw={"traffic_ports": 1}, profile="e5-2658-v3",
        hook={"pmd_cos": True, "reserved_host_ways": 4})


def test_onp_table_3_1(lab):
    pmd_cores = {t.core for t in lab.ovs.pmd_threads()}
    assert pmd_cores == {1}
    # The seed's table holds on the cache id of the PMD cores; on the
    # others no PMD runs and the PMD COS holds the host's ways.
    caps = hooklab.fs(lab).capabilities()
    (cid,) = agent_mod.pmd_cache_ids(caps, pmd_cores)
    others = sorted(set(caps.cache["L3"].domains) - {cid})
    # Before any VM the PMDs share the OS ways: a CBM cannot be empty.
    assert hooklab.schemata(lab, PMD).get("L3", cid) == 0xf

    for name in ("vm0", "vm1"):
        lab.libvirt.define(hooklab.managed_domain(
            lab, name, cache_kib=8 * WAY_KIB, pmd_share=True,
            cache_id=cid))
        lab.libvirt.start_domain(name)
    try:
        hooklab.eventually(lambda: hooklab.schemata(lab, PMD).get("L3", cid)
                           == 0xffff0)
        os_ways = hooklab.schemata(lab).get("L3", cid)
        vm0, vm1 = (hooklab.schemata(lab, hooklab.group_of(lab, n))
                    .get("L3", cid) for n in ("vm0", "vm1"))
        pmd = hooklab.schemata(lab, PMD).get("L3", cid)
        assert os_ways == 0x0000f
        # Placed next to each other, as the PMD COS must stay one run.
        assert {vm0, vm1} == {0x00ff0, 0xff000}
        assert vm0 & vm1 == 0                      # VMs disjoint
        assert pmd == vm0 | vm1 == 0xffff0         # PMD = union of both
        assert os_ways & (vm0 | vm1 | pmd) == 0    # OS disjoint from all
        assert hooklab.schemata(lab, PMD).get("MB", cid) is None  # no MBA
        # The PMD COS holds exactly the real PMD cores.
        assert hooklab.fs(lab).group(PMD).cpus() == pmd_cores
        assert all(hooklab.schemata(lab, PMD).get("L3", o) == 0xf
                   for o in others)
        assert hooklab.hook_errors(lab) == []

        lab.libvirt.destroy("vm1")
        hooklab.eventually(
            lambda: hooklab.schemata(lab, PMD).get("L3", cid) == vm0)
        lab.libvirt.destroy("vm0")
        hooklab.eventually(
            lambda: hooklab.schemata(lab, PMD).get("L3", cid) == 0xf)
    finally:
        for name in ("vm0", "vm1"):
            lab.libvirt.virsh("destroy", name, check=False)
            lab.libvirt.virsh("undefine", name, check=False)
    assert hooklab.hook_errors(lab) == []
