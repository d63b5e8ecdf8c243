"""devstack/plugin.sh through its phases, twice, in a devstack-like
environment (tests/devstack/functions.sh: iniset and friends as devstack
documents them; a sudo that records and runs)."""

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


@pytest.fixture
def env(tmp_path):
    nova = tmp_path / "nova.conf"
    nova.write_text("[DEFAULT]\ndebug = True\n\n[filter_scheduler]\n"
                    "enabled_filters = ComputeFilter,NUMATopologyFilter\n")
    (tmp_path / "tempest.conf").write_text("[compute]\nimage_ref = x\n")
    return {
        "PATH": f"{REPO}/tests/devstack:{os.path.dirname(sys.executable)}:"
                f"{os.environ['PATH']}",
        "DEST": str(tmp_path), "NOVA_RDT_DIR": REPO,
        "NOVA_CONF": str(nova), "TEMPEST_CONFIG": str(tmp_path /
                                                       "tempest.conf"),
        "NOVA_BIN_DIR": os.path.dirname(sys.executable),
        "NOVA_RDT_HOOKS_DIR": str(tmp_path / "hooks"),
        "NOVA_RDT_HOOK_SETTINGS": str(tmp_path / "nova-rdt" / "hook.json"),
        "NOVA_RDT_STATE_PATH": str(tmp_path / "state"),
        "NOVA_RDT_CLASSES": "low_priority:l3_ways=1,mb=10;bulk:l3_ways=2",
        "ENABLED_SERVICES": "n-api,n-sch,n-cpu,tempest",
        "FAKE_LOG": str(tmp_path / "calls.log"),
        "HOME": str(tmp_path),
    }


def _phase(env, *phase):
    script = ("set -eu\nsource tests/devstack/functions.sh\n"
              "source devstack/settings\n"
              f"source devstack/plugin.sh {' '.join(phase)}\n")
    res = subprocess.run(["bash", "-c", script], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def _stack(env):
    for p in STACK:
        _phase(env, "stack", p)


def _digest(*paths):
    h = hashlib.sha256()
    for p in paths:
        if os.path.exists(p):
            h.update(open(p, "rb").read())
    return h.hexdigest()


def _nova_conf(path):
    return novaconf.load(path)


def test_stack_twice_then_unstack_and_clean(env):
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    _stack(env)
    nova, tempest = env["NOVA_CONF"], env["TEMPEST_CONFIG"]
    hook = os.path.join(env["NOVA_RDT_HOOKS_DIR"], "qemu.d", "nova-rdt")
    conf = _nova_conf(nova)
    assert conf.compute_driver == "rdt.LibvirtRDTDriver"
    assert conf.filter_scheduler.available_filters == [
        "nova.scheduler.filters.all_filters",
        "nova_rdt.scheduler.filter.RDTFilter"]
    assert conf.filter_scheduler.enabled_filters == [
        "ComputeFilter", "NUMATopologyFilter", "RDTFilter"]
    assert conf.rdt.classes == ["low_priority:l3_ways=1,mb=10",
                                "bulk:l3_ways=2"]
    assert conf.rdt.reserved_host_ways == 2 and not conf.rdt.pmd_cos
    assert conf.rdt.state_path == env["NOVA_RDT_STATE_PATH"]
    assert "debug = True" in open(nova).read()      # nothing else lost
    text = open(tempest).read()
    assert "[nova_rdt]" in text and "generator = none" in text
    assert "noisy_class = low_priority" in text
    assert os.access(hook, os.X_OK)
    assert os.path.exists(env["NOVA_RDT_HOOK_SETTINGS"])
    log = open(env["FAKE_LOG"]).read().splitlines()
    assert f"pip_install {REPO}" in log
    assert log.count("restart_service libvirtd") == 1

    before = _digest(nova, tempest, hook, env["NOVA_RDT_HOOK_SETTINGS"])
    _stack(env)
    assert _digest(nova, tempest, hook,
                   env["NOVA_RDT_HOOK_SETTINGS"]) == before
    # The hook was there already: libvirtd is not restarted again.
    assert open(env["FAKE_LOG"]).read().count("restart_service") == 1

    _phase(env, "unstack")
    assert not os.path.exists(hook)
    assert not os.path.exists(env["NOVA_RDT_HOOK_SETTINGS"])
    _phase(env, "unstack")          # idempotent
    _phase(env, "clean")
    conf = _nova_conf(nova)
    assert conf.compute_driver is None
    assert conf.filter_scheduler.available_filters == [
        "nova.scheduler.filters.all_filters"]
    assert conf.filter_scheduler.enabled_filters == [
        "ComputeFilter", "NUMATopologyFilter"]
    assert conf.rdt.classes == []
    assert "pip_uninstall nova-rdt" in open(env["FAKE_LOG"]).read()
    _phase(env, "clean")


def test_ovs_dpdk_hosts_get_the_pmd_cos_and_a_sync(env):
    env = {**env, "OVS_DATAPATH_TYPE": "netdev"}
    _phase(env, "stack", "post-config")
    out = _phase(env, "stack", "extra")
    assert _nova_conf(env["NOVA_CONF"]).rdt.pmd_cos is True
    log = open(env["FAKE_LOG"]).read()
    assert "pmd sync --config-file" in log
    # No resctrl in this test: the sync fails, stack goes on and says so.
    assert "pmd sync failed" in out


def test_shellcheck_is_clean():
    if shutil.which("shellcheck") is None:
        pytest.skip("no shellcheck (apt-get install shellcheck)")
    res = subprocess.run(
        ["shellcheck", "-x", "devstack/plugin.sh", "devstack/settings",
         "libvirt_hooks/qemu", "tests/devstack/functions.sh",
         "tests/devstack/sudo", "tools/setup-host.sh", "tools/run-tests.sh",
         "tools/run-demo.sh", ".ci/run"],
        cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout
