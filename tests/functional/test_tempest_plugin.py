"""The Tempest plugin, loaded by a real Tempest (installed from PyPI)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

TEMPEST = os.path.join(os.path.dirname(sys.executable), "tempest")

CONF = """[DEFAULT]
log_dir = {ws}/logs
[auth]
use_dynamic_credentials = true
admin_username = admin
admin_password = secret
admin_project_name = admin
admin_domain_name = Default
[identity]
uri_v3 = http://127.0.0.1:9/identity/v3
auth_version = v3
[compute]
image_ref = 00000000-0000-0000-0000-000000000000
flavor_ref = 1
[nova_rdt]
{rdt}
"""


def _tempest(*args, cwd=None, home=None, timeout=180):
    if not os.path.exists(TEMPEST):
        pytest.skip(f"tempest is not installed beside {sys.executable}")
    # tempest init registers workspaces in ~/.tempest: keep that private.
    env = {**os.environ, **({"HOME": str(home)} if home else {})}
    return subprocess.run([TEMPEST, *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env=env)


@pytest.fixture
def workspace(tmp_path):
    res = _tempest("init", str(tmp_path / "ws"), home=tmp_path)
    assert res.returncode == 0, res.stderr
    return tmp_path / "ws"


def _configure(ws, rdt=""):
    (ws / "etc" / "tempest.conf").write_text(CONF.format(ws=ws, rdt=rdt))


def test_tempest_lists_the_plugin():
    res = _tempest("list-plugins")
    assert res.returncode == 0, res.stderr
    assert "nova-rdt" in res.stdout
    assert "tempest_plugin.plugin:NovaRdtTempestPlugin" in res.stdout


def test_the_plugins_tests_load(workspace):
    _configure(workspace)
    res = _tempest("run", "--list-tests", "--regex", "tempest_plugin",
                   cwd=workspace, home=workspace.parent)
    assert res.returncode == 0, res.stdout + res.stderr
    listed = [line for line in res.stdout.splitlines()
              if line.startswith("tempest_plugin.")]
    assert len(listed) == 3, res.stdout
    assert any("test_forwarding_latency_holds_with_a_busy_neighbour" in t
               for t in listed)
    assert any("test_bad_rdt_specs_get_400_naming_the_key" in t
               for t in listed)


@pytest.mark.parametrize("rdt,reason", [
    ("", "no traffic generator configured ([nova_rdt] generator = none)"),
    ("generator = software", "[nova_rdt] generator_config is not set"),
    ("generator = software\ngenerator_config = {cfg}",
     "no RDT-capable compute configured ([nova_rdt] rdt_compute = False)"),
])
def test_scenario_skips_with_its_reason_when_unconfigured(workspace, rdt,
                                                          reason):
    cfg = workspace / "rfc2544.yaml"
    cfg.write_text("generator: {type: software}\n")
    _configure(workspace, rdt.format(cfg=cfg))
    res = _tempest("run", "--regex", "tempest_plugin.tests.scenario",
                   cwd=workspace, home=workspace.parent)
    out = res.stdout + res.stderr
    assert f"SKIPPED: {reason}" in out, out[-3000:]
    assert "Failed: 0" in out and "Skipped: 1" in out, out[-3000:]
