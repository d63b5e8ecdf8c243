"""The runtime resource manager (``nova-rdt controller``).

* ``daemon``: its loop: observe, decide, write, record;
* ``governor``: between a policy and the hardware: bounds, hysteresis, rate;
* ``guardian``: restores the static values when the controller dies;
* ``layout``: between schemata and the policies' two numbers per class;
* ``masks``: the class masks it may write, always inside the static one;
* ``metrics``: its Prometheus metrics, and a small server for them;
* ``model``: what it sees and what it may do: plain values, no I/O;
* ``notify``: ``rdt.controller.decision``, a notification per decision;
* ``policy``: from an observation to the MB and ways each class should have;
* ``slo_spec``: ``[rdt_controller] slo`` entries;
* ``sources``: where a protected instance's current latency comes from;
* ``state``: the fail-safe record ``nova-rdt reconcile`` reads.

The pure core (``model``, ``policy``, ``governor``, ``layout``,
``masks``, ``slo_spec``) decides; ``daemon`` observes and writes through
the resctrl library.
"""
