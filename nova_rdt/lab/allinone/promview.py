"""What the cloud's Prometheus scrapes, read as the dashboard reads it,
and the judgement that every compute is there.

The dashboard's ``$host`` variable is Grafana's
``label_values(nova_rdt_resctrl_available, host)``; the same question is
put to Prometheus's label API here.  Reading (:func:`observe`) is I/O;
judging (:func:`judge`) is pure.
"""

from __future__ import annotations

import dataclasses
import json
import time
import urllib.parse
import urllib.request

#: The series the dashboard's ``$host`` is drawn from.
HOST_SERIES = "nova_rdt_resctrl_available"


@dataclasses.dataclass(frozen=True)
class PromSeen:
    #: scrape URL -> health ("up", "down", "unknown")
    targets: dict[str, str]
    #: what the dashboard's ``$host`` offers
    hosts: tuple[str, ...]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


def observe(base: str) -> PromSeen:
    targets = _get(f"{base}/api/v1/targets?state=active")["data"]
    query = urllib.parse.urlencode({"match[]": HOST_SERIES})
    hosts = _get(f"{base}/api/v1/label/host/values?{query}")["data"]
    return PromSeen(
        {t["scrapeUrl"]: t["health"] for t in targets["activeTargets"]},
        tuple(sorted(hosts)))


def judge(seen: PromSeen, hosts: list[str], targets: int) -> list[str]:
    """What is missing: a target not up (``targets`` expected, an
    exporter and a controller per compute), or a compute the dashboard's
    ``$host`` does not offer.  [] when all are there."""
    bad = [f"{url} is {health}" for url, health in
           sorted(seen.targets.items()) if health != "up"]
    if len(seen.targets) != targets:
        bad.append(f"{len(seen.targets)} scrape targets, not {targets}")
    missing = sorted(set(hosts) - set(seen.hosts))
    if missing:
        bad.append(f"the dashboard's $host lacks {', '.join(missing)} "
                   f"(it offers {', '.join(seen.hosts) or 'none'})")
    return bad


def wait(base: str, hosts: list[str], targets: int,
         timeout: float = 60) -> tuple[PromSeen | None, list[str]]:
    """Poll until :func:`judge` finds nothing missing, or ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            seen = observe(base)
            bad = judge(seen, hosts, targets)
        except (OSError, ValueError, KeyError) as e:
            seen, bad = None, [f"Prometheus at {base}: {e}"]
        if not bad or time.monotonic() > deadline:
            return seen, bad
        time.sleep(2)
