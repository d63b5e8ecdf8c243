"""nova-rdt's per-host exporter: Prometheus metrics, a way-map page and
oslo.messaging notifications, all from one snapshot of resctrl.

Layers, one way: ``sample`` reads resctrl and the hook's records (the
only I/O), ``identity`` and ``waymap`` are pure, ``metrics``, ``page``
and ``notifications`` render a sample, ``server`` and ``notifier`` serve
and publish.
"""
