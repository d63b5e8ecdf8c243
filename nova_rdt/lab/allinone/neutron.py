"""Neutron's API (ML2, no agents): the network service Nova asks.

Nova calls Neutron even for servers booted with ``--nic none``: deleting
one lists its ports (``deallocate_for_instance``), and without a network
endpoint that fails and the server goes to ERROR.  So the cloud runs
neutron's API with ML2 and the openvswitch mechanism driver, as devstack
does on OVS, but no agents: nothing here binds a port.
"""

from __future__ import annotations

import os
import shutil
import sys

from nova_rdt.lab.allinone import ini
from nova_rdt.lab.allinone import uwsgi

PASTE = os.path.join(sys.prefix, "etc", "neutron", "api-paste.ini")


class Neutron:
    user = "neutron"
    service_type = "network"

    def __init__(self, etc: str, data: str, sup, db_url: str, keystone,
                 transport_url: str, pythonpath: list[str]):
        self.etc = etc
        self.data = data
        self.db_url = db_url
        self.keystone = keystone
        self.transport_url = transport_url
        self.conf = os.path.join(etc, "neutron.conf")
        self.ml2 = os.path.join(etc, "ml2_conf.ini")
        self.api = uwsgi.Api(
            "neutron-api", "neutron.wsgi.api:application", etc, sup,
            {"OS_NEUTRON_CONFIG_FILES": f"{self.conf};{self.ml2}"},
            pythonpath)

    @property
    def url(self) -> str:
        return self.api.url

    def configure(self) -> None:
        os.makedirs(self.etc, exist_ok=True)
        shutil.copy(PASTE, os.path.join(self.etc, "api-paste.ini"))
        nova = self.keystone.client_auth("nova")
        ini.write(self.conf, {
            "DEFAULT": {
                "debug": True, "use_stderr": True, "core_plugin": "ml2",
                "service_plugins": "", "auth_strategy": "keystone",
                "transport_url": self.transport_url,
                "api_paste_config": os.path.join(self.etc,
                                                 "api-paste.ini"),
                "notify_nova_on_port_status_changes": False,
                "notify_nova_on_port_data_changes": False,
                "state_path": self.data},
            "database": {"connection": self.db_url},
            "keystone_authtoken": self.keystone.authtoken(self.user),
            "nova": nova,
            "oslo_concurrency": {"lock_path": os.path.join(self.data,
                                                           "lock")},
        })
        ini.write(self.ml2, {
            "ml2": {"type_drivers": "flat,vlan",
                    "tenant_network_types": "",
                    "mechanism_drivers": "openvswitch",
                    "extension_drivers": "port_security"},
            "ml2_type_flat": {"flat_networks": "public"},
        })

    def manage_steps(self) -> list[list[str]]:
        return [["neutron-db-manage", "--config-file", self.conf,
                 "--config-file", self.ml2, "upgrade", "heads"]]
