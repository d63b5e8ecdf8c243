"""``rdt.controller.decision``: a versioned notification per decision.

The payload is an oslo.versionedobject with Nova's ``nova_object.*``
envelope, as the exporter's ``rdt.*`` payloads
(:mod:`nova_rdt.exporter.payloads`), in a registry of its own.  Sending
goes through a bounded queue and a thread, so a slow or absent broker
never holds the control loop; with ``[oslo_messaging_notifications]
driver = noop`` (the default) nothing is sent.

Version history:

RdtControllerDecisionPayload
    1.0: host, policy, group, rdt_class, reason, outcome, dry_run, mb,
    previous_mb, l3_ways, previous_l3_ways, bandwidth_bytes
"""

from __future__ import annotations

import logging
import queue
import threading

from oslo_versionedobjects import base
from oslo_versionedobjects import fields

LOG = logging.getLogger(__name__)
EVENT_TYPE = "rdt.controller.decision"


class ControllerObjectRegistry(base.VersionedObjectRegistry):
    """The controller's own registry: Nova's and the exporter's stay
    untouched."""


@ControllerObjectRegistry.register
class RdtControllerDecisionPayload(base.VersionedObject):
    VERSION = "1.0"
    OBJ_SERIAL_NAMESPACE = "nova_object"
    OBJ_PROJECT_NAMESPACE = "nova_rdt"
    fields = {
        "host": fields.StringField(),
        "policy": fields.StringField(),
        "group": fields.StringField(),
        "rdt_class": fields.StringField(nullable=True),
        "reason": fields.StringField(),
        "outcome": fields.StringField(),
        "dry_run": fields.BooleanField(),
        "mb": fields.IntegerField(nullable=True),
        "previous_mb": fields.IntegerField(nullable=True),
        "l3_ways": fields.IntegerField(nullable=True),
        "previous_l3_ways": fields.IntegerField(nullable=True),
        "bandwidth_bytes": fields.FloatField(nullable=True),
    }

    def to_primitive(self) -> dict:
        self.obj_reset_changes(recursive=True)
        return self.obj_to_primitive()


def payload(**values) -> dict:
    return RdtControllerDecisionPayload(**values).to_primitive()


class Sender:
    """Sends payloads from a thread; drops (and counts) what does not fit
    the queue rather than block the loop."""

    def __init__(self, conf, host: str, maxsize: int = 1000):
        import oslo_messaging

        transport = oslo_messaging.get_notification_transport(conf)
        self.notifier = oslo_messaging.Notifier(
            transport, publisher_id=f"nova-rdt-controller:{host}")
        self.q: queue.Queue = queue.Queue(maxsize=maxsize)
        self.dropped = 0
        self.sent = 0
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="nova-rdt-controller-notify")
        self._thread.start()

    def send(self, body: dict) -> None:
        try:
            self.q.put_nowait(body)
        except queue.Full:
            self.dropped += 1

    def close(self, timeout: float = 5.0) -> None:
        self.q.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            body = self.q.get()
            if body is None:
                return
            try:
                self.notifier.info({}, EVENT_TYPE, body)
                self.sent += 1
            except Exception:
                # A broker outage must not stop the controller.
                LOG.exception("sending %s failed", EVENT_TYPE)
