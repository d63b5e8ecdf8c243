"""``nova-rdt lab``: the whole of nova-rdt on one machine.

Stages (one module each, in :mod:`.stages`): the Host lab (real libvirtd,
real OVS-DPDK, emulated or real resctrl); Nova's real API, scheduler,
conductor and compute in-process (the functional-test harness,
:mod:`nova_rdt.lab.cloud`), with one RDT compute on the lab's resctrl and
one plain compute; the scenario's flavors through the API (with one bad
spec) and boots until no valid host; every domain Nova defines handed to
the real libvirtd with its RDT elements, so libvirt allocates and the hook
acts; the COS table, way map and relations; the exporter and a short RFC
2544 run; an HTML report (:mod:`.report`, from a template); and a
teardown that leaves nothing behind.

The console shows the stages, progress, tables and a summary; log records
and warnings go to ``lab.log`` in the report directory (:mod:`.console`).
"""

from nova_rdt.lab.demo.cli import main

__all__ = ["main"]
