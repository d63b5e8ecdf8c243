"""``etc/prometheus/prometheus.yml``'s scrape jobs, run by the real
Prometheus against a real exporter: ``up`` carries the Nova host name the
sample labels a target with, as the exporter's own series do, so the
dashboard's host variable selects a host's ``up`` with its series; a
target listed without a label falls back to its address."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
import yaml

from tests.functional.exporter.proc import ExporterProcess
from tests.integration import prometheus

SAMPLE = os.path.join(prometheus.REPO, "etc", "prometheus", "prometheus.yml")


def test_up_carries_the_nova_host_name_the_sample_gives(tmp_path):
    reason = prometheus.unavailable_reason()
    if reason:
        pytest.skip(reason)
    with open(SAMPLE) as f:
        doc = yaml.safe_load(f)
    job = next(j for j in doc["scrape_configs"]
               if j["job_name"] == "nova-rdt")
    exporter = ExporterProcess(str(tmp_path / "no-resctrl"), str(tmp_path),
                               host="compute-0")
    exporter.start()
    proc = None
    try:
        port = exporter.url.rsplit(":", 1)[1]
        # The sample's job as it is (relabelling, honor_labels), two
        # targets at the one exporter: one labelled as the sample labels
        # them, one not.
        job.update(scrape_interval="1s", static_configs=[
            {"targets": [f"127.0.0.1:{port}"],
             "labels": {"host": "compute-0"}},
            {"targets": [f"localhost:{port}"]}])
        cfg = {"global": {"scrape_interval": "1s"},
               "scrape_configs": [job]}
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(cfg))
        listen = prometheus.free_port()
        proc = subprocess.Popen(
            ["prometheus", f"--config.file={tmp_path}/prometheus.yml",
             f"--storage.tsdb.path={tmp_path}/data",
             f"--web.listen-address=127.0.0.1:{listen}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd=str(tmp_path))
        prom = prometheus.Prometheus(str(tmp_path), [], "")
        prom.port = listen
        deadline = time.monotonic() + 30
        while True:
            try:
                up = {(r["metric"]["instance"], r["metric"].get("host")):
                      r["value"][1] for r in prom.query("up")}
                if len(up) == 2:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "no up series"
            time.sleep(0.5)
        assert up == {(f"127.0.0.1:{port}", "compute-0"): "1",
                      (f"localhost:{port}", "localhost"): "1"}
        # The exporter's own series keep its host label either way.
        hosts = {r["metric"]["host"] for r in prom.query(
            "nova_rdt_resctrl_available")}
        assert hosts == {"compute-0"}
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        exporter.stop()
