"""A traffic network namespace joined to the host by veth pairs.

The host end of each pair becomes an OVS af_packet port; the other end
sits in the namespace, where a traffic generator sends and receives.
IPv6 is off on both ends so that no router solicitation or DAD frame
counts as test traffic.
"""

from __future__ import annotations

import os
import subprocess

from nova_rdt.lab.procs import LabError

IFNAMSIZ = 15


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(["ip", *args], capture_output=True, text=True,
                         timeout=30)
    if check and res.returncode != 0:
        raise LabError(f"ip {' '.join(args)}: {res.stderr.strip()}")
    return res


def netns_exists(name: str) -> bool:
    return os.path.exists(os.path.join("/run/netns", name))


def link_exists(name: str) -> bool:
    return os.path.exists(os.path.join("/sys/class/net", name))


def _disable_ipv6(iface: str, netns: str | None = None) -> None:
    argv = ["sysctl", "-q", "-w", f"net.ipv6.conf.{iface}.disable_ipv6=1"]
    if netns:
        argv = ["ip", "netns", "exec", netns, *argv]
    # A kernel without IPv6 has nothing to disable.
    subprocess.run(argv, capture_output=True, timeout=30)


class TrafficNamespace:
    """``ip netns`` namespace plus veth pairs, all removed by stop()."""

    def __init__(self, name: str, link_prefix: str):
        if len(link_prefix) + 2 > IFNAMSIZ:
            raise ValueError(f"link prefix {link_prefix!r} leaves no room "
                             f"in a {IFNAMSIZ}-character interface name")
        self.name = name
        self.link_prefix = link_prefix
        self.pairs: list[tuple[str, str]] = []
        self.created = False

    def start(self) -> None:
        _ip("netns", "add", self.name)
        self.created = True
        _ip("-n", self.name, "link", "set", "lo", "up")

    def add_veth(self) -> tuple[str, str]:
        """A new pair: (host end, end inside the namespace)."""
        n = len(self.pairs)
        host = f"{self.link_prefix}h{n}"
        inner = f"{self.link_prefix}t{n}"
        if len(host) > IFNAMSIZ:
            raise LabError(f"too many veth pairs for prefix "
                           f"{self.link_prefix!r}")
        _ip("link", "add", host, "type", "veth", "peer", "name", inner,
            "netns", self.name)
        self.pairs.append((host, inner))
        _disable_ipv6(host)
        _disable_ipv6(inner, self.name)
        _ip("link", "set", host, "up")
        _ip("-n", self.name, "link", "set", inner, "up")
        return host, inner

    def exec(self, argv: list[str], **kw) -> subprocess.CompletedProcess:
        return subprocess.run(["ip", "netns", "exec", self.name, *argv],
                              **kw)

    def stop(self) -> None:
        """Delete every link, then the namespace.  Idempotent."""
        for host, _inner in self.pairs:
            if link_exists(host):
                _ip("link", "del", host, check=False)
        if self.created and netns_exists(self.name):
            _ip("netns", "del", self.name, check=False)
        self.created = False

    def leftovers(self) -> list[str]:
        left = [f"link {h}" for h, _ in self.pairs if link_exists(h)]
        if netns_exists(self.name):
            left.append(f"netns {self.name}")
        return left
