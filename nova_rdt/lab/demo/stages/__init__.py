"""The stages of ``nova-rdt lab``, one module each, in the order
:mod:`nova_rdt.lab.demo.runner` runs them:

1. :mod:`.host`: the Host lab (libvirtd, OVS-DPDK, resctrl, the hook);
2.-3. :mod:`.nova`: Nova in-process (:mod:`nova_rdt.lab.cloud`), where
   :mod:`.flavors` creates the scenario's flavors and :mod:`.boots` boots
   until no valid host, each domain handed to the real libvirtd by
   :mod:`.libvirt`;
4. :mod:`.libvirt` again: what the real libvirtd holds, the PMD COS;
5. :mod:`.show`: the COS table, the way map and the relations;
6. :mod:`.exporter` and :mod:`.rfc2544`: measure; then the HTML report
   (:mod:`nova_rdt.lab.demo.report`);
7. clean-up, by the runner.
"""
