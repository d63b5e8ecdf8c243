"""Processes the lab starts: spawned with a log each, stopped by pid.

Every daemon runs in the foreground as our direct child, so its pid is
known without pidfiles and nothing daemonizes out of reach.  The start
time from ``/proc/<pid>/stat`` is recorded with the pid so that a stop
after the process died never signals an unrelated process that reused
the pid.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import time

from nova_rdt import exception
from nova_rdt.host.procinfo import is_running
from nova_rdt.host.procinfo import proc_start_time


class LabError(exception.NovaRdtError, RuntimeError):
    """A lab component could not be started or stopped."""


@dataclasses.dataclass
class Process:
    name: str
    argv: list[str]
    log_path: str
    popen: subprocess.Popen
    start_time: int | None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        if self.popen.poll() is not None:
            return False
        return is_running(self.pid, self.start_time)

    def log_tail(self, limit: int = 4000) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-limit:]
        except OSError:
            return ""


class Supervisor:
    """Starts children with their output in ``log_dir/<name>.log``."""

    def __init__(self, log_dir: str):
        self.log_dir = log_dir
        self.procs: list[Process] = []

    def spawn(self, name: str, argv: list[str], env: dict | None = None,
              stdin=subprocess.DEVNULL, cwd: str | None = None) -> Process:
        os.makedirs(self.log_dir, exist_ok=True)
        log_path = os.path.join(self.log_dir, f"{name}.log")
        with open(log_path, "ab") as log:
            try:
                popen = subprocess.Popen(
                    argv, stdout=log, stderr=subprocess.STDOUT, stdin=stdin,
                    env=env, cwd=cwd, start_new_session=True)
            except OSError as e:
                raise LabError(f"cannot start {name} ({argv[0]}): {e}") \
                    from e
        proc = Process(name, argv, log_path, popen,
                       proc_start_time(popen.pid))
        self.procs.append(proc)
        return proc

    def wait_for(self, proc: Process, ready, timeout: float,
                 what: str) -> None:
        """Poll ``ready()`` until true; fail early if ``proc`` dies."""
        deadline = time.monotonic() + timeout
        while True:
            if ready():
                return
            if not proc.running():
                raise LabError(
                    f"{proc.name} exited (status {proc.popen.poll()}) "
                    f"before {what}; its log ends:\n{proc.log_tail()}")
            if time.monotonic() > deadline:
                raise LabError(
                    f"{proc.name} did not reach {what} within {timeout:.0f}s;"
                    f" its log ends:\n{proc.log_tail()}")
            time.sleep(0.02)

    def stop(self, proc: Process, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL; always reaps.  Safe to repeat."""
        if proc.popen.returncode is None and proc.running():
            try:
                os.kill(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                if proc.running():
                    os.kill(proc.pid, signal.SIGKILL)
                proc.popen.wait()
        else:
            proc.popen.poll()
        if proc.popen.stdin:
            try:
                proc.popen.stdin.close()
            except OSError:
                pass

    def stop_all(self) -> None:
        """Stop in reverse start order: clients before their servers."""
        for proc in reversed(self.procs):
            self.stop(proc)

    def alive(self) -> list[Process]:
        return [p for p in self.procs if p.running()]
