"""The isolation procedure's cloud, through Tempest's clients.

:class:`TempestCloud` implements
:class:`nova_rdt.isolation.cloud.IsolationCloud` for a real cloud:
flavors with the admin client, servers with the primary one in an
affinity server group (the procedure still checks the host), the host
from the admin view (``OS-EXT-SRV-ATTR:host``), load and port counters
from server diagnostics (microversion 2.48: ``cpu_details``,
``nic_details``), and RFC 2544 through the generator in
``[nova_rdt] generator_config``.
"""

from __future__ import annotations

import os
import time

from oslo_log import log as logging
from tempest.common import waiters
from tempest.lib import exceptions as lib_exc
from tempest.lib.common.utils import data_utils
from tempest.lib.common.utils import test_utils
from tempest.lib.services.compute import base_compute_client

from nova_rdt.isolation import cloud as cloud_mod
from nova_rdt.isolation import frames as frames_mod
from nova_rdt.isolation import procedure
from nova_rdt.isolation import userdata

LOG = logging.getLogger(__name__)

DIAGNOSTICS_MICROVERSION = "2.48"      # the standard diagnostics format
NO_NIC_MICROVERSION = "2.37"           # networks: "none"
KVM_MARK = "Hypervisor detected: KVM"
#: Seconds between two reads of a console waited for.
CONSOLE_POLL = 2.0
#: ovs-vswitchd's smallest stats-update-interval, and a margin (s).
OVSDB_STATS_INTERVAL = 6.0


def skip_reason(opts) -> str | None:
    """Why the scenario cannot run with ``[nova_rdt]`` = ``opts``."""
    if opts.generator == "none":
        return ("no traffic generator configured ([nova_rdt] generator = "
                "none)")
    if not opts.generator_config:
        return "[nova_rdt] generator_config is not set"
    if not os.path.exists(opts.generator_config):
        return (f"[nova_rdt] generator_config {opts.generator_config} "
                f"does not exist")
    if not opts.rdt_compute:
        return ("no RDT-capable compute configured ([nova_rdt] "
                "rdt_compute = False)")
    if len(opts.dataplane_networks) != 2:
        return ("[nova_rdt] dataplane_networks must list the forwarding "
                "VM's two dataplane networks (UUIDs); it has "
                f"{len(opts.dataplane_networks)}")
    return None


def check_search_goals(opts) -> None:
    """``[nova_rdt] search_goals`` checked before any server boots; a
    bad goal raises ValueError naming the option and the field."""
    from nova_rdt.rfc2544 import config as rcfg
    from nova_rdt.rfc2544 import search
    try:
        over = rcfg.scenario_overrides(opts.search_goals,
                                       opts.initial_trial_duration)
        if over.get("goals"):
            rcfg.goals(over["goals"], search.SearchConfig(
                trial_duration=opts.trial_duration))
    except ValueError as e:
        # goals() says goals[i]; the option is search_goals.
        text = str(e)
        if text.startswith("goals["):
            text = "search_" + text
        raise ValueError(f"[nova_rdt] {text}") from None


def settings_from_conf(opts) -> procedure.Settings:
    """The procedure's settings from ``[nova_rdt]``; a bad value raises
    ValueError naming the option."""
    check_search_goals(opts)
    try:
        sizes = tuple(int(s) for s in opts.frame_sizes)
    except ValueError:
        raise ValueError(f"[nova_rdt] frame_sizes: {opts.frame_sizes!r} "
                         f"are not all integers") from None
    common = {"hw:mem_page_size": opts.mem_page_size} \
        if opts.mem_page_size else {}
    try:
        return procedure.Settings(
            frame_sizes=sizes, loss_tolerance=opts.loss_tolerance,
            forwarding_vcpus=opts.forwarding_vcpus,
            forwarding_ram_mb=opts.forwarding_ram_mb,
            noisy_vcpus=opts.noisy_vcpus, noisy_ram_mb=opts.noisy_ram_mb,
            forwarding_l3_ways=opts.forwarding_l3_ways,
            noisy_l3_ways=opts.noisy_l3_ways,
            noisy_class=opts.noisy_class or None, common_specs=common,
            cpu_policy=opts.cpu_policy or None,
            noisy_load=opts.noisy_load,
            noisy_memory_mb=opts.noisy_memory_mb,
            forwarding_user_data=opts.forwarding_user_data or None,
            noisy_user_data=opts.noisy_user_data or None,
            settle_s=opts.settle_seconds,
            max_latency_ratio=opts.max_latency_ratio,
            max_p99_ratio=opts.max_p99_ratio,
            # A cloud with real RDT: the ratio limits are the test; on an
            # emulated resctrl nothing partitions the cache, so they are
            # reported only.
            enforce_ratios=True if opts.rdt == "real" else None)
    except ValueError as e:
        # "isolation settings: <field> ..." -> the option's name.
        raise ValueError(f"[nova_rdt] {e}".replace(
            "isolation settings: ", "")) from None


class TempestCloud:
    """IsolationCloud on Tempest's service clients.

    ``test``: the running scenario (its ``os_primary``/``os_admin``
    clients, ``addCleanup`` as a second net under the procedure's own
    clean-up).  ``conf``: Tempest's CONF.
    """

    def __init__(self, test, settings: procedure.Settings, conf,
                 out_dir: str, sleep=time.sleep, clock=time.monotonic):
        self.test, self.settings, self.conf = test, settings, conf
        self.opts = conf.nova_rdt
        self.out_dir = out_dir
        self.sleep, self.clock = sleep, clock
        self.flavors_client = test.os_admin.flavors_client
        self.servers_client = test.os_primary.servers_client
        self.admin_servers_client = test.os_admin.servers_client
        self.groups_client = test.os_primary.server_groups_client
        self.interfaces_client = test.os_primary.interfaces_client
        self.roles: dict[str, str] = {}
        self.runs = 0
        self._group = None
        self._consoles_talk = True
        self._facts = {"accel": self.opts.accel or "unknown",
                       "forwarder": "unknown", "rdt": self.opts.rdt}
        # When the last measurement ended (see port_counters).
        self._measured_at: float | None = None
        self._specs: dict[str, dict] = {}
        self._flavor_of: dict[str, str] = {}
        #: The whitebox checks of each nova-rdt pair, through the RDT
        #: compute's exporter: {"servers", "problems"}, one per pair.
        self.whitebox: list[dict] = []

    # -- facts --
    def facts(self) -> dict:
        return dict(self._facts)

    def _console(self, server_id) -> str:
        try:
            return self.servers_client.get_console_output(
                server_id)["output"] or ""
        except lib_exc.RestClientException as e:
            LOG.warning("no console output of %s: %s", server_id, e)
            return ""

    def _watch_console(self, server_id, role):
        """Wait (up to workload_timeout) for the role's script to say on
        the console that its workload started; learn the forwarder and
        the accelerator from it.  Not fatal: a console that is not
        captured says nothing, and the checks on the measurements still
        tell whether the workload ran."""
        mark = (userdata.FORWARDER_MARK if role == cloud_mod.FORWARDING
                else userdata.NOISY_MARK)
        # Once a console stayed silent, the cloud does not capture them:
        # waiting again would only add workload_timeout per server.
        wait = self.opts.workload_timeout if self._consoles_talk else 0
        deadline = self.clock() + wait
        while True:
            text = self._console(server_id)
            if not self.opts.accel and KVM_MARK in text:
                self._facts["accel"] = "kvm"
            if mark in text or self.clock() >= deadline:
                break
            self.sleep(CONSOLE_POLL)
        if mark not in text:
            LOG.warning("the console of %s never said %r", server_id, mark)
            self._consoles_talk = False
        if role == cloud_mod.FORWARDING:
            self._facts["forwarder"] = userdata.forwarder_from_console(text)

    # -- flavors --
    def create_flavor(self, name, vcpus, ram_mb, specs) -> str:
        flavor = self.flavors_client.create_flavor(
            name=data_utils.rand_name(name), ram=ram_mb, vcpus=vcpus,
            disk=self.opts.disk_gb)["flavor"]
        self.test.addCleanup(test_utils.call_and_ignore_notfound_exc,
                             self.flavors_client.delete_flavor, flavor["id"])
        if specs:
            self.flavors_client.set_flavor_extra_spec(flavor["id"], **specs)
        self._specs[flavor["id"]] = dict(specs)
        return flavor["id"]

    def delete_flavor(self, flavor_id) -> None:
        test_utils.call_and_ignore_notfound_exc(
            self.flavors_client.delete_flavor, flavor_id)

    # -- servers --
    def _group_id(self) -> str:
        if self._group is None:
            group = self.groups_client.create_server_group(
                name=data_utils.rand_name("rdt-isolation"),
                policies=["affinity"])["server_group"]
            self._group = group["id"]
            self.test.addCleanup(test_utils.call_and_ignore_notfound_exc,
                                 self.groups_client.delete_server_group,
                                 self._group)
        return self._group

    def _networks(self, role) -> list[dict] | str:
        """The role's NICs; "none" for a neighbour with no management
        network: left to Nova, it would pick a network itself, which
        fails (409, "Multiple possible networks found") wherever the
        dataplane networks are shared, and the neighbour needs none."""
        mgmt = [self.opts.management_network] \
            if self.opts.management_network else []
        if role == cloud_mod.FORWARDING:
            nets = mgmt + list(self.opts.dataplane_networks)
        else:
            nets = mgmt
        return [{"uuid": n} for n in nets] or "none"

    def boot(self, name, flavor_id, role) -> str:
        image = ((self.opts.forwarding_image_ref
                  if role == cloud_mod.FORWARDING
                  else self.opts.noisy_image_ref)
                 or self.conf.compute.image_ref)
        kwargs = {"name": data_utils.rand_name(name), "flavorRef": flavor_id,
                  "imageRef": image,
                  "user_data": userdata.for_role(role, self.settings),
                  "scheduler_hints": {"group": self._group_id()}}
        kwargs["networks"] = self._networks(role)
        # As _diagnostics: set for this call, and what was put back.
        before = base_compute_client.COMPUTE_MICROVERSION
        if kwargs["networks"] == "none":
            base_compute_client.COMPUTE_MICROVERSION = NO_NIC_MICROVERSION
        try:
            server = self.servers_client.create_server(**kwargs)["server"]
        finally:
            base_compute_client.COMPUTE_MICROVERSION = before
        self.roles[server["id"]] = role
        self._flavor_of[server["id"]] = flavor_id
        self.test.addCleanup(self._delete_quietly, server["id"])
        return server["id"]

    def wait_active(self, server_id) -> None:
        waiters.wait_for_server_status(self.servers_client, server_id,
                                       "ACTIVE")
        self._watch_console(server_id, self.roles.get(server_id))
        if self.roles.get(server_id) == cloud_mod.NOISY:
            self._check_ways(server_id)

    def _check_ways(self, noisy_id) -> None:
        """Once a nova-rdt pair runs: the forwarding VM's group holds
        exactly its flavor's ways and shares the PMD COS on the PMD
        cores' caches, the neighbour's is disjoint from both (the RDT
        compute's exporter, ``/api/layout``)."""
        from tempest_plugin import exporter as exporter_mod
        fwd = next((sid for sid, role in self.roles.items()
                    if role == cloud_mod.FORWARDING
                    and "rdt:pmd_share" in self._specs.get(
                        self._flavor_of.get(sid), {})), None)
        specs = self._specs.get(self._flavor_of.get(fwd), {})
        if fwd is None or not self.opts.exporter_url or not any(
                k.startswith("rdt:") for k in self._specs.get(
                    self._flavor_of.get(noisy_id), {})):
            return
        ways = int(specs["rdt:l3_cache_ways"])
        rdt_class = self._specs.get(self._flavor_of.get(noisy_id),
                                    {}).get("rdt:class")
        exporter = exporter_mod.Exporter(self.opts.exporter_url)
        last = {"problems": ["not read"]}

        def settled():
            # The hook publishes the PMD COS it derives a moment after
            # the domain starts: read until it holds or time is up.
            last["problems"] = exporter_mod.pmd_sharing_problems(
                exporter.layout(), fwd, ways, noisy_id, rdt_class)
            return not last["problems"]
        exporter.wait_for("the pair's groups", settled, timeout=30)
        self.whitebox.append({"servers": {"forwarding": fwd,
                                          "noisy": noisy_id},
                              "problems": last["problems"]})
        LOG.info("whitebox (exporter /api/layout): %s",
                 "; ".join(last["problems"]) or "the forwarding VM holds "
                 f"its {ways} ways and shares the PMD COS; the neighbour's "
                 "ways are its own")

    def host_of(self, server_id) -> str:
        server = self.admin_servers_client.show_server(server_id)["server"]
        return server["OS-EXT-SRV-ATTR:host"]

    def pause(self, server_id) -> None:
        self.servers_client.pause_server(server_id)
        waiters.wait_for_server_status(self.servers_client, server_id,
                                       "PAUSED")

    def unpause(self, server_id) -> None:
        self.servers_client.unpause_server(server_id)
        waiters.wait_for_server_status(self.servers_client, server_id,
                                       "ACTIVE")

    def delete(self, server_id) -> None:
        try:
            self.servers_client.delete_server(server_id)
        except lib_exc.NotFound:
            return
        waiters.wait_for_server_termination(self.servers_client, server_id)

    def _delete_quietly(self, server_id):
        try:
            self.delete(server_id)
        except lib_exc.NotFound:
            pass

    # -- measurements --
    def measure(self, forwarding_id, frame_sizes, short) -> list[dict]:
        self.runs += 1
        label = f"run-{self.runs}"
        frames = self._measure(label, frame_sizes, short)
        missing = [f["frame_size"] for f in frames
                   if f.get("avg_latency_us") is None]
        if missing:
            # A search that found no passing rate (a guest that stalled
            # through its trials: emulated CPUs on a busy host) is run
            # once more; both reports are kept.
            LOG.warning("no latency at %s B: measuring once more",
                        ", ".join(map(str, missing)))
            again = {f["frame_size"]: {**f, "measured_twice": True}
                     for f in self._measure(f"{label}-again", missing,
                                            short)}
            frames = [again.get(f["frame_size"], f) for f in frames]
        return frames

    def _measure(self, label, frame_sizes, short) -> list[dict]:
        from nova_rdt.rfc2544 import config as rcfg
        from nova_rdt.rfc2544 import engine
        from nova_rdt.rfc2544 import generators
        from nova_rdt.rfc2544 import report

        doc = rcfg.load_file(self.opts.generator_config)
        doc.update({"label": label,
                    "frame_sizes": [int(s) for s in frame_sizes],
                    "loss_tolerance": self.settings.loss_tolerance,
                    "trial_duration": self.opts.trial_duration,
                    "latency_duration": self.opts.latency_duration})
        if short:
            doc.update(trial_duration=min(1.0, self.opts.trial_duration),
                       latency_duration=min(1.0, self.opts.latency_duration))
        # [nova_rdt] search_goals and initial_trial_duration over the
        # generator file's (a short run caps the goals' trial length).
        doc.update(rcfg.scenario_overrides(
            self.opts.search_goals, self.opts.initial_trial_duration,
            final_cap=doc["trial_duration"] if short else None))
        doc.setdefault("generator", {})["type"] = self.opts.generator
        cfg, spec = rcfg.parse(doc)
        gen = generators.load(spec)
        try:
            result = engine.run(gen, cfg)
        finally:
            gen.close()
            self._measured_at = self.clock()
        report.write(result, os.path.join(self.out_dir, "rfc2544", label))
        return frames_mod.from_report(report.to_dict(result))

    def _diagnostics(self, server_id) -> dict | None:
        # Tempest's APIMicroversionFixture resets the global to None on
        # exit, which would strip the scenario's own microversion from
        # every later request: set it for this call and put back what was.
        before = base_compute_client.COMPUTE_MICROVERSION
        base_compute_client.COMPUTE_MICROVERSION = DIAGNOSTICS_MICROVERSION
        try:
            return self.admin_servers_client.show_server_diagnostics(
                server_id)
        except lib_exc.RestClientException as e:
            LOG.warning("no diagnostics of %s: %s", server_id, e)
            return None
        finally:
            base_compute_client.COMPUTE_MICROVERSION = before

    def _dataplane_macs(self, server_id) -> set[str]:
        ifaces = self.interfaces_client.list_interfaces(
            server_id)["interfaceAttachments"]
        nets = set(self.opts.dataplane_networks)
        return {i["mac_addr"].lower() for i in ifaces
                if i.get("net_id") in nets}

    def port_counters(self, server_id) -> dict | None:
        # libvirt reads a vhost-user NIC's counters from OVSDB, which
        # ovs-vswitchd refreshes every stats-update-interval (5 s at
        # least): read right after a measurement they miss its last
        # seconds.
        if self._measured_at is not None:
            wait = OVSDB_STATS_INTERVAL - (self.clock() - self._measured_at)
            if wait > 0:
                self.sleep(wait)
        diag = self._diagnostics(server_id)
        if not diag or not diag.get("nic_details"):
            return None
        macs = self._dataplane_macs(server_id)
        nics = [n for n in diag["nic_details"]
                if (n.get("mac_address") or "").lower() in macs]
        if not nics or any(n.get("rx_packets") is None
                           or n.get("tx_packets") is None for n in nics):
            return None
        # libvirt reports interface statistics as the guest sees them.
        return {"rx": sum(n["rx_packets"] for n in nics),
                "tx": sum(n["tx_packets"] for n in nics)}

    def load(self, server_id) -> dict | None:
        diag = self._diagnostics(server_id)
        cpus = (diag or {}).get("cpu_details") or []
        times = [c.get("time") for c in cpus]
        if not times or any(t is None for t in times):
            return None
        return {"cpu_time_ns": sum(times), "state": diag.get("state")}
