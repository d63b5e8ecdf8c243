"""A server's group counters read from the exporter's exposition text.

The text is made by the exporter's own collector (its real metric names
and labels) through prometheus_client, as ``/metrics`` serves it.
"""

import types

from prometheus_client import CollectorRegistry
from prometheus_client import generate_latest
import pytest

from nova_rdt.exporter import identity
from nova_rdt.exporter.live import Bandwidth
from nova_rdt.exporter.metrics import RdtCollector
from nova_rdt.exporter.sample import GroupSample
from nova_rdt.exporter.sample import HostSample
from nova_rdt.lab.isolation import group_counters
from nova_rdt.resctrl.monitoring import Reading

NOISY = "qemu-4-instance-00000004-vcpus_0"
FWD = "qemu-3-instance-00000003-vcpus_0-1"


def exposition(features, bw):
    caps = types.SimpleNamespace(
        cache={"L3": None}, bandwidth={}, mba_mbps=False,
        monitoring={"L3_MON": types.SimpleNamespace(features=features)})

    def g(name, occ):
        return GroupSample(
            name, True, identity.Identity("instance"), {"L3": {0: 0x30}}, 2,
            (Reading("L3", 0, occ, 10, 5), Reading("L3", 1, occ, 10, 5)))

    sample = HostSample(caps, (g("", 1), g(FWD, 1 << 20), g(NOISY, 3 << 20)),
                        0.0, 0.0)
    collector = RdtCollector(None, "compute-0")

    class Families:
        def collect(self):
            return collector._groups(sample, bw)

    reg = CollectorRegistry()
    reg.register(Families())
    return generate_latest(reg).decode()


def test_the_groups_counters_summed_over_nodes():
    bw = {(NOISY, 0): Bandwidth(1000, 700, 0, 0),
          (NOISY, 1): Bandwidth(24, 20, 0, 0),
          (FWD, 0): Bandwidth(5, 5, 0, 0), (FWD, 1): Bandwidth(5, 5, 0, 0)}
    text = exposition(("llc_occupancy", "mbm_total_bytes",
                       "mbm_local_bytes"), bw)
    assert group_counters.of_group(text, NOISY) == {
        "rdt_group": NOISY, "mbm_total_bytes": 1024,
        "mbm_local_bytes": 720, "llc_occupancy_bytes": 6 << 20}
    assert group_counters.of_group(text, FWD)["llc_occupancy_bytes"] == \
        2 << 20


def test_what_the_platform_does_not_count_is_none_not_zero():
    # The ONP app note's Haswell: CMT only, no MBM.
    text = exposition(("llc_occupancy",), {})
    got = group_counters.of_group(text, NOISY)
    assert got["mbm_total_bytes"] is None and got["mbm_local_bytes"] is None
    assert got["llc_occupancy_bytes"] == 6 << 20
    gone = group_counters.of_group(text, "qemu-9-gone-vcpus_0")
    assert gone == {"rdt_group": "qemu-9-gone-vcpus_0",
                    "mbm_total_bytes": None, "mbm_local_bytes": None,
                    "llc_occupancy_bytes": None}


def test_no_group_is_every_key_none():
    assert group_counters.none_values() == dict.fromkeys(
        group_counters.KEYS)


def test_a_text_that_is_not_prometheus_is_a_clear_error():
    with pytest.raises(group_counters.CountersError, match="does not parse"):
        group_counters.of_group("nova_rdt_x{group=\"a\" 1\n", NOISY)


def test_an_exporter_that_does_not_answer_is_a_clear_error():
    with pytest.raises(group_counters.CountersError,
                       match="cannot scrape the exporter at "
                             "http://127.0.0.1:9"):
        group_counters.scrape("http://127.0.0.1:9", timeout=2)
