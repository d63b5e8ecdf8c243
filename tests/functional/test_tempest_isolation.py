"""``tempest run --regex tempest_plugin.tests.scenario`` with a real
Tempest against a tempest.conf: where there is no cloud to run the
isolation scenario on, it skips and says why."""

from __future__ import annotations

import pytest

from tests.functional import tempest_workspace as tw

CONFIGURED = ("generator = software\ngenerator_config = {cfg}\n"
              "rdt_compute = True\n")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    ws = tw.init(tmp_path_factory.mktemp("tempest-home"))
    (ws / "rfc2544.yaml").write_text("generator: {type: software}\n")
    return ws


@pytest.mark.parametrize("rdt,reason", [
    ("", "no traffic generator configured ([nova_rdt] generator = none)"),
    ("generator = software", "[nova_rdt] generator_config is not set"),
    ("generator = software\ngenerator_config = {cfg}",
     "no RDT-capable compute configured ([nova_rdt] rdt_compute = False)"),
    (CONFIGURED, "[nova_rdt] dataplane_networks must list the forwarding "
                 "VM's two dataplane networks (UUIDs); it has 0"),
    (CONFIGURED + "dataplane_networks = 0b5e2d2c-0000-4000-8000-000000000001",
     "[nova_rdt] dataplane_networks must list the forwarding VM's two "
     "dataplane networks (UUIDs); it has 1"),
])
def test_tempest_run_of_the_scenario_skips_with_its_reason(workspace, rdt,
                                                           reason):
    cfg = workspace / "rfc2544.yaml"
    tw.configure(workspace, rdt.format(cfg=cfg))
    _res, out = tw.run(workspace, "run", "--regex",
                       "tempest_plugin.tests.scenario")
    # Tempest exits 1 when nothing passed, skips included: judge the text.
    # skip_checks skips the whole class (setUpClass).
    assert "test_rdt_isolation.RdtIsolationScenarioTest" in out, \
        out[-3000:]
    assert f"SKIPPED: {reason}" in out, out[-3000:]
    assert "Failed: 0" in out and "Skipped: 1" in out, out[-3000:]
