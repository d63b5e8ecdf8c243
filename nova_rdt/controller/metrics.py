"""The controller's Prometheus metrics, and a small server for them.

Rendering is prometheus-client's, as the exporter's is
(:meth:`Metrics.render`); the server only serves the text.  Names
start ``nova_rdt_controller_`` so they sit beside the exporter's
``nova_rdt_`` series in one dashboard.  The port takes the exporter's
web configuration (TLS and basic auth, :mod:`nova_rdt.web.webconfig`).
"""

from __future__ import annotations

from collections.abc import Iterator
import http.server
import threading

from prometheus_client import CollectorRegistry
from prometheus_client import exposition
from prometheus_client.core import CounterMetricFamily
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from nova_rdt.web import webconfig

PREFIX = "nova_rdt_controller_"
CLIENT_TIMEOUT = 10.0


class Metrics(Collector):
    """The controller's series, rendered by prometheus-client as the
    exporter's are (escaping, number format, TYPE lines)."""

    def __init__(self, host: str, policy: str, dry_run: bool):
        self.host = host
        self.policy = policy
        self.dry_run = dry_run
        self._lock = threading.Lock()
        self.mb: dict[str, int | None] = {}
        self.static_mb: dict[str, int | None] = {}
        self.ways: dict[str, int | None] = {}
        self.static_ways: dict[str, int | None] = {}
        self.bandwidth: dict[str, float] = {}
        self.protected_bandwidth: dict[str, float] = {}
        self.slo: dict[str, tuple[float | None, float]] = {}
        self.decisions: dict[tuple[str, str, str], int] = {}
        self.periods = 0
        self.errors = 0
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(self)

    def set_class(self, name, mb, static_mb, ways, static_ways, bw):
        with self._lock:
            self.mb[name], self.static_mb[name] = mb, static_mb
            self.ways[name], self.static_ways[name] = ways, static_ways
            if bw is not None:
                self.bandwidth[name] = bw

    def drop_class(self, name):
        with self._lock:
            for d in (self.mb, self.static_mb, self.ways, self.static_ways,
                      self.bandwidth):
                d.pop(name, None)

    def count(self, cls: str, reason: str, outcome: str) -> None:
        with self._lock:
            key = (cls, reason, outcome)
            self.decisions[key] = self.decisions.get(key, 0) + 1

    def render(self) -> str:
        return exposition.generate_latest(self._registry).decode()

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            return iter(self._families())

    def _families(self) -> list[Metric]:
        out = []

        def family(name, kind, text, labels, rows):
            cls = CounterMetricFamily if kind == "counter" \
                else GaugeMetricFamily
            f = cls(PREFIX + name, text, labels=["host", *labels])
            for values, value in rows:
                if value is not None:
                    f.add_metric([self.host, *values], value)
            out.append(f)

        family("info", "gauge", "The controller's policy and mode.",
               ["policy", "dry_run"],
               [((self.policy, str(self.dry_run).lower()), 1)])
        family("class_mb", "gauge",
               "Current MB of a best-effort class (percent or MBps).",
               ["class"], [((c,), v) for c, v in sorted(self.mb.items())])
        family("class_static_mb", "gauge",
               "The class's static MB, restored on stop.", ["class"],
               [((c,), v) for c, v in sorted(self.static_mb.items())])
        family("class_l3_ways", "gauge",
               "Current L3 ways per cache id of a best-effort class.",
               ["class"], [((c,), v) for c, v in sorted(self.ways.items())])
        family("class_static_l3_ways", "gauge",
               "The class's static L3 ways per cache id.", ["class"],
               [((c,), v) for c, v in sorted(self.static_ways.items())])
        family("class_bandwidth_bytes", "gauge",
               "MBM total bandwidth of a class, bytes/s, last period.",
               ["class"],
               [((c,), float(v)) for c, v in sorted(self.bandwidth.items())])
        family("protected_bandwidth_bytes", "gauge",
               "MBM total bandwidth of a protected instance, bytes/s.",
               ["instance"],
               [((i,), float(v))
                for i, v in sorted(self.protected_bandwidth.items())])
        family("slo_value", "gauge",
               "Last SLO signal of a protected instance.", ["instance"],
               [((i,), float(v))
                for i, (v, _t) in sorted(self.slo.items()) if v is not None])
        family("slo_target", "gauge", "SLO target of a protected instance.",
               ["instance"],
               [((i,), float(t)) for i, (_v, t) in sorted(self.slo.items())])
        family("decisions", "counter",
               "Decisions by class, reason and outcome (applied, held, "
               "dry_run, refused).", ["class", "reason", "outcome"],
               [((c, r, o), n)
                for (c, r, o), n in sorted(self.decisions.items())])
        family("periods", "counter", "Control periods run.", [],
               [((), self.periods)])
        family("errors", "counter",
               "Periods with an error (logged with its reason).", [],
               [((), self.errors)])
        return out


class _Handler(http.server.BaseHTTPRequestHandler):
    metrics: Metrics
    # A client gets this long per read and write, the TLS handshake
    # included, before its thread gives up on it.
    timeout = CLIENT_TIMEOUT

    def do_GET(self):  # noqa: N802 (http.server's name)
        config = self.server.web.current()  # type: ignore[attr-defined]
        extra = list(config.headers)
        if not self.server.auth.allowed(  # type: ignore[attr-defined]
                config, self.headers.get("Authorization")):
            status, more, body = webconfig.UNAUTHORIZED
            self.send_response(int(status.split()[0]))
            for k, v in more + extra + [("Content-Type", "text/plain"),
                                        ("Content-Length", str(len(body)))]:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path.split("?", 1)[0] != "/metrics":
            self.send_error(404, "only /metrics here")
            return
        body = self.server.metrics.render().encode()  # type: ignore
        self.send_response(200)
        self.send_header("Content-Type", exposition.CONTENT_TYPE_LATEST)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def get_request(self):
        sock, addr = super().get_request()
        ctx = self.web.current().context  # type: ignore[attr-defined]
        if ctx is not None:
            # The handshake runs in the request's thread, on its first
            # read, under the handler's timeout: never in this one.
            sock = ctx.wrap_socket(sock, server_side=True,
                                   do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request, client_address):
        pass                    # a failed handshake or a gone client


def serve(metrics: Metrics, address: str, port: int,
          web: webconfig.Watcher | None = None):
    """Serve ``metrics`` at /metrics; ``web`` adds TLS and basic auth."""
    httpd = _Server((address, port), _Handler)
    httpd.metrics = metrics  # type: ignore[attr-defined]
    httpd.web = web or webconfig.Watcher(None)  # type: ignore[attr-defined]
    httpd.auth = webconfig.BasicAuth()  # type: ignore[attr-defined]
    threading.Thread(target=httpd.serve_forever, name="metrics",
                     daemon=True).start()
    return httpd
