"""RFC 2544 for nova-rdt: throughput (with a loss tolerance), then latency
at the found rate, per frame size.

``search`` and ``latency`` are pure and work on plain numbers;
``engine`` drives them against a :class:`~nova_rdt.rfc2544.model.
TrafficGenerator`; ``report`` writes JSON, CSV and PNG; ``generators``
holds the IxNetwork and software backends; ``simdut`` is a simulated
device under test with a known capacity, for tests and benchmarks.
"""
