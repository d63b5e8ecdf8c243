"""Whether the migration whitebox tests can run, and where to read each
compute: pure, over tempest.conf's values and Nova's service list.

The tests move an RDT server between two computes and read both ends
through each compute's nova-rdt exporter (``[nova_rdt] exporter_urls``,
a DictOpt of Nova host -> URL).  oslo.config's Dict type splits each
comma-separated pair at its *first* colon, so ``compute1:http://h:9787``
is ``{"compute1": "http://h:9787"}``: a URL keeps its scheme's and its
port's colons, and a Nova host name has none.
"""

from __future__ import annotations

import urllib.parse

#: Live migration names its host from 2.30 with no ``force``: the
#: scheduler then checks the destination (RDTFilter claims its ways) as
#: for any move; ``block_migration: "auto"`` is 2.25's.  Cold migration
#: names a host from 2.56 (also scheduler-checked).  2.37 gives
#: ``networks: "none"``.  2.56 covers all four.
MIGRATION_MICROVERSION = "2.56"

FEATURES = {"live": "live_migration", "cold": "cold_migration"}


def bad_exporter_urls(urls: dict) -> list[str]:
    """Each ``[nova_rdt] exporter_urls`` value that is no http(s) URL
    with a host, said with its compute."""
    out = []
    for host, url in sorted((urls or {}).items()):
        try:
            parts = urllib.parse.urlsplit(url)
            _port = parts.port      # raises on a port that is no number
        except ValueError as e:
            out.append(f"{host}: {url!r} ({e})")
            continue
        if parts.scheme not in ("http", "https") or not parts.hostname:
            out.append(f"{host}: {url!r} is no http(s)://HOST[:PORT] URL")
    return out


def conf_skip_reason(kind: str, min_compute_nodes: int,
                     feature_enabled: bool, rdt_compute: bool,
                     exporter_urls: dict) -> str | None:
    """Why the ``kind`` ("live" or "cold") migration tests cannot run,
    from tempest.conf alone (checked before any credentials)."""
    if not rdt_compute:
        return ("no RDT-capable compute configured ([nova_rdt] "
                "rdt_compute = False)")
    if min_compute_nodes < 2:
        return (f"a move needs two computes: [compute] min_compute_nodes "
                f"= {min_compute_nodes}")
    if not feature_enabled:
        return (f"{kind} migration is not available "
                f"([compute-feature-enabled] {FEATURES[kind]} = False)")
    if not exporter_urls:
        return ("[nova_rdt] exporter_urls is not set: these checks read "
                "the nova-rdt exporter of both computes of a move "
                "(HOST:URL pairs, such as "
                "compute1:http://192.0.2.11:9787,"
                "compute2:http://192.0.2.12:9787)")
    return None


def up_computes(services: list[dict]) -> list[str]:
    """The hosts of the nova-compute services that are up and enabled
    (a move's destination must be both), in Nova's order."""
    return [s["host"] for s in services
            if s.get("binary", "nova-compute") == "nova-compute"
            and s.get("state") == "up" and s.get("status") == "enabled"]


def hosts_skip_reason(services: list[dict],
                      exporter_urls: dict) -> str | None:
    """Why the migration tests cannot run on this cloud: fewer than two
    up and enabled computes, or one with no exporter URL (named)."""
    hosts = up_computes(services)
    if len(hosts) < 2:
        return (f"a move needs two computes; {len(hosts)} nova-compute "
                f"service(s) are up and enabled: {hosts}")
    missing = [h for h in hosts if h not in (exporter_urls or {})]
    if missing:
        return (f"[nova_rdt] exporter_urls names no exporter for the up "
                f"compute(s) {', '.join(missing)} (it has "
                f"{sorted(exporter_urls)})")
    return None


def other_host(hosts: list[str], host: str) -> str | None:
    """The first of ``hosts`` that is not ``host``."""
    return next((h for h in hosts if h != host), None)
