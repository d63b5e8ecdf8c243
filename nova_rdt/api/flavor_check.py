"""Paste filter: whole-flavor checks of rdt: extra specs at the API.

Nova's per-key validators see one key at a time.  Mixing unified and CDP
keys, a vCPU list beyond the flavor's vCPUs, or a ``.N`` suffix beyond its
NUMA nodes can only be judged against the whole flavor, so this filter
merges the request into the flavor's current specs and answers 400, naming
the key, before Nova stores anything.  It checks every microversion: the
rdt: namespace is ours, and an old client must not slip a bad flavor past.

Authorization comes first.  A caller whom Nova's policy would refuse
(``os_compute_api:os-flavor-extra-specs:create|update|delete``, admin-only
by default) is passed straight to Nova, which answers its own 403: our 400
describes the flavor's specs and the rules they break, which is nothing to
tell a caller who may not change them.  The policy is asked through Nova's
own engine with the request's context, so an operator's policy file
applies here exactly as it does in Nova's controller.

Add it to the compute API pipelines in api-paste.ini, right before
``osapi_compute_app_v21``::

    [filter:rdt_flavor_check]
    paste.filter_factory = nova_rdt.api.flavor_check:filter_factory
"""

from __future__ import annotations

import json
import re

from oslo_log import log as logging
import webob
import webob.dec

from nova_rdt.allocation import spec

LOG = logging.getLogger(__name__)

# The extra-spec controller's policy actions, by method (nova/api/openstack/
# compute/flavors_extraspecs.py: create, update, delete).
_ACTIONS = {"POST": "create", "PUT": "update", "DELETE": "delete"}
_PATH_RE = re.compile(
    r"/flavors/(?P<flavor>[^/]+)/os-extra_specs(?:/(?P<key>[^/]+))?/?$")


def merged_specs(method: str, key: str | None, body: bytes,
                 current: dict[str, str]) -> dict[str, str] | None:
    """The flavor's specs as they would be after this request, or None."""
    if method == "DELETE" and key:
        return {k: v for k, v in current.items() if k != key}
    try:
        doc = json.loads(body or b"{}")
    except (ValueError, RecursionError):
        # Nova answers the bad body (a deeply nested one exhausts the
        # parser's recursion before any schema sees it).
        return None
    if not isinstance(doc, dict):
        return None
    new = doc.get("extra_specs") if method == "POST" else doc
    if not isinstance(new, dict) or \
            not all(isinstance(v, str) for v in new.values()):
        return None                         # Nova's schema wants strings
    return {**current, **new}


def check(specs: dict[str, str], vcpus: int) -> str | None:
    """None when the rdt: specs are consistent, else the 400 message."""
    if not any(spec.is_rdt_key(k) for k in specs):
        return None
    raw = specs.get("hw:numa_nodes", "1")
    try:
        # The language's own reader: bounded, so a huge count is refused
        # here instead of becoming one planned entry per node.
        nodes = spec.parse_number("hw:numa_nodes", raw, 1, spec.MAX_NODES)
        spec.parse(specs, vcpus, nodes, units_required=True)
    except spec.SpecError as e:
        return f"Validation failed for extra spec {e.key}: {e.reason}."
    return None


class FlavorCheck:
    def __init__(self, app):
        self.app = app

    @webob.dec.wsgify
    def __call__(self, req: webob.Request):
        m = _PATH_RE.search(req.path_info)
        if m is None or req.method not in ("POST", "PUT", "DELETE"):
            return req.get_response(self.app)
        key = m.group("key")
        if not key and req.method != "POST":
            return req.get_response(self.app)
        if not self._authorized(req):
            return req.get_response(self.app)   # Nova answers 403
        flavor = self._flavor(req, m.group("flavor"))
        if flavor is None:
            return req.get_response(self.app)   # Nova answers 404/403
        after = merged_specs(req.method, key, req.body,
                             dict(flavor.extra_specs or {}))
        message = check(after, flavor.vcpus) if after is not None else None
        if message is None:
            return req.get_response(self.app)
        LOG.info("rdt_flavor_check: refused %s %s: %s", req.method,
                 req.path_info, message)
        resp = webob.Response(status=400, content_type="application/json")
        resp.body = json.dumps(
            {"badRequest": {"code": 400, "message": message}}).encode()
        return resp

    @staticmethod
    def _authorized(req) -> bool:
        """Whether Nova's policy lets this caller change extra specs."""
        from nova.policies import flavor_extra_specs as fes_policies
        ctx = req.environ.get("nova.context")
        if ctx is None:
            return False
        action = fes_policies.POLICY_ROOT % _ACTIONS[req.method]
        try:
            # The target Nova's controller passes for these three actions.
            return bool(ctx.can(action, target={}, fatal=False))
        except Exception:
            # Whatever the policy engine raises here, it raises in Nova's
            # controller too: Nova answers, not us.
            LOG.exception("rdt_flavor_check: policy check of %s failed",
                          action)
            return False

    @staticmethod
    def _flavor(req, flavor_id):
        from nova import exception
        from nova import objects
        ctx = req.environ.get("nova.context")
        if ctx is None:
            return None
        try:
            return objects.Flavor.get_by_flavor_id(ctx, flavor_id)
        except exception.FlavorNotFound:
            return None


def filter_factory(global_conf, **local_conf):
    def _factory(app):
        return FlavorCheck(app)
    return _factory
