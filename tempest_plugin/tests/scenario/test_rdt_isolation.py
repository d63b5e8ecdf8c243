"""RFC 2544 proves the forwarding VM stays isolated from a noisy one.

The ONP app note's experiment on a real cloud, through the procedure the
Host lab runs too (:mod:`nova_rdt.isolation.procedure`): a forwarding VM
(testpmd in io mode, or kernel forwarding) between the generator's two
dataplane networks, and a noisy neighbour (memtester or stress-ng) on
the same host (an affinity group, and checked).  Four conditions: the
flavors without ``rdt:`` keys, then the nova-rdt flavors (the forwarding
VM's ways shared with the OVS-DPDK PMDs, the neighbour's disjoint), each
with the neighbour paused (the idle reference) then running.  With the
nova-rdt flavors the busy latency must stay within the configured ratios
of the idle reference, per frame size; the no-CAT vs CAT comparison
(Tables 3-2/3-3, Figures 3-2/3-3) and summary.json are saved under
``[nova_rdt] artifacts_dir``.
"""

import os

from oslo_log import log as logging
from tempest import config
from tempest.lib import decorators
from tempest.lib.common.utils import data_utils
from tempest.scenario import manager

from nova_rdt.isolation import artifacts
from nova_rdt.isolation import procedure
from nova_rdt.isolation import tables
from tempest_plugin import cloud as tempest_cloud

CONF = config.CONF
LOG = logging.getLogger(__name__)


def skip_reason():
    """Why the scenario cannot run here, or None."""
    return tempest_cloud.skip_reason(CONF.nova_rdt)


class RdtIsolationScenarioTest(manager.ScenarioTest):
    credentials = ["primary", "admin"]

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        reason = skip_reason()
        if reason:
            raise cls.skipException(reason)

    @decorators.idempotent_id("5d3c1a0e-3b9a-4f0e-8c51-7e7f8f2b1c01")
    @decorators.attr(type="slow")
    def test_forwarding_latency_holds_with_a_busy_neighbour(self):
        settings = tempest_cloud.settings_from_conf(CONF.nova_rdt)
        out = os.path.join(CONF.nova_rdt.artifacts_dir,
                           data_utils.rand_name("isolation"))
        cloud = tempest_cloud.TempestCloud(self, settings, CONF, out)
        summary = procedure.run(cloud, settings, progress=LOG.info)
        summary["whitebox"] = cloud.whitebox
        artifacts.write(summary, out)
        LOG.info("accel %s, forwarder %s, rdt %s\n%s", summary["accel"],
                 summary["forwarder"], summary["rdt"],
                 tables.render_text(summary["tables"]))
        failed = [f"{v['check']} (rdt {v.get('rdt')}, neighbour "
                  f"{v.get('neighbour', '-')}): {v['detail']}"
                  for v in summary["verdicts"]
                  if v["binding"] and v["ok"] is False]
        # Whitebox, where the RDT compute's exporter is configured: the
        # nova-rdt pair's groups as the flavors asked.
        failed += [f"whitebox: {p}" for w in cloud.whitebox
                   for p in w["problems"]]
        if CONF.nova_rdt.exporter_url and not cloud.whitebox:
            failed.append("whitebox: the nova-rdt pair's groups were not "
                          "read from the exporter")
        self.assertEqual([], failed, f"summary and tables in {out}")
