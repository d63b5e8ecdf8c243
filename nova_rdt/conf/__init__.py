"""nova-rdt's configuration options ([rdt] in nova.conf or nova-rdt.conf)."""

from oslo_config import cfg

from nova_rdt.resctrl import capabilities
from nova_rdt.resctrl import groups

rdt_group = cfg.OptGroup(
    "rdt", title="Intel RDT",
    help="How nova-rdt finds and manages the host's resctrl filesystem.")

resctrl_opts = [
    cfg.StrOpt("resctrl_root", default=capabilities.DEFAULT_ROOT,
               help="Mount point of the resctrl filesystem."),
    cfg.StrOpt("sysfs_cpu_root", default=capabilities.DEFAULT_SYSFS_CPU,
               help="Directory holding cpu*/cache/index*/, where cache ids "
                    "and sizes are read."),
    cfg.StrOpt("group_prefix", default=groups.DEFAULT_PREFIX,
               help="Name prefix of the resctrl groups nova-rdt creates. "
                    "Groups without it (libvirt's, pqos', container "
                    "runtimes') are never changed or removed."),
    cfg.FloatOpt("lock_timeout", default=30.0, min=0.1,
                 help="Seconds to wait for the resctrl flock that libvirt "
                      "also takes before giving up."),
]


def register_opts(conf) -> None:
    conf.register_group(rdt_group)
    conf.register_opts(resctrl_opts, group=rdt_group)


def list_opts():
    return [(rdt_group, resctrl_opts)]
