"""The lab cloud's way of running devstack/plugin.sh
(nova_rdt.lab.allinone.devstack_plugin), on a nova.conf in a temp
directory: what the phases write, and the run_process command lines it
records for the lab to run (the real cloud runs them in
tests/integration/test_lab_cloud.py)."""

from __future__ import annotations

import configparser
import os
import shutil
import sysconfig

import pytest

from nova_rdt.lab.allinone import devstack_plugin
from nova_rdt.lab.allinone import nova as nova_mod


@pytest.fixture
def env(tmp_path):
    if devstack_plugin.unavailable_reason():
        pytest.skip(devstack_plugin.unavailable_reason())
    if shutil.which("sudo") is None:
        pytest.skip("sudo is not installed (apt-get install sudo)")
    paste = os.path.join(sysconfig.get_paths()["data"], "etc", "nova",
                         "api-paste.ini")
    if not os.path.exists(paste):
        pytest.skip(f"Nova's api-paste.ini not at {paste}")
    etc = tmp_path / "etc-nova"
    (etc / "rootwrap.d").mkdir(parents=True)
    shutil.copy(paste, etc / "api-paste.ini")
    (etc / "nova.conf").write_text(
        "[DEFAULT]\ndebug = True\n\n[filter_scheduler]\n"
        f"enabled_filters = {nova_mod.FILTERS}\n\n[database]\n"
        "connection = mysql+pymysql://x\n")
    return {
        "DEST": str(tmp_path), "NOVA_DIR": str(tmp_path / "no-nova"),
        "NOVA_CONF_DIR": str(etc), "NOVA_CONF": str(etc / "nova.conf"),
        "NOVA_CPU_CONF": str(etc / "nova-cpu.conf"),
        "NOVA_API_PASTE_INI": str(etc / "api-paste.ini"),
        "NOVA_BIN_DIR": "/nonexistent",
        "ENABLED_SERVICES": "n-api,n-sch,n-cpu,nova-rdt,"
                            "nova-rdt-exporter",
        "OVS_DATAPATH_TYPE": "netdev",
        "NOVA_RDT_STATE_PATH": str(tmp_path / "state"),
        "NOVA_RDT_RESCTRL_ROOT": str(tmp_path / "resctrl"),
        "NOVA_RDT_CPUINFO": str(tmp_path / "no-cpuinfo"),
        "NOVA_RDT_EXPORTER_PORT": "9999",
        "HOME": str(tmp_path),
    }


def test_post_config_then_devstacks_nova_cpu_conf(env, tmp_path):
    (tmp_path / "no-cpuinfo").write_text("flags\t: fpu\n")
    plugin = devstack_plugin.Plugin(env, str(tmp_path / "plugin.log"))
    rec = plugin.run("post-config", extra=nova_mod.Nova.CPU_CONF_BASH
                     .replace(nova_mod.NOVA_CONF, env["NOVA_CONF"])
                     .replace(nova_mod.NOVA_CPU_CONF, env["NOVA_CPU_CONF"]))
    assert "this CPU has no RDT" in rec.output
    conf = configparser.ConfigParser(strict=False, interpolation=None)
    conf.read(env["NOVA_CPU_CONF"])
    assert conf["DEFAULT"]["compute_driver"] == "rdt.LibvirtRDTDriver"
    assert conf["rdt"]["pmd_cos"] == "True"          # OVS's netdev datapath
    assert conf["filter_scheduler"]["enabled_filters"].endswith(
        ",RDTFilter")
    assert not conf.has_option("database", "connection")
    assert (tmp_path / "etc-nova" / "rootwrap.d" /
            "nova-rdt.filters").exists()
    assert "rdt_flavor_check" in (tmp_path / "etc-nova" /
                                  "api-paste.ini").read_text()
    assert "== stack post-config" in (tmp_path / "plugin.log").read_text()


def test_run_process_lines_are_recorded_for_the_lab(env, tmp_path):
    plugin = devstack_plugin.Plugin(env, str(tmp_path / "plugin.log"))
    # Only the recording: the functions that run_process, not the hook.
    rec = plugin.run("test-config", extra="start_nova_rdt_exporter\n"
                     "restart_service libvirtd\n")
    cmd = rec.processes["nova-rdt-exporter"]
    assert cmd.endswith("exporter --config-file "
                        f"{env['NOVA_CPU_CONF']} --port 9999")
    assert rec.restarted == ["libvirtd"]


def test_a_failing_phase_says_which(env, tmp_path):
    env = {**env, "NOVA_CONF": str(tmp_path / "missing" / "nova.conf")}
    plugin = devstack_plugin.Plugin(env, str(tmp_path / "plugin.log"))
    with pytest.raises(devstack_plugin.PluginError,
                       match="stack post-config failed"):
        plugin.run("post-config")


def test_test_config_writes_the_scenarios_options(env, tmp_path):
    """The lab cloud's NOVA_RDT_TEMPEST_* variables, as devstack's
    local.conf would set them: each set one lands in [nova_rdt] (an
    empty one too: "do not set the extra spec"), an unset one keeps
    Tempest's default, and network names become ids."""
    tempest_conf = tmp_path / "tempest.conf"
    tempest_conf.write_text("[compute]\nimage_ref = x\n")
    ids = ["0b5ed4f2-0c4e-4a71-9a43-7b1c5ad0c0a1",
           "6f3b2f27-4f83-4b7e-8f1e-2d2e1b8e4c52"]
    env = {**env, "ENABLED_SERVICES": env["ENABLED_SERVICES"] + ",tempest",
           "TEMPEST_CONFIG": str(tempest_conf),
           "NOVA_RDT_TEMPEST_GENERATOR": "software",
           "NOVA_RDT_TEMPEST_GENERATOR_CONFIG": "/srv/gen.yaml",
           "NOVA_RDT_TEMPEST_DATAPLANE_NETWORKS": ",".join(ids),
           "NOVA_RDT_TEMPEST_FRAME_SIZES": "64,1024",
           "NOVA_RDT_TEMPEST_CPU_POLICY": "",
           "NOVA_RDT_TEMPEST_RDT": "emulated"}
    env.pop("NOVA_RDT_TEMPEST_TRIAL_DURATION", None)
    devstack_plugin.Plugin(env, str(tmp_path / "plugin.log")).run(
        "test-config")
    conf = configparser.ConfigParser(interpolation=None)
    conf.read(tempest_conf)
    got = dict(conf["nova_rdt"])
    assert got["generator"] == "software"
    assert got["generator_config"] == "/srv/gen.yaml"
    assert got["dataplane_networks"] == ",".join(ids)
    assert got["frame_sizes"] == "64,1024"
    assert got["cpu_policy"] == ""
    assert got["rdt"] == "emulated"
    assert "trial_duration" not in got
    assert "mem_page_size" not in got


def test_a_dataplane_network_name_is_looked_up(env, tmp_path):
    """A name goes to `openstack network show` (here a stand-in on PATH
    that answers for one name only); an id is taken as it is."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "openstack"
    fake.write_text('#!/bin/sh\n[ "$7" = dataplane0 ] || exit 1\n'
                    'echo 11111111-2222-3333-4444-555555555555\n')
    fake.chmod(0o755)
    tempest_conf = tmp_path / "tempest.conf"
    tempest_conf.write_text("")
    other = "6f3b2f27-4f83-4b7e-8f1e-2d2e1b8e4c52"
    env = {**env, "ENABLED_SERVICES": env["ENABLED_SERVICES"] + ",tempest",
           "TEMPEST_CONFIG": str(tempest_conf),
           "PATH": f"{bindir}:{os.environ['PATH']}",
           "NOVA_RDT_TEMPEST_DATAPLANE_NETWORKS": f"dataplane0,{other}"}
    devstack_plugin.Plugin(env, str(tmp_path / "plugin.log")).run(
        "test-config")
    conf = configparser.ConfigParser(interpolation=None)
    conf.read(tempest_conf)
    assert conf["nova_rdt"]["dataplane_networks"] == \
        f"11111111-2222-3333-4444-555555555555,{other}"
    env["NOVA_RDT_TEMPEST_DATAPLANE_NETWORKS"] = "nosuchnet"
    with pytest.raises(devstack_plugin.PluginError, match="no network "
                       "nosuchnet"):
        devstack_plugin.Plugin(env, str(tmp_path / "plugin.log")).run(
            "test-config")
