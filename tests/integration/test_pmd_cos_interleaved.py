"""The PMD COS on gold-6252 with pmd_shared_ways=2 (issue 17).

11 ways: the host keeps 0x003, the PMD base is 0x600 at the top, and
libvirt's best fit places VMs from the bottom of the free runs.  Sharing
and non-sharing VMs start and stop, interleaved, on the real libvirtd;
the hook recomputes the PMD group after each.  After every step the PMD
group's schemata is what the emulated kernel accepted, one run of ways,
and covers the base and the sharing VMs' ways and no other VM's.  The
sequence is one the driver accepts (a sharing VM always lands next to
the span; tests/unit/test_pmdplan.py models the refusals).
"""

from __future__ import annotations

import uuid as uuid_mod

import pytest

from nova_rdt.lab import diskless_domain_xml
from nova_rdt.resctrl import cbm
from nova_rdt.virt import config as rdt_config
from tests.integration import hooklab
from tests.integration.conftest import prepared_lab

WAY_KIB = 36608 // 11
PMD = "nova-rdt-pmd"
BASE = 0x600
ROOT = 0x003
IDS = (0, 1)


@pytest.fixture(scope="module")
def lab(libvirt_cache):
    yield from prepared_lab(
        libvirt_cache, reserved_ways=2, pmd_ways=2, ovs=True, sync_pmd=True,
        profile="gold-6252", hook={"pmd_cos": True, "reserved_host_ways": 2,
                                   "pmd_shared_ways": 2})


def _domain(lab, name, ways, sharing):
    """A domain as Nova's driver writes it: ways on both cache ids."""
    meta = rdt_config.LibvirtConfigGuestMetaNovaRdt()
    meta.vcpus = {0}
    meta.pmd_share = sharing
    meta.cache = [(cid, "both", ways) for cid in IDS]
    caches = "".join(f"<cache id='{cid}' level='3' type='both' "
                     f"size='{ways * WAY_KIB}' unit='KiB'/>" for cid in IDS)
    xml = diskless_domain_xml(
        name, vcpus=1, domain_type=lab.libvirt.domain_type,
        cputune=f"<cachetune vcpus='0'>{caches}</cachetune>",
        metadata=meta.to_xml())
    return xml.replace("<name>", f"<uuid>{uuid_mod.uuid4()}</uuid>\n  <name>",
                       1)


def test_interleaved_sharing_and_non_sharing(lab):
    sharing: dict[str, bool] = {}
    running: dict[str, int] = {}          # name -> L3 mask (same per id)
    seen: list[str] = []

    def expect(absorbed=0):
        want = BASE
        for n, m in running.items():
            if sharing[n]:
                want |= m

        def settled():
            s = hooklab.schemata(lab, PMD)
            return all(s.get("L3", cid) == want | absorbed for cid in IDS)
        hooklab.eventually(settled)
        pmd = hooklab.schemata(lab, PMD)
        for cid in IDS:
            p = pmd.get("L3", cid)
            cbm.check(p, 11)                       # what the kernel takes
            assert cbm.is_contiguous(p), hex(p)
            for n, m in running.items():
                if sharing[n]:
                    assert p & m == m, (n, hex(p), hex(m))
                else:
                    assert p & m == 0, (n, hex(p), hex(m))
            assert p & ROOT == 0
        seen.append(pmd.format().strip().replace("\n", " "))

    def start(name, ways, share, mask):
        sharing[name] = share
        lab.libvirt.define(_domain(lab, name, ways, share))
        lab.libvirt.start_domain(name)
        group = hooklab.group_of(lab, name)
        for cid in IDS:   # libvirt's best fit, as the driver predicts
            assert hooklab.schemata(lab, group).get("L3", cid) == mask
        running[name] = mask

    def stop(name):
        lab.libvirt.destroy(name)
        lab.libvirt.virsh("undefine", name, check=False)
        del running[name]

    names = ("n1", "s1", "s2", "n2", "s3")
    try:
        expect()                                   # base only: 0x600
        start("n1", 3, False, 0x01c)
        expect()                                   # 0x600: n1 outside
        start("s1", 4, True, 0x1e0)
        expect()                                   # 0x7e0
        stop("n1")
        expect()
        start("s2", 3, True, 0x01c)
        expect()                                   # 0x7fc
        stop("s2")
        expect()                                   # back to 0x7e0
        start("n2", 2, False, 0x00c)
        expect()
        start("s3", 1, True, 0x010)
        expect()                                   # 0x7f0
        # A sharing VM in the middle of the span leaves: the span keeps
        # s3 and the base, so s1's free ways stay with the PMDs.
        stop("s1")
        expect(absorbed=0x1e0)
        stop("s3")
        expect()                                   # 0x600
        stop("n2")
        expect()
        assert hooklab.hook_errors(lab) == []
        # Every schemata written was accepted: the kernel says so.
        assert hooklab.fs(lab).last_cmd_status() in ("ok", "")
    finally:
        for name in names:
            lab.libvirt.virsh("destroy", name, check=False)
            lab.libvirt.virsh("undefine", name, check=False)
        print("\n".join(seen))
