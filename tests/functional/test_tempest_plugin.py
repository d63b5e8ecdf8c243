"""The Tempest plugin, loaded by a real Tempest (installed from PyPI)."""

from __future__ import annotations

import pytest

from tests.functional import tempest_workspace as tw


@pytest.fixture
def workspace(tmp_path):
    return tw.init(tmp_path)


def test_tempest_lists_the_plugin():
    res = tw.tempest("list-plugins")
    assert res.returncode == 0, res.stderr
    assert "nova-rdt" in res.stdout
    assert "tempest_plugin.plugin:NovaRdtTempestPlugin" in res.stdout


def test_the_plugins_tests_load(workspace):
    tw.configure(workspace)
    res, out = tw.run(workspace, "run", "--list-tests", "--regex",
                      "tempest_plugin")
    assert res.returncode == 0, out
    listed = [line for line in res.stdout.splitlines()
              if line.startswith("tempest_plugin.")]
    assert len(listed) == 17, res.stdout
    # The moves: live (3 kinds of server, and the scheduler's choice),
    # cold confirmed and reverted (3 each), tagged multinode.
    moves = [t for t in listed if ".test_rdt_migration." in t]
    assert len(moves) == 10 and all("multinode" in t for t in moves), moves
    assert sum("RdtLiveMigrationTest." in t for t in moves) == 4
    assert sum("_reverted_" in t for t in moves) == 3
    assert any("test_a_pmd_sharer_and_its_neighbour_hold_their_own_ways"
               in t for t in listed)
    assert any("test_forwarding_latency_holds_with_a_busy_neighbour" in t
               for t in listed)
    assert any("test_bad_rdt_specs_get_400_naming_the_key" in t
               for t in listed)
    # Every test has its idempotent id, each its own; negative tests are
    # tagged, in a class of their own.
    ids = [t.split("[id-")[1].split(",")[0].rstrip("]") for t in listed]
    assert len(set(ids)) == len(listed), listed
    negative = [t for t in listed if "negative" in t.split("[")[1]]
    assert negative and all("NegativeTest." in t for t in negative)
