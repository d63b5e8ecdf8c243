"""The parts of ``nova-rdt lab`` that need no lab: its tables, the HTML
report's template, where its logs and warnings go, its option errors,
and what it imports.  Quick, no root."""

from __future__ import annotations

import html as html_mod
import importlib.resources
import logging
import os
import re
import subprocess
import sys
import warnings

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import pytest

from nova_rdt.lab import scenarios
from nova_rdt.lab.demo import cli
from nova_rdt.lab.demo import console
from nova_rdt.lab.demo import report
from nova_rdt.lab.demo import tables
from nova_rdt.lab.demo.stages import rfc2544 as rfc2544_stage

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


# -- tables -----------------------------------------------------------------

def _group(l3: dict[int, int], cpus=(), tasks=0, mb=None) -> dict:
    schemata = {"L3": dict(l3)}
    if mb:
        schemata["MB"] = dict(mb)
    return {"schemata": schemata, "cpus": set(cpus), "tasks": tasks}


@st.composite
def snapshots(draw):
    n_ways = draw(st.integers(4, 20))
    ids = draw(st.lists(st.integers(0, 3), min_size=1, max_size=2,
                        unique=True))
    mask = st.integers(0, (1 << n_ways) - 1)
    names = draw(st.lists(st.sampled_from(
        ["nova-rdt-pmd", "nova-rdt-class-noisy", "qemu-1-instance-1-vcpus_0",
         "qemu-2-instance-2-vcpus_0-1", "other"]), unique=True, max_size=4))
    snap = {"/": _group({i: draw(mask) for i in ids},
                        cpus=draw(st.sets(st.integers(0, 63))))}
    for name in names:
        snap[name] = _group({i: draw(mask) for i in ids},
                            tasks=draw(st.integers(0, 9)))
    return snap, n_ways


@settings(max_examples=60)
@given(snapshots())
def test_way_map_marks_exactly_the_set_bits(data):
    snap, n_ways = data
    text = tables.way_map(snap, {}, n_ways)
    marks = tables.letters(snap)
    rows = iter(text.splitlines())
    for cid in sorted(snap["/"]["schemata"]["L3"]):
        assert next(rows) == f"L3 cache id {cid} (way {n_ways - 1} ... 0):"
        for group, g in snap.items():
            cells, _, label = next(rows).strip().partition("  ")
            assert label.split()[0] == group
            assert len(cells) == n_ways
            mask = g["schemata"]["L3"][cid]
            for pos, c in enumerate(cells):
                way = n_ways - 1 - pos
                assert c == (marks[group] if mask >> way & 1 else ".")
    assert next(rows, None) is None


def test_letters_host_pmd_and_position():
    snap = {"/": {}, "nova-rdt-pmd": {}, "qemu-1-a-vcpus_0": {},
            "qemu-2-b-vcpus_0": {}}
    assert tables.letters(snap) == {"/": "H", "nova-rdt-pmd": "P",
                                    "qemu-1-a-vcpus_0": "c",
                                    "qemu-2-b-vcpus_0": "d"}


@settings(max_examples=60)
@given(snapshots())
def test_cos_rows_one_per_group_with_every_mask(data):
    snap, _ = data
    rows = tables.cos_rows(snap, {"/": "host (OS)"})
    assert [r[0] for r in rows] == list(snap)
    for (group, owner, mask, cpus), g in zip(rows, snap.values()):
        assert owner == ("host (OS)" if group == "/" else "")
        for cid, value in g["schemata"]["L3"].items():
            assert f"{cid}=0x{value:x}" in mask.split(";")
        assert cpus.endswith(f" / {g['tasks']} tasks")


def test_cos_rows_mb_and_long_cpu_lists():
    snap = {"/": _group({0: 0xf}, cpus=range(48), tasks=3, mb={0: 100}),
            "g": _group({0: 0x30}, cpus=[1, 2])}
    rows = tables.cos_rows(snap, {})
    assert rows[0] == ("/", "", "0=0xf MB 100", "48 CPUs / 3 tasks")
    assert rows[1] == ("g", "", "0=0x30", "1,2 / 0 tasks")


@settings(max_examples=40)
@given(st.lists(st.tuples(
    st.text(st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp")),
            max_size=8), st.integers()), max_size=5))
def test_table_aligns_columns(rows):
    text = tables.table(rows, ("name", "value"))
    lines = text.splitlines()
    assert len(lines) == len(rows) + 2
    assert set(lines[1].replace(" ", "")) <= {"-"}
    width = len(lines[1])
    assert all(len(line) == width for line in lines)


def test_group_names_and_roles():
    snap = {"/": {}, "nova-rdt-pmd": {}, "nova-rdt-class-noisy": {},
            "qemu-1-instance-00000001-vcpus_0-1": {}}
    servers = [{"name": "fwd-0", "flavor": "nfv.fwd", "role": "forwarding",
                "domain": "instance-00000001"},
               {"name": "x", "flavor": "f", "role": "noisy",
                "domain": "instance-00000009"}]
    names, roles = tables.group_names(snap, servers)
    assert names == {"/": "host (OS)", "nova-rdt-pmd": "OVS PMD COS",
                     "nova-rdt-class-noisy": "class noisy",
                     "qemu-1-instance-00000001-vcpus_0-1": "fwd-0 (nfv.fwd)"}
    assert roles == {"forwarding": ["qemu-1-instance-00000001-vcpus_0-1"]}


# -- the report -------------------------------------------------------------

LAYOUT = {"caches": [{"resource": "L3", "cache_id": 0, "cells": [
    {"way": 0, "owners": [{"kind": "host", "label": "host"}]},
    {"way": 1, "owners": []},
    {"way": 2, "owners": [{"kind": "pmd", "label": "OVS PMD"},
                          {"kind": "instance", "label": "vm<1>"}]}]}]}

RFC = {"frames": [
    {"frame_size": 64, "throughput": {
        "achieved_pps": 12345.6, "generator_limited": True,
        "status": "generator-limited", "mark": "GENERATOR-LIMITED: so"},
     "latency": {"percentiles_us": {"50": 11.0, "99": 42.0}}},
    {"frame_size": 1518, "throughput": {
        "achieved_pps": None, "generator_limited": False},
     "latency": None}]}


def test_way_cells_highest_way_first_with_owners():
    (row,) = report.way_cells(LAYOUT)
    assert (row["resource"], row["cache_id"]) == ("L3", 0)
    assert row["cells"] == [
        {"way": 2, "css": "pmd shared", "title": "OVS PMD + vm<1>"},
        {"way": 1, "css": "free", "title": "free"},
        {"way": 0, "css": "host", "title": "host"}]


def test_frame_rows():
    rows = report.frame_rows(RFC)
    assert rows[0] == {"frame_size": 64, "achieved_pps": 12345.6,
                       "generator_limited": True,
                       "status": "generator-limited",
                       "mark": "GENERATOR-LIMITED: so", "p50": 11.0,
                       "p99": 42.0}
    assert rows[1]["achieved_pps"] == 0
    assert (rows[1]["p50"], rows[1]["p99"], rows[1]["mark"]) == ("-", "-",
                                                                  "")


def _render(tmp_path, drop=(), **over):
    (tmp_path / "rfc2544").mkdir()
    for name in report.IMAGES:
        (tmp_path / "rfc2544" / name).write_bytes(b"\x89PNG " + name.encode())
    ctx = dict(scenario=scenarios.SCENARIOS["onp"], emulated=True,
               emulation_note="no hardware enforces <them>", layout=LAYOUT,
               way_map="HHHH  / host", cos_table="a  b", seed_table="s",
               relations=[("VMs <disjoint>", True), ("PMD & host", False)],
               bad_spec="HTTP 400: 'lots' <bad>", no_valid_host=None,
               filter_reasons=["r1", "r2"], rfc=RFC,
               metrics="nova_rdt_x 1", log_file="/tmp/x/lab.log")
    ctx.update(over)
    for key in drop:
        del ctx[key]
    path = report.render(str(tmp_path), **ctx)
    return path, open(path, encoding="utf-8").read()


def test_report_renders_every_section_escaped(tmp_path):
    path, html = _render(tmp_path)
    assert path == str(tmp_path / "report.html")
    assert html.startswith("<!DOCTYPE html>")
    assert 'id="emulation-note">no hardware enforces &lt;them&gt;' in html
    assert html.count("data:image/png;base64,") == 2
    assert 'title="OVS PMD + vm&lt;1&gt;">2</td>' in html
    assert "<li class=\"ok\">&#10003; VMs &lt;disjoint&gt;</li>" in html
    assert "<li class=\"bad\">&#10007; PMD &amp; host</li>" in html
    assert "Bad spec: HTTP 400: &#39;lots&#39; &lt;bad&gt;" in html
    assert "No valid host: None" in html
    assert "<pre>r1\nr2</pre>" in html
    assert "<td>12,346</td><td>yes</td><td>11.0</td><td>42.0</td>" in html
    assert '<p class="note">64 B: GENERATOR-LIMITED: so</p>' in html
    assert "<td>1518</td><td>0</td><td>no</td><td>-</td><td>-</td>" in html
    assert "/tmp/x/lab.log" in html
    assert html_mod.unescape(html).count("<script") == 0


def test_report_without_emulation_has_no_note(tmp_path):
    _path, html = _render(tmp_path, emulated=False)
    assert "emulation-note" not in html


def test_report_needs_every_value(tmp_path):
    # StrictUndefined: a value the runner forgot is an error, not a blank.
    import jinja2
    with pytest.raises(jinja2.UndefinedError, match="metrics"):
        _render(tmp_path, drop=("metrics",))


def test_template_is_package_data():
    res = importlib.resources.files("nova_rdt.lab.demo.templates")
    assert res.joinpath(report.TEMPLATE).is_file()


def test_installed_copy_ships_the_template():
    """The console script runs the installed (non-editable) copy: pbr
    must have shipped the template with it."""
    code = ("import importlib.util, os, sys\n"
            "spec = importlib.util.find_spec('nova_rdt')\n"
            "d = os.path.join(os.path.dirname(spec.origin), 'lab', 'demo')\n"
            "if not os.path.exists(os.path.join(d, 'runner.py')):\n"
            "    print('stale'); sys.exit(0)\n"
            "print(os.path.isfile(os.path.join(d, 'templates', "
            "'report.html.j2')))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd="/",
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    if r.stdout.strip() == "stale":
        pytest.skip("the installed nova-rdt predates the lab's demo package;"
                    " run tools/setup-host.sh")
    assert r.stdout.strip() == "True"


# -- the console and the log file -------------------------------------------

def test_console_stage_heading():
    lines = []

    class Out:
        def write(self, s):
            lines.append(s)

        def flush(self):
            pass

    say = console.Console(Out())
    say.stage(3, "Boots")
    say("x")
    assert "".join(lines) == "\n== 3. Boots " + "=" * 55 + "\nx\n"


def test_logs_and_warnings_go_to_the_file_not_the_console(tmp_path, capsys):
    root = logging.getLogger()
    foreign = logging.StreamHandler(sys.stdout)
    root.addHandler(foreign)
    before = list(root.handlers)
    path = tmp_path / "lab.log"
    with console.LogFile(str(path)) as logs:
        assert root.handlers == [logs.handler]
        logging.getLogger("nova.x").debug("a DEBUG record")
        logging.getLogger("matplotlib.font_manager").debug("findfont: score")
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("a deprecation", DeprecationWarning, stacklevel=1)
        # What importing nova.test does (oslo.log on stdout) is undone.
        root.addHandler(foreign)
        logs.claim()
        assert root.handlers == [logs.handler]
        logging.getLogger("oslo").warning("after claim")
    assert root.handlers == before
    root.removeHandler(foreign)
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""
    text = path.read_text()
    assert "DEBUG nova.x: a DEBUG record" in text
    assert "findfont" not in text
    assert "DeprecationWarning: a deprecation" in text
    assert "WARNING oslo: after claim" in text


# -- options ----------------------------------------------------------------

@pytest.mark.parametrize("argv,needle", [
    (["--kernel", "4.19"], "--kernel: kernel version '4.19' is older"),
    (["--kernel", "banana"], "--kernel: kernel version 'banana' is not"),
    (["--kernel", "6.1", "--resctrl", "real"], "--kernel applies to the "
                                               "emulated resctrl only"),
    (["--profile", "nope"], "--profile: unknown profile 'nope'"),
    (["--scenario", "nope"], "--scenario: invalid choice"),
])
def test_bad_options_are_usage_errors(argv, needle, capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        cli.main(argv + ["--out", str(tmp_path / "out")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_rfc2544_progress_lines_carry_the_engine_marks():
    trial = {"event": "trial", "frame_size": 64, "trial": 2,
             "offered_pps": 2e5, "achieved_pps": 1.5e5, "loss_ratio": 0.5,
             "passed": False, "generator_limited": True}
    line = rfc2544_stage.progress_line(trial)
    assert line.startswith("  [64 B] trial 2: offered 200,000 pps, sent "
                           "150,000")
    assert "generator-limited: sent less than offered" in line
    assert "fail" in line
    result = {"event": "result", "frame_size": 64, "throughput_pps": 0.0,
              "achieved_pps": 0.0, "upper_pps": 46678.0,
              "generator_limited": False, "converged": False,
              "note": "stopped after max_trials=6", "trials": 6,
              "avg_latency_us": None}
    line = rfc2544_stage.progress_line(result)
    assert line.startswith("  [64 B] throughput 0 pps")
    assert "NOT CONVERGED (stopped after max_trials=6)" in line
    assert rfc2544_stage.progress_line({"event": "frame"}) is None


# -- imports ----------------------------------------------------------------

def test_lab_cli_imports_no_nova_before_patching():
    """``nova-rdt lab`` must patch eventlet before Nova's test framework
    (and oslo.messaging) load: importing its entry point loads neither,
    and the Nova-free halves of the harness load no Nova either."""
    code = ("import sys\n"
            "import nova_rdt.lab.demo, nova_rdt.lab.cloud.libvirt_caps\n"
            "import nova_rdt.lab.cloud.host_sysfs, nova_rdt.lab\n"
            "bad = sorted(m for m in sys.modules if m == 'nova' or "
            "m.startswith(('nova.', 'oslo_messaging', 'eventlet')))\n"
            "print(bad)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
    # The stages import the harness only through stages.nova / runner.
    src = os.path.join(ROOT, "nova_rdt", "lab", "demo")
    for dirpath, _dirs, files in os.walk(src):
        for name in files:
            if not name.endswith(".py"):
                continue
            text = open(os.path.join(dirpath, name)).read()
            if re.search(r"^(from|import) nova(\.| )", text, re.M):
                assert name in ("flavors.py",), name
