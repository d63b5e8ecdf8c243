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
