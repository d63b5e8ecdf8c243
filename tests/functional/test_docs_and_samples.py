"""The Sphinx docs build with warnings as errors, document every rdt:
key the API accepts, and the generated samples are current."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from nova_rdt.allocation import rdtclass
from nova_rdt.conf import samples
from nova_rdt.host.settings import HookSettings
from tests import novaconf

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
DOC = os.path.join(REPO, "doc", "source")


def test_sphinx_builds_with_warnings_as_errors(tmp_path):
    pytest.importorskip("sphinx")
    res = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b",
         "html", "-d", str(tmp_path / "doctrees"), DOC,
         str(tmp_path / "html")],
        capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    # The configuration reference is generated from the code.
    ref = (tmp_path / "html" / "configuration.html").read_text()
    for opt in ("reserved_host_ways", "pmd_cos", "hook_strict",
                "notify_interval"):
        assert opt in ref, opt


def test_every_rdt_key_the_api_accepts_is_documented():
    from nova_rdt.api import validators

    with open(os.path.join(DOC, "extra-specs.rst")) as f:
        text = f.read()
    documented = set(re.findall(r"``(rdt:[a-z0-9_]+)``", text))
    accepted = {v.name for v in validators.register()
                if "{node}" not in v.name}
    assert accepted and accepted <= documented, accepted - documented
    # The .N suffix for NUMA nodes is documented too.
    assert any("{node}" in v.name for v in validators.register())
    assert ".N" in text


def test_generated_samples_are_current():
    for rel, text in samples.render().items():
        path = os.path.join(REPO, "etc", rel)
        with open(path) as f:
            assert f.read() == text, (
                f"etc/{rel} is stale: run python -m nova_rdt.conf.samples "
                f"etc")


def test_nova_conf_fragment_is_valid_configuration(tmp_path):
    conf = novaconf.load(
        os.path.join(REPO, "etc", "nova.conf.d", "nova-rdt.conf.sample"))
    assert conf.compute_driver == "rdt.LibvirtRDTDriver"
    assert "RDTFilter" in conf.filter_scheduler.enabled_filters
    assert "nova_rdt.scheduler.filter.RDTFilter" in \
        conf.filter_scheduler.available_filters
    assert rdtclass.parse_all(conf.rdt.classes)["low_priority"].mb == 10


def test_hook_settings_sample_loads():
    s = HookSettings.load(os.path.join(REPO, "etc", "libvirt-hook",
                                       "hook.json.sample"))
    assert s == HookSettings()
    with open(os.path.join(REPO, "etc", "libvirt-hook",
                           "hook.json.sample")) as f:
        assert json.load(f)["resctrl_root"] == "/sys/fs/resctrl"
