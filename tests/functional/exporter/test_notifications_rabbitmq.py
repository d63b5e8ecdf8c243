"""rdt.* notifications through oslo.messaging to a real RabbitMQ."""

from __future__ import annotations

import os
import queue
import threading

import oslo_messaging
import pytest
from oslo_config import cfg

from nova_rdt.exporter.live import LiveView
from nova_rdt.exporter.notifier import Publisher
from nova_rdt.exporter.sample import Sampler
from nova_rdt.hook import records as records_mod
from nova_rdt.resctrl.groups import Resctrl
from tests.functional.exporter import onp
from tests.functional.exporter import rabbitmq

pytestmark = pytest.mark.fuse


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    reason = rabbitmq.unavailable_reason()
    if reason:
        pytest.skip(reason)
    b = rabbitmq.RabbitMQ(str(tmp_path_factory.mktemp("rabbitmq")))
    b.start()
    yield b
    b.stop()


class _Endpoint:
    def __init__(self):
        self.got = queue.Queue()

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        self.got.put((publisher_id, event_type, payload))


def _conf(url, tmp_path):
    """A ConfigOpts read from a nova-rdt.conf, as the exporter reads it."""
    path = tmp_path / "nova-rdt.conf"
    path.write_text("[oslo_messaging_notifications]\n"
                    f"transport_url = {url}\n"
                    "driver = messagingv2\ntopics = notifications\n")
    conf = cfg.ConfigOpts()
    conf(["--config-file", str(path)], project="nova-rdt-test")
    return conf


def _drain(endpoint, n, timeout=20.0):
    out = []
    for _ in range(n):
        out.append(endpoint.got.get(timeout=timeout))
    return out


@pytest.mark.parametrize("emulator", ["e5-2658-v3"], indirect=True)
def test_allocation_changes_and_samples_reach_the_broker(
        emulator, broker, tmp_path):
    onp.write_layout(emulator.mountpoint, str(tmp_path))
    conf = _conf(broker.url, tmp_path)
    transport = oslo_messaging.get_notification_transport(conf)
    endpoint = _Endpoint()
    listener = oslo_messaging.get_notification_listener(
        transport, [oslo_messaging.Target(topic="notifications")],
        [endpoint], executor="threading")
    listener.start()
    try:
        fs = Resctrl(emulator.mountpoint, sysfs_cpu=emulator.sysfs_cpu)
        pub = Publisher(conf, LiveView(Sampler(fs, str(tmp_path))),
                        "compute-onp", interval=60.0)
        # The baseline: no allocation events, one sample per instance.
        assert pub.publish_once() == 2
        first = _drain(endpoint, 2)
        assert {e for _p, e, _d in first} == {"rdt.instance.sample"}
        sample = next(d for _p, _e, d in first
                      if d["nova_object.data"]["instance_name"] == "vm0")
        assert sample["nova_object.name"] == "RdtInstanceSamplePayload"
        assert sample["nova_object.version"] == "1.0"
        data = sample["nova_object.data"]
        assert data["instance_uuid"] == onp.VM0[2]
        assert data["flavor"] == "nfv.fwd"
        assert data["l3_ways"] == {"0": 8, "1": 8}
        assert set(data["llc_occupancy_bytes"]) == {"0", "1"}

        # An instance goes away, the PMD mask shrinks to the other one.
        vm0 = os.path.join(emulator.mountpoint, onp.VM0[0])
        os.rmdir(vm0)
        records_mod.Records(str(tmp_path)).remove(onp.VM0[2])
        with open(os.path.join(emulator.mountpoint, onp.PMD[0],
                               "schemata"), "w") as f:
            f.write("L3:0=ff0;1=ff0\n")
        assert pub.publish_once() == 3
        got = _drain(endpoint, 3)
        events = {e: d for _p, e, d in got if e.startswith("rdt.alloc")}
        assert set(events) == {"rdt.allocation.delete",
                               "rdt.allocation.update"}
        gone = events["rdt.allocation.delete"]["nova_object.data"]
        assert gone["group"] == onp.VM0[0] and gone["schemata"] is None
        assert gone["previous"] == {"L3": {"0": "ff000", "1": "ff000"}}
        pmd = events["rdt.allocation.update"]["nova_object.data"]
        assert pmd["kind"] == "pmd"
        assert pmd["schemata"]["L3"] == {"0": "ff0", "1": "ff0"}
        assert pmd["previous"]["L3"] == {"0": "ffff0", "1": "ffff0"}
        assert {p for p, _e, _d in got} == {"nova-rdt-exporter:compute-onp"}
    finally:
        listener.stop()
        listener.wait()
        transport.cleanup()
