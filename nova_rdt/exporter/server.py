"""The exporter's HTTP server: ``/metrics``, ``/`` and ``/api/layout``."""

from __future__ import annotations

import json
import logging
import socketserver
import threading
from wsgiref import simple_server

from prometheus_client import CollectorRegistry
from prometheus_client import exposition

from nova_rdt.exporter import page
from nova_rdt.exporter.live import LiveView
from nova_rdt.exporter.metrics import RdtCollector

LOG = logging.getLogger(__name__)


class App:
    def __init__(self, live: LiveView, host: str):
        self.live = live
        self.host = host
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = RdtCollector(live)
        self.registry.register(self.collector)

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "/")
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            return self._reply(start_response, "405 Method Not Allowed",
                               "text/plain", b"GET only\n")
        if path == "/metrics":
            body = exposition.generate_latest(self.registry)
            return self._reply(start_response, "200 OK",
                               exposition.CONTENT_TYPE_LATEST, body)
        if path == "/api/layout":
            s, bw = self.live.refresh()
            body = json.dumps(page.layout(self.host, s, bw)).encode()
            return self._reply(start_response, "200 OK",
                               "application/json", body)
        if path in ("/", "/index.html"):
            return self._reply(start_response, "200 OK",
                               "text/html; charset=utf-8",
                               page.PAGE.encode())
        if path == "/healthz":
            return self._reply(start_response, "200 OK", "text/plain",
                               b"ok\n")
        return self._reply(start_response, "404 Not Found", "text/plain",
                           b"not found\n")

    @staticmethod
    def _reply(start_response, status, ctype, body):
        start_response(status, [("Content-Type", ctype),
                                ("Content-Length", str(len(body))),
                                ("Cache-Control", "no-store"),
                                ("X-Content-Type-Options", "nosniff")])
        return [body]


class _Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, fmt, *args):
        LOG.debug("%s " + fmt, self.address_string(), *args)


def serve(app: App, address: str, port: int) -> simple_server.WSGIServer:
    """Bind (port 0 picks one) and serve in a daemon thread."""
    httpd = simple_server.make_server(address, port, app,
                                      server_class=_Server,
                                      handler_class=_QuietHandler)
    threading.Thread(target=httpd.serve_forever, name="nova-rdt-exporter",
                     daemon=True).start()
    return httpd
