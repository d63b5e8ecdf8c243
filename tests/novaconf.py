"""Reads a nova.conf with nova-rdt's options and the few Nova options
nova-rdt's samples and devstack plugin set, for tests."""

from __future__ import annotations

from oslo_config import cfg

from nova_rdt import conf as conf_mod


def load(*paths: str) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    conf_mod.register_opts(conf)
    conf.register_opt(cfg.StrOpt("compute_driver"))
    conf.register_opts([cfg.MultiStrOpt("available_filters"),
                        cfg.ListOpt("enabled_filters")],
                       group="filter_scheduler")
    conf([], default_config_files=list(paths))
    return conf
