"""``nova-rdt lab`` end to end, in its short mode, checked from the raw
resctrl files it copied before teardown (not from its own printout)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.integration.conftest import lab_skip_reason


def _skip():
    reason = lab_skip_reason(libvirt=True, ovs=True)
    if reason:
        pytest.skip(reason)
    try:
        import nova.tests.functional.libvirt.base  # noqa: F401
    except ImportError as e:
        pytest.skip(f"Nova's functional framework is not importable: {e}")


def _l3(path):
    with open(os.path.join(path, "schemata")) as f:
        for line in f:
            name, _, body = line.strip().partition(":")
            if name == "L3":
                return {int(k): int(v, 16) for k, v in
                        (p.split("=") for p in body.split(";"))}
    raise AssertionError(f"no L3 line in {path}/schemata")


def test_onp_scenario_end_to_end(tmp_path):
    _skip()
    out = tmp_path / "report"
    res = subprocess.run(
        [sys.executable, "-m", "nova_rdt.cmd.main", "lab", "--scenario",
         "onp", "--short", "--out", str(out)],
        capture_output=True, text=True, timeout=900)
    tail = (res.stdout + res.stderr)[-4000:]
    assert res.returncode == 0, tail
    assert "nothing left behind" in res.stdout, tail

    snap = out / "resctrl"
    servers = {s["role"]: s for s in json.loads(
        (out / "servers.json").read_text())}
    groups = {g for g in os.listdir(snap)}

    def group_of(role):
        dom = servers[role]["domain"]
        found = [g for g in groups if f"-{dom}-vcpus_" in g]
        assert len(found) == 1, (role, groups)
        return str(snap / found[0])

    fwd, noisy = _l3(group_of("forwarding")), _l3(group_of("noisy"))
    root, pmd = _l3(snap / "_root"), _l3(snap / "nova-rdt-pmd")
    for cid in root:
        assert fwd[cid] & noisy[cid] == 0              # VMs disjoint
        assert pmd[cid] == fwd[cid] | noisy[cid]       # PMD = union
        assert root[cid] & (pmd[cid] | fwd[cid] | noisy[cid]) == 0
        assert bin(root[cid]).count("1") == 4          # OS ways reserved
        assert bin(fwd[cid]).count("1") == 8
    # The PMD COS holds the PMD core the lab's OVS runs (pmd-cpu-mask 0x2).
    assert (snap / "nova-rdt-pmd" / "cpus_list").read_text().strip() == "1"

    summary = json.loads((out / "summary.json").read_text())
    assert summary["bad_spec"].startswith("HTTP 400") and \
        "rdt:l3_cache_ways" in summary["bad_spec"]
    assert "No valid host" in summary["no_valid_host"]
    assert any("CLOS" in r or "free run" in r
               for r in summary["filter_reasons"]), summary
    html = (out / "report.html").read_text()
    assert 'id="emulation-note"' in html and "no hardware enforces" in html
    assert html.count("data:image/png;base64") == 2
    assert (out / "rfc2544" / "report.json").exists()
