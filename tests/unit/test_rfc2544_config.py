"""The rfc2544 configuration loader and ``nova-rdt rfc2544 run``'s
handling of bad input: one line naming the file, key or option and what
is allowed, exit 2, never a traceback; and a fuzz test of the loader."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import pytest
import yaml

from nova_rdt.rfc2544 import config

GEN = {"type": "simulated", "capacity_pps": 1_000_000,
       "line_rate_pps": 2_000_000}
FAST = {"trial_duration": 0.01, "probe_duration": 0.01,
        "latency_duration": 0.01, "frame_sizes": [64]}
ALIAS_BOMB = "\n".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'] +
    [f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]"
     for p, c in zip("abcdefgh", "bcdefghi")]) + "\n"


def _cli(tmp_path, text=None, *extra):
    argv = [sys.executable, "-m", "nova_rdt.rfc2544.cli", "run",
            "--out", str(tmp_path / "out")]
    if text is not None:
        path = tmp_path / "c.yaml"
        path.write_text(text)
        argv += ["--config", str(path)]
    return subprocess.run(argv + list(extra), capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("doc,key,words", [
    ({"generator": GEN, "trial_duration": float("nan")}, "trial_duration",
     "finite"),
    ({"generator": GEN, "latency_duration": float("inf")},
     "latency_duration", "finite"),
    ({"generator": GEN, "probe_duration": -1}, "probe_duration", "outside"),
    ({"generator": GEN, "latency_bins_us": [25, float("nan")]},
     "latency_bins_us", "finite"),
    ({"generator": GEN, "max_trials": 2.9}, "max_trials", "whole number"),
    ({"generator": GEN, "max_trials": -3}, "max_trials", "outside"),
    ({"generator": GEN, "verify_repeats": -1}, "verify_repeats", "outside"),
    ({"generator": GEN, "frame_sizes": [64.9]}, "frame_sizes",
     "whole number"),
    ({"generator": GEN, "frame_sizes": [2.9]}, "frame_sizes",
     "whole number"),
    ({"generator": GEN, "frame_sizes": [-64]}, "frame_sizes", "64-9216"),
    ({"generator": GEN, "frame_sizes": [True]}, "frame_sizes", "integer"),
    ({"generator": GEN, "frame_sizes": []}, "frame_sizes", "empty"),
    ({"generator": GEN, "frame_sizes": 64}, "frame_sizes", "list"),
    ({"generator": GEN, "resolution": "0.01"}, "resolution", "number"),
    ({"generator": GEN, "loss_tolerance": [1]}, "loss_tolerance",
     "number"),
    ({"generator": GEN, "latency_load": 0}, "latency_load", "outside"),
    ({"generator": GEN, "label": {"a": 1}}, "label", "text"),
    ({"generator": GEN, "frame_size": [64]}, "frame_size", "allowed:"),
    ({"generator": "software"}, "generator", "mapping"),
    ({"generator": {"type": "trex"}}, "generator.type", "one of"),
    ({"generator": {**GEN, "colour": 1}}, "generator.colour", "allowed:"),
    ({"generator": {**GEN, "capacity_pps": float("nan")}},
     "generator.capacity_pps", "finite"),
])
def test_bad_values_are_refused_naming_the_key(doc, key, words):
    with pytest.raises(config.ConfigError) as e:
        config.parse(doc)
    assert e.value.key == key, e.value
    assert words in str(e.value), e.value


def test_alias_bomb_is_refused_fast():
    assert len(ALIAS_BOMB) < 400
    start = time.monotonic()
    with pytest.raises(config.ConfigError) as e:
        config.loads(ALIAS_BOMB, "bomb.yaml")
    assert time.monotonic() - start < 0.5
    assert "aliases" in str(e.value) and e.value.key == "bomb.yaml"


def test_a_few_aliases_are_still_fine():
    doc = config.loads("g: &g {type: simulated, capacity_pps: 10,"
                       " line_rate_pps: 20}\ngenerator: *g\n")
    assert doc["generator"]["type"] == "simulated"


def test_size_and_depth_limits():
    with pytest.raises(config.ConfigError, match="larger than"):
        config.loads("a: 1\n" * (config.MAX_FILE_BYTES // 4))
    with pytest.raises(config.ConfigError, match="deeper"):
        config.loads("a: " + "[" * 100 + "]" * 100)


@pytest.mark.parametrize("text,words", [
    ("frame_sizes: [64\n", "not valid YAML at line"),
    ("- 1\n- 2\n", "top level must be a mapping"),
    (ALIAS_BOMB, "aliases"),
    ("generator: {type: simulated, capacity_pps: 1000000, "
     "line_rate_pps: 2000000}\ntrial_duration: .nan\n",
     "trial_duration: must be a finite number"),
    ("generator: {type: simulated, capacity_pps: 1000000, "
     "line_rate_pps: 2000000}\nframe_sizes: [64.9]\n",
     "frame_sizes: must be a whole number"),
    ("generator: {type: simulated}\n", "generator.capacity_pps is required"),
    ("\x00\x01", "not valid YAML"),
])
def test_cli_one_line_exit_2_no_traceback(tmp_path, text, words):
    res = _cli(tmp_path, text)
    assert res.returncode == 2, res
    assert "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert words in res.stderr and str(tmp_path / "c.yaml") in res.stderr


def test_cli_missing_file_output_file_and_bad_flags(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "nova_rdt.rfc2544.cli", "run", "--config",
         str(tmp_path / "nope.yaml")], capture_output=True, text=True)
    assert res.returncode == 2 and "nope.yaml: no such file" in res.stderr
    (tmp_path / "out").write_text("a file")
    ok = yaml.safe_dump({"generator": GEN, **FAST})
    res = _cli(tmp_path, ok)
    assert res.returncode == 2
    assert "--out" in res.stderr and "not a directory" in res.stderr
    (tmp_path / "out").unlink()
    res = _cli(tmp_path, ok, "--frame-sizes", "64,big")
    assert res.returncode == 2 and "--frame-sizes" in res.stderr
    res = _cli(tmp_path, ok, "--loss-tolerance", "nan")
    assert res.returncode == 2 and "loss_tolerance" in res.stderr
    for res in (_cli(tmp_path, ok),):
        assert "Traceback" not in res.stderr


def test_cli_runs_and_writes_strict_json(tmp_path):
    res = _cli(tmp_path, yaml.safe_dump({"generator": GEN, **FAST}))
    assert res.returncode == 0, res.stderr
    assert "[64 B] throughput" in res.stdout
    doc = json.loads((tmp_path / "out" / "report.json").read_text(),
                     parse_constant=lambda c: pytest.fail(c))
    assert doc["frames"][0]["throughput"]["throughput_pps"] > 0


_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**30, 10**30),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8))
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=12)
_keys = st.sampled_from(sorted(config.SEARCH_KEYS | config.RUN_KEYS)
                        + ["bogus"])


@settings(max_examples=300, deadline=None)
@given(doc=st.dictionaries(_keys, _values, max_size=6),
       gen=st.dictionaries(st.sampled_from(
           ["type", "capacity_pps", "line_rate_pps", "jitter", "seed",
            "tx_interface", "max_rate_pps", "x"]),
           _values, max_size=4))
def test_fuzz_parse_only_ever_raises_config_error(doc, gen):
    """Whatever the document, parse() returns a valid config or raises
    ConfigError naming a key; a returned config is finite."""
    doc = dict(doc)
    if gen:
        doc["generator"] = {"type": "simulated", **gen} \
            if "type" not in gen else gen
    try:
        run, spec = config.parse(doc)
    except config.ConfigError as e:
        assert e.key and str(e).startswith(e.key)
        return
    assert run.frame_sizes and all(64 <= s <= 9216 for s in run.frame_sizes)
    json.dumps({"search": vars(run.search), "lat": run.latency_duration},
               allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200) | st.builds(
    lambda d: yaml.safe_dump(d), st.dictionaries(_keys, _values,
                                                 max_size=5)))
def test_fuzz_yaml_text_only_ever_raises_config_error(text):
    try:
        doc = config.loads(text, "f.yaml")
        config.parse(doc)
    except config.ConfigError as e:
        assert e.key



def test_goals_are_parsed_and_bad_ones_named_before_any_trial():
    from nova_rdt.rfc2544 import config as rcfg
    gen = {"type": "simulated", "capacity_pps": 1e6, "line_rate_pps": 1e7}
    run, _gen = rcfg.parse({"generator": gen, "trial_duration": 30,
                            "goals": [{"loss_ratio": 0},
                                      {"loss_ratio": 0.005, "name": "PDR"}]})
    ndr, pdr = run.goals
    assert (ndr.label, ndr.final_trial_duration, ndr.duration_sum) == (
        "NDR", 30, 60)
    assert pdr.label == "PDR" and pdr.loss_ratio == 0.005
    for goal, key in (({"loss_ratio": 1.0}, "goals[0].loss_ratio"),
                      ({"exceed_ratio": -0.1}, "goals[0].exceed_ratio"),
                      ({"final_trial_duration": 60, "duration_sum": 30},
                       "goals[0].duration_sum"),
                      ({"speed": 1}, "goals[0].'speed'")):
        with pytest.raises(rcfg.ConfigError) as e:
            rcfg.parse({"generator": gen, "goals": [goal]})
        assert e.value.key == key, (goal, e.value)
    with pytest.raises(rcfg.ConfigError):
        rcfg.parse({"generator": gen, "goals": [{}, {}]})


def test_cli_goal_flags(tmp_path):
    ok = yaml.safe_dump({"generator": GEN, **FAST})
    res = _cli(tmp_path, ok, "--goal", "loss_ratio=0.5%")
    assert res.returncode == 2 and "--goal loss_ratio" in res.stderr
    res = _cli(tmp_path, ok, "--goal", "loss_ratio")
    assert res.returncode == 2 and "KEY=VALUE" in res.stderr
    res = _cli(tmp_path, ok, "--goal",
               "loss_ratio=0,final_trial_duration=1,duration_sum=0.5")
    assert res.returncode == 2 and "goals[0].duration_sum" in res.stderr
    res = _cli(tmp_path, ok, "--goal", "loss_ratio=0",
               "--goal", "loss_ratio=0.005,name=PDR",
               "--initial-trial-duration", "0.1")
    assert res.returncode == 0, res.stderr
    assert "goal NDR" in res.stdout and "goal PDR" in res.stdout
    assert (tmp_path / "out" / "goals.csv").exists()


def test_scenario_overrides_from_tempest_options():
    from nova_rdt.rfc2544 import config as rcfg
    over = rcfg.scenario_overrides(
        ["loss_ratio=0,final_trial_duration=60,duration_sum=120",
         "loss_ratio=0.005,name=PDR"], 1.0, final_cap=1.0)
    assert over["initial_trial_duration"] == 1.0
    ndr, pdr = over["goals"]
    assert ndr == {"loss_ratio": 0.0, "final_trial_duration": 1.0,
                   "duration_sum": 2.0}
    assert pdr == {"loss_ratio": 0.005, "name": "PDR"}
    gen = {"type": "simulated", "capacity_pps": 1e6, "line_rate_pps": 1e7}
    run, _gen = rcfg.parse({"generator": gen, "trial_duration": 1.0,
                            **over})
    assert [g.label for g in run.goals] == ["NDR", "PDR"]
    assert rcfg.scenario_overrides([], None) == {}
    with pytest.raises(rcfg.ConfigError) as e:
        rcfg.scenario_overrides(["loss_ratio=lots"])
    assert e.value.key == "search_goals[0] loss_ratio"
