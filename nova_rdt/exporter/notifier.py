"""Publishes the exporter's notifications through oslo.messaging.

Uses ``[oslo_messaging_notifications]`` (driver, topics, transport_url)
as every OpenStack service does; with the default ``noop`` driver
nothing is sent.  Runs in a daemon thread every ``interval`` seconds.
"""

from __future__ import annotations

import logging
import threading

import oslo_messaging

from nova_rdt.exporter import notifications
from nova_rdt.exporter.live import LiveView

LOG = logging.getLogger(__name__)


class Publisher:
    def __init__(self, conf, live: LiveView, host: str, interval: float):
        self.live = live
        self.host = host
        self.interval = interval
        transport = oslo_messaging.get_notification_transport(conf)
        self.notifier = oslo_messaging.Notifier(
            transport, publisher_id=f"nova-rdt-exporter:{host}")
        self._prev = None
        self._stop = threading.Event()
        self.sent = 0

    def publish_once(self) -> int:
        """Sample, send what changed and the per-instance samples."""
        s, bw = self.live.refresh()
        msgs = notifications.allocation_changes(self.host, self._prev, s)
        msgs += [("rdt.instance.sample", p) for p in
                 notifications.instance_samples(self.host, s, bw,
                                                self.interval)]
        self._prev = s
        for event_type, payload in msgs:
            self.notifier.info({}, event_type, payload)
        self.sent += len(msgs)
        return len(msgs)

    def start(self) -> threading.Thread:
        t = threading.Thread(target=self._run, name="nova-rdt-notifier",
                             daemon=True)
        t.start()
        return t

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.publish_once()
            except Exception:
                # A broker outage must not stop the exporter; retry later.
                LOG.exception("nova-rdt: publishing notifications failed")
            self._stop.wait(self.interval)
