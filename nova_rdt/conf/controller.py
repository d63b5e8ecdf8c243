"""``[rdt_controller]``: the runtime resource manager (nova-rdt controller)."""

from oslo_config import cfg

from nova_rdt.conf.types import FiniteFloatOpt

MAX_SECONDS = 3600.0

controller_group = cfg.OptGroup(
    "rdt_controller", title="nova-rdt runtime controller",
    help="The per-host runtime resource manager (nova-rdt controller): "
         "each period it reads MBM/CMT of nova-rdt's best-effort class "
         "groups and of protected instances, and an optional SLO signal, "
         "and lowers or raises the classes' MB and L3 ways within these "
         "bounds.  It never changes a protected instance, libvirt's or "
         "anyone else's group, and on stop it puts every class back to "
         "its static values.")

controller_opts = [
    cfg.StrOpt("policy", default="bandwidth-share",
               choices=[("bandwidth-share",
                         "From MBM alone: keep memory bandwidth below "
                         "target_utilisation of bandwidth_capacity_mbps, "
                         "protected instances first."),
                        ("slack",
                         "Heracles-style: from the SLO signal's slack "
                         "(needs at least one slo source)."),
                        ("static",
                         "Hold every class at its static values (a "
                         "baseline; useful with dry_run).")],
               help="The control law."),
    FiniteFloatOpt("period", default=5.0, min=0.1, max=MAX_SECONDS,
                   help="Seconds between observations and decisions."),
    cfg.BoolOpt("dry_run", default=False,
                help="Decide, log and export decisions, but write nothing "
                     "to resctrl."),
    cfg.ListOpt("classes", default=[],
                help="The [rdt] classes (by name) the controller manages; "
                     "empty manages every nova-rdt class group on the "
                     "host."),
    cfg.IntOpt("mb_min", default=10, min=1,
               help="The lowest MB a class is given, in the host's MB "
                    "units: percent, or MBps on an mba_MBps mount.  Raised "
                    "to the hardware's min_bandwidth."),
    cfg.IntOpt("mb_step", default=10, min=1,
               help="MB given back per raise, in the host's MB units."),
    cfg.IntOpt("ways_min", default=1, min=1, max=64,
               help="The fewest L3 ways per cache id a class keeps; raised "
                    "to the hardware's min_cbm_bits."),
    FiniteFloatOpt("min_interval", default=10.0, min=0.0, max=MAX_SECONDS,
                   help="Rate limit: seconds between two changes of one "
                        "class.  A cut on an SLO violation is not held."),
    cfg.IntOpt("raise_hold", default=3, min=1, max=1000,
               help="Hysteresis: consecutive periods a policy must ask to "
                    "raise a class before it is raised."),
    FiniteFloatOpt("low_slack", default=0.10, min=0.0, max=1.0,
                   help="slack policy: below this slack best effort is "
                        "cut one step per period."),
    FiniteFloatOpt("high_slack", default=0.30, min=0.0, max=1.0,
                   help="slack policy: above this slack best effort is "
                        "given one step back."),
    cfg.IntOpt("bandwidth_capacity_mbps", default=0, min=0,
               help="bandwidth-share policy: the host's usable memory "
                    "bandwidth in MiB/s (from STREAM or Intel MLC); 0 "
                    "learns it as the highest total seen."),
    FiniteFloatOpt("target_utilisation", default=0.7, min=0.05, max=1.0,
                   help="bandwidth-share policy: the fraction of the "
                        "capacity protected and best effort may use "
                        "together."),
    cfg.ListOpt("protected", default=[],
                help="Protected instances without an SLO signal: uuids "
                     "or domain names as the hook records them, resctrl "
                     "group names, or display names where only one "
                     "instance on the host has it (a display name two "
                     "tenants share is refused with a warning naming "
                     "their uuids).  Their groups are watched (MBM), "
                     "never changed."),
    cfg.MultiStrOpt("slo", default=[],
                    help="A protected instance with an SLO signal, as "
                         "INSTANCE=TARGET@SOURCE; SOURCE is file:PATH (a "
                         "file holding the current value, e.g. p99 "
                         "seconds) or prometheus:QUERY (an instant query "
                         "against prometheus_url returning one sample).  "
                         "Repeat for more instances."),
    cfg.URIOpt("prometheus_url", default="http://127.0.0.1:9090",
               schemes=["http", "https"],
               help="Prometheus for prometheus: SLO sources."),
    FiniteFloatOpt("slo_timeout", default=2.0, min=0.1, max=60.0,
                   help="Seconds an SLO source may take to answer."),
    FiniteFloatOpt("slo_max_age", default=0.0, min=0.0, max=MAX_SECONDS,
                   help="A file: SLO value older than this many seconds is "
                        "ignored; 0 means three periods."),
    cfg.StrOpt("state_file", default="",
               help="The controller's state (static and current values "
                    "of every class it changed, its pid), read by "
                    "nova-rdt reconcile and 'nova-rdt controller "
                    "restore'.  Empty: controller.json in [rdt] "
                    "state_path."),
    cfg.HostAddressOpt("listen_address", default="127.0.0.1",
                       help="Address of the controller's /metrics."),
    cfg.PortOpt("port", default=9788,
                help="Port of the controller's /metrics; 0 serves none."),
    cfg.StrOpt("web_config_file", default="",
               help="TLS and basic auth for the controller's /metrics, in "
                    "the same exporter-toolkit format as [rdt_exporter] "
                    "web_config_file (the two may share one file).  "
                    "Empty: plain HTTP.  Needs the web extra: pip install "
                    "'nova-rdt[web]' (PyYAML, bcrypt)."),
]


def register_opts(conf) -> None:
    """Register ``[rdt_controller]`` on ``conf`` unless it already is."""
    if "rdt_controller" in conf:
        return
    fresh = cfg.OptGroup(controller_group.name, title=controller_group.title,
                         help=controller_group.help)
    conf.register_group(fresh)
    conf.register_opts(controller_opts, group=fresh)


def list_opts():
    return [(controller_group, controller_opts)]
