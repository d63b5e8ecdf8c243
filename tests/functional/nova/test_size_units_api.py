"""A bare ``rdt:l3_cache_size`` is refused by Nova's API, naming the key
and the unit it needs (issue 31): through Nova's per-key validators
(microversion 2.86 and later) and through the rdt_flavor_check paste
filter on every microversion, so ``2816`` (a StarlingX ``hw:cache_l3``
value, in KiB, copied over) never reaches the scheduler as 2816 bytes.
The real API: Nova's paste pipeline, its validators and policy."""

import fixtures
from nova.tests.functional import integrated_helpers
from nova.tests.functional.api import client

from tests.functional.nova.test_flavor_check_policy import _paste_ini


class SizeUnitsTest(integrated_helpers._IntegratedTestBase):
    REQUIRES_LOCKING = False

    def _setup_services(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        self.flags(api_paste_config=_paste_ini(tmp), group="wsgi")
        super()._setup_services()

    def setUp(self):
        super().setUp()
        flavor = self.admin_api.post_flavor({"flavor": {
            "name": "rdt-units", "ram": 512, "vcpus": 2, "disk": 1}})
        self.flavor_id = flavor["id"]

    def _specs(self):
        return self.admin_api.api_get(
            f"/flavors/{self.flavor_id}/os-extra_specs").body["extra_specs"]

    def _post(self, specs, microversion):
        self.admin_api.microversion = microversion
        return self.admin_api.api_post(
            f"/flavors/{self.flavor_id}/os-extra_specs",
            {"extra_specs": specs})

    def test_a_bare_size_is_a_400_naming_the_key_and_the_unit(self):
        # The paste filter sits before Nova's app, so it answers on every
        # microversion; Nova's validators (2.86+) would refuse the same
        # value (tests/unit/test_spec_units.py).
        for mv in ("2.85", "2.86", "latest"):
            for key in ("rdt:l3_cache_size", "rdt:l3_cache_size.0"):
                exc = self.assertRaises(
                    client.OpenStackApiException, self._post,
                    {key: "2816"}, mv)
                self.assertEqual(400, exc.response.status_code, mv)
                body = exc.response.text
                self.assertIn(key, body, mv)
                self.assertIn("has no unit", body, mv)
                self.assertIn("2816KiB", body, mv)
        # CDP halves too, on the filter's path.
        exc = self.assertRaises(
            client.OpenStackApiException, self._post,
            {"rdt:l3_code_size": "1024", "rdt:l3_data_size": "1MiB"}, "2.85")
        self.assertEqual(400, exc.response.status_code)
        self.assertIn("rdt:l3_code_size", exc.response.text)
        self.assertEqual({}, self._specs())

    def test_sizes_with_units_are_stored(self):
        self._post({"rdt:l3_cache_size": "2.75MiB"}, "2.86")
        self._post({"rdt:l3_cache_size.1": "2816KiB", "hw:numa_nodes": "2"},
                   "2.85")
        self.assertEqual({"rdt:l3_cache_size": "2.75MiB",
                          "rdt:l3_cache_size.1": "2816KiB",
                          "hw:numa_nodes": "2"}, self._specs())
