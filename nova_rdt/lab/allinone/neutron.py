"""Neutron: its API (uWSGI), its RPC server, and ML2 with the
openvswitch mechanism driver and flat provider networks, as devstack
runs it on OVS.

The API under uWSGI serves no RPC: ``neutron-rpc-server`` is the process
the agents report to and that turns their port updates into port status
changes (and Nova's ``network-vif-plugged`` events, which nova-compute
waits for before it resumes a guest).  The agent itself is
:mod:`.dataplane`'s.  Nova calls Neutron even for servers booted with
``--nic none`` (deleting one lists its ports).
"""

from __future__ import annotations

import os
import shutil
import sys

from nova_rdt.lab.allinone import dataplane
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
                "notify_nova_on_port_status_changes": True,
                "notify_nova_on_port_data_changes": True,
                # One RPC worker: two cores, as devstack's API_WORKERS.
                "rpc_workers": 1, "rpc_state_report_workers": 1,
                "graceful_shutdown_timeout": 5,
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
            "ml2_type_flat": {"flat_networks": ",".join(
                ("public",) + dataplane.PHYSNETS)},
        })

    def manage_steps(self) -> list[list[str]]:
        return [["neutron-db-manage", "--config-file", self.conf,
                 "--config-file", self.ml2, "upgrade", "heads"]]

    def rpc_server_argv(self) -> list[str]:
        return ["neutron-rpc-server", "--config-file", self.conf,
                "--config-file", self.ml2]
