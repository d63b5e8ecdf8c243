"""rdt.* notifications from ``nova-rdt exporter`` to a real RabbitMQ.

The exporter runs as its own process with an [oslo_messaging_notifications]
configuration; the test reads the notifications queue with kombu.
"""

from __future__ import annotations

import json
import os
import time

import kombu
import pytest

from nova_rdt.host import records as records_mod
from tests.functional.exporter import onp
from tests.functional.exporter import rabbitmq
from tests.functional.exporter.proc import ExporterProcess
from tests.unit import test_exporter_logic as logic

pytestmark = pytest.mark.fuse
QUEUE = "notifications.info"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    reason = rabbitmq.unavailable_reason()
    if reason:
        pytest.skip(reason)
    b = rabbitmq.RabbitMQ(str(tmp_path_factory.mktemp("rabbitmq")))
    b.start()
    yield b
    b.stop()


class _Reader:
    """Takes oslo.messaging v2 notifications off the queue."""

    def __init__(self, port: int):
        self.conn = kombu.Connection(f"amqp://guest:guest@127.0.0.1:{port}//")
        self.got: list[dict] = []

    def poll(self) -> None:
        try:
            ch = self.conn.channel()
            while True:
                msg = ch.basic_get(QUEUE, no_ack=True)
                if msg is None:
                    break
                body = json.loads(msg.body)
                self.got.append(json.loads(body["oslo.message"]))
            ch.close()
        except Exception as e:       # the notifier has not declared it yet
            if "NOT_FOUND" not in str(e) and "404" not in str(e):
                raise
            self.conn.close()
            self.conn = kombu.Connection(
                self.conn.as_uri(include_password=True))

    def wait_for(self, check, timeout=30.0):
        deadline = time.monotonic() + timeout
        while not check(self.got):
            assert time.monotonic() < deadline, self.got
            time.sleep(0.3)
            self.poll()

    def close(self):
        self.conn.close()


def test_allocation_changes_and_samples_reach_the_broker(
        emulator_e5, broker, tmp_path):
    emulator = emulator_e5
    state = tmp_path / "state"
    onp.write_layout(emulator.mountpoint, str(state))
    conf = tmp_path / "nova-rdt.conf"
    conf.write_text("[oslo_messaging_notifications]\n"
                    f"transport_url = {broker.url}\n"
                    "driver = messagingv2\ntopics = notifications\n")
    reader = _Reader(broker.port)
    exp = ExporterProcess(emulator.mountpoint, emulator.sysfs_cpu,
                          str(state), host="compute-onp",
                          notify_interval=1.0, config_file=str(conf))
    exp.start()
    try:
        # The first check is the baseline: samples, no allocation events.
        reader.wait_for(lambda got: {
            m["payload"]["nova_object.data"]["instance_name"]
            for m in got if m["event_type"] == "rdt.instance.sample"}
            >= {"vm0", "vm1"})
        assert not [m for m in reader.got
                    if m["event_type"].startswith("rdt.allocation")]
        sample = next(m for m in reader.got
                      if m["event_type"] == "rdt.instance.sample")
        assert sample["publisher_id"] == "nova-rdt-exporter:compute-onp"
        assert sample["priority"] == "INFO"
        payload = sample["payload"]
        assert payload["nova_object.name"] == "RdtInstanceSamplePayload"
        assert payload["nova_object.namespace"] == "nova_rdt"
        assert payload["nova_object.version"] == "1.0"
        vm0 = next(m["payload"]["nova_object.data"] for m in reader.got
                   if m["event_type"] == "rdt.instance.sample"
                   and m["payload"]["nova_object.data"]["instance_name"]
                   == "vm0")
        assert vm0["instance_uuid"] == onp.VM0[2]
        assert vm0["flavor"] == "nfv.fwd"
        assert vm0["l3_ways"] == {"0": 8, "1": 8}
        assert set(vm0["llc_occupancy_bytes"]) == {"0", "1"}

        # vm0 goes away; the PMD mask shrinks to vm1 and the base.
        os.rmdir(os.path.join(emulator.mountpoint, onp.VM0[0]))
        records_mod.Records(str(state)).remove(onp.VM0[2])
        with open(os.path.join(emulator.mountpoint, onp.PMD[0],
                               "schemata"), "w") as f:
            f.write("L3:0=ff0;1=ff0\n")
        reader.wait_for(lambda got: {
            m["event_type"] for m in got} >= {"rdt.allocation.delete",
                                              "rdt.allocation.update"})
        events = {m["event_type"]: m["payload"]["nova_object.data"]
                  for m in reader.got
                  if m["event_type"].startswith("rdt.allocation")}
        gone = events["rdt.allocation.delete"]
        assert gone["group"] == onp.VM0[0] and gone["schemata"] is None
        assert gone["instance_name"] == "vm0"
        assert gone["previous"] == {"L3": {"0": "ff000", "1": "ff000"}}
        pmd = events["rdt.allocation.update"]
        assert pmd["kind"] == "pmd"
        assert pmd["schemata"]["L3"] == {"0": "ff0", "1": "ff0"}
        assert pmd["previous"]["L3"] == {"0": "ffff0", "1": "ffff0"}
        # Every notification that reached the broker is its sample's
        # payload, version and fields (doc/notification_samples/).
        for m in reader.got:
            with open(logic._sample_file(m["event_type"])) as f:
                logic.assert_matches_sample(m, json.load(f))
    finally:
        output = exp.stop()
        reader.close()
    assert "Traceback" not in output, output
