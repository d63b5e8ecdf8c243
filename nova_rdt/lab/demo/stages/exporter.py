"""Stage 6, first half: ``nova-rdt exporter`` on the lab's resctrl and
hook records, its layout and a metrics snapshot for the report."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request

from nova_rdt import exception

START_TIMEOUT = 30.0
_LISTENING = re.compile(r"on (http://[\d.]+:\d+)/")


class ExporterError(exception.NovaRdtError, RuntimeError):
    pass


def listening_url(log_path: str, offset: int) -> str | None:
    """The address the exporter says it listens on, in what it wrote to
    ``log_path`` after ``offset``."""
    with open(log_path, "rb") as f:
        f.seek(offset)
        m = _LISTENING.search(f.read().decode(errors="replace"))
    return m.group(1) if m else None


class Exporter:
    """The exporter as a subprocess; its output goes to ``log_path``."""

    def __init__(self, lab, log_path: str):
        self.lab = lab
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.url: str | None = None
        self._log_from = 0

    def start(self) -> str:
        s = self.lab.hook_settings(host_view=True)
        with open(self.log_path, "ab") as log:
            # The log is appended to, run after run in the same --out:
            # only what this exporter writes may tell its address.
            self._log_from = log.tell()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "nova_rdt.cmd.main", "exporter",
                 "--no-config-files", "--port", "0", "--listen",
                 "127.0.0.1", "--resctrl-root", self.lab.resctrl_root,
                 "--sysfs-cpu-root", self.lab.sysfs_cpu_root,
                 "--state-path", s.state_path,
                 "--host", "lab", "--notify-interval", "0"],
                stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)
        self.url = self._wait_listening()
        return self.url

    def _wait_listening(self) -> str:
        # A file, not a pipe nobody reads: the exporter logs on and on.
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            m = listening_url(self.log_path, self._log_from)
            if m:
                return m
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise ExporterError(f"the exporter did not start; see "
                            f"{self.log_path}")

    def layout(self) -> dict:
        with urllib.request.urlopen(self.url + "/api/layout",
                                    timeout=10) as r:
            return json.load(r)

    def metrics(self) -> str:
        """nova-rdt's metric lines (the per-way owner series left out)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            text = r.read().decode()
        return "\n".join(line for line in text.splitlines()
                         if line.startswith("nova_rdt_")
                         and "way_owner" not in line)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def log_path(out_dir: str) -> str:
    return os.path.join(out_dir, "exporter.log")
