"""nova-rdt's Tempest plugin: the rdt: flavor specs through the API, and
an RFC 2544 scenario that proves a forwarding VM keeps its latency next
to a busy noisy neighbour."""
