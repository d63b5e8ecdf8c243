"""Glance with a file store, as devstack configures it."""

from __future__ import annotations

import os
import shutil
import sys

from nova_rdt.lab.allinone import ini
from nova_rdt.lab.allinone import uwsgi

#: The paste file glance ships (the wheel installs it as data).
PASTE = os.path.join(sys.prefix, "etc", "glance", "glance-api-paste.ini")


class Glance:
    user = "glance"
    service_type = "image"

    def __init__(self, etc: str, data: str, sup, db_url: str, keystone,
                 pythonpath: list[str]):
        self.etc = etc
        self.data = data
        self.db_url = db_url
        self.keystone = keystone
        self.conf = os.path.join(etc, "glance-api.conf")
        self.api = uwsgi.Api("glance-api", "glance.wsgi.api:application",
                             etc, sup, {"OS_GLANCE_CONFIG_DIR": etc},
                             pythonpath)

    @property
    def url(self) -> str:
        return self.api.url

    def configure(self) -> None:
        os.makedirs(self.etc, exist_ok=True)
        shutil.copy(PASTE, os.path.join(self.etc, "glance-api-paste.ini"))
        store = lambda name: {"filesystem_store_datadir": os.path.join(  # noqa: E731
            self.data, name)}
        ini.write(self.conf, {
            "DEFAULT": {"debug": True, "use_stderr": True,
                        "enabled_backends": "file:file",
                        "worker_self_reference_url": self.url,
                        "image_cache_dir": os.path.join(self.data, "cache")},
            "database": {"connection": self.db_url},
            "keystone_authtoken": self.keystone.authtoken(self.user),
            "paste_deploy": {"flavor": "keystone"},
            "glance_store": {"default_backend": "file"},
            "file": store("images"),
            "os_glance_staging_store": store("staging"),
            "os_glance_tasks_store": store("tasks"),
            "oslo_concurrency": {"lock_path": os.path.join(self.data,
                                                           "lock")},
        })

    def manage_steps(self) -> list[list[str]]:
        return [["glance-manage", "--config-file", self.conf, "db_sync"]]
