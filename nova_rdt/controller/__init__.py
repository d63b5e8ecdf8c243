"""The runtime resource manager (``nova-rdt controller``).

The pure core (:mod:`.model`, :mod:`.policy`, :mod:`.governor`,
:mod:`.masks`, :mod:`.slo_spec`) decides; :mod:`.daemon` observes and
writes through the resctrl library; :mod:`.state` is the fail-safe record
``nova-rdt reconcile`` reads.
"""
