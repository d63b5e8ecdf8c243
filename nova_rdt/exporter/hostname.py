"""The exporter's ``host`` label: Nova's ``[DEFAULT] host``.

Nova names a compute by ``[DEFAULT] host`` (the machine's hostname unless
set); the exporter reads the same option from the same config files, so
that its series join Nova's host names (hypervisors, instances'
``OS-EXT-SRV-ATTR:host``, the scheduler's logs).
"""

from __future__ import annotations

import socket


def nova_host(config_files: list[str] | None,
              override: str | None = None) -> str:
    """``override`` if given, else ``[DEFAULT] host`` of the files, else
    the hostname, as Nova itself defaults it."""
    if override:
        return override
    from oslo_config import cfg

    conf = cfg.ConfigOpts()
    conf.register_opt(cfg.StrOpt("host", default=socket.gethostname()))
    conf([], project="nova", default_config_files=list(config_files or ()))
    return conf.host or socket.gethostname()
