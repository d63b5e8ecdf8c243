"""Nova's side of the faults lab: the lab cloud with a restartable RDT
compute, and servers booted through the API whose domains the lab's
real libvirtd runs.

Importing this module imports Nova's test framework: eventlet must be
patched first.
"""

from __future__ import annotations

import logging
import os
import time
import unittest

from nova_rdt.lab.cloud import lab_cloud
from nova_rdt.lab.demo.stages import libvirt as libvirt_stage

LOG = logging.getLogger(__name__)
RDT_COMPUTE = lab_cloud.RDT_COMPUTE
BOOT_TIMEOUT = 60.0
#: How long a start waits for the hook's record (a fault may stop it).
RECORD_WAIT = 5.0

#: The scenario's flavors: a PMD-sharing VM, and a class member.
FLAVORS = {
    "fault.fwd": {"rdt:l3_cache_ways": "2", "rdt:pmd_share": "true"},
    "fault.be": {"rdt:class": "be"},
}
ROLE_OF_FLAVOR = {"fault.fwd": "fwd", "fault.be": "be"}
CLASSES = ("be:l3_ways=1",)


class FaultCloud(lab_cloud.LabCloud):
    """The lab cloud, with nova-compute restartable on the lab's host."""

    def start_lab_computes(self) -> None:
        super().start_lab_computes()
        # start_rdt_compute gives a host its own state directory; this one
        # shares the hook's, so that a restart reconciles the hook's
        # records (restart_compute_service re-applies these flags).
        host = self._rdt_hosts[RDT_COMPUTE]
        host.state_path = self._config.rdt_flags["state_path"]
        self.flags(group="rdt", **self._config.rdt_flags)

    def restart_rdt_compute(self):
        """A new nova-compute (manager and driver) on the same host:
        what is only in the old one's memory, its claims, is gone."""
        return self.restart_compute_service(RDT_COMPUTE)

    @property
    def rdt_driver(self):
        return self.computes[RDT_COMPUTE].manager.driver


def run_in_cloud(config: lab_cloud.CloudConfig, body):
    """:func:`lab_cloud.run_in_cloud` with :class:`FaultCloud`."""
    os.makedirs(config.no_resctrl_dir, exist_ok=True)
    case = FaultCloud(config, body)
    result = unittest.TestResult()
    case.run(result)
    lab_cloud._log_details(case)
    problems = result.errors + result.failures
    if problems:
        for _case, text in problems:
            LOG.error("the Nova stage failed:\n%s", text)
        last = problems[0][1].strip().splitlines()[-1]
        raise lab_cloud.CloudError(f"the Nova stage failed: {last}")
    if result.skipped:
        raise lab_cloud.CloudError(
            "the Nova stage was skipped: "
            + "; ".join(why for _c, why in result.skipped))
    return case._value


class Servers:
    """Servers on the RDT compute, mirrored to the lab's libvirtd."""

    def __init__(self, cloud: FaultCloud, lab, state_path: str,
                 out_dir: str):
        self.cloud = cloud
        self.lab = lab
        self.state_path = state_path
        self.out_dir = out_dir
        self.flavor_ids: dict[str, str] = {}
        self._n = 0

    def create_flavors(self) -> None:
        for name, specs in FLAVORS.items():
            self.flavor_ids[name] = self.cloud._create_flavor(
                name=name, vcpu=1, memory_mb=512, disk=1, ephemeral=0,
                extra_spec=specs)

    # -- Nova ----------------------------------------------------------

    def all(self) -> list[dict]:
        return self.cloud.api.get_servers(detail=True)

    def role(self, server: dict) -> str | None:
        return ROLE_OF_FLAVOR.get(server.get("flavor", {})
                                  .get("original_name"))

    def active(self) -> dict[str, dict]:
        """uuid -> server, for the ACTIVE ones on the RDT compute."""
        return {s["id"]: s for s in self.all()
                if s["status"] == "ACTIVE"
                and s.get("OS-EXT-SRV-ATTR:host") == RDT_COMPUTE}

    @staticmethod
    def domain(server: dict) -> str:
        return server["OS-EXT-SRV-ATTR:instance_name"]

    def boot(self, role: str, until=None) -> dict:
        """A server of ``role`` (fwd, be); returns it ACTIVE or ERROR, or
        as it is once ``until()`` is true."""
        flavor = next(f for f, r in ROLE_OF_FLAVOR.items() if r == role)
        self._n += 1
        server = self.cloud.api.post_server({"server": self.cloud
                                             ._build_server(
            name=f"{role}-{self._n}", flavor_id=self.flavor_ids[flavor],
            networks="none")})
        return self.wait_settled(server["id"], until)

    def wait_settled(self, uuid: str, until=None) -> dict:
        deadline = time.monotonic() + BOOT_TIMEOUT
        while True:
            server = self.cloud.api.get_server(uuid)
            if server["status"] in ("ACTIVE", "ERROR") and \
                    not server.get("OS-EXT-STS:task_state"):
                return server
            if until is not None and until():
                return server
            if time.monotonic() > deadline:
                raise TimeoutError(f"server {uuid} stuck in "
                                   f"{server['status']}")
            time.sleep(0.1)

    def delete(self, server: dict) -> None:
        """Through the API, then on the lab's libvirtd (as Nova's
        destroy would on a real host)."""
        self.cloud._delete_server(server)
        self.unrun(self.domain(server))

    # -- the lab's libvirtd ----------------------------------------------

    def realize(self, server: dict, wait_record: bool = True,
                hook_gave_up=None) -> str:
        """Define and start the domain Nova defined, on the real
        libvirtd; the hook's record is waited for (not insisted on), or
        until ``hook_gave_up(uuid)`` says the hook failed."""
        name, uuid, xml = libvirt_stage.domain_for_libvirt(
            self.cloud.domain_xml(server["id"]), self.lab.libvirt.domain_type)
        if name not in self.lab.libvirt.domains():
            self.lab.libvirt.define(xml)
        if name not in self.lab.libvirt.domains(running_only=True):
            self.lab.libvirt.start_domain(name)
        if wait_record:
            path = os.path.join(self.state_path, "domains", f"{uuid}.json")
            deadline = time.monotonic() + RECORD_WAIT
            while not os.path.exists(path) and time.monotonic() < deadline:
                if hook_gave_up is not None and hook_gave_up(uuid):
                    break
                time.sleep(0.05)
        return name

    def unrun(self, name: str) -> None:
        virsh = self.lab.libvirt.virsh
        if name in self.lab.libvirt.domains(running_only=True):
            virsh("destroy", name, check=False)
        if name in self.lab.libvirt.domains():
            virsh("undefine", name, check=False)

    def mirror(self) -> list[str]:
        """What the operator (and Nova, on a real host) does after a
        failure: servers in ERROR deleted; the lab's libvirtd made to run
        exactly Nova's ACTIVE servers.  Returns what it did."""
        done = []
        for s in self.all():
            if s["status"] == "ERROR":
                self.cloud._delete_server(s)
                done.append(f"deleted ERROR server {s['name']}")
        active = self.active()
        wanted = {self.domain(s) for s in active.values()}
        for name in self.lab.libvirt.domains():
            if name.startswith("instance-") and name not in wanted:
                self.unrun(name)
                done.append(f"destroyed {name}")
        running = set(self.lab.libvirt.domains(running_only=True))
        for s in active.values():
            if self.domain(s) not in running:
                self.realize(s)
                done.append(f"started {self.domain(s)}")
        return done
