"""The exporter's HTTP server: ``/metrics``, ``/`` and ``/api/layout``.

The port is reachable by anyone on the network, so the server is built
so that no client can hold it:

* request headers are read by the accepting thread, non-blocking, for
  every connection at once; a connection gets a thread only when its
  headers are complete.  A client trickling its headers a byte at a time
  (each byte would reset a per-read timeout) costs no thread and no
  GIL hand-off, and is closed at its deadline;
* every connection has one deadline, ``[rdt_exporter] client_timeout``
  from accept to close, covering the headers, the answer and a client
  that never reads it;
* a listen backlog of :data:`BACKLOG` instead of socketserver's 5, so a
  burst of connections queues instead of stalling in SYN retries;
* at most :data:`MAX_CLIENTS` connections at once; more are closed at
  accept rather than growing without bound;
* the WSGI handling itself is the standard library's (``wsgiref``).

With a web configuration (:mod:`nova_rdt.web.webconfig`) the TLS
handshake is driven by the same accepting thread, non-blocking and under
the same deadline, so TLS gives a slow client no new way to hold a
thread; basic auth is checked before any route.
"""

from __future__ import annotations

import io
import json
import logging
import os
import selectors
import socket
import ssl
import threading
import time
from wsgiref import simple_server

from prometheus_client import CollectorRegistry
from prometheus_client import exposition

from nova_rdt.exporter import page
from nova_rdt.exporter.live import LiveView
from nova_rdt.exporter.metrics import RdtCollector
from nova_rdt.web import webconfig

LOG = logging.getLogger(__name__)

BACKLOG = 128
MAX_CLIENTS = 512
MAX_HEADER_BYTES = 64 * 1024
DEFAULT_CLIENT_TIMEOUT = 10.0
HTTP_TO_HTTPS = (b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\n"
                 b"Connection: close\r\n\r\n"
                 b"Client sent an HTTP request to an HTTPS server.\n")


class App:
    def __init__(self, live: LiveView, host: str,
                 web: webconfig.Watcher | None = None):
        self.live = live
        self.host = host
        self.web = web or webconfig.Watcher(None)
        self.auth = webconfig.BasicAuth()
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = RdtCollector(live, host)
        self.registry.register(self.collector)

    def __call__(self, environ, start_response):
        config = self.web.current()
        if not self.auth.allowed(config, environ.get("HTTP_AUTHORIZATION")):
            status, extra, body = webconfig.UNAUTHORIZED
            body = self._reply(start_response, status, "text/plain", body,
                               extra + list(config.headers))
        else:
            body = self._route(environ, _with_headers(start_response,
                                                      config.headers))
        # HEAD: the same status and headers (Content-Length included),
        # no body (RFC 9110 9.3.2).  One empty chunk, not none: wsgiref
        # would otherwise rewrite Content-Length to 0.
        return [b""] if environ.get("REQUEST_METHOD") == "HEAD" else body

    def _route(self, environ, start_response):
        path = environ.get("PATH_INFO", "/")
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            return self._reply(start_response, "405 Method Not Allowed",
                               "text/plain", b"GET only\n",
                               [("Allow", "GET, HEAD")])
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
    def _reply(start_response, status, ctype, body, extra=()):
        start_response(status, [("Content-Type", ctype),
                                ("Content-Length", str(len(body))),
                                ("Cache-Control", "no-store"),
                                ("X-Content-Type-Options", "nosniff"),
                                *extra])
        return [body]


def _with_headers(start_response, headers):
    if not headers:
        return start_response

    def start(status, response_headers, exc_info=None):
        return start_response(status, list(response_headers) + list(headers),
                              exc_info)
    return start


class _Writer:
    """The response stream: blocking sends bounded by the deadline."""

    def __init__(self, sock: socket.socket):
        self.sock = sock

    def write(self, data: bytes) -> int:
        self.sock.sendall(data)
        return len(data)

    def flush(self) -> None:
        pass


class _Handler(simple_server.WSGIRequestHandler):
    """wsgiref's handler, over headers the server has already read."""

    # No HTTP/0.9: every answer, errors included, has a status line.
    default_request_version = "HTTP/1.0"

    def __init__(self, sock, client_address, server, head: bytes):
        self._head = head
        super().__init__(sock, client_address, server)

    def setup(self):
        self.connection = self.request
        self.rfile = io.BytesIO(self._head)
        self.wfile = _Writer(self.request)

    def finish(self):
        pass

    def log_message(self, fmt, *args):
        LOG.debug("%s " + fmt, self.address_string(), *args)


class _Conn:
    __slots__ = ("sock", "addr", "deadline", "head", "handshaking")

    def __init__(self, sock, addr, deadline, handshaking=False):
        self.sock, self.addr, self.deadline = sock, addr, deadline
        self.head = b""
        self.handshaking = handshaking


class Server:
    """Serves one WSGI app; see the module's docstring for the rules."""

    def __init__(self, app, address: str, port: int,
                 client_timeout: float = DEFAULT_CLIENT_TIMEOUT,
                 max_clients: int = MAX_CLIENTS):
        self.app = app
        self.client_timeout = client_timeout
        self.max_clients = max_clients
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socket.bind((address, port))
            self.socket.listen(BACKLOG)
        except OSError:
            self.socket.close()
            raise
        self.socket.setblocking(False)
        self.server_address = self.socket.getsockname()
        host, bound = self.server_address[:2]
        self.base_environ = {
            "SERVER_NAME": socket.getfqdn(host) if host else "localhost",
            "GATEWAY_INTERFACE": "CGI/1.1", "SERVER_PORT": str(bound),
            "REMOTE_HOST": "", "CONTENT_LENGTH": "", "SCRIPT_NAME": ""}
        self._wake_r, self._wake_w = socket.socketpair()
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.socket, selectors.EVENT_READ)
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        self._reading: dict[socket.socket, _Conn] = {}
        self._answering = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._done = threading.Event()

    def get_app(self):
        return self.app

    # -- the accepting thread ------------------------------------------

    def serve_forever(self) -> None:
        try:
            while not self._stop.is_set():
                wait = 1.0
                if self._reading:
                    first = min(c.deadline for c in self._reading.values())
                    wait = max(0.0, min(wait, first - time.monotonic()))
                for key, _ev in self._sel.select(wait):
                    if key.fileobj is self.socket:
                        self._accept()
                    elif key.fileobj is self._wake_r:
                        self._wake_r.recv(64)
                    else:
                        self._read(self._reading[key.fileobj])
                now = time.monotonic()
                for c in [c for c in self._reading.values()
                          if c.deadline <= now]:
                    self._drop(c)
        finally:
            for c in list(self._reading.values()):
                self._drop(c)
            self._done.set()

    def _accept(self) -> None:
        while True:
            try:
                sock, addr = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:          # EMFILE and the like: back off
                LOG.warning("exporter: accept failed: %s", e)
                return
            with self._lock:
                busy = len(self._reading) + self._answering
            if busy >= self.max_clients:
                LOG.warning("exporter: %d connections open, closed one "
                            "from %s", busy, addr[0])
                sock.close()
                continue
            sock.setblocking(False)
            ctx = self._tls_context()
            if ctx is not None:
                try:
                    sock = ctx.wrap_socket(sock, server_side=True,
                                           do_handshake_on_connect=False)
                except (OSError, ValueError):
                    _close(sock)
                    continue
            c = _Conn(sock, addr, time.monotonic() + self.client_timeout,
                      handshaking=ctx is not None)
            self._reading[sock] = c
            self._sel.register(sock, selectors.EVENT_READ)

    def _tls_context(self) -> ssl.SSLContext | None:
        web = getattr(self.app, "web", None)
        return web.current().context if web is not None else None

    def _handshake(self, c: _Conn) -> bool:
        """Advance ``c``'s TLS handshake; True once it is done."""
        try:
            c.sock.do_handshake()
        except ssl.SSLWantReadError:
            self._sel.modify(c.sock, selectors.EVENT_READ)
            return False
        except ssl.SSLWantWriteError:
            self._sel.modify(c.sock, selectors.EVENT_WRITE)
            return False
        except ssl.SSLError as e:
            if e.reason == "HTTP_REQUEST":
                # Plain HTTP to the TLS port: say so, in plain HTTP.
                try:
                    os.write(c.sock.fileno(), HTTP_TO_HTTPS)
                except OSError:
                    pass
            LOG.debug("exporter: TLS from %s: %s", c.addr[0], e)
            self._drop(c)
            return False
        except OSError:
            self._drop(c)
            return False
        c.handshaking = False
        self._sel.modify(c.sock, selectors.EVENT_READ)
        return True

    def _read(self, c: _Conn) -> None:
        if c.handshaking and not self._handshake(c):
            return
        try:
            data = c.sock.recv(65536)
        except (BlockingIOError, InterruptedError, ssl.SSLWantReadError,
                ssl.SSLWantWriteError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(c)
            return
        c.head += data
        # TLS may hold decrypted bytes that no select() will announce.
        while isinstance(c.sock, ssl.SSLSocket) and c.sock.pending() \
                and _header_end(c.head) is None \
                and len(c.head) <= MAX_HEADER_BYTES:
            try:
                c.head += c.sock.recv(65536)
            except OSError:
                break
        end = _header_end(c.head)
        if end is None and len(c.head) <= MAX_HEADER_BYTES:
            return
        self._sel.unregister(c.sock)
        del self._reading[c.sock]
        if end is None:
            _try_send(c.sock, b"HTTP/1.0 431 Request Header Fields Too "
                              b"Large\r\nContent-Length: 0\r\n\r\n")
            _close(c.sock)
            return
        with self._lock:
            self._answering += 1
        try:
            threading.Thread(target=self._answer, args=(c,), daemon=True,
                             name="nova-rdt-exporter-request").start()
        except RuntimeError:
            with self._lock:
                self._answering -= 1
            _close(c.sock)

    def _drop(self, c: _Conn) -> None:
        self._reading.pop(c.sock, None)
        try:
            self._sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        _close(c.sock)

    # -- a request's thread --------------------------------------------

    def _answer(self, c: _Conn) -> None:
        try:
            left = c.deadline - time.monotonic()
            if left <= 0:
                return
            c.sock.settimeout(left)        # blocking, up to the deadline
            _Handler(c.sock, c.addr, self, c.head)
        except OSError as e:
            LOG.debug("exporter: %s: %s", c.addr[0], e)
        except Exception:                  # noqa: BLE001 - keep serving
            LOG.exception("exporter: request from %s failed", c.addr[0])
        finally:
            _close(c.sock)
            with self._lock:
                self._answering -= 1

    # -- life cycle ----------------------------------------------------

    def shutdown(self) -> None:
        """Stop serve_forever (from another thread) and wait for it."""
        self._stop.set()
        _try_send(self._wake_w, b"x")
        self._done.wait(10)

    def server_close(self) -> None:
        for s in (self.socket, self._wake_r, self._wake_w):
            s.close()
        self._sel.close()


def _header_end(buf: bytes) -> int | None:
    for sep in (b"\r\n\r\n", b"\n\n"):
        i = buf.find(sep)
        if i >= 0:
            return i + len(sep)
    # A request line alone with no version (HTTP/0.9 style) ends there;
    # wsgiref answers it (with a status line, see _Handler).
    line, nl, _rest = buf.partition(b"\n")
    if nl and len(line.split()) < 3:
        return len(line) + 1
    return None


def _try_send(sock: socket.socket, data: bytes) -> None:
    try:
        sock.send(data)
    except OSError:
        pass


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def serve(app: App, address: str, port: int,
          client_timeout: float = DEFAULT_CLIENT_TIMEOUT) -> Server:
    """Bind (port 0 picks one) and serve in a daemon thread."""
    httpd = Server(app, address, port, client_timeout=client_timeout)
    threading.Thread(target=httpd.serve_forever, name="nova-rdt-exporter",
                     daemon=True).start()
    return httpd
