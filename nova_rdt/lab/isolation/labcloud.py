"""The isolation procedure's cloud (:class:`nova_rdt.isolation.cloud.
IsolationCloud`) on the Host lab.

Nova (in-process, the lab's cloud) schedules, pins and writes the
domains; Neutron's fixture binds the forwarding VM's two ports as
vhost-user on the lab's OVS-DPDK, and os-vif's ovs plugin plugs them into
the lab's real ovsdb; each domain Nova defines is then defined and
started by the lab's real libvirtd (:mod:`.domain` says what changes).
Traffic: generator netns -> p0 -> vhost-user -> guest forwarder ->
vhost-user -> p1 -> receiver (and back the other way).

The domains stay Nova's ``type='kvm'``, ``<cachetune>`` and all, so
libvirt itself allocates, makes each group and moves the vCPU threads
into it; where this machine's KVM cannot boot Linux, its QEMU runs TCG
under the kvm domain (:mod:`nova_rdt.lab.tcg_qemu`).  Each group libvirt
made is read back after the start (:attr:`LabIsolationCloud.
libvirt_groups`).  The servers' group counters come from nova-rdt's
exporter, run on the lab's resctrl mount from the first reading of a
server with a group (:meth:`delete_all` stops it).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import time

from nova.tests.functional.api import client as api_client

from nova_rdt import exception
from nova_rdt import naming
from nova_rdt.isolation import cloud as iso_cloud
from nova_rdt.isolation import frames as iso_frames
from nova_rdt.lab.cloud import vhostuser
from nova_rdt.lab.demo.stages import exporter as exporter_stage
from nova_rdt.lab.guest import boot as guest_boot
from nova_rdt.lab.isolation import domain as domain_mod
from nova_rdt.lab.isolation import group_counters
from nova_rdt.lab.ovsdpdk import BRIDGE
from nova_rdt.resctrl.groups import Resctrl
from nova_rdt.rfc2544 import engine
from nova_rdt.rfc2544 import report as rfc_report
from nova_rdt.rfc2544 import search
from nova_rdt.rfc2544.generators.software import SoftwareGenerator

LOG = logging.getLogger(__name__)

ACTIVE_TIMEOUT = 120.0
#: A TCG guest takes tens of seconds to reach its init.
READY_TIMEOUT = 240.0
LINK_TIMEOUT = 60.0
DELETE_TIMEOUT = 60.0
FLOWS = 2000
#: Where the throughput search starts under TCG: an emulated guest
#: forwards tens of thousands of frames a second, and a search from the
#: generator's 10 Mpps would spend its trials coming down.
TCG_MAX_RATE_PPS = 200_000

#: The image role of each procedure role.
IMAGE_ROLE = {iso_cloud.FORWARDING: "forward", iso_cloud.NOISY: "noisy"}


class LabCloudError(exception.NovaRdtError, RuntimeError):
    pass


def rfc_config(frame_sizes, short: bool) -> engine.RunConfig:
    """RFC 2544 at 0.1% loss, latency at the rate found, the seed's bins
    (the engine's defaults).  Short: fewer, shorter trials.  One search
    goal in RFC 9971's terms, the same search: sub-second trials leave
    nothing shorter to explore with."""
    trial = 0.5 if short else 1.0
    return engine.RunConfig(
        frame_sizes=tuple(frame_sizes), label="isolation",
        search=search.SearchConfig(
            loss_tolerance=0.001, resolution=0.05 if short else 0.02,
            trial_duration=trial, probe_duration=0.3 if short else 0.5,
            max_trials=10 if short else 16),
        latency_duration=0.5 if short else 2.0, latency_load=0.9,
        goals=(search.SearchGoal(loss_ratio=0.001,
                                 final_trial_duration=trial,
                                 duration_sum=2 * trial),))


def ofctl_port_stats(text: str) -> dict[str, dict[str, int]]:
    """``ovs-ofctl dump-ports`` output -> port name -> {rx, tx} packets
    (ports shown by name: ``port  "vhu1234": rx pkts=...``)."""
    out: dict[str, dict[str, int]] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r'\s*port\s+"?([^":\s]+)"?:\s*rx pkts=(\d+)', line)
        if m:
            current = m.group(1)
            out[current] = {"rx": int(m.group(2)), "tx": 0}
            continue
        m = re.match(r"\s*tx pkts=(\d+)", line)
        if m and current is not None:
            out[current]["tx"] = int(m.group(1))
    return out


@dataclasses.dataclass
class _Server:
    id: str
    name: str
    role: str
    ports: list[dict]
    domain: str | None = None
    ready_line: str | None = None


class LabIsolationCloud:
    """IsolationCloud on the lab's Nova, OVS-DPDK and libvirtd."""

    def __init__(self, nova, lab, img, accel, images: dict[str, str],
                 out_dir: str, say, hostmap: domain_mod.HostMap):
        self.nova = nova
        self.lab = lab
        self.img = img
        self.accel = accel
        self.images = images
        self.out_dir = out_dir
        self.say = say
        self.hostmap = hostmap
        self.servers: dict[str, _Server] = {}
        self.flavors: list[str] = []
        self.forwarder = "unknown"
        self.trials: list[dict] = []
        #: Servers whose RDT elements libvirt refused (no KVM at all).
        self.rdt_not_applied: list[str] = []
        #: Server id -> the resctrl groups libvirt made for its domain.
        self.groups: dict[str, list[str]] = {}
        #: Server name -> what libvirt made: groups, their schemata and
        #: tasks, the domain's vCPU threads (the report).
        self.libvirt_groups: dict[str, dict] = {}
        self.exporter: exporter_stage.Exporter | None = None
        self.exporter_error: str | None = None
        os.makedirs(os.path.join(out_dir, "domains"), exist_ok=True)

    # -- facts -------------------------------------------------------------

    def facts(self) -> dict:
        return {"accel": self.accel.accel, "accel_reason": self.accel.reason,
                "forwarder": self.forwarder,
                "rdt": "emulated" if self.lab.emulated else "real",
                "domain_type": self.lab.libvirt.linux_domain_type,
                "machine_forces": list(self.lab.libvirt.forced),
                "rdt_not_applied": list(self.rdt_not_applied),
                "libvirt_groups": dict(self.libvirt_groups),
                "traffic_path": "generator netns -> OVS-DPDK p0 -> "
                                "vhost-user -> guest forwarder -> "
                                "vhost-user -> OVS-DPDK p1 -> receiver"}

    # -- flavors -----------------------------------------------------------

    def create_flavor(self, name: str, vcpus: int, ram_mb: int,
                      specs: dict[str, str]) -> str:
        fid = self.nova._create_flavor(
            name=name, vcpu=vcpus, memory_mb=ram_mb, disk=0, ephemeral=0,
            extra_spec=dict(specs))
        self.flavors.append(fid)
        return fid

    def delete_flavor(self, flavor_id: str) -> None:
        try:
            self.nova.admin_api.delete_flavor(flavor_id)
        except api_client.OpenStackApiNotFoundException:
            pass
        if flavor_id in self.flavors:
            self.flavors.remove(flavor_id)

    # -- servers -----------------------------------------------------------

    def boot(self, name: str, flavor_id: str, role: str) -> str:
        if role not in IMAGE_ROLE:
            raise ValueError(f"role must be one of {', '.join(IMAGE_ROLE)}, "
                             f"not {role!r}")
        ports = []
        if role == iso_cloud.FORWARDING:
            for i in range(2):
                ports.append(vhostuser.create_port(
                    self.nova.neutron, f"{name}-eth{i}", self.lab.ovs.run_dir,
                    BRIDGE))
        networks = ([{"port": p["id"]} for p in ports] if ports
                    else "none")
        body = self.nova._build_server(
            name=name, image_uuid=self.images[IMAGE_ROLE[role]],
            flavor_id=flavor_id, networks=networks)
        server = self.nova.api.post_server({"server": body})
        self.servers[server["id"]] = _Server(server["id"], name, role, ports)
        return server["id"]

    def _server(self, server_id: str) -> _Server:
        try:
            return self.servers[server_id]
        except KeyError:
            raise LabCloudError(f"server {server_id} was not booted by "
                                f"this cloud") from None

    def _wait_status(self, server_id: str, want: str,
                     timeout: float = ACTIVE_TIMEOUT) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            server = self.nova.api.get_server(server_id)
            if server["status"] == want:
                return server
            if server["status"] == "ERROR":
                fault = server.get("fault", {}).get("message", "?")
                raise LabCloudError(f"server {server['name']} went to "
                                    f"ERROR: {fault}")
            if time.monotonic() > deadline:
                raise LabCloudError(f"server {server['name']} still "
                                    f"{server['status']} after {timeout:g}s "
                                    f"(waiting for {want})")
            time.sleep(0.2)

    def wait_active(self, server_id: str) -> None:
        srv = self._server(server_id)
        self._wait_status(server_id, "ACTIVE")
        if srv.domain is None:
            self._realize(srv)
        # The computes publish their RDT state from the resource
        # tracker's periodic task: the next boot plans on it.
        self.nova._run_periodics()

    def _console_log(self, srv: _Server) -> str:
        return os.path.join(self.lab.base, "consoles", f"{srv.id}.log")

    def _realize(self, srv: _Server) -> None:
        """Nova's domain, defined and started by the real libvirtd."""
        nova_xml = self.nova.domain_xml(srv.id)
        log = self._console_log(srv)
        os.makedirs(os.path.dirname(log), exist_ok=True)
        real = domain_mod.for_real_libvirt(
            nova_xml, self.img.kernel, self.img.initrd, self.hostmap, log)
        ddir = os.path.join(self.out_dir, "domains")
        with open(os.path.join(ddir, f"{srv.name}.nova.xml"), "w") as f:
            f.write(nova_xml)
        with open(os.path.join(ddir, f"{srv.name}.changes.txt"), "w") as f:
            f.write("\n".join(real.changes) + "\n")
        libvirt = self.lab.libvirt
        libvirt.define(real.xml)
        srv.domain = real.name
        libvirt.start_domain(real.name, paused=False)
        socks = ", ".join(map(os.path.basename, real.vhostuser_sockets))
        self.say(f"  {srv.name}: libvirt started {real.name} "
                 f"({libvirt.linux_domain_type}, {self.accel.accel}) from "
                 f"Nova's XML"
                 + (f", vhost-user {socks}" if socks else ""))
        if real.dropped_tune:
            self.rdt_not_applied.append(srv.name)
            self.say(f"  {srv.name}: no resctrl group: "
                     + "; ".join(c for c in real.changes if "dropped <" in c
                                 and "tune" in c))
        else:
            self._read_groups(srv)
        with open(os.path.join(ddir, f"{srv.name}.xml"), "w") as f:
            f.write(libvirt.dumpxml(real.name))
        srv.ready_line = self._wait_ready(srv, log)
        self.say(f"  {srv.name}: {srv.ready_line}")
        if srv.role == iso_cloud.FORWARDING:
            self.forwarder = guest_boot.forwarder_of(srv.ready_line)
            for p in self._ovs_ports(srv):
                self._wait_link(p)

    def _resctrl(self) -> Resctrl:
        return Resctrl(self.lab.resctrl_root,
                       sysfs_cpu=self.lab.sysfs_cpu_root)

    def _read_groups(self, srv: _Server) -> None:
        """The groups libvirt made for the domain it just started (none
        for a flavor without rdt: keys), with their masks and tasks."""
        fs = self._resctrl()
        groups = [g for g in fs.groups(with_mon=False)
                  if naming.is_libvirt_group_of(g.name, srv.domain)]
        if not groups:
            return
        tids = sorted(self.lab.libvirt.vcpu_tids(srv.domain).values())
        doc = {"groups": [g.name for g in groups], "vcpu_tids": tids,
               "schemata": {}, "tasks": {}}
        for g in groups:
            sch = g.schemata()
            doc["schemata"][g.name] = {
                res: {str(c): (f"{m:#x}" if res.startswith("L") else m)
                      for c, m in sorted(sch.domains(res).items())}
                for res in sch.resources()}
            doc["tasks"][g.name] = sorted(g.tasks())
        # Checked, not assumed: libvirt moved every vCPU thread in.
        held = set().union(*(set(t) for t in doc["tasks"].values()))
        doc["vcpus_in_tasks"] = bool(tids) and set(tids) <= held
        if not doc["vcpus_in_tasks"]:
            self.say(f"  {srv.name}: vCPU threads {tids} are not all in "
                     f"the tasks of {', '.join(doc['groups'])}")
        pmd = self._pmd_l3()
        if pmd:
            doc["pmd_l3"] = pmd
        self.groups[srv.id] = doc["groups"]
        self.libvirt_groups[srv.name] = doc
        self.say(f"  {srv.name}: libvirt made "
                 + ", ".join(f"{name} ("
                             + "; ".join(f"{res} " + ";".join(
                                 f"{c}={m}" for c, m in d.items())
                                 for res, d in doc["schemata"][name].items())
                             + f", tasks {doc['tasks'][name]})"
                             for name in doc["groups"]))

    def _pmd_l3(self) -> str | None:
        """The PMD group's L3 line, as the hook left it."""
        settings = self.lab.hook_settings(host_view=True)
        fs = self._resctrl()
        try:
            g = fs.group(naming.pmd_group(settings.group_prefix))
            doms = g.schemata().domains("L3")
        except Exception:  # the report says "none"; the run goes on
            return None
        return ";".join(f"{c}={m:#x}" for c, m in sorted(doms.items())) \
            or None

    def _wait_ready(self, srv: _Server, log: str) -> str:
        want = guest_boot.READY[IMAGE_ROLE[srv.role]]
        deadline = time.monotonic() + READY_TIMEOUT
        text = ""
        while time.monotonic() < deadline:
            try:
                with open(log, errors="replace") as f:
                    text = f.read()
            except OSError:
                text = ""
            for line in text.splitlines():
                if want in line:
                    return line[line.index(want):].strip()
                if any(bad in line for bad in guest_boot.FAILED):
                    raise LabCloudError(f"{srv.name}: the guest failed: "
                                        f"{line.strip()}")
            state = self.lab.libvirt.virsh("domstate", "--reason",
                                           srv.domain, check=False).strip()
            if not state.startswith("running"):
                raise LabCloudError(f"{srv.name}: the domain is {state} "
                                    f"before {want.strip()!r}; console "
                                    f"tail: {text[-500:]!r}")
            time.sleep(0.5)
        raise LabCloudError(f"{srv.name}: no {want.strip()!r} within "
                            f"{READY_TIMEOUT:g}s ({self.accel.accel}); "
                            f"console tail: {text[-500:]!r}")

    def _ovs_ports(self, srv: _Server) -> list[str]:
        return [vhostuser.ovs_port_name(p["id"]) for p in srv.ports]

    def _wait_link(self, port: str) -> None:
        deadline = time.monotonic() + LINK_TIMEOUT
        while self.lab.ovs.link_state(port) != "up":
            if time.monotonic() > deadline:
                raise LabCloudError(
                    f"vhost-user port {port} did not come up in "
                    f"{LINK_TIMEOUT:g}s (is QEMU serving its socket?)")
            time.sleep(0.2)

    def host_of(self, server_id: str) -> str:
        return self.nova.api.get_server(server_id)["OS-EXT-SRV-ATTR:host"]

    def pause(self, server_id: str) -> None:
        srv = self._server(server_id)
        self.nova.api.post_server_action(server_id, {"pause": None})
        self._wait_status(server_id, "PAUSED")
        if srv.domain:
            self.lab.libvirt.virsh("suspend", srv.domain)

    def unpause(self, server_id: str) -> None:
        srv = self._server(server_id)
        self.nova.api.post_server_action(server_id, {"unpause": None})
        self._wait_status(server_id, "ACTIVE")
        if srv.domain:
            self.lab.libvirt.virsh("resume", srv.domain)

    def delete(self, server_id: str) -> None:
        srv = self._server(server_id)
        if srv.domain:
            self.lab.libvirt.virsh("destroy", srv.domain, check=False)
            self.lab.libvirt.virsh("undefine", srv.domain, check=False)
        self.groups.pop(server_id, None)
        try:
            self.nova.api.delete_server(server_id)
        except api_client.OpenStackApiNotFoundException:
            pass
        deadline = time.monotonic() + DELETE_TIMEOUT
        while True:
            try:
                self.nova.api.get_server(server_id)
            except api_client.OpenStackApiNotFoundException:
                break
            if time.monotonic() > deadline:
                raise LabCloudError(f"server {srv.name} not deleted after "
                                    f"{DELETE_TIMEOUT:g}s")
            time.sleep(0.2)
        for p in srv.ports:
            self.nova.neutron.delete_port(p["id"])
        del self.servers[server_id]

    def delete_all(self) -> None:
        """Every server and flavor this cloud made, and the exporter
        (clean-up)."""
        for sid in list(self.servers):
            try:
                self.delete(sid)
            except Exception:
                LOG.exception("deleting server %s", sid)
        for fid in list(self.flavors):
            try:
                self.delete_flavor(fid)
            except Exception:
                LOG.exception("deleting flavor %s", fid)
        self.stop_exporter()

    def stop_exporter(self) -> None:
        if self.exporter is not None:
            self.exporter.stop()
            self.exporter = None

    # -- measurements ------------------------------------------------------

    def _route_through(self, srv: _Server) -> None:
        """p0 -> guest eth0, guest eth1 -> p1, and back: nothing else."""
        a, b = self._ovs_ports(srv)
        ofctl = self.lab.ovs.ofctl
        ofctl("del-flows")
        for src, dst in (("p0", a), (b, "p1"), ("p1", b), (a, "p0")):
            ofctl("add-flow", f"in_port={src},actions=output:{dst}")

    def _port_stats(self) -> dict[str, dict[str, int]]:
        """OVS port name -> {rx, tx} packets, live from the datapath
        (the Interface table's statistics lag by seconds)."""
        by_no = ofctl_port_stats(self.lab.ovs.ofctl("dump-ports"))
        out = {}
        for line in self.lab.ovs.vsctl("--columns=name,ofport", "list",
                                       "Interface").split("\n\n"):
            fields = dict(
                (k.strip(), v.strip().strip('"')) for k, _, v in
                (row.partition(":") for row in line.splitlines()))
            if fields.get("ofport") in by_no:
                out[fields["name"]] = by_no[fields["ofport"]]
        out.update({k: v for k, v in by_no.items() if not k.isdigit()})
        return out

    def port_counters(self, server_id: str) -> dict | None:
        srv = self._server(server_id)
        names = self._ovs_ports(srv)
        if not names:
            return None
        stats = self._port_stats()
        # OVS's tx on a vhost-user port went into the guest.
        return {"rx": sum(stats.get(n, {}).get("tx", 0) for n in names),
                "tx": sum(stats.get(n, {}).get("rx", 0) for n in names)}

    def load(self, server_id: str) -> dict | None:
        srv = self._server(server_id)
        if not srv.domain:
            return None
        out = self.lab.libvirt.virsh("domstats", "--cpu-total", srv.domain)
        m = re.search(r"cpu\.time=(\d+)", out)
        if not m:
            return None
        return {"cpu_time_ns": int(m.group(1)), **self._counters(server_id)}

    def _counters(self, server_id: str) -> dict:
        """The server's group counters from the exporter's /metrics
        (None-valued without a group: the flavor had no rdt: keys)."""
        groups = self.groups.get(server_id)
        if not groups:
            return group_counters.none_values()
        # The counters are a report, not a check: an exporter that fails
        # is said, and the measurement goes on without them.
        try:
            if self.exporter_error:
                raise group_counters.CountersError(self.exporter_error)
            if self.exporter is None:
                # Held before it starts: an interrupt during start() must
                # still find it for stop_exporter().
                self.exporter = exporter_stage.Exporter(
                    self.lab, os.path.join(self.out_dir, "exporter.log"))
                try:
                    url = self.exporter.start()
                except exporter_stage.ExporterError as e:
                    # Once: a second start would fail the same way, slowly.
                    self.exporter_error = str(e)
                    self.stop_exporter()
                    raise
                self.say(f"  nova-rdt exporter on {url} (the servers' group "
                         f"counters)")
            return group_counters.of_group(
                group_counters.scrape(self.exporter.url), groups[0])
        except (exporter_stage.ExporterError,
                group_counters.CountersError) as e:
            self.say(f"  group counters of {groups[0]} not read: {e}")
            return {**group_counters.none_values(),
                    "rdt_group": groups[0],
                    "counters_error": str(e)}

    def measure(self, forwarding_id: str, frame_sizes: list[int],
                short: bool) -> list[dict]:
        srv = self._server(forwarding_id)
        self._route_through(srv)
        frames = self._measure(srv, frame_sizes, short)
        missing = [f["frame_size"] for f in frames
                   if f.get("avg_latency_us") is None]
        if missing:
            # Under TCG a guest can stall for a whole trial; one search
            # that found no passing rate is measured once more, and the
            # OVS counters of both runs are kept.
            self.say(f"    no result at {', '.join(map(str, missing))} B: "
                     f"measuring once more")
            again = {f["frame_size"]: f
                     for f in self._measure(srv, missing, short)}
            frames = [again.get(f["frame_size"], f) for f in frames]
        return frames

    def _measure(self, srv, frame_sizes: list[int],
                 short: bool) -> list[dict]:
        traffic = self.lab.traffic
        gen = SoftwareGenerator(traffic.pairs[0][1], traffic.pairs[1][1],
                                netns=traffic.name, flows=FLOWS,
                                bidirectional=True,
                                **({"max_rate_pps": TCG_MAX_RATE_PPS}
                                   if self.accel.accel == "tcg" else {}))
        names = self._ovs_ports(srv)
        marks: list[dict] = []

        def counters():
            stats = self._port_stats()
            return {"vm_rx": sum(stats.get(n, {}).get("tx", 0)
                                 for n in names),
                    "vm_tx": sum(stats.get(n, {}).get("rx", 0)
                                 for n in names)}

        def progress(ev):
            if ev["event"] in ("frame", "trial"):
                marks.append({**ev, **counters()})
            if ev["event"] == "result":
                self.say("    " + _result_line(ev))

        result = engine.run(gen, rfc_config(frame_sizes, short), progress)
        doc = rfc_report.to_dict(result)
        frames = iso_frames.from_report(doc)
        for f, fr in zip(frames, doc["frames"]):
            # Each goal's bounds and conditional throughput (summary.json).
            f["goals"] = fr.get("goals") or []
        per_trial = _per_trial(marks, doc["frames"])
        for f in frames:
            f["trials_ovs"] = [t for t in per_trial
                               if t["frame_size"] == f["frame_size"]]
        self.trials.extend(per_trial)
        return frames


def _per_trial(marks: list[dict], doc_frames: list[dict]) -> list[dict]:
    """Each trial's generator tx/rx beside the VM's vhost-user counters
    over the same trial (the difference between marks)."""
    logs = {f["frame_size"]: f["throughput"]["trial_log"]
            for f in doc_frames}
    out = []
    prev = None
    for m in marks:
        if m["event"] == "trial" and prev is not None:
            log = logs.get(m["frame_size"], [])
            i = m["trial"] - 1
            t = log[i] if i < len(log) else {}
            out.append({"frame_size": m["frame_size"], "trial": m["trial"],
                        "offered_pps": m["offered_pps"],
                        "gen_tx": t.get("tx"), "gen_rx": t.get("rx"),
                        "vm_rx": m["vm_rx"] - prev["vm_rx"],
                        "vm_tx": m["vm_tx"] - prev["vm_tx"]})
        prev = m
    return out


def _result_line(ev: dict) -> str:
    lat = ev.get("avg_latency_us")
    marks = []
    if not ev.get("converged"):
        marks.append("not converged")
    if ev.get("generator_limited"):
        marks.append("generator-limited")
    return (f"{ev['frame_size']} B: {ev['throughput_pps']:.0f} pps"
            + (f", avg latency {lat:.1f} us" if lat is not None else "")
            + (f" ({', '.join(marks)})" if marks else ""))


def dump_json(path: str, doc) -> None:
    with open(path, "w") as f:
        json.dump(doc, f, indent=2, default=str)
