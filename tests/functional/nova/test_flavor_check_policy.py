"""The paste filter answers only callers Nova's policy lets through.

Nova's API (the real paste pipeline with rdt_flavor_check before the app,
keystone stubbed as Nova's own functional tests stub it, the real policy
engine with its default rules): a member who sends a bad rdt: spec gets
Nova's 403, never the filter's 400 describing the spec; an admin gets the
400; and a policy file that lets members change extra specs lets them
reach the filter's 400, so the filter follows Nova's policy, not a role
name of its own.
"""

import re

import fixtures
from nova.policies import flavor_extra_specs as fes_policies
from nova.tests.functional import integrated_helpers
from nova.tests.functional.api import client

from tests.functional.nova import nova_api_paste_ini

# Valid: way allocation on NUMA node 1 of a two-node flavor.  Deleting
# hw:numa_nodes would leave a suffix beyond the flavor's nodes.
GOOD = {"hw:numa_nodes": "2", "rdt:l3_cache_ways.1": "1"}
BAD = {"rdt:l3_cache_ways.1": "lots"}


def _paste_ini(tmp_dir: str) -> str:
    """Nova's api-paste.ini with rdt_flavor_check right before the app."""
    with open(nova_api_paste_ini()) as f:
        text = f.read()
    text = re.sub(r"(\s)osapi_compute_app_v21\b",
                  r"\1rdt_flavor_check osapi_compute_app_v21", text)
    text += ("\n[filter:rdt_flavor_check]\npaste.filter_factory = "
             "nova_rdt.api.flavor_check:filter_factory\n")
    path = f"{tmp_dir}/api-paste.ini"
    with open(path, "w") as f:
        f.write(text)
    return path


class FlavorCheckPolicyTest(integrated_helpers._IntegratedTestBase):
    REQUIRES_LOCKING = False

    def _setup_services(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        self.flags(api_paste_config=_paste_ini(tmp), group="wsgi")
        super()._setup_services()

    def setUp(self):
        super().setUp()
        flavor = self.admin_api.post_flavor({"flavor": {
            "name": "rdt-policy", "ram": 512, "vcpus": 2, "disk": 1}})
        self.flavor_id = flavor["id"]
        self.admin_api.post_extra_spec(self.flavor_id,
                                       {"extra_specs": GOOD})

    def _specs(self):
        return self.admin_api.api_get(
            f"/flavors/{self.flavor_id}/os-extra_specs").body["extra_specs"]

    def _requests(self, api):
        """Each extra-spec write the filter checks, with a bad rdt: spec."""
        base = f"/flavors/{self.flavor_id}/os-extra_specs"
        return {
            "POST": lambda: api.api_post(base, {"extra_specs": BAD}),
            "PUT": lambda: api.api_put(f"{base}/rdt:l3_cache_ways.1", BAD),
            # The filter judges the flavor as the deletion would leave it.
            "DELETE": lambda: api.api_delete(f"{base}/hw:numa_nodes"),
        }

    def test_member_gets_nova_403_not_the_filter_400(self):
        before = self._specs()
        for method, call in self._requests(self.api).items():
            exc = self.assertRaises(client.OpenStackApiException, call)
            self.assertEqual(403, exc.response.status_code, method)
            body = exc.response.text
            self.assertIn("os-flavor-extra-specs", body, method)
            self.assertNotIn("rdt:", body, method)
            self.assertNotIn("Validation failed", body, method)
        self.assertEqual(before, self._specs())

    def test_admin_still_gets_the_filter_400_naming_the_key(self):
        before = self._specs()
        for method, call in self._requests(self.admin_api).items():
            exc = self.assertRaises(client.OpenStackApiException, call)
            self.assertEqual(400, exc.response.status_code, method)
            self.assertIn("rdt:l3_cache_ways.1", exc.response.text, method)
        self.assertEqual(before, self._specs())

    def test_a_policy_that_lets_members_write_lets_them_reach_the_check(self):
        rules = {fes_policies.POLICY_ROOT % a: "@"
                 for a in ("create", "update", "delete")}
        self.policy.set_rules(rules, overwrite=False)
        exc = self.assertRaises(
            client.OpenStackApiException, self.api.api_post,
            f"/flavors/{self.flavor_id}/os-extra_specs",
            {"extra_specs": BAD})
        self.assertEqual(400, exc.response.status_code)
        self.assertIn("rdt:l3_cache_ways.1", exc.response.text)
        # ... and a good spec from that member is stored.
        self.api.api_post(f"/flavors/{self.flavor_id}/os-extra_specs",
                          {"extra_specs": {"rdt:l3_cache_ways.1": "2"}})
        self.assertEqual("2", self._specs()["rdt:l3_cache_ways.1"])

    def test_member_without_the_flavor_gets_403_before_404(self):
        # Nova's controller checks policy before looking the flavor up.
        resp = self.assertRaises(
            client.OpenStackApiException, self.api.api_post,
            "/flavors/no-such-flavor/os-extra_specs",
            {"extra_specs": BAD}).response
        self.assertEqual(403, resp.status_code)
