"""pytest glue for Nova's in-process functional framework.

Nova's tests are testtools/unittest classes meant for stestr.  Under pytest
they need three things, all scoped to this directory:

* A skip, with the reason, for every test module here when Nova or its
  test-only dependencies (openstack-placement, wsgi-intercept, oslotest,
  ...) are not importable.
* ``nova.test.TestCase._clear_attrs`` (a cleanup) deletes every public
  instance attribute.  pytest's unittest runner stores the bound test
  method on the instance under the test's name and ``delattr``\\ s it after
  the run, which then fails with ``AttributeError: '<Test>' object has no
  attribute 'test_x'``.  The replacement below spares that one attribute.
* ``[wsgi] api_paste_config``: Nova's ``ConfFixture`` defaults it to
  ``$state_path/etc/nova/api-paste.ini`` (inside site-packages), where the
  wheel does not put it.  A test class's ``API_PASTE_CONFIG`` (the
  product adds its own paste filter) is what the test base applies; a
  class that sets none gets the installed Nova's file.
"""

from __future__ import annotations

import pytest

from . import NOVA_UNAVAILABLE
from . import nova_api_paste_ini

_SKIP_REASON = NOVA_UNAVAILABLE
if _SKIP_REASON is None:
    try:
        import nova.test

        # Pulls in placement, wsgi_intercept, os-brick fixtures, ...
        import nova.tests.functional.libvirt.base  # noqa: F401
    except ImportError as exc:
        _SKIP_REASON = (
            f"Nova's functional test framework is not importable ({exc}); "
            "pip install -r test-requirements.txt")


if _SKIP_REASON is not None:
    class _SkippedModule(pytest.Module):
        def collect(self):
            pytest.skip(_SKIP_REASON)

    def pytest_pycollect_makemodule(module_path, parent):
        # Never import the test modules: they import Nova at the top.
        return _SkippedModule.from_parent(parent, path=module_path)

else:
    def _clear_attrs(self):
        """nova.test.TestCase._clear_attrs, sparing what pytest put there."""
        keep = {"id", self._testMethodName}
        for key in [k for k in self.__dict__ if k[0] != "_" and
                    k not in keep]:
            del self.__dict__[key]

    @pytest.fixture(autouse=True)
    def _nova_clear_attrs_under_pytest(monkeypatch):
        monkeypatch.setattr(nova.test.TestCase, "_clear_attrs", _clear_attrs)

    @pytest.fixture(scope="session")
    def nova_api_paste_config(tmp_path_factory) -> str:
        """The installed Nova's api-paste.ini (written out if it is absent)."""
        path = nova_api_paste_ini()
        if path is None:
            generated = tmp_path_factory.mktemp("nova-etc") / "api-paste.ini"
            generated.write_text(_FALLBACK_API_PASTE_INI)
            path = str(generated)
        return path

    @pytest.fixture(autouse=True)
    def _nova_api_paste_config_default(request, nova_api_paste_config):
        # The test base applies API_PASTE_CONFIG (a parameter of the test,
        # not a patch of Nova's ConfFixture); a class that sets none gets
        # the installed Nova's, on this instance only.
        case = request.instance
        if case is not None and hasattr(case, "API_PASTE_CONFIG") \
                and not case.API_PASTE_CONFIG:
            case.API_PASTE_CONFIG = nova_api_paste_config


# Nova 34's etc/nova/api-paste.ini (the parts the compute API uses), for
# installs that did not lay down the data files.
_FALLBACK_API_PASTE_INI = """\
[composite:metadata]
use = egg:Paste#urlmap
/: meta

[pipeline:meta]
pipeline = cors http_proxy_to_wsgi metaapp

[app:metaapp]
paste.app_factory = nova.api.metadata.handler:MetadataRequestHandler.factory

[composite:osapi_compute]
use = call:nova.api.openstack.urlmap:urlmap_factory
/: oscomputeversions
/v2: oscomputeversion_legacy_v2
/v2.1: oscomputeversion_v2
/v2/+: openstack_compute_api_v21_legacy_v2_compatible
/v2.1/+: openstack_compute_api_v21

[composite:openstack_compute_api_v21]
use = call:nova.api.auth:pipeline_factory_v21
keystone = cors http_proxy_to_wsgi compute_req_id faultwrap request_log \
sizelimit osprofiler authtoken keystonecontext osapi_compute_app_v21

[composite:openstack_compute_api_v21_legacy_v2_compatible]
use = call:nova.api.auth:pipeline_factory_v21
keystone = cors http_proxy_to_wsgi compute_req_id faultwrap request_log \
sizelimit osprofiler authtoken keystonecontext legacy_v2_compatible \
osapi_compute_app_v21

[filter:request_log]
paste.filter_factory = nova.api.openstack.requestlog:RequestLog.factory

[filter:compute_req_id]
paste.filter_factory = nova.api.compute_req_id:ComputeReqIdMiddleware.factory

[filter:faultwrap]
paste.filter_factory = nova.api.openstack:FaultWrapper.factory

[filter:osprofiler]
paste.filter_factory = nova.profiler:WsgiMiddleware.factory

[filter:sizelimit]
paste.filter_factory = oslo_middleware:RequestBodySizeLimiter.factory

[filter:http_proxy_to_wsgi]
paste.filter_factory = \
oslo_middleware.http_proxy_to_wsgi:HTTPProxyToWSGI.factory

[filter:legacy_v2_compatible]
paste.filter_factory = nova.api.openstack:LegacyV2CompatibleWrapper.factory

[app:osapi_compute_app_v21]
paste.app_factory = nova.api.openstack.compute:APIRouterV21.factory

[pipeline:oscomputeversions]
pipeline = cors faultwrap request_log http_proxy_to_wsgi oscomputeversionapp

[pipeline:oscomputeversion_v2]
pipeline = cors compute_req_id faultwrap request_log http_proxy_to_wsgi \
oscomputeversionapp_v2

[pipeline:oscomputeversion_legacy_v2]
pipeline = cors compute_req_id faultwrap request_log http_proxy_to_wsgi \
legacy_v2_compatible oscomputeversionapp_v2

[app:oscomputeversionapp]
paste.app_factory = nova.api.openstack.compute.versions:Versions.factory

[app:oscomputeversionapp_v2]
paste.app_factory = nova.api.openstack.compute.versions:VersionsV2.factory

[filter:cors]
paste.filter_factory = oslo_middleware.cors:filter_factory
oslo_config_project = nova

[filter:keystonecontext]
paste.filter_factory = nova.api.auth:NovaKeystoneContext.factory

[filter:authtoken]
paste.filter_factory = keystonemiddleware.auth_token:filter_factory
"""
