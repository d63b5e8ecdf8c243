"""nova-rdt's per-host exporter: Prometheus metrics, a way-map page and
oslo.messaging notifications, all from one snapshot of resctrl.

* ``dashboard``: the Grafana dashboard, generated from code;
* ``hostname``: the ``host`` label: Nova's ``[DEFAULT] host``;
* ``identity``: who a resctrl group belongs to;
* ``live``: the state between scrapes: last sample, monotonic MB counters;
* ``metrics``: Prometheus metrics from the live view, at every scrape;
* ``notifications``: versioned notification payloads from samples;
* ``notifier``: publishes the notifications through oslo.messaging;
* ``page``: the page at ``/`` and the ``/api/layout`` JSON it polls;
* ``payloads``: the ``rdt.*`` payloads as oslo.versionedobjects;
* ``sample``: one snapshot of resctrl with each group's owner;
* ``server``: the HTTP server: ``/metrics``, ``/`` and ``/api/layout``;
* ``waymap``: the way map, free ways and CLOS of one sample.

Layers, one way: ``sample`` reads resctrl and the hook's records (the
only I/O), ``identity``, ``notifications`` and ``waymap`` are pure, the
others render, serve and publish.
"""
