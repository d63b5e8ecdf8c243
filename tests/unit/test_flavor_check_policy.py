"""rdt_flavor_check asks Nova's policy before it validates.

Nova's real policy engine is exercised in
tests/functional/nova/test_flavor_check_policy.py; here, the filter's own
decisions around it: which rule each method asks, and that a refusal, a
missing context or a failing policy engine all leave the request to Nova
(which answers 403 or fails as it would without nova-rdt), never to the
filter's 400.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("nova.policies.flavor_extra_specs")
import webob  # noqa: E402

from nova_rdt.api import flavor_check  # noqa: E402

BAD = {"rdt:l3_cache_ways": "lots"}


class Context:
    def __init__(self, verdict):
        self.verdict, self.asked = verdict, []

    def can(self, action, target=None, fatal=True):
        self.asked.append((action, target, fatal))
        if isinstance(self.verdict, Exception):
            raise self.verdict
        return self.verdict


def _nova(environ, start_response):
    start_response("418 I'm a teapot", [("Content-Type", "text/plain")])
    return [b"nova"]


def _call(method, path, body, ctx, monkeypatch):
    class Flavor:
        vcpus, extra_specs = 2, {}
    monkeypatch.setattr(flavor_check.FlavorCheck, "_flavor",
                        staticmethod(lambda req, fid: Flavor()))
    req = webob.Request.blank(path, method=method,
                              body=json.dumps(body).encode())
    if ctx is not None:
        req.environ["nova.context"] = ctx
    return req.get_response(flavor_check.FlavorCheck(_nova))


CASES = [("POST", "/v2.1/flavors/1/os-extra_specs", {"extra_specs": BAD},
          "create"),
         ("PUT", "/v2.1/flavors/1/os-extra_specs/rdt:l3_cache_ways", BAD,
          "update"),
         ("DELETE", "/v2.1/flavors/1/os-extra_specs/rdt:l3_cache_ways", {},
          "delete")]


@pytest.mark.parametrize("method, path, body, action", CASES)
def test_each_method_asks_its_rule_and_a_refusal_goes_to_nova(
        method, path, body, action, monkeypatch):
    ctx = Context(False)
    resp = _call(method, path, body, ctx, monkeypatch)
    assert resp.status_int == 418
    assert ctx.asked == [
        (f"os_compute_api:os-flavor-extra-specs:{action}", {}, False)]


@pytest.mark.parametrize("verdict", [RuntimeError("policy file"), None])
def test_a_failing_engine_or_no_context_goes_to_nova(verdict, monkeypatch):
    ctx = None if verdict is None else Context(verdict)
    resp = _call("POST", "/v2.1/flavors/1/os-extra_specs",
                 {"extra_specs": BAD}, ctx, monkeypatch)
    assert resp.status_int == 418


def test_an_allowed_caller_gets_the_400_naming_the_key(monkeypatch):
    resp = _call("POST", "/v2.1/flavors/1/os-extra_specs",
                 {"extra_specs": BAD}, Context(True), monkeypatch)
    assert resp.status_int == 400
    assert "rdt:l3_cache_ways" in resp.json["badRequest"]["message"]
