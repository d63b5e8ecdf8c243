"""``nova-rdt exporter`` as its own process, as operators run it.

The exporter is never run inside the test process: the Nova functional
tests' eventlet monkey-patching (global to a pytest run) would turn its
server thread into a green thread that a blocking select starves.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time

URL_RE = re.compile(r"on (https?://[\d.]+:\d+)/")


class ExporterProcess:
    def __init__(self, resctrl_root: str, sysfs_cpu: str,
                 state_path: str | None = None, host: str = "h",
                 notify_interval: float = 0.0,
                 config_file: str | None = None,
                 web_config_file: str | None = None):
        self.args = [sys.executable, "-m", "nova_rdt.cmd.main", "exporter",
                     "--port", "0", "--listen", "127.0.0.1",
                     "--resctrl-root", resctrl_root,
                     "--sysfs-cpu-root", sysfs_cpu, "--host", host,
                     "--notify-interval", str(notify_interval)]
        if state_path:
            self.args += ["--state-path", state_path]
        self.args += (["--config-file", config_file] if config_file
                      else ["--no-config-files"])
        if web_config_file:
            self.args += ["--web-config-file", web_config_file]
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.output = ""

    def start(self, timeout: float = 30.0) -> ExporterProcess:
        repo = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.dirname(os.path.abspath(__file__)))))
        self.proc = subprocess.Popen(
            self.args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, cwd=repo, text=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _w, _x = select.select([self.proc.stdout], [], [], 0.5)
            if ready:
                line = self.proc.stdout.readline()
                self.output += line
                m = URL_RE.search(line)
                if m:
                    self.url = m.group(1)
                    return self
            if self.proc.poll() is not None:
                break
        self.stop()
        raise RuntimeError(f"exporter did not start: {self.output}")

    def stop(self) -> str:
        """Stop it; returns what it printed."""
        if self.proc is not None:
            self.proc.terminate()
            try:
                out, _ = self.proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                out, _ = self.proc.communicate()
            self.output += out or ""
            self.proc = None
        return self.output

    def __enter__(self) -> ExporterProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
