"""``tempest run --regex tempest_plugin.tests.api.test_rdt_migration``
with a real Tempest against a tempest.conf and no cloud: on a cloud of
one compute, or with the move off, or no exporter per compute, both
classes skip and say why; a malformed exporter URL is an error that
names its compute.  (Fewer than two *up* computes, or an up compute
with no URL, needs Nova's service list: see
tests/unit/test_tempest_migration.py.)"""

from __future__ import annotations

import pytest

from tests.functional import tempest_workspace as tw

# Microversion 2.56 must be within the cloud's range, or Tempest skips
# for that first.
MICRO = "max_microversion = latest"
TWO = MICRO + "\nmin_compute_nodes = 2"
URLS = ("exporter_urls = compute1:http://192.0.2.11:9787,"
        "compute2:http://192.0.2.12:9787")
LIVE = "test_rdt_migration.RdtLiveMigrationTest"
COLD = "test_rdt_migration.RdtColdMigrationTest"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    return tw.init(tmp_path_factory.mktemp("tempest-home"))


def _run(ws, rdt, compute, extra=""):
    tw.configure(ws, rdt, compute, extra)
    _res, out = tw.run(ws, "run", "--regex",
                       "tempest_plugin.tests.api.test_rdt_migration")
    return out


@pytest.mark.parametrize("rdt,compute,extra,live,cold", [
    ("", TWO, "",
     "no RDT-capable compute configured ([nova_rdt] rdt_compute = False)",
     None),
    ("rdt_compute = True\n" + URLS, MICRO, "",
     "a move needs two computes: [compute] min_compute_nodes = 1", None),
    ("rdt_compute = True\n" + URLS, TWO,
     "[compute-feature-enabled]\nlive_migration = False\n"
     "cold_migration = False\n",
     "live migration is not available ([compute-feature-enabled] "
     "live_migration = False)",
     "cold migration is not available ([compute-feature-enabled] "
     "cold_migration = False)"),
    ("rdt_compute = True", TWO, "",
     "[nova_rdt] exporter_urls is not set: these checks read the nova-rdt "
     "exporter of both computes of a move", None),
])
def test_both_classes_skip_with_their_reason(workspace, rdt, compute, extra,
                                             live, cold):
    out = _run(workspace, rdt, compute, extra)
    # Tempest exits 1 when nothing passed, skips included: judge the text.
    for cls, reason in ((LIVE, live), (COLD, cold or live)):
        assert f"setUpClass (tempest_plugin.tests.api.{cls}) ... " \
            f"SKIPPED: {reason}" in out, out[-3000:]
    assert "Failed: 0" in out and "Skipped: 2" in out, out[-3000:]


def test_a_malformed_exporter_url_is_an_error_naming_its_compute(
        workspace):
    out = _run(workspace, "rdt_compute = True\nexporter_urls = "
               "compute1:http://192.0.2.11:9787,compute2:192.0.2.12",
               TWO)
    assert "[nova_rdt] exporter_urls: compute2: '192.0.2.12' is no " \
        "http(s)://HOST[:PORT] URL" in out, out[-3000:]
    assert "Skipped: 0" in out, out[-3000:]
