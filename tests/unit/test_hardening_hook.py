"""Issue 16, the hook: not strict, it always exits 0 with one log line.

``run()`` is the hook's whole process body (the shim execs
``python -m nova_rdt.hook.main``); the last test runs it as that process.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from nova_rdt.hook import main as hook_main

UUID = "6f1a3c86-5b1e-4c55-9a3a-1b2c3d4e5f60"
NS = "http://openstack.org/xmlns/libvirt/nova-rdt/1.0"


@pytest.fixture(autouse=True)
def _restore_logging():
    # run() points the "nova_rdt" logger at the hook's log file, as the
    # hook process does; give the rest of the test run its logger back.
    logger = logging.getLogger("nova_rdt")
    handlers, level = logger.handlers[:], logger.level
    yield
    for h in logger.handlers:
        if h not in handlers:
            h.close()
    logger.handlers[:], logger.level = handlers, level


def _xml(vcpus="0-1", extra="", name="vm"):
    return (f"<domain><name>{name}</name><uuid>{UUID}</uuid><metadata>"
            f"<nova-rdt:instance xmlns:nova-rdt='{NS}' version='1'>"
            f"<nova-rdt:vcpus>{vcpus}</nova-rdt:vcpus>{extra}"
            f"</nova-rdt:instance></metadata></domain>").encode()


def _settings(tmp_path, **kw):
    log = tmp_path / "hook.log"
    data = {"log_file": str(log), "state_path": str(tmp_path / "state"),
            "resctrl_root": str(tmp_path / "no-resctrl"),
            "libvirt_qemu_run_dir": str(tmp_path / "run"), **kw}
    p = tmp_path / "hook.json"
    p.write_text(json.dumps(data))
    return str(p), log


HOSTILE = [
    _xml("²"), _xml("0-" + "9" * 5000), _xml("0-99999999"), _xml("٣"),
    _xml(extra="<nova-rdt:mb id='0' value='" + "9" * 5000 +
         "' unit='MBps'/>"),
    _xml(extra="<nova-rdt:mb id='²' value='1' unit='MBps'/>"),
    _xml(extra="<nova-rdt:class>low\n</nova-rdt:class>"),
    _xml(extra="<nova-rdt:cache id='0' type='both' ways='٤'/>"),
    b"<domain>" * 100000, b"\xff\xfe\x00", b"",
    b"<" + b"a" * 100 + b">",
]


@pytest.mark.parametrize("xml", HOSTILE)
def test_refused_input_exits_0_with_one_line(tmp_path, xml):
    path, log = _settings(tmp_path)
    rc = hook_main.run(["--settings", path, "--", "vm", "started", "begin",
                        "-"], xml)
    assert rc == 0
    lines = log.read_text().splitlines()
    assert len(lines) == 1 and "refused input" in lines[0], lines
    assert "Traceback" not in log.read_text()


@pytest.mark.parametrize("xml", HOSTILE[:4])
def test_strict_refuses_with_exit_1(tmp_path, xml):
    path, log = _settings(tmp_path, hook_strict=True)
    assert hook_main.run(["--settings", path, "vm", "started"], xml) == 1
    assert "refused input" in log.read_text()


@pytest.mark.parametrize("argv", [["x" * 5000, "started"],
                                  ["../etc", "started"], ["vm\n", "started"],
                                  ["vm"], []])
def test_hostile_arguments_are_one_line(tmp_path, argv):
    path, log = _settings(tmp_path)
    assert hook_main.run(["--settings", path, "--", *argv], _xml()) == 0
    text = log.read_text()
    assert text.count("\n") == 1 and "refused input" in text
    assert len(text) < 1500              # the name is cut, not echoed


def test_an_agent_failure_is_one_line_and_exit_0(tmp_path):
    # A managed domain whose QEMU pidfile is missing: the agent fails.
    path, log = _settings(tmp_path)
    assert hook_main.run(["--settings", path, "vm", "started"],
                         _xml()) == 0
    lines = log.read_text().splitlines()
    assert len(lines) == 1 and "isolation not applied" in lines[0], lines


def test_unusable_settings_never_fail_the_start(tmp_path, capfd):
    p = tmp_path / "hook.json"
    p.write_text(json.dumps({"hook_timeout": "nan"}))
    assert hook_main.run(["--settings", str(p), "vm", "started"],
                         _xml()) == 0
    assert "unusable settings" in capfd.readouterr().err


def test_the_hook_process_itself(tmp_path):
    path, log = _settings(tmp_path)
    res = subprocess.run(
        [sys.executable, "-m", "nova_rdt.hook.main", "--settings", path,
         "--", "vm", "started", "begin", "-"], input=_xml("²"),
        capture_output=True, timeout=60,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))))
    assert res.returncode == 0 and res.stderr == b""
    assert "refused input" in log.read_text()
