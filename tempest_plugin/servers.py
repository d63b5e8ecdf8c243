"""Flavors and NIC-less servers for the whitebox tests, deleted (and
waited for) at clean-up: a mixin of Tempest's admin compute tests."""

from tempest import config
from tempest.common import waiters
from tempest.lib.common.utils import data_utils

CONF = config.CONF


class RdtServersMixin:
    """Needs ``admin_flavors_client`` and ``admin_servers_client``
    (``base.BaseV2ComputeAdminTest``) and microversion 2.37 or later
    (``networks: "none"``)."""

    def flavor(self, specs, vcpus=1, ram=128):
        flavor = self.admin_flavors_client.create_flavor(
            name=data_utils.rand_name("rdt"), ram=ram, vcpus=vcpus,
            disk=1)["flavor"]
        self.addCleanup(self.admin_flavors_client.delete_flavor,
                        flavor["id"])
        self.admin_flavors_client.set_flavor_extra_spec(flavor["id"],
                                                        **specs)
        return flavor["id"]

    def boot(self, flavor_id, wait_until="ACTIVE", **kwargs):
        """A server with no NIC; deleted (and waited for) at clean-up.
        ``kwargs`` go to create_server (``scheduler_hints``...)."""
        body = self.admin_servers_client.create_server(
            name=data_utils.rand_name("rdt"), flavorRef=flavor_id,
            imageRef=CONF.compute.image_ref, networks="none",
            **kwargs)["server"]
        self.addCleanup(waiters.wait_for_server_termination,
                        self.admin_servers_client, body["id"])
        self.addCleanup(self.admin_servers_client.delete_server, body["id"])
        if wait_until:
            waiters.wait_for_server_status(self.admin_servers_client,
                                           body["id"], wait_until)
        return body["id"]
