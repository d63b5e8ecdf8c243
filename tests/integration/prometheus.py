"""A real Prometheus server for tests (Debian's ``prometheus``)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
RULES = os.path.join(REPO, "etc", "prometheus", "nova-rdt-alerts.yml")


def unavailable_reason() -> str | None:
    if shutil.which("prometheus") is None:
        return "no prometheus binary (apt-get install prometheus)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, workdir: str, targets: list[str], host: str,
                 scrape: dict | None = None, job: str = "nova-rdt",
                 more_jobs: list[dict] = ()):
        """``scrape``: more of the job's scrape_config (scheme,
        tls_config, basic_auth); ``more_jobs``: whole scrape_configs."""
        self.dir = workdir
        self.port = free_port()
        self.targets = targets
        self.host = host
        self.scrape = scrape or {}
        self.job = job
        self.more_jobs = list(more_jobs)
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(workdir, "prometheus.log")

    def start(self, timeout: float = 30.0) -> Prometheus:
        shutil.copy(RULES, os.path.join(self.dir, "rules.yml"))
        cfg = os.path.join(self.dir, "prometheus.yml")
        with open(cfg, "w") as f:
            json.dump({   # JSON is YAML
                "global": {"scrape_interval": "1s",
                           "evaluation_interval": "1s"},
                "rule_files": ["rules.yml"],
                "scrape_configs": [{
                    "job_name": self.job,
                    # As etc/prometheus/prometheus.yml: the exporter's
                    # host label is kept, the target's names `up`.
                    "honor_labels": True,
                    "static_configs": [{"targets": self.targets,
                                        "labels": {"host": self.host}}],
                    **self.scrape}] + self.more_jobs,
            }, f)
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={cfg}",
             f"--storage.tsdb.path={os.path.join(self.dir, 'data')}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=self.dir)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log()}")
            try:
                urllib.request.urlopen(self.url("/-/ready"), timeout=1)
                return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"prometheus not ready: {self.log()}")

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def api(self, path: str, **params) -> dict:
        q = urllib.parse.urlencode(params)
        with urllib.request.urlopen(self.url(f"/api/v1/{path}?{q}"),
                                    timeout=10) as r:
            doc = json.load(r)
        assert doc["status"] == "success", doc
        return doc["data"]

    def query(self, promql: str) -> list[dict]:
        return self.api("query", query=promql)["result"]

    def log(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
