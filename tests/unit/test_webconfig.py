"""The exporter-toolkit web configuration: what loads, what is refused
(naming the key), basic auth's answers and cache, reloading."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess

import bcrypt
import pytest

from nova_rdt.web import webconfig

HASH = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode()


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("no openssl")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
         "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
         "-subj", "/CN=localhost", "-keyout", str(d / "key.pem"),
         "-out", str(d / "cert.pem")], check=True, capture_output=True)
    return d


def _write(d, text):
    p = d / "web.yml"
    p.write_text(text)
    return str(p)


def test_an_empty_file_is_plain_and_open(tmp_path):
    c = webconfig.load(_write(tmp_path, ""))
    assert not c.tls and c.users == ()
    assert webconfig.BasicAuth().allowed(c, None)


def test_tls_with_files_relative_to_the_config(cert):
    c = webconfig.load(_write(cert, "tls_server_config:\n"
                                    "  cert_file: cert.pem\n"
                                    "  key_file: key.pem\n"
                                    "  min_version: TLS13\n"))
    assert c.tls
    assert c.context.minimum_version.name == "TLSv1_3"
    assert str(cert / "cert.pem") in c.files


@pytest.mark.parametrize("text, key", [
    ("tls_server_config:\n  cert_file: cert.pem\n",
     "tls_server_config.key_file: missing"),
    ("tls_server_config:\n  cert_file: cert.pem\n  key_file: nope.pem\n",
     "tls_server_config.key_file: no file"),
    ("tls_server_config:\n  cert_file: key.pem\n  key_file: cert.pem\n",
     "tls_server_config.cert_file/key_file"),
    ("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
     "  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
     "tls_server_config.cipher_suites: not supported"),
    ("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
     "  client_auth_type: RequireAnyClientCert\n",
     "tls_server_config.client_auth_type"),
    ("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
     "  client_auth_type: RequireAndVerifyClientCert\n",
     "tls_server_config.client_ca_file: missing"),
    ("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
     "  min_version: TLS14\n", "tls_server_config.min_version"),
    ("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
     "  min_version: TLS13\n  max_version: TLS12\n",
     "tls_server_config.min_version: above max_version"),
    ("tls_config:\n  cert_file: cert.pem\n", "tls_config: unknown key"),
    ("rate_limit:\n  interval: 1s\n", "rate_limit: not supported"),
    ("basic_auth_users:\n  prom: plaintext\n",
     "basic_auth_users.prom: not a bcrypt hash"),
    ("basic_auth_users: [prom]\n", "basic_auth_users: must be a mapping"),
    ("http_server_config:\n  headers:\n    X-Powered-By: me\n",
     "http_server_config.headers.X-Powered-By"),
    ("http_server_config:\n  http2: maybe\n", "http_server_config.http2"),
    ("- a list\n", "(top)"),
    ("tls_server_config: [\n", "not YAML"),
])
def test_what_is_refused_names_the_key(cert, text, key):
    path = _write(cert, text)
    with pytest.raises(webconfig.WebConfigError) as e:
        webconfig.load(path)
    assert key in str(e.value)
    assert str(e.value).startswith(f"web config {path}: ")


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(webconfig.WebConfigError, match="cannot read"):
        webconfig.load(str(tmp_path / "none.yml"))


def _basic(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()
                                       ).decode()


def test_basic_auth(tmp_path):
    # htpasswd writes $2y$; bcrypt.checkpw takes it.
    c = webconfig.load(_write(tmp_path, "basic_auth_users:\n  prom: '"
                                        + HASH.replace("$2b$", "$2y$")
                                        + "'\n"))
    auth = webconfig.BasicAuth()
    assert auth.allowed(c, _basic("prom", "s3cret"))
    assert auth.allowed(c, _basic("prom", "s3cret"))      # cached
    for header in (None, "", _basic("prom", "wrong"),
                   _basic("nobody", "s3cret"), "Bearer x", "Basic !!!",
                   "Basic " + base64.b64encode(b"nocolon").decode(),
                   "Basic " + base64.b64encode(b"\xff:x").decode()):
        assert not auth.allowed(c, header), header
    assert len(auth._cache) <= 4
    assert not any(b"s3cret" in k for k in auth._cache)


def test_a_changed_file_is_reloaded_and_a_broken_one_is_not(tmp_path):
    path = _write(tmp_path, "")
    now = [0.0]
    w = webconfig.Watcher(path, clock=lambda: now[0])
    assert w.current().users == ()
    _write(tmp_path, f"basic_auth_users:\n  prom: '{HASH}'\n")
    os.utime(path, ns=(1, 1))
    assert w.current().users == ()             # checked at most 1/s
    now[0] = 2.0
    assert [u for u, _h in w.current().users] == ["prom"]
    _write(tmp_path, "basic_auth_users:\n  prom: nope\n")
    os.utime(path, ns=(2, 2))
    now[0] = 4.0
    assert [u for u, _h in w.current().users] == ["prom"]   # kept


def test_no_file_is_plain():
    assert webconfig.Watcher(None).current() is webconfig.PLAIN
    assert webconfig.Watcher("").current() is webconfig.PLAIN
