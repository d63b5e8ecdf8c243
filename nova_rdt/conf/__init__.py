"""nova-rdt's configuration options ([rdt] in nova.conf or nova-rdt.conf).

``[rdt]`` and ``[rdt_exporter]`` are defined here; beside them:

* ``controller``: ``[rdt_controller]``, the runtime resource manager's;
* ``samples``: the configuration samples under ``etc/``, generated;
* ``types``: option types oslo.config lacks (a float that must be finite).
"""

from oslo_config import cfg

from nova_rdt import naming
from nova_rdt.conf.types import FiniteFloatOpt
from nova_rdt.resctrl import capabilities

# Time options: finite and bounded (see nova_rdt.conf.types).
MAX_SECONDS = 3600.0

rdt_group = cfg.OptGroup(
    "rdt", title="Intel RDT",
    help="How nova-rdt finds and manages the host's resctrl filesystem.")

resctrl_opts = [
    cfg.StrOpt("resctrl_root", default=capabilities.DEFAULT_ROOT,
               help="Mount point of the resctrl filesystem."),
    cfg.StrOpt("sysfs_cpu_root", default=capabilities.DEFAULT_SYSFS_CPU,
               help="Directory holding cpu*/cache/index*/, where cache ids "
                    "and sizes are read."),
    cfg.StrOpt("group_prefix", default=naming.DEFAULT_PREFIX,
               help="Name prefix of the resctrl groups nova-rdt creates. "
                    "Groups without it (libvirt's, pqos', container "
                    "runtimes') are never changed or removed.  1-64 of "
                    "letters, digits and '_.:-'; a prefix that a libvirt "
                    "group name could start with ('q', 'qemu-', "
                    "'qemu-1-', 'vcpus') is refused."),
    FiniteFloatOpt("lock_timeout", default=30.0, min=0.1, max=MAX_SECONDS,
                   help="Seconds to wait for the resctrl flock that "
                        "libvirt also takes before giving up."),
]

# Options read by nova-compute's driver extension and the scheduler filter.
host_opts = [
    cfg.IntOpt("reserved_host_ways", default=2, min=1, max=64,
               help="L3 ways per cache id kept by the default (root) "
                    "group: the HOST domain where the OS and every "
                    "unmanaged task run.  At init_host nova-rdt shrinks "
                    "the root group's L3 masks to the lowest this many "
                    "ways; until then libvirt can allocate nothing, since "
                    "the root holds every way.  Must be at least the "
                    "hardware's min_cbm_bits."),
    cfg.IntOpt("pmd_shared_ways", default=0, min=0, max=64,
               help="L3 ways per cache id owned by the OVS-DPDK PMD group "
                    "on their own (the shared base of ONP Table 3-1), "
                    "taken from the top of the mask.  0 leaves the PMD "
                    "cores in the HOST domain.  The ways of instances "
                    "with rdt:pmd_share=true are added to the PMD group "
                    "on top of these.  More than 0 needs pmd_cos = true."),
    cfg.BoolOpt("require_resctrl", default=True,
                help="Refuse to start nova-compute when resctrl is not "
                     "mounted at resctrl_root or the [rdt] options cannot "
                     "be honoured on this host.  When False, a host "
                     "without resctrl runs as a plain libvirt host and "
                     "reports no CUSTOM_RDT_* traits."),
    cfg.StrOpt("missing_rdt_policy", default="reject",
               choices=[("reject",
                         "Fail the build (and reschedule) of an instance "
                         "whose flavor asks for RDT the host cannot give."),
                        ("ignore",
                         "Boot it without the RDT elements and log a "
                         "warning.")],
               help="What nova-compute does with an instance whose rdt: "
                    "extra specs this host cannot honour (no CAT, no MBA, "
                    "no CDP...).  The RDTFilter keeps such requests away "
                    "from such hosts; this decides what happens when the "
                    "filter is not enabled or the host is forced."),
    cfg.StrOpt("monitor_default", default="rdt",
               choices=[("none", "No <monitor> unless rdt:monitor=true."),
                        ("rdt", "Monitor instances with any rdt: spec."),
                        ("all", "Monitor every instance.")],
               help="Which instances get CMT/MBM monitoring (a libvirt "
                    "<monitor>, one RMID each) when their flavor does "
                    "not set rdt:monitor."),
]


# The libvirt hook, the PMD COS and the class groups (nova-rdt hook,
# nova-rdt pmd sync, nova-rdt reconcile).
hook_opts = [
    cfg.MultiStrOpt("classes", default=[],
                    help="A shared class group that instances with "
                         "rdt:class=NAME join, as NAME:l3_ways=N[,mb=P]: N "
                         "ways on every cache id and P percent MB (MBps on "
                         "an mba_MBps mount) on every node.  Repeat the "
                         "option for more classes.  All members of a class "
                         "cost one CLOS together."),
    cfg.BoolOpt("pmd_cos", default=False,
                help="Keep the OVS-DPDK PMD cores in a group whose ways are "
                     "pmd_shared_ways joined with the ways of running "
                     "instances with rdt:pmd_share=true (ONP Table 3-1)."),
    cfg.BoolOpt("compaction", default=False,
                help="When an instance's ways fit the free ways of a cache "
                     "id but not in one run, move other instances' masks "
                     "(never an rdt:slo=latency instance's) to make one. "
                     "Every move is counted and logged.  Off: such an "
                     "instance is refused on this host."),
    cfg.StrOpt("ovsdb_connection",
               default="unix:/var/run/openvswitch/db.sock",
               help="OVSDB to read other_config:pmd-cpu-mask from."),
    cfg.StrOpt("ovs_vswitchd_pidfile",
               default="/var/run/openvswitch/ovs-vswitchd.pid",
               help="ovs-vswitchd's pidfile, to find its PMD threads."),
    cfg.StrOpt("ovs_vswitchd_target", default="ovs-vswitchd",
               help="ovs-appctl -t target of ovs-vswitchd: a name in "
                    "OVS's run directory or a control socket path."),
    cfg.StrOpt("state_path", default="/var/lib/nova-rdt",
               help="Where the hook records the running instances it "
                    "manages (one small JSON file each)."),
    cfg.StrOpt("libvirt_qemu_run_dir", default="/run/libvirt/qemu",
               help="Where libvirt keeps QEMU pidfiles (<name>.pid)."),
    cfg.BoolOpt("hook_strict", default=False,
                help="Make a domain start fail when the hook cannot apply "
                     "isolation (class group, PMD COS).  By default the "
                     "hook logs the failure and lets the domain start."),
    FiniteFloatOpt("hook_timeout", default=10.0, min=0.5, max=MAX_SECONDS,
                   help="Seconds the hook may take before it gives up "
                        "(and lets the start go on, unless hook_strict)."),
]


exporter_group = cfg.OptGroup(
    "rdt_exporter", title="nova-rdt exporter",
    help="The per-host Prometheus exporter, way-map page and "
         "notifications (nova-rdt exporter).  Notifications use "
         "[oslo_messaging_notifications] driver, topics and transport_url; "
         "with its default noop driver none are sent.")

exporter_opts = [
    cfg.HostAddressOpt("listen_address", default="127.0.0.1",
                       help="Address the exporter listens on.  The "
                            "default serves this host only (a local "
                            "Prometheus agent or a reverse proxy); set "
                            "the host's management address, or 0.0.0.0, "
                            "to let a central Prometheus scrape it."),
    cfg.PortOpt("port", default=9787,
                help="Port of /metrics, the way-map page / and "
                     "/api/layout."),
    FiniteFloatOpt("notify_interval", default=60.0, min=0.0,
                   max=MAX_SECONDS,
                   help="Seconds between rdt.instance.sample notifications "
                        "(and checks for rdt.allocation.* changes); 0 "
                        "turns notifications off."),
    FiniteFloatOpt("capabilities_ttl", default=60.0, min=0.0,
                   max=MAX_SECONDS,
                   deprecated_for_removal=True,
                   deprecated_reason="The capabilities are kept per "
                                     "resctrl mount and re-read exactly "
                                     "when it changes (a remount, CPU "
                                     "hotplug); a time to live only "
                                     "served stale ones after a remount. "
                                     "The value is ignored.",
                   help="Ignored."),
    FiniteFloatOpt("client_timeout", default=10.0, min=0.1, max=300.0,
                   help="Seconds a client connection may stay silent "
                        "(sending its request or reading the answer) "
                        "before the exporter closes it, so that slow or "
                        "stalled clients cannot hold its threads."),
    cfg.StrOpt("web_config_file", default="",
               help="TLS and basic auth for the exporter's port: a web "
                    "configuration file in the Prometheus "
                    "exporter-toolkit format (tls_server_config with "
                    "cert_file and key_file, basic_auth_users with bcrypt "
                    "hashes).  Empty: plain HTTP, open to whoever reaches "
                    "listen_address.  Re-read when it or a file it names "
                    "changes.  Needs the web extra: pip install "
                    "'nova-rdt[web]' (PyYAML, bcrypt)."),
]


def register_opts(conf) -> None:
    # A fresh OptGroup per ConfigOpts: oslo copies a registered group
    # shallowly, so sharing the module's would share set_override()s
    # (and values) between unrelated ConfigOpts objects.
    for group, opts in list_opts():
        fresh = cfg.OptGroup(group.name, title=group.title, help=group.help)
        conf.register_group(fresh)
        conf.register_opts(opts, group=fresh)


def list_opts():
    # Imported here: nova_rdt.conf.controller imports this package's
    # types module, and list_opts is what the sample generator calls.
    from nova_rdt.conf import controller as controller_conf

    return ([(rdt_group, resctrl_opts + host_opts + hook_opts),
             (exporter_group, exporter_opts)]
            + controller_conf.list_opts())
