"""The references made from the code are in the built docs: every
command, option and exit code in the CLI reference (doc/source/cli.rst),
the privsep context's ``[nova_rdt_privileged]`` in the configuration
reference, and the upgrade and seed documents pages, with Sphinx's
warnings as errors."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys

import pytest

from nova_rdt.cmd import reference
from nova_rdt.privsep import opts as privsep_opts

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
DOC = os.path.join(REPO, "doc", "source")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    pytest.importorskip("sphinx")
    out = tmp_path_factory.mktemp("docs")
    res = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b",
         "html", "-d", str(out / "doctrees"), DOC, str(out / "html")],
        capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr

    def text(page: str) -> str:
        raw = (out / "html" / page).read_text()
        return html.unescape(re.sub(r"<[^>]+>", "", raw))
    return text


def test_cli_reference_has_every_command_option_and_code(built):
    text = built("cli.html")
    for leaf in reference.leaves():
        assert f"nova-rdt {leaf.name}" in text, leaf.name
        for action in leaf.options:
            for flag in action.option_strings:
                assert flag in text, (leaf.name, flag)
        for code, meaning in leaf.exit_codes.items():
            first = meaning.split()[0]
            assert f"{code}: {first}" in text, (leaf.name, code)
    assert "nova-rdt status upgrade check --role compute" in text


def test_configuration_reference_has_the_privsep_group(built):
    text = built("configuration.html")
    assert "nova_rdt_privileged" in text
    for _group, options in privsep_opts.list_opts():
        for opt in options:
            assert opt.name in text, opt.name
    # The group is the one the context reads.
    from nova_rdt import privsep
    assert privsep.sys_admin_pctxt.cfg_section == "nova_rdt_privileged"


def test_configuration_reference_is_the_code(built):
    """Every group and option nova-rdt registers (the oslo.config.opts
    entry point the sample generator reads), each option's help as the
    code has it, and the web extra named where TLS needs it."""
    from nova_rdt import conf as conf_mod

    # Sphinx's smart quotes and dashes, undone.
    text = " ".join(built("configuration.html").translate(
        str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"',
                       "\u201d": '"', "\u2013": "--", "\u2014": "---"})
    ).split())
    for group, options in conf_mod.list_opts():
        assert f"[{group.name}]" in text or group.name in text, group.name
        for opt in options:
            assert opt.name in text, (group.name, opt.name)
            words = " ".join(opt.help.split())[:60]
            assert words in text, (group.name, opt.name, words)
    assert text.count("pip install 'nova-rdt[web]'") >= 2


def test_upgrade_and_seed_pages(built):
    upgrade = built("upgrade.html")
    for words in ("Rolling upgrade order", "Schedulers must be upgraded",
                  "nova-rdt hook install",
                  "MIN_LIBVIRT_VERSION", "34.x"):
        assert words in upgrade, words
    seeds = built("seeds.html")
    for words in ("ONP app note", "seed 004", "Table 3-1", "MBA article",
                  "CAT article", "BarbequeRTRM", "seed 003"):
        assert words in seeds, words


def test_the_upgrade_page_states_what_the_code_pins(built):
    """The versions on the upgrade page are the ones the code and the
    requirements hold; a change there fails here until the page follows."""
    import configparser

    from nova_rdt.allocation import hoststate
    from nova_rdt.emulator import versions

    upgrade = " ".join(built("upgrade.html").split())
    setup = configparser.ConfigParser()
    setup.read(os.path.join(REPO, "setup.cfg"))
    assert "nova>=34.0.0,<35" in setup["extras"]["nova"]
    assert setup["metadata"]["python_requires"] == ">=3.11"
    assert "3.11 and later" in upgrade
    with open(os.path.join(REPO, "test-requirements.txt")) as f:
        assert "nova==34.0.0" in f.read()
    kernels = ", ".join(versions.SUPPORTED[:-1]) + " and " + \
        versions.SUPPORTED[-1]
    assert kernels in upgrade, kernels
    # What a compute publishes: the page describes the version this
    # release writes and every version it still reads.
    assert f"Version {hoststate.STATS_VERSION} (this release)" in upgrade, \
        "doc/source/upgrade.rst: describe the stats version this release " \
        "publishes"
    for v in hoststate._READABLE_VERSIONS:
        assert f"Version {v}" in upgrade, v
    driver = pytest.importorskip("nova.virt.libvirt.driver",
                                 reason="needs nova (the nova extra)")
    assert driver.MIN_LIBVIRT_VERSION == (8, 0, 0)
    assert driver.NEXT_MIN_LIBVIRT_VERSION == (10, 0, 0)
    assert driver.MIN_QEMU_VERSION == (6, 2, 0)
    for words in ("8.0.0 and later", "below 10.0.0", "QEMU 6.2.0"):
        assert words in upgrade, words
