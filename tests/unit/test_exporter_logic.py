"""Pure parts of the exporter: owners, notification payloads."""

from __future__ import annotations

import types

from nova_rdt.exporter import identity
from nova_rdt.exporter import notifications
from nova_rdt.exporter.sample import GroupSample
from nova_rdt.exporter.sample import HostSample
from nova_rdt.host.records import Record

UUID = "6f1a3c86-5b1e-4c55-9a3a-1b2c3d4e5f60"


def _resolver():
    recs = [Record(UUID, "instance-0000002a", 1, None, True, None,
                   "qemu-7-instance-0000002a-vcpus_0-1", "fwd", "nfv.fwd"),
            Record("6f1a3c86-5b1e-4c55-9a3a-1b2c3d4e5f61",
                   "instance-0000002b-with-a-long-name", 2, None, False,
                   None, None, None, None)]
    return identity.Resolver("nova-rdt-", recs)


def test_owner_kinds():
    r = _resolver()
    assert r.resolve("") == identity.HOST
    assert r.resolve("nova-rdt-pmd").kind == "pmd"
    cls = r.resolve("nova-rdt-class-low_priority")
    assert (cls.kind, cls.rdt_class) == ("class", "low_priority")
    fwd = r.resolve("qemu-7-instance-0000002a-vcpus_0-1")
    assert (fwd.kind, fwd.instance_name, fwd.flavor,
            fwd.instance_uuid) == ("instance", "fwd", "nfv.fwd", UUID)
    # A monitor group inside an instance's group is that instance.
    assert r.resolve("vcpus_0", parent="qemu-7-instance-0000002a-vcpus_0-1") \
        == fwd
    # libvirt cuts the name in its group names to 20 characters; with no
    # Nova name in the record, the domain name labels it.
    mon_only = r.resolve("qemu-9-instance-0000002b-wi-vcpus_0", parent="")
    assert (mon_only.kind, mon_only.instance_name) == (
        "instance", "instance-0000002b-with-a-long-name")
    for foreign in ("COS1", "qemu-3-someone-else-vcpus_0", "nova-rdt"):
        assert r.resolve(foreign) == identity.FOREIGN


def _sample(groups, t=100.0):
    caps = types.SimpleNamespace(cache={"L3": None})
    return HostSample(caps, tuple(groups), t, 0.01)


def _g(name, l3, kind="foreign", **ident):
    return GroupSample(name, True, identity.Identity(kind, **ident),
                       {"L3": l3, "MB": {0: 100}}, 1, ())


def test_allocation_changes():
    a = _sample([_g("/", {0: 0xf}), _g("x", {0: 0xf0})])
    assert notifications.allocation_changes("h", None, a) == []
    b = _sample([_g("/", {0: 0xf}), _g("x", {0: 0x30}),
                 _g("y", {0: 0xc0}, "instance", instance_name="vm")])
    out = dict(notifications.allocation_changes("h", a, b))
    assert set(out) == {"rdt.allocation.update", "rdt.allocation.create"}
    upd = out["rdt.allocation.update"]
    assert upd["nova_object.namespace"] == "nova_rdt"
    assert upd["nova_object.data"]["schemata"]["L3"] == {"0": "30"}
    assert upd["nova_object.data"]["previous"]["L3"] == {"0": "f0"}
    assert upd["nova_object.data"]["schemata"]["MB"] == {"0": 100}
    new = out["rdt.allocation.create"]["nova_object.data"]
    assert (new["instance_name"], new["previous"]) == ("vm", None)
    gone = dict(notifications.allocation_changes("h", b, a))
    assert gone["rdt.allocation.delete"]["nova_object.data"]["group"] == "y"
    # No RDT now: nothing to say (not a mass delete).
    assert notifications.allocation_changes(
        "h", b, HostSample(None, (), 0, 0, error="gone")) == []
