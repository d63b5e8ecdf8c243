"""One ``nova-rdt lab`` run, whatever the scenario: the console, the log
file, Ctrl-C and SIGTERM, the clean-up, ``summary.json`` and the summary.

Every scenario's runner is::

    def run(scenario_name, profile, out_dir, short, resctrl, say=None,
            libvirt_cache_dir=None, kernel=None, logs=None) -> dict:
        with LabRun(scenario_name, out_dir, say, logs) as run:
            run.lab = Lab(...)            # stopped, and its leaks said,
            run.stage("Host")             # at the end, whatever happens
            ...
            run.summary["ok"] = ...
        return run.summary

:class:`LabRun` owns what used to be repeated in each runner:

* SIGINT and SIGTERM raise KeyboardInterrupt in the runner's own flow
  (:mod:`nova_rdt.lab.interrupt`) from ``__enter__`` to the end of the
  clean-up, so that the runner's ``with`` block unwinds and everything
  is stopped;
* a failure keeps the lab's logs under ``<out>/failure-logs`` and says
  where (:meth:`nova_rdt.lab.host.Lab.say_failed`);
* the clean-up is the next numbered stage: the runner's own clean-ups
  (:meth:`LabRun.cleanup`, last registered first; one that fails is
  said, and the others still run), then the lab's stop, whose leftovers
  go into ``left_behind`` (anything left, or any failure, makes the run
  not ok);
* ``summary.json`` (and any other :attr:`LabRun.summary_paths`) is
  written, the runner's :attr:`LabRun.say_summary` prints the summary
  under its heading, and a log file the run opened is closed.
"""

from __future__ import annotations

from collections.abc import Callable
import json
import os
import time

from nova_rdt.lab import interrupt
from nova_rdt.lab.demo import console


def describe(exc: BaseException) -> str:
    """A failure as one line for people: the lab's own errors say what
    happened; anything else also says what it is (a bare KeyError prints
    only its key)."""
    from nova_rdt.lab.procs import LabError
    text = str(exc)
    if isinstance(exc, LabError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class LabRun:
    def __init__(self, scenario: str, out_dir: str,
                 say: console.Console | None = None,
                 logs: console.LogFile | None = None):
        self.say = say or console.Console()
        self.out_dir = out_dir
        os.makedirs(out_dir, exist_ok=True)
        self._own_logs = logs is None
        self.logs = logs or console.LogFile(
            os.path.join(out_dir, console.LOG_FILE))
        self.summary: dict = {
            "scenario": scenario, "out_dir": os.path.abspath(out_dir),
            "log_file": os.path.abspath(self.logs.path), "ok": False}
        #: Where the summary is written (the scenario may add its own).
        self.summary_paths = [os.path.join(out_dir, "summary.json")]
        #: The Host lab (or anything with stop_and_say and say_failed).
        self.lab = None
        #: Stops what the run started and returns what outlived it, in
        #: place of ``lab.stop_and_say`` (a cloud of many processes).
        self.stopper: Callable[[], list[str]] | None = None
        #: Appended to the "everything stopped" line.
        self.stop_note = ""
        #: After the stop, before the summary is written (a report that
        #: reads the summary).
        self.finishers: list[Callable[[dict], None]] = []
        #: Prints the scenario's summary lines (after the heading).
        self.say_summary: Callable[[console.Console, dict], None] = \
            lambda say, summary: None
        self._cleanups: list[tuple[str, Callable[[], object]]] = []
        self._stage = 0
        self._old_signals: dict | None = None
        self._t0 = 0.0

    # -- for the runner ----------------------------------------------------

    def stage(self, title: str) -> int:
        """Say the next numbered stage; returns its number."""
        self._stage = max(self._stage, getattr(self.say, "last_stage", 0)) \
            + 1
        self.say.stage(self._stage, title)
        return self._stage

    def cleanup(self, what: str, fn: Callable[[], object]) -> None:
        """Run ``fn`` at the clean-up, before the lab stops."""
        self._cleanups.append((what, fn))

    @property
    def seconds(self) -> float:
        return round(time.monotonic() - self._t0, 1)

    # -- the run -----------------------------------------------------------

    def __enter__(self) -> LabRun:
        self._old_signals = interrupt.install()
        self._t0 = time.monotonic()
        return self

    def __exit__(self, typ, exc, tb) -> bool:
        if isinstance(exc, SystemExit):
            # A library gave up (Nova's load_compute_driver exits when the
            # driver cannot be imported): a failure, not the user's Ctrl-C.
            exc = RuntimeError(f"a component exited with status {exc.code} "
                               f"(its reason is in the run's log)")
        try:
            if isinstance(exc, Exception) and self.lab is not None:
                self.lab.say_failed(self.out_dir, exc)
            self.stage("Clean up")
            for what, fn in reversed(self._cleanups):
                try:
                    fn()
                except Exception as e:  # the other clean-ups still run
                    self.say(f"clean-up: {what} failed: {e}")
            left: list[str] = []
            if self.stopper is not None:
                left = list(self.stopper())
                self.say("everything stopped" + (
                    f"; LEFT BEHIND: {left}" if left
                    else "; nothing left behind") + self.stop_note)
            elif self.lab is not None:
                left = self.lab.stop_and_say(self.stop_note)
            self.summary["left_behind"] = left
            self.summary["seconds"] = self.seconds
            if exc is not None or left:
                self.summary["ok"] = False
            if exc is not None and not isinstance(exc, Exception):
                self.summary["interrupted"] = True
            elif exc is not None:
                self.summary["error"] = describe(exc)
        finally:
            interrupt.restore(self._old_signals or {})
        for fn in self.finishers:
            try:
                fn(self.summary)
            except Exception as e:  # the summary is the record
                self.say(f"clean-up: {e}")
        for path in self.summary_paths:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                json.dump(self.summary, f, indent=2, default=str)
        self.say("\n== Summary " + "=" * 57)
        self.say_summary(self.say, self.summary)
        if self._own_logs:
            self.logs.close()
        return False
