"""devstack/plugin.sh through its phases, twice, under ``set -o errexit``
in a devstack-like environment: tests/devstack/functions.sh holds stand-ins
with the semantics of devstack's own inc/ini-config (checked below against
what the real functions print), a sudo that records and runs, Nova's real
api-paste.ini, and a Nova "source tree" for the shim."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys

import pytest

from tests import novaconf

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
STACK = ("install", "post-config", "extra", "test-config")
ALL = "nova.scheduler.filters.all_filters"
RDT = "nova_rdt.scheduler.filter.RDTFilter"
NOVA_CONF = ("[DEFAULT]\ndebug = True\n\n[filter_scheduler]\n"
             "enabled_filters = ComputeFilter,NUMATopologyFilter\n")


def _nova_paste_ini():
    """Nova's own api-paste.ini, as devstack copies it to /etc/nova."""
    import sysconfig
    path = os.path.join(sysconfig.get_paths()["data"], "etc", "nova",
                        "api-paste.ini")
    if not os.path.exists(path):
        pytest.skip(f"Nova's api-paste.ini not at {path} (pip install nova)")
    return path


@pytest.fixture
def env(tmp_path):
    nova = tmp_path / "nova.conf"
    nova.write_text(NOVA_CONF)
    (tmp_path / "tempest.conf").write_text("[compute]\nimage_ref = x\n")
    etc = tmp_path / "etc-nova"
    (etc / "rootwrap.d").mkdir(parents=True)
    shutil.copy(_nova_paste_ini(), etc / "api-paste.ini")
    (tmp_path / "nova" / "nova" / "virt").mkdir(parents=True)
    (tmp_path / "cpuinfo").write_text(
        "processor\t: 0\nflags\t\t: fpu vme cat_l3 cdp_l3 rdt_a mba\n")
    (tmp_path / "filesystems").write_text("nodev\tresctrl\n")
    return {
        "PATH": f"{REPO}/tests/devstack:{os.path.dirname(sys.executable)}:"
                f"{os.environ['PATH']}",
        "DEST": str(tmp_path), "NOVA_RDT_DIR": REPO,
        "NOVA_DIR": str(tmp_path / "nova"),
        "NOVA_CONF": str(nova), "NOVA_CONF_DIR": str(etc),
        "NOVA_API_PASTE_INI": str(etc / "api-paste.ini"),
        "TEMPEST_CONFIG": str(tmp_path / "tempest.conf"),
        "NOVA_BIN_DIR": os.path.dirname(sys.executable),
        "NOVA_RDT_HOOKS_DIR": str(tmp_path / "hooks"),
        "NOVA_RDT_HOOK_SETTINGS": str(tmp_path / "nova-rdt" / "hook.json"),
        "NOVA_RDT_STATE_PATH": str(tmp_path / "state"),
        "NOVA_RDT_RESCTRL_ROOT": str(tmp_path / "resctrl"),
        "NOVA_RDT_CPUINFO": str(tmp_path / "cpuinfo"),
        "NOVA_RDT_FILESYSTEMS": str(tmp_path / "filesystems"),
        "NOVA_RDT_CLASSES": "low_priority:l3_ways=1,mb=10;bulk:l3_ways=2",
        "ENABLED_SERVICES": "n-api,n-sch,n-cpu,tempest,nova-rdt-exporter,"
                            "nova-rdt-controller",
        "FAKE_LOG": str(tmp_path / "calls.log"),
        "HOME": str(tmp_path),
    }


def _phase(env, *phase):
    script = ("set -o errexit -o nounset -o pipefail\n"
              "source tests/devstack/functions.sh\n"
              "source devstack/settings\n"
              f"source devstack/plugin.sh {' '.join(phase)}\n")
    res = subprocess.run(["bash", "-c", script], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def _stack(env):
    for p in STACK:
        _phase(env, "stack", p)


def _files(env):
    return [env["NOVA_CONF"], env["TEMPEST_CONFIG"],
            env["NOVA_API_PASTE_INI"],
            os.path.join(env["NOVA_RDT_HOOKS_DIR"], "qemu.d", "nova-rdt"),
            env["NOVA_RDT_HOOK_SETTINGS"],
            os.path.join(env["NOVA_CONF_DIR"], "rootwrap.d",
                         "nova-rdt.filters"),
            os.path.join(env["NOVA_DIR"], "nova", "virt", "rdt",
                         "__init__.py")]


def _digest(paths):
    h = hashlib.sha256()
    for p in paths:
        h.update(p.encode() + b"\0")
        if os.path.exists(p):
            h.update(open(p, "rb").read())
    return h.hexdigest()


def _lines(path, prefix):
    return [line for line in open(path).read().splitlines()
            if line.replace(" ", "").startswith(prefix)]


def _pipeline(path):
    return _pipelines(path)[0]


def _pipelines(path):
    """Every keystone pipeline: /v2.1's, then the legacy /v2's."""
    return [line.split("=", 1)[1].split()
            for line in _lines(path, "keystone=")]


def test_stack_twice_then_unstack_and_clean(env):
    paste_before = open(env["NOVA_API_PASTE_INI"]).read()
    _stack(env)
    nova, tempest = env["NOVA_CONF"], env["TEMPEST_CONFIG"]
    paste = env["NOVA_API_PASTE_INI"]
    hook = os.path.join(env["NOVA_RDT_HOOKS_DIR"], "qemu.d", "nova-rdt")
    shim = os.path.join(env["NOVA_DIR"], "nova", "virt", "rdt",
                        "__init__.py")
    conf = novaconf.load(nova)
    assert conf.compute_driver == "rdt.LibvirtRDTDriver"
    assert conf.filter_scheduler.available_filters == [ALL, RDT]
    assert conf.filter_scheduler.enabled_filters == [
        "ComputeFilter", "NUMATopologyFilter", "RDTFilter"]
    assert conf.rdt.classes == ["low_priority:l3_ways=1,mb=10",
                                "bulk:l3_ways=2"]
    assert conf.rdt.reserved_host_ways == 2 and not conf.rdt.pmd_cos
    assert conf.rdt.state_path == env["NOVA_RDT_STATE_PATH"]
    assert conf.rdt.resctrl_root == env["NOVA_RDT_RESCTRL_ROOT"]
    assert "debug = True" in open(nova).read()      # nothing else lost
    text = open(tempest).read()
    assert "[nova_rdt]" in text and "generator = none" in text
    assert "noisy_class = low_priority" in text
    assert os.access(hook, os.X_OK)
    assert os.path.exists(env["NOVA_RDT_HOOK_SETTINGS"])
    # The shim sits in $NOVA_DIR's nova/virt, the filter in rootwrap.d.
    from nova_rdt.cmd import install_shim
    assert open(shim).read() == install_shim.SHIM
    assert open(_files(env)[5]).read() == open(os.path.join(
        REPO, "etc", "nova", "rootwrap.d", "nova-rdt.filters")).read()
    # Both compute pipelines: the legacy /v2 runs no per-key validation
    # of Nova's own either.
    pipelines = _pipelines(paste)
    assert len(pipelines) == 2
    for pipeline in pipelines:
        i = pipeline.index("keystonecontext")
        assert pipeline[i + 1] == "rdt_flavor_check"
    assert "[filter:rdt_flavor_check]" in open(paste).read()
    log = open(env["FAKE_LOG"]).read().splitlines()
    assert "define_plugin nova-rdt" in log
    assert f"setup_develop {REPO}" in log
    assert not any(line.startswith("pip_install") for line in log)
    assert log.count("restart_service libvirtd") == 1
    assert log.count(f"sudo mount -t resctrl resctrl "
                     f"{env['NOVA_RDT_RESCTRL_ROOT']}") == 1
    assert any(line.startswith("run_process nova-rdt-exporter ")
               and " exporter --config-file " in line for line in log)
    assert any(line.startswith("run_process nova-rdt-controller ")
               and " controller --config-file " in line for line in log)

    before = _digest(_files(env))
    _stack(env)
    assert _digest(_files(env)) == before
    # Twice, and still once each: devstack's iniadd appends, its
    # iniget_multiline answers on one line.
    assert _lines(nova, "available_filters=") == [
        f"available_filters = {ALL}", f"available_filters = {RDT}"]
    assert _lines(nova, "enabled_filters=") == [
        "enabled_filters = ComputeFilter,NUMATopologyFilter,RDTFilter"]
    assert [p.count("rdt_flavor_check") for p in _pipelines(paste)] == \
        [1, 1]
    assert open(paste).read().count("[filter:rdt_flavor_check]") == 1
    log = open(env["FAKE_LOG"]).read()
    # The hook and resctrl were there already: no second restart, mount.
    assert log.count("restart_service") == 1
    assert log.count("sudo mount ") == 1

    _phase(env, "unstack")
    assert not os.path.exists(hook)
    assert not os.path.exists(env["NOVA_RDT_HOOK_SETTINGS"])
    assert "stop_process nova-rdt-exporter" in open(env["FAKE_LOG"]).read()
    assert "stop_process nova-rdt-controller" in open(
        env["FAKE_LOG"]).read()
    _phase(env, "unstack")          # idempotent
    _phase(env, "clean")
    # Nothing of nova-rdt's is left: both files are as they were.
    assert open(nova).read() == NOVA_CONF
    assert open(paste).read() == paste_before
    assert not os.path.exists(_files(env)[5])
    assert not os.path.exists(os.path.dirname(shim))
    assert not os.path.exists(env["NOVA_RDT_STATE_PATH"])
    log = open(env["FAKE_LOG"]).read()
    assert "pip_uninstall nova-rdt" in log
    assert f"sudo umount {env['NOVA_RDT_RESCTRL_ROOT']}" in log
    _phase(env, "clean")
    assert open(nova).read() == NOVA_CONF
    assert open(paste).read() == paste_before


def test_no_rdt_cpu_no_mount_and_no_exporter_unless_enabled(env):
    with open(env["NOVA_RDT_CPUINFO"], "w") as f:
        f.write("processor\t: 0\nflags\t\t: fpu vme\n")
    env = {**env, "ENABLED_SERVICES": "n-api,n-sch,n-cpu"}
    out = _phase(env, "stack", "post-config")
    assert "this CPU has no RDT" in out
    _phase(env, "stack", "extra")
    _phase(env, "unstack")
    log = open(env["FAKE_LOG"]).read()
    assert "sudo mount" not in log
    assert "nova-rdt-exporter" not in log
    assert "nova-rdt-controller" not in log


def test_a_custom_pipeline_without_keystonecontext(env):
    paste = env["NOVA_API_PASTE_INI"]
    with open(paste, "w") as f:
        f.write("[composite:openstack_compute_api_v21]\n"
                "use = call:nova.api.auth:pipeline_factory_v21\n"
                "keystone = cors authtoken myctx osapi_compute_app_v21\n")
    _phase(env, "stack", "post-config")
    _phase(env, "stack", "post-config")
    assert _pipeline(paste) == ["cors", "authtoken", "myctx",
                                "rdt_flavor_check", "osapi_compute_app_v21"]


# What tests/devstack/ini_scenario.sh printed with devstack's own
# inc/ini-config (openstack/devstack 493835a61a99): one line from
# iniget_multiline, iniadd appending duplicates, iniset_multiline
# replacing every value, inserts right after the section header.
DEVSTACK_INI_SCENARIO = """\
iniget: [x available_filters = y z]
iniget_multiline: [x y z]
absent: []
after iniadd twice: [x y z new1 new1]
5:available_filters = x
6:available_filters = y
7:available_filters = z
8:available_filters = new1
9:available_filters = new1
pipeline: [a b keystonecontext rdt app]
has classes
no nope
[DEFAULT]
compute_driver = rdt.Y two&\\1
debug = False

[filter_scheduler]
[composite:api]
keystone = a b keystonecontext rdt app

[rdt]
classes = p
classes = q
classes = r

[newsec]
opt = v1
opt = v2

[sec]
o = v
"""


def _scenario(functions):
    res = subprocess.run(
        ["bash", "tests/devstack/ini_scenario.sh", functions], cwd=REPO,
        capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_the_stand_ins_behave_as_devstacks_ini_config():
    assert _scenario(os.path.join(REPO, "tests", "devstack",
                                  "functions.sh")) == DEVSTACK_INI_SCENARIO


def test_the_recorded_output_is_still_devstacks():
    """With a devstack checkout (NOVA_RDT_DEVSTACK_DIR), its inc/ini-config
    itself must print the recorded output."""
    top = os.environ.get("NOVA_RDT_DEVSTACK_DIR")
    if not top:
        pytest.skip("set NOVA_RDT_DEVSTACK_DIR to a devstack checkout")
    assert _scenario(os.path.join(top, "inc", "ini-config")) == \
        DEVSTACK_INI_SCENARIO


def test_ovs_dpdk_hosts_get_the_pmd_cos_and_a_sync(env):
    env = {**env, "OVS_DATAPATH_TYPE": "netdev"}
    _phase(env, "stack", "post-config")
    out = _phase(env, "stack", "extra")
    assert novaconf.load(env["NOVA_CONF"]).rdt.pmd_cos is True
    log = open(env["FAKE_LOG"]).read()
    assert "pmd sync --config-file" in log
    # No resctrl in this test: the sync fails, stack goes on and says so.
    assert "pmd sync failed" in out


# -- systemd samples for deployments without devstack ----------------------

SYSTEMD = os.path.join(REPO, "etc", "systemd")


def _unit(name):
    import configparser
    p = configparser.ConfigParser(strict=False, interpolation=None)
    p.optionxform = str
    p.read(os.path.join(SYSTEMD, name))
    return p


def test_the_mount_unit_mounts_what_the_plugin_mounts(env):
    unit = _unit("sys-fs-resctrl.mount")
    where = unit["Mount"]["Where"]
    # systemd requires the unit's name to be the escaped mount point.
    if shutil.which("systemd-escape"):
        res = subprocess.run(["systemd-escape", "-p", "--suffix=mount",
                              where], capture_output=True, text=True)
        assert res.stdout.strip() == "sys-fs-resctrl.mount"
    assert unit["Mount"]["Type"] == "resctrl"
    out = subprocess.run(
        ["bash", "-c", "source tests/devstack/functions.sh; "
                       "source devstack/settings; "
                       "echo $NOVA_RDT_RESCTRL_ROOT"],
        cwd=REPO, env={**env, "NOVA_RDT_RESCTRL_ROOT": ""},
        capture_output=True, text=True).stdout.strip()
    assert out == where


def test_the_exporter_unit_runs_a_command_nova_rdt_accepts():
    import shlex

    from nova_rdt.cmd import main as cli
    argv = shlex.split(_unit("nova-rdt-exporter.service")["Service"][
        "ExecStart"])
    assert os.path.basename(argv[0]) == "nova-rdt"
    args = cli.build_parser().parse_args(argv[1:])
    assert args.cmd == "exporter"
    assert args.config_file == ["/etc/nova/nova.conf"]


def test_systemd_accepts_the_units(tmp_path):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("no systemd-analyze")
    paths = []
    for name in ("sys-fs-resctrl.mount", "nova-rdt-exporter.service"):
        text = open(os.path.join(SYSTEMD, name)).read()
        # verify insists that ExecStart exists: point it at this nova-rdt.
        text = text.replace("/usr/bin/nova-rdt", os.path.join(
            os.path.dirname(sys.executable), "nova-rdt"))
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    res = subprocess.run(["systemd-analyze", "verify", "--man=no", *paths],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


def test_test_config_writes_every_computes_exporter_for_the_moves(env):
    # Unset: the option keeps Tempest's default (not written).
    _phase(env, "stack", "test-config")
    assert "exporter_urls" not in open(env["TEMPEST_CONFIG"]).read()
    urls = ("compute1:http://192.0.2.11:9787,"
            "compute2:http://[2001:db8::2]:19787/")
    _phase({**env, "NOVA_RDT_TEMPEST_EXPORTER_URLS": urls},
           "stack", "test-config")
    assert _lines(env["TEMPEST_CONFIG"], "exporter_urls=") == [
        f"exporter_urls = {urls}"]
    # As the plugin's own option reads it: host -> URL, ports kept.
    from oslo_config import cfg

    from tempest_plugin import config as rdt_config
    conf = cfg.ConfigOpts()
    conf.register_opts(rdt_config.RdtGroup, rdt_config.rdt_group)
    conf(args=[], default_config_files=[env["TEMPEST_CONFIG"]])
    assert conf.nova_rdt.exporter_urls == {
        "compute1": "http://192.0.2.11:9787",
        "compute2": "http://[2001:db8::2]:19787/"}
    # The existing variables are written as before.
    assert conf.nova_rdt.generator == "none"
    assert conf.nova_rdt.noisy_class == "low_priority"
