"""Pure parts of the hook: class definitions, PMD plan, hostile input."""

from __future__ import annotations

import os

import pytest

from nova_rdt.allocation import pmdplan
from nova_rdt.allocation import rdtclass
from nova_rdt.hook import hookinput
from nova_rdt.hook import install
from nova_rdt.host.settings import HookSettings
from nova_rdt.resctrl.schemata import Schemata
from nova_rdt.virt import config as rdt_config

UUID = "6f1a3c86-5b1e-4c55-9a3a-1b2c3d4e5f60"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def test_class_definitions():
    assert rdtclass.parse_all(["low_priority:l3_ways=1,mb=10",
                               "bulk:l3_ways=2"]) == {
        "low_priority": rdtclass.RdtClass("low_priority", 1, 10),
        "bulk": rdtclass.RdtClass("bulk", 2, None)}


@pytest.mark.parametrize("text,message", [
    ("low", "expected NAME:l3_ways"),
    ("Low:l3_ways=1", "the name must match"),
    ("low:ways=1", "unknown setting 'ways'"),
    ("low:l3_ways=0", "positive integer"),
    ("low:l3_ways=1,l3_ways=2", "given twice"),
    ("low:mb=10", "l3_ways is required")])
def test_bad_class_definitions_name_the_problem(text, message):
    with pytest.raises(rdtclass.ClassDefinitionError, match=message):
        rdtclass.parse_one(text)


def test_a_class_defined_twice():
    with pytest.raises(rdtclass.ClassDefinitionError, match="twice"):
        rdtclass.parse_all(["a:l3_ways=1", "a:l3_ways=2"])


# The PMD plan's rules (contiguity, coverage, degraded runs) are in
# test_pmdplan.py; the old union no longer holds by design (issue 17).


def test_pmd_plan_sets_mb_to_full():
    root = Schemata.parse("L3:0=f;1=f\nMB:0=100;1=100\n")
    plan = pmdplan.plan({"L3": [0, 1]}, None, root, {}, {"MB": 100})
    assert plan.schemata.get("MB", 1) == 100


def _xml(name="vm", uuid=UUID, meta=True, **kw):
    m = rdt_config.LibvirtConfigGuestMetaNovaRdt()
    m.vcpus = {0, 1}
    m.pmd_share = kw.get("pmd_share", False)
    m.rdt_class = kw.get("rdt_class")
    m.mb = kw.get("mb", [])
    md = f"<metadata>{m.to_xml()}</metadata>" if meta else ""
    return (f"<domain type='kvm'><name>{name}</name><uuid>{uuid}</uuid>"
            f"{md}</domain>").encode()


def test_managed_domain_is_read():
    ev = hookinput.parse(["vm", "started", "begin", "-"],
                         _xml(pmd_share=True, rdt_class="low"))
    assert ev.uuid == UUID and ev.name == "vm"
    assert ev.managed == hookinput.Managed(frozenset({0, 1}), True, "low",
                                           False)


def test_mbps_values_are_read_and_percent_left_to_libvirt():
    ev = hookinput.parse(["vm", "started"], _xml(
        mb=[(0, 2000, "MBps"), (1, 1500, "MBps"), (2, 50, "percent")]))
    assert ev.managed.mb_mbps == ((0, 2000), (1, 1500))


@pytest.mark.parametrize("mid,value", [("0", "0"), ("0", "-5"), ("x", "1"),
                                       ("0", "99999999999"), ("", "10")])
def test_bad_mbps_values_are_refused(mid, value):
    xml = _xml(mb=[(7, 7, "MBps")]).decode().replace(
        'id="7" value="7"', f'id="{mid}" value="{value}"')
    assert f'value="{value}"' in xml
    with pytest.raises(hookinput.HookInputError, match="metadata mb"):
        hookinput.parse(["vm", "started"], xml.encode())


def test_unmanaged_and_unhandled_are_ignored():
    assert hookinput.parse(["vm", "started", "-", "-"],
                           _xml(meta=False)).managed is None
    assert hookinput.parse(["vm", "stopped", "-", "-"], b"junk") is None


@pytest.mark.parametrize("argv,xml,message", [
    (["vm"], b"", "expected NAME OPERATION"),
    (["../x", "started"], _xml("../x"), "unsafe domain name"),
    (["a/b", "started"], _xml("a/b"), "unsafe domain name"),
    ([".." , "started"], _xml(".."), "unsafe domain name"),
    (["x" * 300, "started"], b"", "length 300"),
    (["vm\n", "started"], b"", "unsafe domain name"),
    (["vm", "started"], _xml(uuid="x"), "not a uuid"),
    (["vm", "started"], _xml("other"), "does not match"),
    (["vm", "started"], b"<domain>", "does not parse"),
    (["vm", "started"], b"<network/>", "expected a <domain>"),
    (["vm", "started"], b"x" * (hookinput.MAX_XML_BYTES + 1), "refused")])
def test_hostile_input_is_refused(argv, xml, message):
    with pytest.raises(hookinput.HookInputError, match=message):
        hookinput.parse(argv, xml)


def test_entities_are_never_expanded():
    bomb = (b'<!DOCTYPE d [<!ENTITY a "aaaaaaaaaa">'
            b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
            b"<domain><name>&b;</name></domain>")
    with pytest.raises(hookinput.HookInputError):
        hookinput.parse(["vm", "started"], bomb)


@pytest.mark.parametrize("field,value", [("class", "Bad Class"),
                                         ("pmd-share", "yes")])
def test_bad_metadata_values(field, value):
    xml = _xml(pmd_share=True, rdt_class="low").decode()
    if field == "class":
        xml = xml.replace(">low<", f">{value}<")
    else:
        xml = xml.replace(">true<", f">{value}<", 1)
    with pytest.raises(hookinput.HookInputError, match=field):
        hookinput.parse(["vm", "started"], xml.encode())


def test_repository_shim_is_the_rendered_default():
    with open(os.path.join(REPO, "libvirt_hooks", "qemu")) as f:
        assert f.read() == install.render_shim()


def test_shim_quotes_what_it_bakes_in():
    shim = install.render_shim(python="/opt/my venv/bin/python",
                               settings="/etc/x;reboot.json", strict=True)
    assert "NOVA_RDT_PYTHON='/opt/my venv/bin/python'" in shim
    assert "NOVA_RDT_SETTINGS='/etc/x;reboot.json'" in shim
    assert "NOVA_RDT_STRICT=1" in shim


def test_install_writes_settings_and_shim(tmp_path):
    s = HookSettings(pmd_cos=True, classes=("a:l3_ways=1",))
    path = install.install(s, hooks_dir=str(tmp_path / "hooks"),
                           settings_path=str(tmp_path / "etc" / "hook.json"),
                           python="/usr/bin/python3")
    assert path == str(tmp_path / "hooks" / "qemu.d" / "nova-rdt")
    assert os.access(path, os.X_OK)
    assert HookSettings.load(str(tmp_path / "etc" / "hook.json")) == s
    install.uninstall(str(tmp_path / "hooks"),
                      str(tmp_path / "etc" / "hook.json"))
    assert not os.path.exists(path)


def test_unknown_settings_are_refused(tmp_path):
    p = tmp_path / "s.json"
    p.write_text('{"pmd_cos": true, "typo": 1}')
    with pytest.raises(ValueError, match="typo"):
        HookSettings.load(str(p))
