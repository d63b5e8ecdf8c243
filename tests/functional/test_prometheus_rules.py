"""The sample alert rules and Prometheus configuration, checked by Debian's
``promtool``: syntax, the unit tests of every alert, a runbook for each."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PROM = os.path.join(REPO, "etc", "prometheus")
RULES = os.path.join(PROM, "nova-rdt-alerts.yml")
TESTS = os.path.join(PROM, "nova-rdt-alerts_test.yml")
DOC = os.path.join(REPO, "doc", "source", "exporter.rst")


def _promtool(*args, cwd=PROM):
    if shutil.which("promtool") is None:
        pytest.skip("no promtool (apt-get install prometheus)")
    return subprocess.run(["promtool", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def _alerts() -> list[dict]:
    with open(RULES) as f:
        return [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]
                if "alert" in r]


def test_promtool_checks_the_rules_and_the_config():
    res = _promtool("check", "rules", RULES)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(_alerts())} rules found" in res.stdout
    res = _promtool("check", "config", os.path.join(PROM, "prometheus.yml"))
    assert res.returncode == 0, res.stdout + res.stderr


def test_promtool_unit_tests_pass():
    res = _promtool("test", "rules", TESTS)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout + res.stderr


def test_every_alert_has_a_unit_test_that_fires_and_one_that_does_not():
    with open(TESTS) as f:
        doc = yaml.safe_load(f)
    fired, quiet = set(), set()
    for case in doc["tests"]:
        for t in case.get("alert_rule_test", ()):
            (fired if t.get("exp_alerts") else quiet).add(t["alertname"])
    names = {a["alert"] for a in _alerts()}
    assert len(names) >= 7
    assert names <= fired, names - fired
    assert names <= quiet, names - quiet


def test_the_unit_tests_catch_a_changed_rule(tmp_path):
    """The tests hold the rules: change one, and promtool fails."""
    shutil.copy(TESTS, tmp_path)
    with open(RULES) as f:
        text = f.read()
    # Sum code and data ways under CDP, as the old rule did.
    broken = text.replace("max by (host, instance_uuid, instance_name, "
                          "project_id, project_name, cache_id)",
                          "sum by (host, instance_uuid, instance_name, "
                          "project_id, project_name, cache_id)")
    assert broken != text
    (tmp_path / "nova-rdt-alerts.yml").write_text(broken)
    res = _promtool("test", "rules", "nova-rdt-alerts_test.yml",
                    cwd=str(tmp_path))
    assert res.returncode != 0
    assert "NovaRdtInstanceOccupancyFarBelowAllocation" in res.stderr + \
        res.stdout


def test_every_alert_has_a_runbook_section():
    with open(DOC) as f:
        text = f.read()
    # A section title is a line followed by an underline of its length.
    titles = set(re.findall(r"^(\S[^\n]*)\n([-~^\"'=])\2+$", text, re.M))
    titles = {t for t, _u in titles}
    for alert in _alerts():
        name = alert["alert"]
        assert name in titles, f"no runbook section {name} in {DOC}"
        assert alert["annotations"]["runbook"] == \
            f"exporter.html#{name.lower()}"
        body = text.split(name + "\n", 1)[1].split("\n\n", 2)
        assert len(" ".join(body[:2])) > 100, name
