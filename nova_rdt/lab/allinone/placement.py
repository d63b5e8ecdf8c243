"""Placement, as devstack configures it."""

from __future__ import annotations

import os

from nova_rdt.lab.allinone import ini
from nova_rdt.lab.allinone import uwsgi


class Placement:
    user = "placement"
    service_type = "placement"

    def __init__(self, etc: str, sup, db_url: str, keystone,
                 pythonpath: list[str]):
        self.etc = etc
        self.db_url = db_url
        self.keystone = keystone
        self.conf = os.path.join(etc, "placement.conf")
        self.api = uwsgi.Api("placement-api",
                             "placement.wsgi.api:application", etc, sup,
                             {"OS_PLACEMENT_CONFIG_DIR": etc}, pythonpath)

    @property
    def url(self) -> str:
        return self.api.url

    def configure(self) -> None:
        ini.write(self.conf, {
            "DEFAULT": {"debug": True},
            "placement_database": {"connection": self.db_url},
            "api": {"auth_strategy": "keystone"},
            "keystone_authtoken": self.keystone.authtoken(self.user),
        })

    def manage_steps(self) -> list[list[str]]:
        return [["placement-manage", "--config-file", self.conf, "db",
                 "sync"]]
