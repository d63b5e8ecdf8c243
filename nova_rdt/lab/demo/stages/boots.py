"""Stage 3, second half: boot the scenario's instances, each domain Nova
defines started by the real libvirtd, then small RDT flavors until the
scheduler finds no valid host, with RDTFilter's reasons."""

from __future__ import annotations

import contextlib
import logging
import time

from nova_rdt.lab.demo.stages import libvirt as libvirt_stage

FILTER_LOGGER = "nova_rdt.scheduler.filter"
BOOT_TIMEOUT = 60.0


class _FilterReasons(logging.Handler):
    """Keeps RDTFilter's per-host reasons."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record):
        msg = record.getMessage()
        if "fails:" in msg:
            self.lines.append(msg)


@contextlib.contextmanager
def filter_reasons():
    """RDTFilter's DEBUG reasons while the block runs (as a list)."""
    reasons = _FilterReasons()
    flog = logging.getLogger(FILTER_LOGGER)
    old_level = flog.level
    flog.addHandler(reasons)
    flog.setLevel(logging.DEBUG)
    try:
        yield reasons.lines
    finally:
        flog.removeHandler(reasons)
        flog.setLevel(old_level)


class Booter:
    """Boots servers on the cloud and hands them to the lab's libvirtd."""

    def __init__(self, cloud, lab, flavors: dict[str, str], state_path: str,
                 out_dir: str, outcome, say):
        self.cloud = cloud
        self.lab = lab
        self.flavors = flavors
        self.state_path = state_path
        self.out_dir = out_dir
        self.outcome = outcome
        self.say = say

    def _wait_active(self, server: dict, name: str) -> dict:
        api = self.cloud.api
        server = api.get_server(server["id"])
        deadline = time.monotonic() + BOOT_TIMEOUT
        while server["status"] not in ("ACTIVE", "ERROR"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} stuck in {server['status']}")
            time.sleep(0.1)
            server = api.get_server(server["id"])
        return server

    def boot(self, flavor: str, role: str, n: int) -> dict:
        """One server; returns it as the API last showed it."""
        name = f"{role}-{n}"
        server = self.cloud.api.post_server({"server": self.cloud
                                             ._build_server(
            name=name, flavor_id=self.flavors[flavor], networks="none")})
        server = self._wait_active(server, name)
        if server["status"] != "ACTIVE":
            return server
        host = server.get("OS-EXT-SRV-ATTR:host")
        try:
            domain = libvirt_stage.realize(
                self.lab, self.cloud.domain_xml(server["id"]),
                self.state_path, self.out_dir)
            self.outcome.realized.append(domain)
            self.say(f"  {name} ({flavor}) ACTIVE on {host}; libvirt "
                     f"started {domain}")
        except libvirt_stage.Refused as e:
            domain = e.domain
            self.outcome.refused.append((e.domain, e.why))
            self.say(f"  {name} ({flavor}) ACTIVE on {host}; libvirt "
                     f"refused it: {e.why}")
        self.outcome.servers.append(
            {"name": name, "id": server["id"], "flavor": flavor,
             "role": role, "host": host, "domain": domain})
        # The computes publish their RDT state to the scheduler from the
        # resource tracker's periodic task: the next boot plans on it.
        self.cloud._run_periodics()
        return server


def boot_scenario(booter: Booter, scenario, say) -> None:
    say("booting the scenario's instances (each domain Nova defines goes "
        "to the real libvirtd):")
    roles = {f.name: f.role for f in scenario.flavors}
    for flavor, count in scenario.boots:
        for i in range(count):
            booter.boot(flavor, roles[flavor], i)


def boot_until_full(booter: Booter, scenario, outcome, say,
                    attempts: int) -> None:
    """Fillers until one lands in ERROR (no valid host), or ``attempts``."""
    say(f"booting {scenario.filler} until no host can take one:")
    with filter_reasons() as reasons:
        for i in range(attempts):
            server = booter.boot(scenario.filler, "filler", i)
            if server["status"] == "ERROR":
                fault = server.get("fault", {}).get("message", "?")
                outcome.no_valid_host = fault
                outcome.filter_reasons = sorted(set(reasons))
                say(f"  filler-{i}: ERROR: {fault}")
                for line in outcome.filter_reasons:
                    say(f"    {line}")
                return
