"""Nova: nova.conf as devstack's lib/nova writes it, the databases and
cells, and its four services.

Everything Nova runs reads ``/etc/nova`` in the lab's mount namespace
(a directory of the lab): nova-rootwrap's filters and the plugin's
settings are written for that path, as on a devstack host.  The API runs
under uWSGI as devstack runs it; conductor and scheduler with one worker
each (devstack's API_WORKERS on two cores); nova-compute with
``nova-cpu.conf``, the copy devstack makes without the database options.
"""

from __future__ import annotations

import os
import shutil
import sys

from nova_rdt.lab.allinone import ini
from nova_rdt.lab.allinone import keystone as keystone_mod
from nova_rdt.lab.allinone import uwsgi

#: Where Nova's configuration is, seen from the lab's namespace.
CONF_DIR = "/etc/nova"
NOVA_CONF = f"{CONF_DIR}/nova.conf"
NOVA_CPU_CONF = f"{CONF_DIR}/nova-cpu.conf"
API_PASTE = f"{CONF_DIR}/api-paste.ini"
#: devstack's NOVA_FILTERS (lib/nova); the plugin adds RDTFilter.
FILTERS = ("ComputeFilter,ComputeCapabilitiesFilter,ImagePropertiesFilter,"
           "ServerGroupAntiAffinityFilter,ServerGroupAffinityFilter,"
           "SameHostFilter,DifferentHostFilter")
CELL = "cell1"


class Nova:
    user = "nova"
    service_type = "compute"

    def __init__(self, etc: str, data: str, sup, db, keystone,
                 transport_url: str, pythonpath: list[str]):
        """``etc``: the lab directory shown at /etc/nova."""
        self.etc = etc
        self.data = data
        self.sup = sup
        self.db = db
        self.keystone = keystone
        self.transport_url = transport_url
        self.pythonpath = pythonpath
        self.conf = os.path.join(etc, "nova.conf")
        self.cpu_conf = os.path.join(etc, "nova-cpu.conf")
        self.api = uwsgi.Api(
            "nova-api", "nova.wsgi.osapi_compute:application", etc, sup,
            {"OS_NOVA_CONFIG_DIR": CONF_DIR}, pythonpath)

    @property
    def url(self) -> str:
        return self.api.url + "/v2.1"

    def urls(self) -> dict[str, str]:
        return {name: self.db.url(f"nova_{name}")
                for name in ("api", "cell0", "cell1")}

    def base_conf(self, libvirt: dict, rdt_host: dict) -> dict:
        """nova.conf before the plugin: lib/nova's create_nova_conf (and
        configure_placement_nova_compute, configure_neutron_nova) with
        the lab's paths; ``libvirt``: the [libvirt] options this machine
        needs; ``rdt_host``: the [rdt] options naming the lab's OVS (the
        plugin owns the rest of [rdt])."""
        urls = self.urls()
        ks = self.keystone
        return {
            "DEFAULT": {
                "debug": True, "use_stderr": True,
                "transport_url": self.transport_url,
                "my_ip": "127.0.0.1",
                "rootwrap_config": f"{CONF_DIR}/rootwrap.conf",
                "state_path": os.path.join(self.data, "state"),
                "instances_path": os.path.join(self.data, "instances"),
                "instance_name_template": "instance-%08x",
                "allow_resize_to_same_host": True,
                # [libvirt] file_backed_memory (vhost-user) requires both.
                "ram_allocation_ratio": 1.0, "reserved_host_memory_mb": 0,
                "report_interval": 10, "service_down_time": 60,
                "shutdown_timeout": 0, "graceful_shutdown_timeout": 5,
            },
            "wsgi": {"api_paste_config": API_PASTE},
            "api": {"auth_strategy": "keystone"},
            "api_database": {"connection": urls["api"]},
            "database": {"connection": urls["cell1"]},
            "conductor": {"workers": 1},
            "scheduler": {"workers": 1},
            "filter_scheduler": {"enabled_filters": FILTERS},
            "keystone_authtoken": ks.authtoken(self.user),
            "placement": ks.client_auth("placement"),
            "neutron": ks.client_auth("neutron"),
            # lib/nova's: Nova's calls on a user's behalf carry its own
            # service token too.  Neutron lets only the service role
            # delete a port bound to a server (delete_port's "not
            # rule:compute_device" for members).
            "service_user": {**ks.client_auth(self.user),
                             "send_service_user_token": True},
            "glance": {"region_name": keystone_mod.REGION},
            "oslo_concurrency": {"lock_path": os.path.join(self.data,
                                                           "lock")},
            "oslo_messaging_notifications": {"driver": "messagingv2"},
            "upgrade_levels": {"compute": "auto"},
            "vnc": {"enabled": False},
            "libvirt": libvirt,
            "rdt": rdt_host,
        }

    def write_conf(self, libvirt: dict, rdt_host: dict,
                   overrides: dict | None = None) -> None:
        """nova.conf, api-paste.ini and rootwrap (devstack copies both from
        Nova, and points rootwrap at its bin directory and filters);
        ``overrides``: options replaced or added, per section (a second
        compute's host and state)."""
        os.makedirs(os.path.join(self.etc, "rootwrap.d"), exist_ok=True)
        for sub in ("state", "instances", "lock"):
            os.makedirs(os.path.join(self.data, sub), exist_ok=True)
        shipped = os.path.join(sys.prefix, "etc", "nova")
        shutil.copy(os.path.join(shipped, "api-paste.ini"),
                    os.path.join(self.etc, "api-paste.ini"))
        shutil.copy(os.path.join(shipped, "rootwrap.d", "compute.filters"),
                    os.path.join(self.etc, "rootwrap.d", "compute.filters"))
        bindir = os.path.dirname(sys.executable)
        ini.write(os.path.join(self.etc, "rootwrap.conf"), {"DEFAULT": {
            "filters_path": f"{CONF_DIR}/rootwrap.d",
            "exec_dirs": f"{bindir},/sbin,/usr/sbin,/bin,/usr/bin,"
                         f"/usr/local/sbin,/usr/local/bin",
            "use_syslog": False}}, mode=0o644)
        conf = self.base_conf(libvirt, rdt_host)
        for section, options in (overrides or {}).items():
            conf[section] = {**conf.get(section, {}), **options}
        ini.write(self.conf, conf)

    #: devstack's start_nova_compute, after the plugin's post-config.
    CPU_CONF_BASH = (f"cp {NOVA_CONF} {NOVA_CPU_CONF}\n"
                     f"inidelete {NOVA_CPU_CONF} database connection\n"
                     f"inidelete {NOVA_CPU_CONF} api_database connection\n")

    def manage_chains(self) -> list[list[list[str]]]:
        """lib/nova's init_nova and init_nova_cells, as chains that may
        run side by side: the API database and the cell mappings; the
        cell1 schema; the cell0 schema (``db sync --local_cell`` with a
        config naming cell0, where devstack's ``db sync`` reaches it
        through the mapping: the same migrations, sooner)."""
        urls = self.urls()
        m = ["nova-manage", "--config-file", self.conf]
        cell0_conf = os.path.join(self.etc, "nova-cell0-sync.conf")
        ini.write(cell0_conf, {"database": {"connection": urls["cell0"]}})
        return [
            [m + ["api_db", "sync"],
             m + ["cell_v2", "map_cell0", "--database_connection",
                  urls["cell0"]],
             m + ["cell_v2", "create_cell", "--name", CELL,
                  "--transport-url", self.transport_url,
                  "--database_connection", urls["cell1"], "--verbose"]],
            [m + ["db", "sync", "--local_cell"]],
            [["nova-manage", "--config-file", cell0_conf, "db", "sync",
              "--local_cell"]],
        ]

    def discover_hosts(self) -> list[str]:
        return ["nova-manage", "--config-file", self.conf, "cell_v2",
                "discover_hosts", "--verbose"]
