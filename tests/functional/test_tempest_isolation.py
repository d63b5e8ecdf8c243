"""``tempest run --regex tempest_plugin.tests.scenario`` with a real
Tempest against a tempest.conf: where there is no cloud to run the
isolation scenario on, it skips and says why."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

TEMPEST = os.path.join(os.path.dirname(sys.executable), "tempest")

# Keystone at a port nothing listens on: no cloud.  The scenario must
# skip on its configuration before it ever asks for credentials.
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

CONFIGURED = ("generator = software\ngenerator_config = {cfg}\n"
              "rdt_compute = True\n")


def _tempest(*args, cwd=None, home=None, timeout=240):
    if not os.path.exists(TEMPEST):
        pytest.skip(f"tempest is not installed beside {sys.executable} "
                    f"(pip install nova-rdt[tempest])")
    env = {**os.environ, **({"HOME": str(home)} if home else {})}
    return subprocess.run([TEMPEST, *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    home = tmp_path_factory.mktemp("tempest-home")
    res = _tempest("init", str(home / "ws"), home=home)
    assert res.returncode == 0, res.stderr
    ws = home / "ws"
    (ws / "rfc2544.yaml").write_text("generator: {type: software}\n")
    return ws


@pytest.mark.parametrize("rdt,reason", [
    ("", "no traffic generator configured ([nova_rdt] generator = none)"),
    (CONFIGURED, "[nova_rdt] dataplane_networks must list the forwarding "
                 "VM's two dataplane networks (UUIDs); it has 0"),
    (CONFIGURED + "dataplane_networks = 0b5e2d2c-0000-4000-8000-000000000001",
     "[nova_rdt] dataplane_networks must list the forwarding VM's two "
     "dataplane networks (UUIDs); it has 1"),
])
def test_tempest_run_of_the_scenario_skips_with_its_reason(workspace, rdt,
                                                           reason):
    cfg = workspace / "rfc2544.yaml"
    (workspace / "etc" / "tempest.conf").write_text(
        CONF.format(ws=workspace, rdt=rdt.format(cfg=cfg)))
    res = _tempest("run", "--regex", "tempest_plugin.tests.scenario",
                   cwd=workspace, home=workspace.parent)
    out = res.stdout + res.stderr
    # Tempest exits 1 when nothing passed, skips included: judge the text.
    # skip_checks skips the whole class (setUpClass).
    assert "test_rdt_isolation.RdtIsolationScenarioTest" in out, \
        out[-3000:]
    assert f"SKIPPED: {reason}" in out, out[-3000:]
    assert "Failed: 0" in out and "Skipped: 1" in out, out[-3000:]
