"""RFC 2544 proves the forwarding VM stays isolated from a noisy one.

The ONP app note's experiment, from Tempest: a forwarding VM (testpmd)
whose flavor has its own L3 ways shared with the OVS-DPDK PMDs, and a
noisy neighbour (memtester or stress-ng) in a best-effort rdt:class.
RFC 2544 runs through the configured generator with the neighbour
paused (idle), then running (busy); the forwarding VM's latency with the
neighbour busy must stay within the configured ratio of the idle
baseline, per frame size.  Reports and Figure 3-2/3-3 style plots are
saved under [nova_rdt] artifacts_dir.
"""

import os
import time

from tempest import config
from tempest.common import waiters
from tempest.lib import decorators
from tempest.lib.common.utils import data_utils
from tempest.scenario import manager
import yaml

CONF = config.CONF


def skip_reason():
    """Why the scenario cannot run here, or None."""
    opts = CONF.nova_rdt
    if opts.generator == "none":
        return ("no traffic generator configured ([nova_rdt] generator = "
                "none)")
    if not opts.generator_config:
        return "[nova_rdt] generator_config is not set"
    if not os.path.exists(opts.generator_config):
        return f"[nova_rdt] generator_config {opts.generator_config} " \
               f"does not exist"
    if not opts.rdt_compute:
        return ("no RDT-capable compute configured ([nova_rdt] "
                "rdt_compute = False)")
    return None


class RdtIsolationScenarioTest(manager.ScenarioTest):
    credentials = ["primary", "admin"]

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        reason = skip_reason()
        if reason:
            raise cls.skipException(reason)

    def _flavor(self, vcpus, specs):
        client = self.os_admin.flavors_client
        flavor = client.create_flavor(
            name=data_utils.rand_name("rdt"), ram=1024, vcpus=vcpus,
            disk=1)["flavor"]
        self.addCleanup(client.delete_flavor, flavor["id"])
        client.set_flavor_extra_spec(flavor["id"], **specs)
        return flavor["id"]

    def _rfc2544(self, label, out_dir):
        from nova_rdt.rfc2544 import config as rcfg
        from nova_rdt.rfc2544 import engine
        from nova_rdt.rfc2544 import generators
        from nova_rdt.rfc2544 import report

        opts = CONF.nova_rdt
        with open(opts.generator_config) as f:
            doc = yaml.safe_load(f) or {}
        doc.update({"label": label,
                    "frame_sizes": [int(s) for s in opts.frame_sizes],
                    "loss_tolerance": opts.loss_tolerance,
                    "trial_duration": opts.trial_duration,
                    "latency_duration": opts.latency_duration})
        doc.setdefault("generator", {})["type"] = opts.generator
        cfg, spec = rcfg.parse(doc)
        gen = generators.load(spec)
        try:
            result = engine.run(gen, cfg)
        finally:
            gen.close()
        report.write(result, os.path.join(out_dir, label))
        return report.to_dict(result)

    @decorators.idempotent_id("5d3c1a0e-3b9a-4f0e-8c51-7e7f8f2b1c01")
    @decorators.attr(type="slow")
    def test_forwarding_latency_holds_with_a_busy_neighbour(self):
        from nova_rdt.rfc2544 import report

        opts = CONF.nova_rdt
        fwd_flavor = self._flavor(4, {
            "rdt:l3_cache_ways": str(opts.forwarding_l3_ways),
            "rdt:pmd_share": "true", "hw:cpu_policy": "dedicated",
            "hw:mem_page_size": "large"})
        noisy_flavor = self._flavor(2, {"rdt:class": opts.noisy_class})
        self.create_server(
            flavor=fwd_flavor,
            image_id=opts.forwarding_image_ref or CONF.compute.image_ref,
            user_data=opts.forwarding_user_data, wait_until="ACTIVE")
        noisy = self.create_server(
            flavor=noisy_flavor,
            image_id=opts.noisy_image_ref or CONF.compute.image_ref,
            user_data=opts.noisy_user_data, wait_until="ACTIVE")

        out = os.path.join(opts.artifacts_dir, data_utils.rand_name("run"))
        self.servers_client.pause_server(noisy["id"])
        waiters.wait_for_server_status(self.servers_client, noisy["id"],
                                       "PAUSED")
        idle = self._rfc2544("neighbour-idle", out)
        self.servers_client.unpause_server(noisy["id"])
        waiters.wait_for_server_status(self.servers_client, noisy["id"],
                                       "ACTIVE")
        time.sleep(10)            # let the neighbour fill the cache
        busy = self._rfc2544("neighbour-busy", out)
        report.compare({"neighbour idle": idle, "neighbour busy": busy},
                       out)

        for a, b in zip(idle["frames"], busy["frames"]):
            size = a["frame_size"]
            self.assertIsNotNone(a["latency"], f"{size} B: no baseline")
            self.assertIsNotNone(b["latency"], f"{size} B: no busy run")
            ratio = b["latency"]["avg_us"] / a["latency"]["avg_us"]
            self.assertLessEqual(
                ratio, opts.max_latency_ratio,
                f"{size} B: average latency {b['latency']['avg_us']:.1f} "
                f"µs with the neighbour busy vs "
                f"{a['latency']['avg_us']:.1f} µs idle (report in {out})")
            p99 = (b["latency"]["percentiles_us"]["99"]
                   / a["latency"]["percentiles_us"]["99"])
            self.assertLessEqual(p99, opts.max_p99_ratio,
                                 f"{size} B: p99 ratio {p99:.2f} "
                                 f"(report in {out})")
