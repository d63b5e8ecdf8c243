"""TLS and basic auth for the metrics ports, in the exporter-toolkit's
web configuration format (``--web.config.file`` of Prometheus's own
exporters), so one file and one habit serve every exporter of a host::

    tls_server_config:
      cert_file: /etc/nova-rdt/tls/server.crt
      key_file: /etc/nova-rdt/tls/server.key
    basic_auth_users:
      prometheus: $2y$10$...        # bcrypt, e.g. htpasswd -nBC 10 ""

What nova-rdt does not implement (inline PEM, cipher and curve lists,
rate limits, SAN lists) is refused by name rather than ignored: a setting
that silently did nothing would be a security hole.  A file that does not
parse, names an unknown key or a certificate that does not load stops
the service at start with a :class:`WebConfigError` naming the key.

The file and the files it names are re-read when one of them changes
(checked at most once a second), so certificates rotate without a
restart; a change that does not load is logged and the previous
configuration is kept.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import logging
import os
import re
import ssl
import threading
import time

from nova_rdt import exception

LOG = logging.getLogger(__name__)

TLS_KEYS = ("cert_file", "key_file", "client_auth_type", "client_ca_file",
            "min_version", "max_version")
UNSUPPORTED_TLS_KEYS = ("cert", "key", "client_ca", "client_allowed_sans",
                        "cipher_suites", "prefer_server_cipher_suites",
                        "curve_preferences")
TOP_KEYS = ("tls_server_config", "http_server_config", "basic_auth_users")
UNSUPPORTED_TOP_KEYS = ("rate_limit",)
HTTP_KEYS = ("http2", "headers")
# The headers the toolkit lets an operator add.
HEADERS = ("Content-Security-Policy", "X-Frame-Options",
           "X-Content-Type-Options", "X-XSS-Protection",
           "Strict-Transport-Security")
VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
            "TLS12": ssl.TLSVersion.TLSv1_2,
            "TLS13": ssl.TLSVersion.TLSv1_3}
# Go's ClientAuthType names -> Python's verify modes.  Request/RequireAny
# (a certificate taken without verifying it) have no Python equivalent
# and, as the toolkit's own docs say, are insecure.
CLIENT_AUTH = {"NoClientCert": ssl.CERT_NONE,
               "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
               "RequireAndVerifyClientCert": ssl.CERT_REQUIRED}
BCRYPT_RE = re.compile(r"^\$2[abxy]?\$\d\d\$[./A-Za-z0-9]{53}$")
RELOAD_EVERY = 1.0
CACHE_SIZE = 1024


def _yaml():
    """PyYAML, needed only where a web config file is given (the
    ``[web]`` extra); a node that serves plain HTTP does without."""
    try:
        import yaml
    except ImportError:
        raise WebConfigError(
            "a web config file needs PyYAML: pip install 'nova-rdt[web]'"
        ) from None
    return yaml


def _bcrypt():
    try:
        import bcrypt
    except ImportError:
        raise WebConfigError(
            "basic_auth_users needs bcrypt: pip install 'nova-rdt[web]'"
        ) from None
    return bcrypt


class WebConfigError(exception.NovaRdtError, ValueError):
    """A web configuration nova-rdt cannot serve; names file and key."""


@dataclasses.dataclass(frozen=True)
class WebConfig:
    path: str | None = None
    context: ssl.SSLContext | None = None   # None: plain HTTP
    users: tuple[tuple[str, bytes], ...] = ()
    headers: tuple[tuple[str, str], ...] = ()
    files: tuple[str, ...] = ()             # what a change reloads

    @property
    def tls(self) -> bool:
        return self.context is not None


PLAIN = WebConfig()


def load(path: str) -> WebConfig:
    """The configuration in ``path``; WebConfigError naming the key."""

    def fail(key: str, why: str) -> WebConfigError:
        return WebConfigError(f"web config {path}: {key}: {why}")

    try:
        with open(path, encoding="utf-8") as f:
            doc = _yaml().safe_load(f)
    except OSError as e:
        raise WebConfigError(f"web config {path}: cannot read: "
                             f"{e.strerror or e}") from None
    except _yaml().YAMLError as e:
        raise WebConfigError(f"web config {path}: not YAML: "
                             f"{str(e).splitlines()[0]}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise fail("(top)", "must be a mapping of tls_server_config, "
                            "http_server_config, basic_auth_users")
    _known(doc, TOP_KEYS, UNSUPPORTED_TOP_KEYS, "", fail)
    files = [os.path.abspath(path)]
    context = None
    tls = doc.get("tls_server_config")
    if tls is not None:
        context, tls_files = _tls(tls, os.path.dirname(path), fail)
        files += tls_files
    http = doc.get("http_server_config") or {}
    if not isinstance(http, dict):
        raise fail("http_server_config", "must be a mapping")
    _known(http, HTTP_KEYS, (), "http_server_config.", fail)
    if "http2" in http and not isinstance(http["http2"], bool):
        raise fail("http_server_config.http2", "must be true or false")
    headers = http.get("headers") or {}
    if not isinstance(headers, dict):
        raise fail("http_server_config.headers", "must be a mapping")
    for name, value in headers.items():
        if name not in HEADERS:
            raise fail(f"http_server_config.headers.{name}",
                       f"not a header the web config sets (known: "
                       f"{', '.join(HEADERS)})")
        if not isinstance(value, str) or "\n" in value or "\r" in value:
            raise fail(f"http_server_config.headers.{name}",
                       "must be a one-line string")
    users = doc.get("basic_auth_users") or {}
    if not isinstance(users, dict):
        raise fail("basic_auth_users", "must be a mapping of user to "
                                       "bcrypt hash")
    for user, hashed in users.items():
        if not isinstance(user, str) or not user or ":" in user:
            raise fail(f"basic_auth_users.{user}",
                       "a user name is a non-empty string without ':'")
        if not isinstance(hashed, str) or not BCRYPT_RE.match(hashed):
            raise fail(f"basic_auth_users.{user}",
                       "not a bcrypt hash ($2y$10$ and 53 characters; "
                       "htpasswd -nBC 10 \"\" | tr -d ':\\n' makes one)")
    return WebConfig(
        os.path.abspath(path), context,
        tuple(sorted((u, h.encode()) for u, h in users.items())),
        tuple(sorted((k, v) for k, v in headers.items() if v)),
        tuple(files))


def _known(doc, known, unsupported, prefix, fail) -> None:
    for key in doc:
        if key in unsupported:
            raise fail(prefix + str(key), "not supported by nova-rdt")
        if key not in known:
            raise fail(prefix + str(key),
                       f"unknown key (known: {', '.join(known)})")


def _tls(tls, base: str, fail) -> tuple[ssl.SSLContext, list[str]]:
    if not isinstance(tls, dict):
        raise fail("tls_server_config", "must be a mapping")
    _known(tls, TLS_KEYS, UNSUPPORTED_TLS_KEYS, "tls_server_config.", fail)

    def path_of(key: str, required: bool) -> str | None:
        value = tls.get(key)
        if value in (None, ""):
            if required:
                raise fail(f"tls_server_config.{key}", "missing")
            return None
        if not isinstance(value, str):
            raise fail(f"tls_server_config.{key}", "must be a file name")
        # As the toolkit does: relative to the web config's directory.
        value = os.path.join(base, value)
        if not os.path.isfile(value):
            raise fail(f"tls_server_config.{key}", f"no file {value}")
        return value

    cert, key = path_of("cert_file", True), path_of("key_file", True)
    auth = tls.get("client_auth_type", "NoClientCert")
    if auth not in CLIENT_AUTH:
        raise fail("tls_server_config.client_auth_type",
                   f"{auth!r} is not one of {', '.join(CLIENT_AUTH)}")
    ca = path_of("client_ca_file", CLIENT_AUTH[auth] != ssl.CERT_NONE)
    versions = []
    for k, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        v = tls.get(k, default)
        if v not in VERSIONS:
            raise fail(f"tls_server_config.{k}",
                       f"{v!r} is not one of {', '.join(VERSIONS)}")
        versions.append(VERSIONS[v])
    if versions[0] > versions[1]:
        raise fail("tls_server_config.min_version", "above max_version")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.minimum_version, ctx.maximum_version = versions
    except (ValueError, ssl.SSLError) as e:
        raise fail("tls_server_config.min_version", str(e)) from None
    try:
        ctx.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as e:
        raise fail("tls_server_config.cert_file/key_file",
                   f"{cert} and {key} do not load as a certificate and "
                   f"its key: {e}") from None
    ctx.verify_mode = CLIENT_AUTH[auth]
    if ca:
        try:
            ctx.load_verify_locations(cafile=ca)
        except (ssl.SSLError, OSError) as e:
            raise fail("tls_server_config.client_ca_file",
                       f"{ca} does not load: {e}") from None
    return ctx, [f for f in (cert, key, ca) if f]


class Watcher:
    """The current configuration of ``path`` (None: plain HTTP, open),
    reloaded when one of its files changes."""

    def __init__(self, path: str | None, clock=time.monotonic):
        self.path = path
        self.clock = clock
        self._lock = threading.Lock()
        self.config = load(path) if path else PLAIN
        self._stamp = self._stamps()
        self._checked = clock()

    def _stamps(self):
        out = []
        for f in self.config.files:
            try:
                st = os.stat(f)
                out.append((st.st_mtime_ns, st.st_size, st.st_ino))
            except OSError:
                out.append(None)
        return tuple(out)

    def current(self) -> WebConfig:
        if not self.path:
            return self.config
        now = self.clock()
        with self._lock:
            if now - self._checked < RELOAD_EVERY:
                return self.config
            self._checked = now
            stamp = self._stamps()
            if stamp == self._stamp:
                return self.config
            self._stamp = stamp
            try:
                self.config = load(self.path)
                self._stamp = self._stamps()
                LOG.info("web config %s reloaded", self.path)
            except WebConfigError as e:
                LOG.error("%s; still serving the previous one", e)
            return self.config


class BasicAuth:
    """Checks ``Authorization: Basic`` against a config's bcrypt users.

    bcrypt is slow on purpose (about 0.1 s at cost 10), so results are
    cached per user, hash and password (a digest of them, never the
    password), one bcrypt runs at a time, and an unknown user is checked
    against a dummy hash so that timing does not tell which users exist.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._cache: dict[bytes, bool] = {}
        self._dummy: bytes | None = None

    def allowed(self, config: WebConfig, header: str | None) -> bool:
        if not config.users:
            return True
        creds = _basic(header)
        if creds is None:
            return False
        user, password = creds
        users = dict(config.users)
        known = user in users
        bcrypt = _bcrypt()

        with self._lock:
            if self._dummy is None:
                self._dummy = bcrypt.hashpw(b"nova-rdt",
                                            bcrypt.gensalt(10))
            hashed = users[user] if known else self._dummy
            key = hashlib.sha256(b"\0".join(
                (user.encode(), hashed, password))).digest()
            ok = self._cache.get(key)
            if ok is None:
                try:
                    ok = bcrypt.checkpw(password, hashed)
                except ValueError:
                    ok = False
                if len(self._cache) >= CACHE_SIZE:
                    self._cache.clear()
                self._cache[key] = ok
        return ok and known


def _basic(header: str | None) -> tuple[str, bytes] | None:
    if not header:
        return None
    scheme, _sp, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        raw = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, colon, password = raw.partition(b":")
    if not colon:
        return None
    try:
        return user.decode(), password
    except UnicodeDecodeError:
        return None


UNAUTHORIZED = ("401 Unauthorized",
                [("WWW-Authenticate", 'Basic realm="nova-rdt"')],
                b"Unauthorized\n")
