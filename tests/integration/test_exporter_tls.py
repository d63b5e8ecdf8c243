"""TLS and basic auth on the metrics ports, scraped by the real Prometheus.

``nova-rdt exporter`` and the controller's metrics server, both with one
exporter-toolkit web config (a certificate made here, a bcrypt user),
each in its own process; Prometheus scrapes both over HTTPS with the
user's password, and a third job without it.  No resctrl is needed: an
exporter on a host without RDT still serves its health series.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

import bcrypt
import pytest

from tests.functional.exporter.proc import ExporterProcess
from tests.integration import dashboard_check
from tests.integration import prometheus

PASSWORD = "scrape-me"
# Serves nova_rdt.controller.metrics as `nova-rdt controller` does.
CONTROLLER = """
import sys, time
from nova_rdt.controller import metrics
from nova_rdt.web import webconfig
m = metrics.Metrics("lab-compute", "static", True)
m.set_class("nova-rdt-class-lp", 30, 100, 2, 4, 1.5e8)
m.count("nova-rdt-class-lp", "bandwidth_over_share", "dry_run")
m.slo["web-1"] = (0.9, 1.0)
m.protected_bandwidth["web-1"] = 1e9
httpd = metrics.serve(m, "127.0.0.1", 0, webconfig.Watcher(sys.argv[1]))
print("port", httpd.server_address[1], flush=True)
time.sleep(600)
"""


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    reason = prometheus.unavailable_reason()
    if reason is None and shutil.which("openssl") is None:
        reason = "no openssl to make a certificate"
    if reason:
        pytest.skip(reason)
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
         "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
         "-subj", "/CN=localhost", "-addext",
         "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem")],
        check=True, capture_output=True)
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(10)).decode()
    (d / "web.yml").write_text(
        "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n")
    (d / "password").write_text(PASSWORD)
    exporter = ExporterProcess(str(d / "no-resctrl"), str(d),
                               host="lab-compute",
                               web_config_file=str(d / "web.yml"))
    ctl = prom = None
    try:
        exporter.start()
        ctl = subprocess.Popen(
            [sys.executable, "-c", CONTROLLER, str(d / "web.yml")],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            cwd=prometheus.REPO)
        ready, _w, _x = select.select([ctl.stdout], [], [], 30)
        line = ctl.stdout.readline() if ready else ""
        assert line.startswith("port "), line
        ctl_target = f"127.0.0.1:{line.split()[1]}"
        secure = {"scheme": "https",
                  "tls_config": {"ca_file": str(d / "cert.pem")},
                  "basic_auth": {"username": "prometheus",
                                 "password_file": str(d / "password")}}
        exp_target = exporter.url.split("//", 1)[1]
        prom = prometheus.Prometheus(
            str(tmp_path_factory.mktemp("prometheus")), [exp_target],
            "lab-compute", scrape=secure, more_jobs=[
                {"job_name": "nova-rdt-controller", "honor_labels": True,
                 "static_configs": [{"targets": [ctl_target],
                                     "labels": {"host": "lab-compute"}}],
                 **secure},
                {"job_name": "no-password", "scheme": "https",
                 "tls_config": {"ca_file": str(d / "cert.pem")},
                 "static_configs": [{"targets": [exp_target]}]}]).start()
        yield d, exporter, ctl_target, prom
    finally:
        if prom:
            prom.stop()
        if ctl:
            ctl.kill()
            ctl.wait()
        exporter.stop()


def _targets(prom, timeout=30.0):
    """{job: (health, lastError)} once every target was scraped."""
    deadline = time.monotonic() + timeout
    while True:
        active = prom.api("targets")["activeTargets"]
        got = {t["labels"]["job"]: (t["health"], t["lastError"])
               for t in active}
        if len(got) == 3 and all(h != "unknown" for h, _e in got.values()):
            return got
        assert time.monotonic() < deadline, active
        time.sleep(0.5)


def test_prometheus_scrapes_both_ports_over_tls_with_basic_auth(tls):
    _d, exporter, _ctl, prom = tls
    assert exporter.url.startswith("https://")
    got = _targets(prom)
    assert got["nova-rdt"] == ("up", ""), got
    assert got["nova-rdt-controller"] == ("up", ""), got
    up = {x["metric"]["job"]: x["value"][1]
          for x in prom.query('up{job=~"nova-rdt|nova-rdt-controller"}')}
    assert up == {"nova-rdt": "1", "nova-rdt-controller": "1"}
    res = prom.query('nova_rdt_resctrl_available{host="lab-compute"}')
    assert res and res[0]["value"][1] == "0"
    assert prom.query('nova_rdt_controller_class_mb{host="lab-compute"}')


def test_the_dashboards_controller_row_has_data(tls):
    """Every query of the dashboard's runtime-controller row, evaluated
    by the real Prometheus against the controller's port (scraped over
    TLS with basic auth): each returns data, keeps host and gives no two
    series one legend."""
    _d, _exporter, _ctl, prom = tls
    deadline = time.monotonic() + 30
    while not prom.query("count_over_time(nova_rdt_controller_"
                         "decisions_total[5s]) > 2"):
        assert time.monotonic() < deadline, prom.log()
        time.sleep(0.5)
    with open(os.path.join(prometheus.REPO, "etc", "grafana",
                           "nova-rdt.json")) as f:
        doc = json.load(f)
    values = {"$host": "lab-compute", "$__rate_interval": "5s"}
    assert dashboard_check.problems(prom, doc, values, "", set(),
                                    controller=True) == []
    # Nothing was skipped: the row has its nine queries.
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", ())
             if "nova_rdt_controller_" in t["expr"]]
    assert len(exprs) == 9, exprs


def test_a_scrape_without_the_password_gets_401(tls):
    _d, _exporter, _ctl, prom = tls
    health, error = _targets(prom)["no-password"]
    assert health == "down" and "401" in error, error


def _get(url, cafile, password=None):
    req = urllib.request.Request(url)
    if password is not None:
        req.add_header("Authorization", "Basic " + base64.b64encode(
            f"prometheus:{password}".encode()).decode())
    ctx = ssl.create_default_context(cafile=cafile)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


@pytest.mark.parametrize("port", ["exporter", "controller"])
def test_unauthenticated_requests_get_401(tls, port):
    d, exporter, ctl, _prom = tls
    base = exporter.url if port == "exporter" else f"https://{ctl}"
    ca = str(d / "cert.pem")
    for password in (None, "wrong"):
        status, headers, _body = _get(base + "/metrics", ca, password)
        assert status == 401
        assert headers["WWW-Authenticate"].startswith("Basic")
    status, _h, body = _get(base + "/metrics", ca, PASSWORD)
    assert status == 200 and b"nova_rdt_" in body


def test_plain_http_to_the_tls_port_is_refused(tls):
    _d, exporter, _ctl, _prom = tls
    url = exporter.url.replace("https://", "http://") + "/metrics"
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url, timeout=10)
    assert e.value.code == 400
    assert b"HTTP request to an HTTPS server" in e.value.read()


@pytest.mark.parametrize("text, key", [
    ("tls_server_config:\n  cert_file: cert.pem\n",
     "tls_server_config.key_file: missing"),
    ("basic_auth_users:\n  prometheus: scrape-me\n",
     "basic_auth_users.prometheus: not a bcrypt hash"),
    ("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
     "  curve_preferences: [X25519]\n",
     "tls_server_config.curve_preferences: not supported"),
])
def test_a_bad_web_config_stops_the_exporter_naming_the_key(tls, text,
                                                             key):
    d = tls[0]
    bad = d / "bad.yml"
    bad.write_text(text)
    proc = ExporterProcess(str(d / "no-resctrl"), str(d),
                           web_config_file=str(bad))
    with pytest.raises(RuntimeError) as e:
        proc.start(timeout=20)
    assert key in str(e.value) and str(bad) in str(e.value)
    os.unlink(bad)


def test_a_stalled_tls_handshake_holds_nothing(tls):
    """Clients that open the TLS port and stall in the handshake are
    closed at the client deadline, while scrapes go on."""
    d = tls[0]
    exp = ExporterProcess(str(d / "no-resctrl"), str(d),
                          web_config_file=str(d / "web.yml"))
    exp.args += ["--client-timeout", "1"]
    exp.start()
    try:
        addr = exp.url.split("//", 1)[1].rsplit(":", 1)
        stalled = []
        for _ in range(50):
            s = socket.create_connection((addr[0], int(addr[1])), timeout=5)
            s.sendall(b"\x16\x03\x01\x00\xff\x01")   # a ClientHello's start
            stalled.append(s)
        t0 = time.monotonic()
        status, _h, _b = _get(exp.url + "/metrics", str(d / "cert.pem"),
                              PASSWORD)
        assert status == 200
        for s in stalled:
            assert s.recv(1) == b""                  # closed by the server
        closed = time.monotonic() - t0
        assert closed < 3.0, closed
    finally:
        exp.stop()


def test_status_check_finds_the_exporter_behind_tls_and_basic_auth(tls):
    """``status upgrade check``'s exporter row asks as the exporter
    serves: HTTPS, and a 401 without a password is the answer its web
    config asks for, not a failure."""
    from types import SimpleNamespace

    from nova_rdt.cmd import status

    d, exporter, _ctl, _prom = tls
    port = int(exporter.url.rsplit(":", 1)[1].split("/")[0])

    def check(web_config_file, port=port):
        env = SimpleNamespace(
            exporter_configured=True, config_files=["/etc/nova/nova.conf"],
            default_files=True, exporter=SimpleNamespace(
                listen_address="127.0.0.1", port=port,
                web_config_file=web_config_file))
        return status.check_exporter(env)

    got = check(str(d / "web.yml"))
    assert got.code == 0, got.text()
    assert got.details.startswith(f"the exporter answers at https://"
                                  f"127.0.0.1:{port}/metrics (basic auth")
    # Asked in plain HTTP (no web config in nova.conf), the TLS port's
    # 400 is a failure that says so.
    got = check("")
    assert got.code == 2 and "answers 400" in got.details, got.text()
    # A web config the exporter would refuse fails the row, naming it.
    bad = d / "status-bad.yml"
    bad.write_text("tls_server_config:\n  cert_file: cert.pem\n")
    got = check(str(bad))
    assert got.code == 2 and "tls_server_config.key_file: missing" in \
        got.details, got.text()
    os.unlink(bad)
