"""What TLS and basic auth cost a scrape, against the same exporter in
plain HTTP.

    .venv/bin/python -m benchmarks.bench_exporter_tls [--scrapes 100]

One emulated Gold 6252 with the root, the PMD COS and 6 instance groups,
served by two exporters in this process over the same resctrl: one plain
(the peer), one with a web config (TLS with an EC P-256 certificate made
here, one bcrypt user at cost 10).  ``--scrapes`` GETs of ``/metrics``
alternate between them, each on a new connection as the exporter closes
every one (so every TLS scrape pays a full handshake).  Prints median and
p95 of each and the ratio of the medians; then the first authenticated
request (one bcrypt check) against the next (cached).
"""

from __future__ import annotations

import argparse
import base64
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import bcrypt

from nova_rdt.emulator import mount
from nova_rdt.exporter import server
from nova_rdt.exporter.live import LiveView
from nova_rdt.exporter.sample import Sampler
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.web import webconfig

PASSWORD = "bench"


def _cert(d: str) -> None:
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
         "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", os.path.join(d, "key.pem"),
         "-out", os.path.join(d, "cert.pem")], check=True,
        capture_output=True)


def _get(url: str, ctx=None, auth=None) -> float:
    req = urllib.request.Request(url)
    if auth:
        req.add_header("Authorization", auth)
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
        r.read()
        assert r.status == 200
    return time.perf_counter() - t0


def _stats(xs):
    xs = sorted(xs)
    return statistics.median(xs), xs[int(len(xs) * 0.95) - 1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scrapes", type=int, default=100)
    args = ap.parse_args()
    reason = mount.fuse_unavailable_reason()
    if reason:
        print(f"skipped: {reason}")
        return 0
    emu = mount.Emulator("gold-6252")
    emu.start()
    servers = []
    try:
        for name in ["nova-rdt-pmd"] + [f"g{i}" for i in range(6)]:
            os.mkdir(os.path.join(emu.mountpoint, name))
        d = tempfile.mkdtemp(prefix="bench-tls-")
        _cert(d)
        hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(10))
        with open(os.path.join(d, "web.yml"), "w") as f:
            f.write("tls_server_config:\n  cert_file: cert.pem\n"
                    "  key_file: key.pem\nbasic_auth_users:\n"
                    f"  prometheus: '{hashed.decode()}'\n")
        fs = Resctrl(emu.mountpoint, sysfs_cpu=emu.sysfs_cpu)
        urls = {}
        for kind, web in (("plain", None),
                          ("tls+auth", os.path.join(d, "web.yml"))):
            app = server.App(LiveView(Sampler(fs)), "bench",
                             webconfig.Watcher(web))
            httpd = server.serve(app, "127.0.0.1", 0)
            servers.append(httpd)
            scheme = "https" if web else "http"
            urls[kind] = f"{scheme}://127.0.0.1:{httpd.server_address[1]}"
        ctx = ssl.create_default_context(cafile=os.path.join(d, "cert.pem"))
        auth = "Basic " + base64.b64encode(
            f"prometheus:{PASSWORD}".encode()).decode()
        first = _get(urls["tls+auth"] + "/metrics", ctx, auth)
        second = _get(urls["tls+auth"] + "/metrics", ctx, auth)
        _get(urls["plain"] + "/metrics")
        times = {"plain": [], "tls+auth": []}
        for _ in range(args.scrapes):
            times["plain"].append(_get(urls["plain"] + "/metrics"))
            times["tls+auth"].append(
                _get(urls["tls+auth"] + "/metrics", ctx, auth))
        for kind, xs in times.items():
            med, p95 = _stats(xs)
            print(f"{kind:9} median {med * 1e3:7.2f} ms  p95 "
                  f"{p95 * 1e3:7.2f} ms")
        ratio = _stats(times["tls+auth"])[0] / _stats(times["plain"])[0]
        print(f"tls+auth / plain median: {ratio:.2f}")
        print(f"first authenticated scrape (one bcrypt): "
              f"{first * 1e3:.1f} ms; the next (cached): "
              f"{second * 1e3:.1f} ms")
    finally:
        for httpd in servers:
            httpd.shutdown()
            httpd.server_close()
        emu.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
