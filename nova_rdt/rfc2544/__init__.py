"""RFC 2544 for nova-rdt: throughput (with a loss tolerance), then latency
at the found rate, per frame size.

* ``cli``: ``nova-rdt rfc2544 run``: its configuration, then the run;
* ``config``: the run's configuration from YAML or flags, validated;
* ``engine``: drives ``search`` and ``latency`` against a generator;
* ``generators``: the software, IxNetwork and simulated generators;
* ``latency``: latency statistics and histogram bins;
* ``model``: the engine's data and the traffic-generator interface;
* ``report``: the report directory: JSON, CSV, PNG plots and HTML;
* ``search``: the highest rate whose loss stays within the tolerance;
* ``simdut``: a simulated device under test with a known capacity;
* ``wording``: how a throughput result is said, the same way everywhere.

``search`` and ``latency`` are pure and work on plain numbers.
"""
