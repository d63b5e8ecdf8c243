"""The ``rdt.*`` notification payloads as oslo.versionedobjects.

As Nova's ``nova/notifications/objects/``: each payload is a versioned
object in a registry of nova-rdt's own, serialised with the
``nova_object.*`` envelope (namespace ``nova_rdt``), so consumers that
read Nova's versioned notifications parse these the same way.  A change
of fields is a version bump: tests/unit/test_notification_payloads.py
holds each payload's fingerprint and fails until the version and the
sample under doc/notification_samples/ follow.

Version history:

RdtAllocationPayload
    1.0: host, group, kind, label, instance_uuid, instance_name, flavor,
    rdt_class, schemata, previous
RdtInstanceSamplePayload
    1.0: the identity fields, period_seconds, timestamp,
    llc_occupancy_bytes, memory_bandwidth, l3_ways
"""

from __future__ import annotations

from oslo_versionedobjects import base
from oslo_versionedobjects import fields


class RdtObjectRegistry(base.VersionedObjectRegistry):
    """nova-rdt's own registry: Nova's stays untouched."""


class _StrOrInt(fields.FieldType):
    """A schemata value: a hex mask (cache) or a number (MB)."""

    @staticmethod
    def coerce(obj, attr, value):
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ValueError(f"{attr}: {value!r} is neither a mask nor a "
                             "number")
        return value


# {resource: {domain id: value}}, as ``{"L3": {"0": "ff0"}, "MB": {"0": 50}}``
SchemataField = fields.Field(fields.Dict(fields.Dict(_StrOrInt())),
                             nullable=True)


class RdtPayloadBase(base.VersionedObject):
    OBJ_SERIAL_NAMESPACE = "nova_object"
    OBJ_PROJECT_NAMESPACE = "nova_rdt"

    def to_primitive(self) -> dict:
        """The payload as it travels: no ``changes`` list, as Nova emits."""
        self.obj_reset_changes(recursive=True)
        return self.obj_to_primitive()


_IDENTITY = {
    "host": fields.StringField(),
    "group": fields.StringField(),
    "kind": fields.StringField(),
    "label": fields.StringField(),
    "instance_uuid": fields.StringField(nullable=True),
    "instance_name": fields.StringField(nullable=True),
    "flavor": fields.StringField(nullable=True),
    "rdt_class": fields.StringField(nullable=True),
}


@RdtObjectRegistry.register
class RdtAllocationPayload(RdtPayloadBase):
    """rdt.allocation.create/update/delete: a control group changed."""
    VERSION = "1.0"
    fields = {
        **_IDENTITY,
        "schemata": SchemataField,
        "previous": SchemataField,
    }


@RdtObjectRegistry.register
class RdtInstanceSamplePayload(RdtPayloadBase):
    """rdt.instance.sample: one instance's occupancy and bandwidth."""
    VERSION = "1.0"
    fields = {
        **_IDENTITY,
        "period_seconds": fields.FloatField(),
        "timestamp": fields.FloatField(),
        "llc_occupancy_bytes": fields.DictOfIntegersField(),
        "memory_bandwidth": fields.Field(fields.Dict(fields.Dict(
            fields.Float(), nullable=True))),
        "l3_ways": fields.DictOfIntegersField(),
    }


# event_type -> payload class, for the samples and their test.
EVENTS = {
    "rdt.allocation.create": RdtAllocationPayload,
    "rdt.allocation.update": RdtAllocationPayload,
    "rdt.allocation.delete": RdtAllocationPayload,
    "rdt.instance.sample": RdtInstanceSamplePayload,
}
