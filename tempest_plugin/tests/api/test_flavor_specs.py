"""The rdt: flavor extra specs through the compute API."""

from tempest import config
from tempest.api.compute import base
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc
from tempest.lib.common.utils import data_utils

CONF = config.CONF


class RdtFlavorSpecsTest(base.BaseV2ComputeAdminTest):
    # Extra-spec validation (400 on bad keys) arrived in 2.86.
    min_microversion = "2.86"

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.nova_rdt.api_validators:
            raise cls.skipException(
                "nova-rdt's API validators are not installed "
                "([nova_rdt] api_validators = False)")

    def _flavor(self):
        flavor = self.admin_flavors_client.create_flavor(
            name=data_utils.rand_name("rdt"), ram=512, vcpus=2,
            disk=1)["flavor"]
        self.addCleanup(self.admin_flavors_client.delete_flavor,
                        flavor["id"])
        return flavor["id"]

    @decorators.idempotent_id("7a1f2f62-6c1e-4b77-9d1b-1f0c5d9a0a01")
    def test_rdt_specs_are_accepted(self):
        fid = self._flavor()
        specs = {"rdt:l3_cache_ways": "2", "rdt:pmd_share": "true",
                 "rdt:mb_percent": "50", "rdt:monitor": "true"}
        body = self.admin_flavors_client.set_flavor_extra_spec(
            fid, **specs)["extra_specs"]
        self.assertEqual(specs, {k: v for k, v in body.items()
                                 if k.startswith("rdt:")})

    @decorators.idempotent_id("7a1f2f62-6c1e-4b77-9d1b-1f0c5d9a0a02")
    def test_bad_rdt_specs_get_400_naming_the_key(self):
        fid = self._flavor()
        for key, value in (("rdt:l3_cache_ways", "lots"),
                           ("rdt:mb_percent", "101"),
                           ("rdt:l3_cache_way", "2")):
            exc = self.assertRaises(
                lib_exc.BadRequest,
                self.admin_flavors_client.set_flavor_extra_spec,
                fid, **{key: value})
            self.assertIn(key, str(exc))
