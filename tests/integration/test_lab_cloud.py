"""``nova-rdt lab --scenario cloud --short``: every OpenStack service a
real process, the user's own tools against it, a real ``tempest run``;
judged from what the run leaves in its report directory.  One run for
the module (it costs a few minutes); the pure parts of the checks need
no cloud and come first."""

from __future__ import annotations

import configparser
import json
import re
import subprocess
import sys

import pytest
import yaml

from nova_rdt.lab.allinone import checks
from nova_rdt.lab.allinone import cloud as cloud_mod
from nova_rdt.lab.allinone import serve
from tests.integration.conftest import DEFAULT_OUT
from tests.integration.conftest import lab_env

NOVA = """<domain type="kvm"><name>instance-1</name>
<os><type machine="pc">hvm</type></os>
<cputune><cachetune vcpus="0"><cache id="0" level="3" type="both"
 size="6656" unit="KiB"/></cachetune></cputune></domain>"""


def test_libvirts_additions_are_not_differences():
    libvirt = """<domain type="kvm" id="3"><name>instance-1</name>
    <os><type arch="x86_64" machine="pc-i440fx-7.2">hvm</type></os>
    <cputune><cachetune vcpus="0" id="vcpus_0"><cache id="0" level="3"
     type="both" size="6656" unit="KiB"/></cachetune>
    <memorytune vcpus="0"><node id="0" bandwidth="100"/></memorytune>
    </cputune></domain>"""
    missing, added = checks.compare_domains(NOVA, libvirt)
    assert missing == []
    assert "domain/cputune/cachetune@id=vcpus_0" in added
    assert any(a.startswith("<memorytune") for a in added)


@pytest.mark.parametrize("change, what", [
    ('size="6656"', 'size="3328"'),
    ('<cache id="0"', '<cache id="1"'),
    ('<cachetune vcpus="0"', '<cachetune vcpus="1"'),
    ('machine="pc"', 'machine="q35"'),
])
def test_a_changed_rdt_element_is_a_difference(change, what):
    libvirt = NOVA.replace(change, what).replace(
        'machine="pc"', 'machine="pc-i440fx-7.2"')
    missing, _ = checks.compare_domains(NOVA, libvirt)
    assert missing


def test_novas_logged_xml_is_read_back(tmp_path):
    log = tmp_path / "nova-compute.log"
    uuid = "4a605b37-a23b-46c4-a0bb-db13dbb54b1d"
    log.write_text(
        f"2026 DEBUG nova [req] [instance: {uuid}] End _get_guest_xml "
        f"xml=<domain type=\"kvm\">\n  <name>a</name>\n</domain>\n"
        f" _get_guest_xml /x/driver.py:8366\n"
        f"2026 DEBUG nova [req] [instance: other] End _get_guest_xml "
        f"xml=<domain>\n</domain>\n")
    assert checks.nova_guest_xml(str(log), uuid) == \
        '<domain type="kvm">\n  <name>a</name>\n</domain>'
    assert checks.nova_guest_xml(str(log), "nope") is None


def test_libvirts_tcg_refusal_is_read_from_nova_computes_log(tmp_path):
    """The line nova-compute logged under TCG (libvirt 9.0, this
    machine): the fault the user sees says only that retries ran out."""
    log = tmp_path / "nova-compute.log"
    log.write_text(
        "2026 ERROR nova.compute.manager [instance: x] libvirt.libvirtError:"
        " unsupported configuration: cachetune is only supported for KVM "
        "domains\n")
    assert checks._libvirt_refusal(str(log)) == (
        "unsupported configuration: cachetune is only supported for KVM "
        "domains")
    log.write_text("2026 ERROR nova libvirt.libvirtError: other\n")
    assert checks._libvirt_refusal(str(log)) is None
    assert checks._libvirt_refusal(str(tmp_path / "missing.log")) is None


def test_l3_masks_and_cache_ids():
    assert checks._l3_masks("MB:0=100;1=100\nL3:0=c;1=30\n") == \
        {0: 0xc, 1: 0x30}
    assert checks._cache_ids(NOVA) == [0]


@pytest.fixture(scope="module")
def cloud_run(tmp_path_factory, libvirt_cache):
    reason = cloud_mod.unavailable_reason()
    if reason:
        pytest.skip(reason)
    # From a fresh working directory with the default, relative --out.
    cwd = tmp_path_factory.mktemp("cloud")
    out = cwd / DEFAULT_OUT
    res = subprocess.run(
        [sys.executable, "-m", "nova_rdt.cmd.main", "lab", "--scenario",
         "cloud", "--short", "--libvirt-cache-dir", libvirt_cache],
        capture_output=True, text=True, timeout=1200, cwd=cwd, env=lab_env())
    path = out / "summary.json"
    assert path.exists(), (res.stdout + res.stderr)[-4000:]
    return res, json.loads(path.read_text()), out / "cloud"


def test_runs_its_checks_and_leaves_nothing_behind(cloud_run):
    res, summary, _ = cloud_run
    failed = [c for c in summary.get("checks", []) if c["ok"] is False]
    assert res.returncode == 0, (failed, res.stdout[-4000:],
                                 res.stderr[-2000:])
    assert summary["ok"] is True
    assert summary["left_behind"] == []
    assert "nothing left behind" in res.stdout


def test_every_service_is_a_process_of_its_own(cloud_run):
    _, summary, cdir = cloud_run
    ps = (cdir / "ps.txt").read_text()
    for name in ("keystone uWSGI master", "glance-api uWSGI master",
                 "placement-api uWSGI master", "neutron-api uWSGI master",
                 "nova-api uWSGI master", "nova-conductor",
                 "nova-scheduler", "bin/nova-compute", "mariadbd",
                 "beam.smp", "nova-rdt exporter", "nova-rdt controller",
                 "prometheus"):
        assert name in ps, name
    pids = [s["pid"] for s in summary["services"].values()]
    assert len(pids) == len(set(pids)) >= 14
    # nova-rootwrap let nova-compute start nova-rdt's privsep daemon
    # through the filter the plugin installed.
    assert "privsep_context nova_rdt.privsep.sys_admin_pctxt" in ps


def test_served_files(cloud_run):
    _, summary, cdir = cloud_run
    clouds = yaml.safe_load((cdir / "clouds.yaml").read_text())["clouds"]
    assert set(clouds) == {serve.ADMIN_CLOUD, serve.MEMBER_CLOUD}
    assert clouds[serve.MEMBER_CLOUD]["auth"]["project_name"] == "demo"
    doc = json.loads((cdir / "serve.json").read_text())
    for name in ("keystone", "glance-api", "placement-api", "nova-api",
                 "nova-compute", "nova-rdt-exporter", "prometheus"):
        svc = doc["services"][name]
        assert svc["pid"] > 0 and svc["log"].endswith(f"{name}.log")
    assert doc["services"]["nova-api"]["url"].startswith("http://127.0.0.1:")
    assert doc["image"] == cloud_mod.IMAGE
    assert doc["resctrl_root"]
    tempest_conf = configparser.ConfigParser()
    tempest_conf.read(f"{doc['tempest_workspace']}/etc/tempest.conf")
    assert tempest_conf["identity"]["uri_v3"].endswith("/v3")
    # The plugin's stack test-config wrote its group.
    assert tempest_conf["nova_rdt"]["rdt_compute"] == "True"


def test_nova_conf_is_the_devstack_plugins(cloud_run):
    _, _, cdir = cloud_run
    conf = configparser.ConfigParser(strict=False, interpolation=None)
    conf.read(cdir / "etc-nova" / "nova-cpu.conf")
    assert conf["DEFAULT"]["compute_driver"] == "rdt.LibvirtRDTDriver"
    assert conf["rdt"]["reserved_host_ways"] == "2"
    assert conf["rdt"]["pmd_cos"] == "True"
    assert "RDTFilter" in conf["filter_scheduler"]["enabled_filters"]
    assert "database" not in conf or "connection" not in conf["database"]
    paste = (cdir / "etc-nova" / "api-paste.ini").read_text()
    assert re.search(r"keystone = .*keystonecontext rdt_flavor_check", paste)
    assert (cdir / "etc-nova" / "nova-rdt.filters").exists()


def test_the_exchange_as_a_user_sees_it(cloud_run):
    _, summary, cdir = cloud_run
    text = (cdir / "exchange.txt").read_text()
    assert "$ openstack flavor create rdt.small" in text
    # A bad value: refused naming the key, at the CLI's default
    # microversion (the paste filter) and at 2.86 (the validators).
    facts = summary["facts"]
    for key in ("bad_value_default_microversion", "bad_value_2.86"):
        assert "400" in facts[key] and "rdt:l3_cache_ways" in facts[key]
    assert "$ OS_CLOUD=nova-rdt-member openstack flavor set" in text
    assert "403" in text
    assert re.search(r"\|\s*status\s*\|\s*ACTIVE", text)
    assert "$ openstack server delete --wait rdt-vm" in text
    assert "CUSTOM_RDT_L3_CAT" in text


def test_every_way_is_no_valid_host_for_rdtfilters_reason(cloud_run):
    _, summary, _ = cloud_run
    nvh = summary["facts"]["no_valid_host"]
    assert "No valid host" in nvh["fault"]
    # RDTFilter's reason is in the fault the user reads (and its
    # per-host reasons in nova-scheduler's log).
    assert "RDTFilter:" in nvh["fault"], nvh
    assert nvh["rdtfilter_reason"], nvh


def test_libvirt_holds_novas_domain_and_resctrl_the_ways(cloud_run):
    _, summary, cdir = cloud_run
    by_name = {c["name"]: c for c in summary["checks"]}
    for name in ("Nova wrote <cachetune>",
                 "libvirt's definition (dumpxml --inactive) holds the "
                 "domain XML nova-compute defined",
                 "libvirt holds the domain XML nova-compute defined",
                 "the resctrl group holds the flavor's ways",
                 "the domain's resctrl group is gone"):
        assert by_name[name]["ok"] is True, by_name[name]
    assert summary["facts"]["nova_xml_not_in_libvirt"] == []
    assert summary["facts"]["nova_xml_not_in_libvirt_inactive"] == []
    assert "<cachetune" in (cdir / "domain-libvirt-inactive.xml").read_text()
    nova_xml = (cdir / "domain-nova.xml").read_text()
    assert "<cachetune" in nova_xml
    groups = summary["facts"]["resctrl_groups"]
    assert groups and all(g.startswith("qemu-") for g in groups)


def test_the_guest_runs_and_the_lab_says_what_this_machine_forced(
        cloud_run):
    _, summary, cdir = cloud_run
    machine = summary["cloud"]
    assert machine["virt_type"] in ("kvm", "qemu")
    assert machine["guest_image"] == "linux"
    assert machine["guest_image_reason"]
    if machine["virt_type"] == "kvm":
        # The forced changes are listed, and the cloud applies them.
        assert any(f.startswith("libvirt.cpu_mode = none")
                   for f in machine["forced_by_this_machine"])
        from nova_rdt.lab.guest import boot as guest_boot
        if guest_boot.detect_accel().accel == "tcg":
            # This machine's KVM cannot boot Linux: its QEMU runs TCG
            # under the kvm domain, and the cloud says so.
            assert any("kvm domains run QEMU's TCG" in f
                       for f in machine["forced_by_this_machine"])
        ran = [c for c in summary["checks"]
               if c["name"].startswith("the guest runs")]
        assert ran and ran[0]["ok"] is True, ran
    doc = json.loads((cdir / "serve.json").read_text())
    assert doc["guest_image"] == machine["guest_image"]


def test_tempest_plugin_passes_or_skips_with_reasons(cloud_run):
    _, summary, _ = cloud_run
    t = summary["tempest"]
    assert t["failed"] == 0 and t["status"] == 0, t
    assert t["passed"] >= 5, t
    assert len(t["skips"]) == t["skipped"]
    assert all(s["reason"] for s in t["skips"])


# -- the dataplane and the isolation scenario (issue 37) -------------------

def test_the_dataplane_is_ml2_ovs_on_the_labs_ovs_dpdk(cloud_run):
    """neutron-openvswitch-agent and Neutron's RPC server are processes
    of the cloud with their own logs; the agent reported the netdev
    datapath and the lab's vhost-user directory to Neutron; the two
    dataplane networks exist and lead to the generator's ports."""
    _, _, cdir = cloud_run
    doc = json.loads((cdir / "serve.json").read_text())
    for name in ("neutron-openvswitch-agent", "neutron-rpc-server"):
        svc = doc["services"][name]
        assert svc["pid"] > 0 and svc["log"].endswith(f"{name}.log")
    agent = doc["services"]["neutron-openvswitch-agent"]["agent"]
    conf = agent["configurations"]
    assert conf["datapath_type"] == "netdev"
    assert conf["vhostuser_socket_dir"] == \
        doc["dataplane"]["vhostuser_socket_dir"]
    assert conf["bridge_mappings"] == {"dataplane0": "br-dp0",
                                       "dataplane1": "br-dp1"}
    assert "dpdkvhostuserclient" in conf["ovs_capabilities"]["iface_types"]
    nets = doc["dataplane"]["networks"]
    assert [n["generator_port"] for n in nets.values()] == ["p0", "p1"]
    assert all(n["id"] for n in nets.values())
    ps = (cdir / "ps.txt").read_text()
    assert "neutron-openvswitch-agent" in ps and "neutron-rpc-server" in ps
    tempest_conf = configparser.ConfigParser(interpolation=None)
    tempest_conf.read(f"{doc['tempest_workspace']}/etc/tempest.conf")
    rdt = tempest_conf["nova_rdt"]
    assert rdt["dataplane_networks"] == ",".join(n["id"]
                                                 for n in nets.values())
    assert rdt["generator"] == "software"
    assert rdt["frame_sizes"] == "64,1024"


def test_the_isolation_scenario_ran_through_the_cloud(cloud_run):
    """Tempest's RdtIsolationScenarioTest, through the cloud's dataplane:
    passed, with Tempest's own lines in the run's console, and its
    tables and summary.json linked from the cloud's summary."""
    res, summary, _ = cloud_run
    t = summary["tempest"]
    assert t["failed"] == 0, t
    # One compute: only the moves between two skip, and say why.
    for skip in t["skips"]:
        assert "Migration" in skip["test"] and "compute" in \
            skip["reason"], skip
    passed = [ln for ln in t["lines"] if ln.endswith("... ok")]
    assert any("RdtIsolationScenarioTest" in ln for ln in passed), t["lines"]
    for ln in t["lines"]:
        assert ln in res.stdout
    assert re.search(r"^\s+- Passed: \d+$", res.stdout, re.M)
    iso = summary["isolation"]
    doc = json.loads(open(iso["summary"]).read())
    assert [(c["rdt"], c["neighbour"]) for c in doc["conditions"]] == [
        ("off", "idle"), ("off", "busy"), ("on", "idle"), ("on", "busy")]
    assert {f["frame_size"] for c in doc["conditions"]
            for f in c["frames"]} == {64, 1024}
    assert doc["rdt"] == "emulated"
    # Frames crossed the forwarding VM: its vhost-user counters, as
    # libvirt reads them from OVS, account for what the receiver got.
    # Nova's diagnostics can miss a condition's counters (the scenario
    # then says "not reported" rather than judge); none may contradict
    # the path, and each RDT setting must show frames through the VM.
    paths = [v for v in doc["verdicts"] if v["check"] == "path"]
    assert paths and not [v for v in paths if v["ok"] is False], paths
    for rdt in ("off", "on"):
        assert [v for v in paths if v["rdt"] == rdt and v["ok"] is True], \
            paths
    assert doc["whitebox"] and all(w["problems"] == []
                                   for w in doc["whitebox"])
    assert open(iso["tables"]).read().strip()
