"""What nova-rdt's HTTP endpoints share (the exporter's and the runtime
controller's metrics ports).

* ``webconfig``: TLS and basic auth, in the exporter-toolkit's format.
"""
