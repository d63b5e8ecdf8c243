"""``nova-rdt lab`` end to end, in its short mode, checked from the raw
resctrl files it copied before teardown (not from its own printout)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.integration.conftest import DEFAULT_OUT
from tests.integration.conftest import lab_env
from tests.integration.conftest import skip_unless_nova_lab


def _l3(path):
    with open(os.path.join(path, "schemata")) as f:
        for line in f:
            name, _, body = line.strip().partition(":")
            if name == "L3":
                return {int(k): int(v, 16) for k, v in
                        (p.split("=") for p in body.split(";"))}
    raise AssertionError(f"no L3 line in {path}/schemata")


def _run(tmp_path, scenario, libvirt_cache, out_arg=None):
    """The lab as a user runs it: from a working directory of its own
    (``tmp_path``, fresh unless a test runs there again), with the
    default (relative) ``--out``, or the relative ``out_arg``."""
    skip_unless_nova_lab()
    cwd = tmp_path
    out = cwd / (out_arg or DEFAULT_OUT)
    res = subprocess.run(
        [sys.executable, "-m", "nova_rdt.cmd.main", "lab", "--scenario",
         scenario, "--short",
         *(("--out", out_arg) if out_arg else ()),
         "--libvirt-cache-dir", libvirt_cache],
        capture_output=True, text=True, timeout=900, cwd=cwd, env=lab_env())
    tail = (res.stdout + res.stderr)[-4000:]
    assert res.returncode == 0, tail
    assert "nothing left behind" in res.stdout, tail
    _assert_readable(res.stdout, out)
    snap = out / "resctrl"
    servers = json.loads((out / "servers.json").read_text())
    groups = set(os.listdir(snap))

    def group_of(server):
        found = [g for g in groups if f"-{server['domain']}-vcpus_" in g]
        assert len(found) == 1, (server, groups)
        return str(snap / found[0])
    return out, snap, servers, group_of


#: What must not reach the console: log records (by level, or by their
#: time stamp), Python's warnings (``...Warning:``) and tracebacks.  (The
#: scheduler's "ERROR: No valid host" is the stage's own line.)
_NOISE = re.compile(r"\b(DEBUG|INFO|WARNING)\b|\w+Warning\b|Traceback"
                    r"|^\d{4}-\d\d-\d\d[ T]\d\d:\d\d")


def _assert_readable(stdout, out):
    """The console holds the stages, progress, tables and the summary;
    the logs and warnings are in the log file the summary names."""
    noise = [line for line in stdout.splitlines() if _NOISE.search(line)]
    assert not noise, "log lines on the lab's stdout:\n" + "\n".join(
        noise[:20])
    for n in range(1, 8):
        assert re.search(rf"^== {n}\. ", stdout, re.M), f"no stage {n}"
    log = out / "lab.log"
    assert f"logs:    {log}" in stdout
    text = log.read_text()
    # Nova's own log of the cloud went there.
    assert "while the cloud ran" in text and "nova." in text


def _mb(path):
    with open(os.path.join(path, "schemata")) as f:
        for line in f:
            name, _, body = line.strip().partition(":")
            if name == "MB":
                return {int(k): int(v) for k, v in
                        (p.split("=") for p in body.split(";"))}
    return {}


def test_onp_scenario_end_to_end(tmp_path, libvirt_cache):
    out, snap, servers, group_of = _run(tmp_path, "onp", libvirt_cache)
    by_role = {s["role"]: s for s in servers}

    def group_of_role(role):
        return group_of(by_role[role])

    fwd = _l3(group_of_role("forwarding"))
    noisy = _l3(group_of_role("noisy"))
    root, pmd = _l3(snap / "_root"), _l3(snap / "nova-rdt-pmd")
    shared_on = []
    for cid in root:
        assert fwd[cid] & noisy[cid] == 0              # VMs disjoint
        assert root[cid] & (fwd[cid] | noisy[cid]) == 0
        assert bin(root[cid]).count("1") == 4          # OS ways reserved
        assert bin(fwd[cid]).count("1") == 8
        if pmd[cid] == root[cid]:
            # No PMD core on this cache id: nothing to share, and the
            # PMD COS holds the host's ways (a mask is never empty).
            assert pmd[cid] & (fwd[cid] | noisy[cid]) == 0
        else:
            assert pmd[cid] == fwd[cid] | noisy[cid]   # PMD = union
            assert root[cid] & pmd[cid] == 0
            shared_on.append(cid)
    # The seed's table holds where the PMD core is.
    assert len(shared_on) == 1, (pmd, root)
    # The PMD COS holds the PMD core the lab's OVS runs (pmd-cpu-mask 0x2).
    assert (snap / "nova-rdt-pmd" / "cpus_list").read_text().strip() == "1"

    summary = json.loads((out / "summary.json").read_text())
    assert summary["bad_spec"].startswith("HTTP 400") and \
        "rdt:l3_cache_ways" in summary["bad_spec"]
    assert "No valid host" in summary["no_valid_host"]
    assert any("CLOS" in r or "free run" in r or "no room for" in r
               for r in summary["filter_reasons"]), summary
    html = (out / "report.html").read_text()
    assert 'id="emulation-note"' in html and "no hardware enforces" in html
    assert html.count("data:image/png;base64") == 2
    assert (out / "rfc2544" / "report.json").exists()
    # What libvirt holds for the forwarding VM: Nova's cachetune, whole
    # ways of 1536 KiB on both cache ids, and nova-rdt's metadata.
    xml = (out / "domains" / f"{by_role['forwarding']['domain']}.xml"
           ).read_text()
    assert "<cachetune vcpus='0-1'" in xml and "nova-rdt:pmd-share>true" in xml


@pytest.fixture(scope="module")
def rerun_dir(tmp_path_factory):
    """One working directory for both scenarios below: the second runs
    again into the report directory the first left behind, as a user's
    second run does."""
    return tmp_path_factory.mktemp("rerun")


@pytest.mark.parametrize("scenario,cls,ways,mb,fwd_ways", [
    ("mba", "low_priority", 1, 10, 4), ("cat", "noisy", 1, None, 2)])
def test_mba_and_cat_scenarios(rerun_dir, libvirt_cache, scenario, cls,
                               ways, mb, fwd_ways):
    # A relative --out of the user's choosing, the same for both.
    _out, snap, servers, group_of = _run(rerun_dir, scenario, libvirt_cache,
                                         out_arg="reports/again")
    klass = snap / f"nova-rdt-class-{cls}"
    root, k = _l3(snap / "_root"), _l3(klass)
    fwd = _l3(group_of(next(s for s in servers
                            if s["role"] == "forwarding")))
    for cid in root:
        assert bin(k[cid]).count("1") == ways
        assert bin(fwd[cid]).count("1") == fwd_ways
        assert k[cid] & fwd[cid] == 0 and (k[cid] | fwd[cid]) & root[cid] == 0
    if mb is not None:
        assert set(_mb(klass).values()) == {mb}
        assert set(_mb(group_of(next(
            s for s in servers if s["role"] == "forwarding"))).values()) \
            == {100}
    # Every neighbour's QEMU threads are in the one class group.
    noisy = [s for s in servers if s["role"] == "noisy"]
    assert len(noisy) == 3
    tasks = (klass / "tasks").read_text().split()
    assert len(tasks) >= 3
