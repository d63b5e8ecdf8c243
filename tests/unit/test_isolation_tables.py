"""Tables 3-2/3-3 analogues, their CSV, the figures and the artefacts."""

import csv
import json
import os

from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
import pytest

from nova_rdt.isolation import artifacts
from nova_rdt.isolation import figures
from nova_rdt.isolation import frames as frames_mod
from nova_rdt.isolation import tables

EDGES = ((0, 25), (25, 50), (50, None))


def cond(rdt, neighbour, avgs, counts=(1, 2, 3)):
    return {"rdt": rdt, "neighbour": neighbour, "vm_ports": None,
            "frames": [{"frame_size": s, "throughput_pps": 1.0,
                        "converged": True, "generator_limited": False,
                        "avg_latency_us": a, "p99_us": a,
                        "bins": [{"from_us": lo, "to_us": hi, "count": c}
                                 for (lo, hi), c in zip(EDGES, counts)]}
                       for s, a in avgs.items()]}


FOUR = [cond("off", "idle", {64: 10.0, 1512: 12.0}),
        cond("off", "busy", {64: 40.0, 1512: 30.0}, (0, 5, 7)),
        cond("on", "idle", {64: 11.0, 1512: 12.0}),
        cond("on", "busy", {64: 20.0, 1512: 36.0}, (1, 1, 1))]


def test_table_3_2_compares_no_cat_with_cat_against_the_idle_reference():
    rows = tables.table_3_2(FOUR)
    assert [r["frame_size"] for r in rows] == [64, 1512]
    r64, r1512 = rows
    assert (r64["idle_no_cat_us"], r64["busy_no_cat_us"], r64["idle_cat_us"],
            r64["busy_cat_us"]) == (10.0, 40.0, 11.0, 20.0)
    assert r64["delta_us"] == 20.0            # no-CAT minus CAT, busy
    assert r64["delta_pct"] == 50.0
    assert r64["busy_vs_idle_no_cat"] == 4.0
    assert r64["busy_vs_idle_cat"] == pytest.approx(20 / 11, abs=1e-3)
    assert r1512["delta_us"] == -6.0          # CAT worse: said, not hidden
    assert r1512["delta_pct"] == -20.0


def test_table_3_2_with_missing_numbers_has_holes_not_errors():
    partial = [cond("off", "idle", {64: None}),
               cond("off", "busy", {64: 5.0}),
               cond("on", "busy", {64: 0.0})]
    (row,) = tables.table_3_2(partial)
    assert row["idle_no_cat_us"] is None and row["idle_cat_us"] is None
    assert row["busy_vs_idle_no_cat"] is None
    assert row["busy_vs_idle_cat"] is None
    assert row["delta_us"] == 5.0 and row["delta_pct"] == 100.0


def test_table_3_3_sums_bins_over_frame_sizes_per_condition():
    rows = tables.table_3_3(FOUR)
    assert [(r["from_us"], r["to_us"]) for r in rows] == [
        (0, 25), (25, 50), (50, None)]
    assert [r["idle_no_cat"] for r in rows] == [2, 4, 6]
    assert [r["busy_no_cat"] for r in rows] == [0, 10, 14]
    assert [r["busy_cat"] for r in rows] == [2, 2, 2]
    two = tables.table_3_3(FOUR[:2])
    assert all(r["idle_cat"] is None for r in two)   # not run, not zero


def test_an_unknown_condition_is_refused():
    with pytest.raises(ValueError, match="rdt='maybe'"):
        tables.build([cond("maybe", "idle", {64: 1.0})])


@hsettings(max_examples=50)
@given(st.lists(st.tuples(st.sampled_from([64, 256, 1024, 1512]),
                          st.floats(0, 1e4), st.floats(0, 1e4),
                          st.floats(0, 1e4), st.floats(0, 1e4)),
                min_size=1, max_size=4, unique_by=lambda t: t[0]))
def test_table_3_2_delta_is_busy_no_cat_minus_busy_cat(rows):
    conds = [cond(rdt, nb, {s: v[i] for s, *v in rows})
             for i, (rdt, nb) in enumerate(tables.CONDITION_NAMES)]
    out = tables.table_3_2(conds)
    assert len(out) == len(rows)
    for r in out:
        assert r["delta_us"] == pytest.approx(
            r["busy_no_cat_us"] - r["busy_cat_us"], abs=2e-3)
    json.dumps(out, allow_nan=False)


def test_csv_round_trip(tmp_path):
    t = tables.build(FOUR)
    p32, p33 = tables.write_csv(t, str(tmp_path))
    with open(p32) as f:
        got = list(csv.DictReader(f))
    assert list(got[0]) == list(tables.TABLE_3_2_COLUMNS)
    assert float(got[0]["delta_us"]) == 20.0
    with open(p33) as f:
        got = list(csv.DictReader(f))
    assert got[-1]["to_us"] == ""            # open-ended last bin
    assert [int(r["busy_no_cat"]) for r in got] == [0, 10, 14]


def test_text_rendering_has_every_number():
    text = tables.render_text(tables.build(FOUR))
    assert "Table 3-2" in text and "Table 3-3" in text
    assert "20.0" in text and ">50" in text and "-6.0" in text


def test_artifacts_and_figures(tmp_path):
    summary = {"rdt": "emulated", "conditions": FOUR,
               "tables": tables.build(FOUR), "x": float("nan")}
    paths = artifacts.write(summary, str(tmp_path))
    names = {os.path.basename(p) for p in paths}
    assert {"summary.json", "table_3_2.csv", "table_3_3.csv",
            "tables.txt"} <= names
    with open(tmp_path / "summary.json") as f:
        doc = json.load(f)
    assert doc["x"] is None and doc["tables"] == summary["tables"]
    if figures._plt() is None:
        pytest.skip("matplotlib is not installed: no figures to check")
    for name in ("figure_3_2.png", "figure_3_3.png"):
        assert name in names
        with open(tmp_path / name, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_frames_from_a_real_rfc2544_report():
    from nova_rdt.rfc2544 import engine
    from nova_rdt.rfc2544 import report
    from nova_rdt.rfc2544 import simdut
    from nova_rdt.rfc2544.search import SearchConfig

    gen = simdut.SimulatedDut(capacity_pps=1e5, line_rate_pps=1e6, seed=1)
    cfg = engine.RunConfig(frame_sizes=(64, 1512), latency_duration=0.1,
                           search=SearchConfig(trial_duration=0.1,
                                               loss_tolerance=0.001))
    doc = report.to_dict(engine.run(gen, cfg))
    out = frames_mod.from_report(doc)
    assert [f["frame_size"] for f in out] == [64, 1512]
    for f, fr in zip(out, doc["frames"]):
        assert f["avg_latency_us"] == fr["latency"]["avg_us"]
        assert f["p99_us"] == fr["latency"]["percentiles_us"]["99"]
        assert f["bins"] == fr["latency"]["bins"]
        assert f["received"] == sum(t["rx"] for t in
                                    fr["throughput"]["trial_log"])
        assert 0 < f["received"] <= f["sent"]
        assert isinstance(f["converged"], bool)
