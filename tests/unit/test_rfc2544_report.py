"""RFC 2544 configuration, reports and comparison plots."""

from __future__ import annotations

import csv
import json

import pytest

from nova_rdt.rfc2544 import config
from nova_rdt.rfc2544 import engine
from nova_rdt.rfc2544 import report
from nova_rdt.rfc2544.simdut import SimulatedDut

GEN = {"type": "simulated", "capacity_pps": 1e6, "line_rate_pps": 2e6}


def test_config_defaults_and_overrides():
    cfg, gen = config.parse({"generator": GEN, "frame_sizes": [64, 1518],
                             "loss_tolerance": 0.001, "max_trials": 20})
    assert cfg.frame_sizes == (64, 1518)
    assert cfg.search.loss_tolerance == 0.001 and cfg.search.max_trials == 20
    assert gen["type"] == "simulated"


@pytest.mark.parametrize("doc,key", [
    ({"generator": GEN, "frame_size": [64]}, "frame_size"),
    ({"generator": GEN, "frame_sizes": [32]}, "frame_sizes"),
    ({"generator": GEN, "frame_sizes": "big"}, "frame_sizes"),
    ({"generator": GEN, "resolution": "fine"}, "resolution"),
    ({"generator": GEN, "loss_tolerance": 2}, "loss_tolerance"),
    ({"frame_sizes": [64]}, "generator"),
    ({"generator": GEN, "latency_bins_us": [50, 25]}, "latency_bins_us"),
])
def test_bad_config_names_the_key(doc, key):
    with pytest.raises(config.ConfigError) as e:
        config.parse(doc)
    assert e.value.key == key, e.value


def _run(label, capacity, seed):
    dut = SimulatedDut(capacity, 14_880_952, seed=seed)
    cfg = engine.RunConfig(frame_sizes=(64, 512), label=label,
                           latency_load=0.9)
    events = []
    return engine.run(dut, cfg, events.append), events


def test_report_files_and_a_with_without_comparison(tmp_path):
    off, events = _run("CAT off", 4e6, 1)
    on, _ = _run("CAT on", 5e6, 2)
    paths = report.write(off, str(tmp_path / "off"))
    names = sorted(p.rsplit("/", 1)[1] for p in paths)
    assert names == ["histogram.png", "latency.png", "report.html",
                     "report.json", "results.csv", "trials.csv"]
    doc = json.loads((tmp_path / "off" / "report.json").read_text())
    assert doc["throughput_kind"] == "RFC 2544 throughput (zero loss)"
    assert [f["frame_size"] for f in doc["frames"]] == [64, 512]
    rows = list(csv.DictReader(open(tmp_path / "off" / "results.csv")))
    assert rows[0]["frame_size"] == "64"
    assert float(rows[0]["throughput_pps"]) == pytest.approx(4e6, rel=0.01)
    assert "bin_0_25us" in rows[0] and "bin_over_1000us" in rows[0]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "frame" and "trial" in kinds and kinds[-1] == "result"
    plots = report.compare({"CAT off": report.to_dict(off),
                            "CAT on": report.to_dict(on)},
                           str(tmp_path / "cmp"))
    for p in plots:
        assert open(p, "rb").read(4) == b"\x89PNG"


def test_not_converged_and_generator_limited_are_marked_everywhere(
        tmp_path):
    """Console, results.csv and report.html say it in words next to the
    number; report.json is strict JSON."""
    from nova_rdt.rfc2544 import cli
    from nova_rdt.rfc2544 import search

    # A DUT faster than the generator's real ceiling: generator-limited.
    fast = SimulatedDut(5e6, 14_880_952, gen_ceiling_pps=131_000, seed=1)
    # A budget too small to converge.
    slow = SimulatedDut(4e6, 14_880_952, seed=2)
    cfg = engine.RunConfig(frame_sizes=(64,), label="x", search=(
        search.SearchConfig(max_trials=3)))
    lines = []
    runs = {}
    for name, dut in (("fast", fast), ("slow", slow)):
        runs[name] = engine.run(dut, cfg, lambda ev: lines.append(
            cli.progress_line(ev)))
        report.write(runs[name], str(tmp_path / name), plots=False)
    results = [ln for ln in lines if ln and "pps forwarded" in ln]
    assert "GENERATOR-LIMITED" in results[0]
    assert "capacity is at least 131,000 pps" in results[0]
    assert "NOT CONVERGED (stopped after max_trials=3)" in results[1]
    # The mark sits right after the number, before anything else.
    assert results[1].index("NOT CONVERGED") < results[1].index("sent")
    for name, word in (("fast", "generator-limited"),
                       ("slow", "not-converged")):
        row = next(csv.DictReader(open(tmp_path / name / "results.csv")))
        assert row["status"] == word
        assert row["mark"].split(" ")[0] in ("GENERATOR-LIMITED:", "NOT")
        page = (tmp_path / name / "report.html").read_text()
        assert row["mark"].split(":")[0].split(" (")[0] in page
        json.loads((tmp_path / name / "report.json").read_text(),
                   parse_constant=lambda c: pytest.fail(f"JSON has {c}"))
    fast_row = next(csv.DictReader(open(tmp_path / "fast" /
                                        "results.csv")))
    assert float(fast_row["throughput_pps"]) == pytest.approx(131_000,
                                                              rel=0.01)


def test_report_json_never_holds_nan():
    assert report.finite({"a": [float("nan"), 1.0, float("inf")],
                          "b": {"c": float("-inf")}}) == \
        {"a": [None, 1.0, None], "b": {"c": None}}


def test_goals_in_events_json_csv_and_html(tmp_path):
    """Each goal's conditional throughput and bounds reach the console,
    report.json, goals.csv and report.html; results.csv keeps the ONP
    columns (the first goal's)."""
    from nova_rdt.rfc2544 import cli
    from nova_rdt.rfc2544 import search

    dut = SimulatedDut(1e6, 2e6, seed=4, warmup_s=1.0, warmup_share=0.8)
    goals = (search.SearchGoal(0.0, final_trial_duration=10,
                               duration_sum=20),
             search.SearchGoal(0.005, final_trial_duration=10,
                               duration_sum=20, name="PDR"))
    cfg = engine.RunConfig(frame_sizes=(64,), label="g", goals=goals,
                           search=search.SearchConfig(resolution=0.01))
    events = []
    r = engine.run(dut, cfg, events.append)
    result = next(e for e in events if e["event"] == "result")
    assert [g["goal"] for g in result["goals"]] == ["NDR", "PDR"]
    ndr, pdr = result["goals"]
    assert ndr["lower_bound_pps"] <= pdr["lower_bound_pps"]
    assert result["throughput_pps"] == ndr["conditional_throughput_pps"]
    assert all("duration" in e for e in events if e["event"] == "trial")
    line = cli.progress_line(result)
    assert "goal NDR: conditional throughput" in line and "goal PDR" in line
    paths = report.write(r, str(tmp_path), plots=False)
    assert str(tmp_path / "goals.csv") in paths
    rows = list(csv.DictReader(open(tmp_path / "goals.csv")))
    assert [row["goal"] for row in rows] == ["NDR", "PDR"]
    assert float(rows[1]["lower_bound_pps"]) == pdr["lower_bound_pps"]
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["config"]["goals"][1]["label"] == "PDR"
    assert doc["frames"][0]["goals"][0]["goal"] == "NDR"
    head = next(csv.reader(open(tmp_path / "results.csv")))
    assert head[:3] == ["frame_size", "throughput_pps", "status"]
    assert 'id="goals"' in (tmp_path / "report.html").read_text()


def test_no_goals_no_goals_csv(tmp_path):
    dut = SimulatedDut(1e6, 2e6, seed=1)
    r = engine.run(dut, engine.RunConfig(frame_sizes=(64,)))
    paths = report.write(r, str(tmp_path), plots=False)
    assert not any(p.endswith("goals.csv") for p in paths)
    assert report.to_dict(r)["frames"][0]["goals"] == []
