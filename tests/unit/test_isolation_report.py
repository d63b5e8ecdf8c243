"""The isolation scenario's HTML report, rendered from a summary as the
runner writes it: every section, escaped, the figures inline or the
reason they are missing, and marks in words next to the numbers."""

from __future__ import annotations

import html as html_mod
import importlib.resources
import os

import jinja2
import pytest

from nova_rdt.isolation import tables as iso_tables
from nova_rdt.lab.isolation import report

# The smallest valid PNG (a 1x1 pixel): the report only inlines bytes.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d00000000"
    "49454e44ae426082")


def _frame(pps, avg, converged=True, limited=False):
    return {"frame_size": 64, "throughput_pps": pps, "converged": converged,
            "generator_limited": limited, "avg_latency_us": avg,
            "p99_us": None if avg is None else avg * 3,
            "bins": [{"from_us": 0, "to_us": 25, "count": 3},
                     {"from_us": 25, "to_us": None, "count": 1}]}


def _summary(tmp_path, figures=True):
    conds = []
    for rdt, neighbour, frame, share, group in (
            ("off", "idle", _frame(12000, 100.0), 0.0, None),
            ("off", "busy", _frame(7000, 900.0, converged=False), 0.7, None),
            ("on", "idle", _frame(12500, 110.0, limited=True), 0.0, "g<1>"),
            ("on", "busy", _frame(None, None), 0.7, "g<1>")):
        counters = {"rdt_group": group, "mbm_total_bytes_per_s":
                    190.5e6 if group and neighbour == "busy" else
                    (0.0 if group else None),
                    "llc_occupancy_bytes": 2 * 2**20 if group else None}
        conds.append({"rdt": rdt, "neighbour": neighbour, "frames": [frame],
                      "vm_ports": {"rx": 1234567, "tx": 1234560},
                      "neighbour_load": {"cpu_share": share,
                                         "counters": counters}})
    iso = tmp_path / "isolation"
    iso.mkdir()
    paths = []
    if figures:
        for name in ("figure_3_2.png", "figure_3_3.png"):
            (iso / name).write_bytes(PNG)
            paths.append(str(iso / name))
    return {
        "ok": True, "accel": "tcg", "forwarder": "testpmd",
        "rdt": "emulated", "seconds": 12.5, "log_file": "/tmp/x/lab.log",
        "facts": {"accel_reason": "PVM <hang>",
                  "traffic_path": "netns -> VM -> netns",
                  "machine_forces": ["kvm domains run <TCG>"],
                  "libvirt_groups": {"noisy": {
                      "groups": ["g<1>"], "vcpu_tids": [41, 42],
                      "schemata": {"g<1>": {"L3": {"0": "0x30"},
                                            "MB": {"0": 50}}},
                      "tasks": {"g<1>": [41, 42]},
                      "vcpus_in_tasks": True}}},
        "notes": ["no hardware enforces <CAT>"],
        "conditions": conds, "tables": iso_tables.build(conds),
        "verdicts": [
            {"check": "path", "rdt": "off", "neighbour": "idle", "ok": True,
             "binding": True, "detail": "rx <ok>"},
            {"check": "neighbour_load", "rdt": "on", "neighbour": "busy",
             "ok": False, "binding": True, "detail": "too idle"},
            {"check": "avg_ratio", "rdt": "off", "ok": None,
             "binding": False, "detail": "reported"}],
        "figures": paths, "left_behind": []}


def test_every_section_escaped(tmp_path):
    path = report.render(str(tmp_path), _summary(tmp_path))
    assert path == str(tmp_path / "report.html")
    html = open(path, encoding="utf-8").read()
    assert html.startswith("<!DOCTYPE html>")
    # Two checks hold (a non-binding one with no verdict counts), one fails.
    assert "<b>OK</b>:\n2/3 checks hold" in html
    assert "tcg (PVM &lt;hang&gt;)" in html
    assert '<p class="note">no hardware enforces &lt;CAT&gt;</p>' in html
    assert html.count("data:image/png;base64,") == 2
    assert "Figures skipped" not in html
    assert "12,000</td>" in html
    assert "7,000 <b>(not converged)</b>" in html
    assert ("12,500 <b>(generator-limited: the VM&#39;s capacity is at "
            "least this)</b>") in html
    assert "1,234,567 / 1,234,560" in html
    assert "g&lt;1&gt;, MBM 190.5 MB/s, LLC 2.00 MiB" in html
    assert "no resctrl group" in html
    assert "<td>noisy</td><td>g&lt;1&gt;</td><td>L3:0=0x30 MB:0=50 </td>" \
        "<td>41, 42</td><td>41, 42</td><td>yes</td>" in html
    assert "<li>kvm domains run &lt;TCG&gt;</li>" in html
    assert "[reported, not enforced]" in html
    assert "rx &lt;ok&gt;" in html
    assert "Left behind: nothing" in html
    assert html_mod.unescape(html).count("<script") == 0


def test_table_3_2_has_the_delta_and_missing_values_as_dashes(tmp_path):
    html = open(report.render(str(tmp_path), _summary(tmp_path)),
                encoding="utf-8").read()
    table = html[html.index('id="table-3-2"'):html.index('id="table-3-3"')]
    # busy with CAT measured nothing: no delta either.
    assert table.count("<td>-</td>") == 3
    assert "<td>100.0</td>" in table and "<td>900.0</td>" in table


def test_figures_missing_says_why(tmp_path):
    summary = _summary(tmp_path, figures=False)
    summary["figures_skipped"] = "matplotlib <absent>"
    html = open(report.render(str(tmp_path), summary),
                encoding="utf-8").read()
    assert "data:image/png" not in html
    assert "Figures skipped: matplotlib &lt;absent&gt;" in html


def test_a_summary_from_a_failed_run_still_renders(tmp_path):
    html = open(report.render(str(tmp_path), {"ok": False}),
                encoding="utf-8").read()
    assert "<b>FAILED</b>" in html and "Figures skipped" in html


def test_strict_undefined_is_kept(tmp_path):
    with pytest.raises(jinja2.UndefinedError):
        report.demo_report.environment("nova_rdt.lab.isolation") \
            .get_template(report.TEMPLATE).render()


def test_templates_are_package_data():
    res = importlib.resources.files("nova_rdt.lab.isolation.templates")
    assert res.joinpath(report.TEMPLATE).is_file()
    shared = importlib.resources.files("nova_rdt.lab.demo.templates")
    assert shared.joinpath("style.css.j2").is_file()
    assert os.path.basename(report.TEMPLATE) == "isolation.html.j2"
