"""``nova-rdt lab --scenario cloud --computes 2 --short``: two computes,
each with its own libvirtd, resctrl, hook and nova-compute; every move
of a PMD sharer and of a class member between them on real libvirt,
judged on both computes; boots that race with two scheduler workers.

Judged from what the run leaves in its report directory: one run for
the module."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nova_rdt.lab.allinone import cloud as cloud_mod
from tests.integration.conftest import DEFAULT_OUT
from tests.integration.conftest import lab_env

MOVES = ("live migration (--host)", "live migration (scheduled)",
         "live migration refused (full destination)",
         "live migration aborted",
         "cold migration, confirm", "cold migration, revert",
         "shelve, unshelve (--host)", "evacuate (source forced down)",
         "evacuated: source back up, cleaned",
         "resize to a flavor with no rdt: keys")


@pytest.fixture(scope="module")
def two(tmp_path_factory, libvirt_cache):
    reason = cloud_mod.unavailable_reason()
    if reason:
        pytest.skip(reason)
    cwd = tmp_path_factory.mktemp("cloud2")
    res = subprocess.run(
        [sys.executable, "-m", "nova_rdt.cmd.main", "lab", "--scenario",
         "cloud", "--computes", "2", "--short", "--libvirt-cache-dir",
         libvirt_cache],
        capture_output=True, text=True, timeout=2400, cwd=cwd,
        env=lab_env())
    out = cwd / DEFAULT_OUT
    path = out / "summary.json"
    assert path.exists(), (res.stdout + res.stderr)[-4000:]
    return res, json.loads(path.read_text()), out / "cloud"


def test_it_runs_and_leaves_nothing_behind(two):
    res, summary, _ = two
    # What failed first, in full: pytest cuts a long message at 640
    # characters, and the moves' table is in the report.
    failed = "; ".join(f"{m['move']} ({m['kind']}): {m['detail']}"
                       for m in summary.get("moves", []) if m["ok"] is False)
    assert res.returncode == 0, (
        f"{summary.get('error') or res.stderr[-1500:]} | failed moves: "
        f"{failed or 'none'} | race: {summary.get('race')}")
    assert summary["ok"] is True
    assert summary["left_behind"] == []


def test_both_computes_serve(two):
    _, summary, cdir = two
    serve = json.loads((cdir / "serve.json").read_text())
    hosts = [c["host"] for c in serve["computes"]]
    assert len(hosts) == len(set(hosts)) == 2
    assert all(c["exporter"] for c in serve["computes"])
    for name in ("nova-compute", "nova-compute-2", "nova-rdt-exporter",
                 "nova-rdt-exporter-2", "shared-instances"):
        assert name in summary["services"], name
    # Each compute's libvirtd is its own.
    assert len({c["libvirt_uri"] for c in serve["computes"]}) == 2
    # Prometheus scrapes an exporter and a controller per compute, and
    # the dashboard's $host offers both.
    prom = summary["prometheus"]
    assert prom["missing"] == [], prom
    assert sorted(prom["hosts"]) == sorted(hosts)
    assert sorted(prom["targets"].values()) == ["up"] * 4


def test_every_move_of_both_kinds_held_on_both_computes(two):
    _, summary, cdir = two
    rows = summary["moves"]
    for kind in ("sharer", "class member"):
        made = {r["move"] for r in rows if r["kind"] == kind}
        assert set(MOVES) <= made, (kind, sorted(set(MOVES) - made))
    assert [r for r in rows if r["ok"] is False] == []
    assert "resize to more ways" in {r["move"] for r in rows
                                     if r["kind"] == "sharer"}
    # Each move left the instance on the other compute (or, refused or
    # reverted, where it was).
    for r in rows:
        if r["move"].startswith(("live migration (", "cold migration, co",
                                 "shelve", "evacuate")):
            assert r["src"] != r["dst"], r
    table = (cdir / "moves.txt").read_text()
    assert table.splitlines()[0].split()[:3] == ["move", "instance",
                                                 "result"]


def test_the_race_left_no_server_unisolated_or_half_made(two):
    _, summary, _ = two
    race = summary["race"]
    assert race["ok"] is True, race
    assert race["unisolated"] == [] and race["overlapping"] == []
    assert race["active"] <= race["fit"] < race["n"]
    assert race["active"] + race["no_valid_host"] + \
        race["max_retries_exceeded"] == race["n"]


def test_tempest_moved_servers_between_the_computes(two):
    _, summary, _ = two
    t = summary["tempest"]
    assert t["failed"] == 0 and t["passed"] >= 2, t
    assert not t["skips"], t["skips"]
