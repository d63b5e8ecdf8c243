"""CDP and MBps from a flavor, through Nova's driver, to the real libvirtd.

For each profile a Host lab (emulated resctrl, real libvirtd with the
nova-rdt hook) and, in a child process (:mod:`tests.integration.nova_boot`),
Nova's control plane whose RDT compute runs LibvirtRDTDriver on the lab's
resctrl.  The domain XML the driver wrote is started on the lab's libvirtd
as a diskless guest that keeps Nova's ``<cachetune>``/``<memorytune>`` and
metadata (as ``nova-rdt lab`` does), so libvirt allocates and the hook
acts; then the resctrl schemata of libvirt's group is read back.

* gold-6252-cdp: ``rdt:l3_code_ways=2``/``rdt:l3_data_ways=3`` give
  ``type='code'``/``type='data'`` caches that libvirt allocates as
  L3CODE/L3DATA masks, best fit above the host's ways.
* gold-6252-mbps: ``rdt:mb_mbps=2000`` travels in nova-rdt's metadata
  (libvirt 9.0's ``<memorytune>`` takes percent only) and the hook writes
  ``MB:0=2000;1=2000`` into libvirt's group.
* A percent host refuses MBps metadata: the hook logs one ERROR line
  naming the unit and leaves MB unthrottled (it does not convert).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from lxml import etree
import pytest

from nova_rdt import naming
from nova_rdt.emulator import profiles
from nova_rdt.lab import diskless_domain_xml
from tests.integration import hooklab
from tests.integration.conftest import finish_lab
from tests.integration.conftest import lab_skip_reason
from tests.integration.conftest import start_lab

NOVA_NS = "http://openstack.org/xmlns/libvirt/nova/1.1"
KEEP_META = (f"{{{naming.METADATA_NS}}}instance", f"{{{NOVA_NS}}}instance")
KEEP_TUNE = ("cachetune", "memorytune")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def _skip():
    reason = lab_skip_reason(libvirt=True)
    if reason:
        pytest.skip(reason)
    try:
        import nova.tests.functional.libvirt.base  # noqa: F401
    except ImportError as e:
        pytest.skip(f"Nova's functional framework is not importable: {e}")


def _lab(profile, libvirt_cache):
    _skip()
    lab = start_lab(profile=profile, ovs=False,
                    libvirt_cache_dir=libvirt_cache,
                    hook={"reserved_host_ways": 2})
    try:
        lab.start()
    except BaseException:
        finish_lab(lab)
        raise
    return lab


def _nova_xml(lab, tmp_path, specs) -> str:
    """Boot ``specs`` through Nova on the lab's resctrl; Nova's XML."""
    s = lab.hook_settings(host_view=True)
    config = {
        "profile": lab.profile.name,
        "numa_nodes": profiles.get(lab.profile.name).domains,
        "resctrl_root": lab.resctrl_root,
        "rdt_flags": {"reserved_host_ways": 2, "state_path": s.state_path,
                      "libvirt_qemu_run_dir": s.libvirt_qemu_run_dir},
        "no_resctrl_dir": str(tmp_path / "no-resctrl"),
        "extra_specs": specs, "vcpus": 2}
    cfg, out = tmp_path / "cloud.json", tmp_path / "nova.xml"
    cfg.write_text(json.dumps(config))
    res = subprocess.run(
        [sys.executable, "-m", "tests.integration.nova_boot", str(cfg),
         str(out)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    return out.read_text()


def _realize(lab, nova_xml: str, extra_meta: str = "") -> tuple[str, str]:
    """Start Nova's domain on the lab's libvirtd; (name, libvirt's XML)."""
    dom = etree.fromstring(nova_xml.encode())
    name, uuid = dom.findtext("name"), dom.findtext("uuid")
    tune = "".join(etree.tostring(e).decode()
                   for e in dom.findall("cputune/*") if e.tag in KEEP_TUNE)
    meta = "".join(etree.tostring(e).decode()
                   for e in dom.findall("metadata/*") if e.tag in KEEP_META)
    if extra_meta:
        meta = meta.replace("</nova-rdt:instance>",
                            extra_meta + "</nova-rdt:instance>")
    xml = diskless_domain_xml(name, vcpus=int(dom.findtext("vcpu")),
                              domain_type=lab.libvirt.domain_type,
                              cputune=tune, metadata=meta)
    lab.libvirt.define(xml.replace("<name>",
                                   f"<uuid>{uuid}</uuid>\n  <name>", 1))
    lab.libvirt.start_domain(name)
    record = os.path.join(lab.hook_settings(host_view=True).state_path,
                          "domains", f"{uuid}.json")
    hooklab.eventually(lambda: os.path.exists(record))
    return name, lab.libvirt.dumpxml(name)


def _report(title, *parts):
    print(f"\n===== {title} =====")
    for p in parts:
        print(p.strip())


def test_cdp_flavor_gets_code_and_data_masks(tmp_path, libvirt_cache):
    lab = _lab("gold-6252-cdp", libvirt_cache)
    names = []
    try:
        nova_xml = _nova_xml(lab, tmp_path, {"rdt:l3_code_ways": "2",
                                             "rdt:l3_data_ways": "3"})
        dom = etree.fromstring(nova_xml.encode())
        caches = sorted((c.get("id"), c.get("type"), c.get("size"))
                        for c in dom.findall("cputune/cachetune/cache"))
        way = 36608 // 11
        assert caches == [("0", "code", str(2 * way)),
                          ("0", "data", str(3 * way)),
                          ("1", "code", str(2 * way)),
                          ("1", "data", str(3 * way))]
        name, live_xml = _realize(lab, nova_xml)
        names.append(name)
        group = hooklab.group_of(lab, name)
        s = hooklab.schemata(lab, group)
        root = hooklab.schemata(lab)
        for cid in (0, 1):
            assert root.get("L3CODE", cid) == root.get("L3DATA", cid) == 0x3
            assert s.get("L3CODE", cid) == 0x00c      # 2 ways above root
            assert s.get("L3DATA", cid) == 0x01c      # 3 ways above root
        assert "type='code'" in live_xml and "type='data'" in live_xml
        # percent host: MBps metadata is refused, not converted.
        extra = ("<nova-rdt:mb id='0' value='2000' unit='MBps'/>"
                 "<nova-rdt:mb id='1' value='2000' unit='MBps'/>")
        refused_xml = nova_xml.replace(name, name + "-mbps").replace(
            dom.findtext("uuid"), "0b3c5a7e-97a3-4d55-9f63-0d1a1e6c2f11")
        name2, _ = _realize(lab, refused_xml, extra)
        names.append(name2)
        hooklab.eventually(lambda: hooklab.hook_errors(lab))
        errors = hooklab.hook_errors(lab)
        assert len(errors) == 1 and "MBps" in errors[0] and \
            "NOT set" in errors[0] and "percent" in errors[0], errors
        g2 = hooklab.group_of(lab, name2)
        assert set(hooklab.schemata(lab, g2).domains("MB").values()) == {100}
        _report("gold-6252-cdp: Nova's cputune", *(
            etree.tostring(e).decode() for e in dom.findall("cputune/*")
            if e.tag in KEEP_TUNE))
        _report(f"gold-6252-cdp: resctrl {group}/schemata", s.format())
        _report("gold-6252-cdp: percent host refusing MBps", errors[0])
    finally:
        for n in names:
            lab.libvirt.virsh("destroy", n, check=False)
            lab.libvirt.virsh("undefine", n, check=False)
        finish_lab(lab)


def test_mbps_flavor_gets_the_mb_line_from_the_hook(tmp_path, libvirt_cache):
    lab = _lab("gold-6252-mbps", libvirt_cache)
    names = []
    try:
        nova_xml = _nova_xml(lab, tmp_path, {"rdt:l3_cache_ways": "2",
                                             "rdt:mb_mbps": "2000"})
        dom = etree.fromstring(nova_xml.encode())
        # No <memorytune>: libvirt 9.0 takes percent only.
        assert dom.find("cputune/memorytune") is None
        meta = dom.find(f"metadata/{{{naming.METADATA_NS}}}instance")
        assert [(m.get("id"), m.get("value"), m.get("unit")) for m in
                meta.findall(f"{{{naming.METADATA_NS}}}mb")] == \
            [("0", "2000", "MBps"), ("1", "2000", "MBps")]
        name, _live = _realize(lab, nova_xml)
        names.append(name)
        group = hooklab.group_of(lab, name)
        hooklab.eventually(lambda: set(hooklab.schemata(lab, group)
                                       .domains("MB").values()) == {2000})
        s = hooklab.schemata(lab, group)
        for cid in (0, 1):
            assert s.get("L3", cid) == 0x00c
            assert s.get("MB", cid) == 2000
        assert hooklab.hook_errors(lab) == []
        _report("gold-6252-mbps: Nova's metadata",
                etree.tostring(meta).decode())
        _report(f"gold-6252-mbps: resctrl {group}/schemata", s.format())
    finally:
        for n in names:
            lab.libvirt.virsh("destroy", n, check=False)
            lab.libvirt.virsh("undefine", n, check=False)
        finish_lab(lab)
