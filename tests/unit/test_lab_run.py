"""nova_rdt.lab.run.LabRun: the one run type of every ``nova-rdt lab``
scenario, with a stand-in lab (the real ones are exercised by the
scenarios' integration tests)."""

from __future__ import annotations

import io
import json
import signal

import pytest

from nova_rdt.lab.demo import console
from nova_rdt.lab.run import LabRun


class FakeLab:
    def __init__(self, left=()):
        self.left = list(left)
        self.events = []

    def say_failed(self, out_dir, error):
        self.events.append(("failed", str(error)))

    def stop_and_say(self, note=""):
        self.events.append(("stop", note))
        return self.left


def _say():
    return console.Console(io.StringIO())


def _text(say) -> str:
    return say.stream.getvalue()


def test_success_writes_every_summary_and_says_it(tmp_path):
    say = _say()
    lab = FakeLab()
    with LabRun("x", str(tmp_path), say) as run:
        run.lab = lab
        run.summary_paths.append(str(tmp_path / "x" / "summary.json"))
        run.say_summary = lambda s, summary: s(f"VERDICT {summary['ok']}")
        run.stage("One")
        run.stage("Two")
        run.summary["ok"] = True
    assert lab.events == [("stop", "")]
    for path in (tmp_path / "summary.json", tmp_path / "x" / "summary.json"):
        doc = json.loads(path.read_text())
        assert doc["ok"] is True and doc["left_behind"] == []
        assert doc["scenario"] == "x" and doc["seconds"] >= 0
    text = _text(say)
    assert "== 1. One" in text and "== 2. Two" in text
    assert "== 3. Clean up" in text
    assert text.index("== Summary") < text.index("VERDICT True")


def test_cleanups_run_last_first_then_the_stop(tmp_path):
    """One clean-up failing is said; the others and the stop still run."""
    say = _say()
    lab = FakeLab()
    order = lab.events

    def boom():
        order.append("boom")
        raise RuntimeError("no")

    with LabRun("x", str(tmp_path), say) as run:
        run.lab = lab
        run.cleanup("first", lambda: order.append("first"))
        run.cleanup("boom", boom)
        run.cleanup("last", lambda: order.append("last"))
    assert order == ["last", "boom", "first", ("stop", "")]
    assert "clean-up: boom failed: no" in _text(say)


def test_anything_left_behind_makes_the_run_fail(tmp_path):
    with LabRun("x", str(tmp_path), _say()) as run:
        run.lab = FakeLab(left=["process qemu[1]"])
        run.summary["ok"] = True
    assert run.summary["ok"] is False
    assert run.summary["left_behind"] == ["process qemu[1]"]


def test_a_failure_keeps_the_logs_and_is_recorded(tmp_path):
    lab = FakeLab()
    with pytest.raises(ValueError):
        with LabRun("x", str(tmp_path), _say()) as run:
            run.lab = lab
            run.summary["ok"] = True
            raise ValueError("broken")
    assert lab.events == [("failed", "broken"), ("stop", "")]
    doc = json.loads((tmp_path / "summary.json").read_text())
    # Not the lab's own error: it says what it is.
    assert doc["ok"] is False and doc["error"] == "ValueError: broken"


def test_a_failure_says_what_it_is_unless_it_is_the_labs_own():
    from nova_rdt.lab.procs import LabError
    from nova_rdt.lab.run import describe
    assert describe(LabError("libvirtd did not start")) == \
        "libvirtd did not start"
    # A bare KeyError printed only its key: "nova-rdt lab failed: None".
    assert describe(KeyError(None)) == "KeyError: None"
    assert describe(RuntimeError()) == "RuntimeError"


def test_an_interrupt_stops_everything_and_restores_the_handlers(tmp_path):
    before = signal.getsignal(signal.SIGINT)
    lab = FakeLab()
    with pytest.raises(KeyboardInterrupt):
        with LabRun("x", str(tmp_path), _say()) as run:
            run.lab = lab
            assert signal.getsignal(signal.SIGINT) is not before
            raise KeyboardInterrupt
    assert lab.events == [("stop", "")]        # nothing to explain
    assert signal.getsignal(signal.SIGINT) is before
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert doc["interrupted"] is True and doc["ok"] is False


def test_a_library_that_exits_is_a_failure_not_an_interrupt(tmp_path):
    """Nova's load_compute_driver calls sys.exit(1) when the driver does
    not import: the run says it failed, keeps the logs, and is not taken
    for the user's Ctrl-C."""
    lab = FakeLab()
    with pytest.raises(SystemExit):
        with LabRun("x", str(tmp_path), _say()) as run:
            run.lab = lab
            raise SystemExit(1)
    assert lab.events[0][0] == "failed"
    assert "a component exited with status 1" in lab.events[0][1]
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert doc["ok"] is False and "interrupted" not in doc
    assert "exited with status 1" in doc["error"]


def test_a_stopper_replaces_the_labs_stop(tmp_path):
    say = _say()
    lab = FakeLab()
    with LabRun("x", str(tmp_path), say) as run:
        run.lab = lab
        run.stopper = lambda: ["port 5672"]
        run.stop_note = " (lab directory /tmp/x)"
    assert lab.events == []
    assert run.summary["left_behind"] == ["port 5672"]
    assert "LEFT BEHIND: ['port 5672'] (lab directory /tmp/x)" in _text(say)


def test_finishers_see_the_final_summary(tmp_path):
    seen = {}
    with LabRun("x", str(tmp_path), _say()) as run:
        run.lab = FakeLab()
        run.summary["ok"] = True
        run.finishers.append(lambda s: seen.update(s))
        run.finishers.append(lambda s: s.__setitem__("report", "r.html"))
    assert seen["left_behind"] == [] and "seconds" in seen
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert doc["report"] == "r.html"


def test_a_log_file_the_run_opened_is_closed(tmp_path):
    import logging
    root = logging.getLogger()
    before = list(root.handlers)
    with LabRun("x", str(tmp_path), _say()) as run:
        run.lab = FakeLab()
        assert run.logs.handler in root.handlers
    assert root.handlers == before
    assert (tmp_path / console.LOG_FILE).exists()
