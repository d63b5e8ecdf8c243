"""Pure parts of the exporter: owners, notification payloads."""

from __future__ import annotations

import dataclasses
import json
import os
import types

import pytest

from nova_rdt.exporter import identity
from nova_rdt.exporter import notifications
from nova_rdt.exporter import payloads
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
    # libvirt's group names carry the whole (hostname-safe) domain name;
    # with no Nova name in the record, the domain name labels it.
    mon_only = r.resolve("qemu-9-instance-0000002b-with-a-long-name-vcpus_0",
                         parent="")
    assert (mon_only.kind, mon_only.instance_name) == (
        "instance", "instance-0000002b-with-a-long-name")
    for foreign in ("COS1", "qemu-3-someone-else-vcpus_0", "nova-rdt",
                    # a 20-character cut is not libvirt's
                    "qemu-9-instance-0000002b-wi-vcpus_0"):
        assert r.resolve(foreign) == identity.FOREIGN


def test_owner_of_a_uuid_template_domain():
    # instance_name_template = instance-%(uuid)s: 45 characters, all of
    # them in libvirt's group name (its cut is at 64 with the prefix).
    name = f"instance-{UUID}"
    rec = Record(UUID, name, 1, None, False, None, None, "fwd", "nfv.fwd")
    other = Record("6f1a3c86-5b1e-4c55-9a3a-1b2c3d4e5f61",
                   "instance-6f1a3c86-5b1e-4c55-9a3a-1b2c3d4e5f61", 2, None,
                   False, None, None, "other", "nfv.fwd")
    r = identity.Resolver("nova-rdt-", [other, rec])
    for domid in (7, 123, 4567):
        group = f"qemu-{domid}-{name}-vcpus_0-1"
        got = r.resolve(group)
        assert (got.kind, got.instance_uuid, got.instance_name) == (
            "instance", UUID, "fwd"), group
        assert r.resolve("vcpus_1", parent=group) == got
    # Any other cut is nobody's.
    assert r.resolve(f"qemu-4567-{name[:-1]}-vcpus_0") == identity.FOREIGN
    assert r.resolve(f"qemu-7-{name[:20]}-vcpus_0") == identity.FOREIGN


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


# -- versioned notifications: fingerprints, samples, what is emitted ------

SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "doc", "notification_samples")

# Like Nova's test_notification.py: a payload whose fields change must get
# a new VERSION (and a new sample); then update the fingerprint here.
FINGERPRINTS = {
    "RdtAllocationPayload": "1.0-aa4816f6d48da54618794c538ab9856d",
    "RdtInstanceSamplePayload": "1.0-92c9c4df60fe97200f12f4a78fe7c3b0",
    # nova_rdt.controller.notify: rdt.controller.decision.
    "RdtControllerDecisionPayload": "1.0-232e795c95d9d1407b2804ede23a331d",
}


def test_payload_versions_follow_their_fields():
    from oslo_versionedobjects import fixture

    # Every nova-rdt payload registered, whatever ran before.
    from nova_rdt.controller import notify  # noqa: F401

    # oslo's registries share one class-level table: once Nova's objects
    # are registered (any Nova test in the same run), they are in it too.
    ours = {name: classes for name, classes in
            payloads.RdtObjectRegistry.obj_classes().items()
            if all(c.__module__.startswith("nova_rdt.") for c in classes)}
    checker = fixture.ObjectVersionChecker(ours)
    expected, actual = checker.test_hashes(FINGERPRINTS)
    assert expected == actual, (
        "a notification payload changed: bump its VERSION, note it in "
        "nova_rdt/exporter/payloads.py, update its sample under "
        "doc/notification_samples/, then the fingerprint here")


def _sample_file(event_type):
    return os.path.join(SAMPLES, event_type.replace(".", "-") + ".json")


@pytest.mark.parametrize("event_type", sorted(payloads.EVENTS))
def test_every_event_has_a_sample_of_its_version(event_type):
    with open(_sample_file(event_type)) as f:
        sample = json.load(f)
    cls = payloads.EVENTS[event_type]
    assert sample["event_type"] == event_type
    assert sample["priority"] == "INFO"
    assert sample["publisher_id"].startswith("nova-rdt-exporter:")
    p = sample["payload"]
    assert (p["nova_object.name"], p["nova_object.namespace"],
            p["nova_object.version"]) == (cls.__name__, "nova_rdt",
                                          cls.VERSION)
    # The sample holds exactly the payload's fields, in their types.
    obj = cls.obj_from_primitive(p)
    assert obj.to_primitive() == p
    assert set(p["nova_object.data"]) == set(cls.fields)


def _emit():
    """Publisher.publish_once over two samples: the baseline, then a group
    created, one changed, one gone; through oslo.messaging's test
    driver, as the exporter sends them."""
    from oslo_config import cfg
    import oslo_messaging
    from oslo_messaging.notify import _impl_test

    from nova_rdt.exporter import notifier
    from nova_rdt.exporter.live import Bandwidth
    from nova_rdt.resctrl.monitoring import Reading

    vm = dict(kind="instance", instance_name="vm0", flavor="nfv.fwd",
              instance_uuid=UUID)
    reading = (Reading("L3", 0, 1 << 20, 10, 5),)
    a = _sample([_g("/", {0: 0x3}), _g("nova-rdt-pmd", {0: 0xff0}, "pmd"),
                 _g("nova-rdt-class-bulk", {0: 0x3000}, "class",
                    rdt_class="bulk")])
    b = _sample([_g("/", {0: 0x3}), _g("nova-rdt-pmd", {0: 0x3f0}, "pmd"),
                 dataclasses.replace(_g("qemu-1-vm0-vcpus_0", {0: 0xc0},
                                        **vm), readings=reading)], t=101.0)
    bw = {("qemu-1-vm0-vcpus_0", 0): Bandwidth(10, 5, 1e6, 5e5)}

    class Live:
        def __init__(self):
            self.samples = [(a, {}), (b, bw)]

        def refresh(self):
            return self.samples.pop(0)

    conf = cfg.ConfigOpts()
    conf([], default_config_files=[])
    oslo_messaging.get_notification_transport(conf, url="fake://")
    conf.set_override("driver", ["test"],
                      group="oslo_messaging_notifications")
    conf.set_override("transport_url", "fake://",
                      group="oslo_messaging_notifications")
    _impl_test.reset()
    pub = notifier.Publisher(conf, Live(), "compute-0", 10.0)
    pub.publish_once()
    pub.publish_once()
    return [dict(event_type=m["event_type"], payload=m["payload"],
                 priority=m["priority"], publisher_id=m["publisher_id"])
            for _ctx, m, _prio, _retry in _impl_test.NOTIFICATIONS]


def _types(data):
    return {k: (type(v).__name__ if v is not None else None)
            for k, v in data.items()}


def test_every_emitted_notification_matches_its_sample():
    emitted = _emit()
    assert {m["event_type"] for m in emitted} == set(payloads.EVENTS)
    for m in emitted:
        with open(_sample_file(m["event_type"])) as f:
            sample = json.load(f)
        assert_matches_sample(m, sample)


def assert_matches_sample(m, sample):
    """Same envelope, same version, the same fields of the same types
    (None where the sample has a value, or the other way, is allowed:
    the nullable identity fields)."""
    assert m["priority"] == sample["priority"]
    assert m["publisher_id"].split(":")[0] == \
        sample["publisher_id"].split(":")[0]
    got, want = m["payload"], sample["payload"]
    assert {k: v for k, v in got.items() if k != "nova_object.data"} == \
        {k: v for k, v in want.items() if k != "nova_object.data"}
    g, w = _types(got["nova_object.data"]), _types(want["nova_object.data"])
    assert set(g) == set(w), m["event_type"]
    for k in g:
        assert None in (g[k], w[k]) or g[k] == w[k], (m["event_type"], k)
    payloads.EVENTS[m["event_type"]].obj_from_primitive(got)


# -- the host label ---------------------------------------------------------

def test_every_series_of_a_failed_scrape_has_the_host_too():
    from nova_rdt.exporter.metrics import RdtCollector

    class Broken:
        def refresh(self):
            raise OSError("resctrl went away")

    fams = list(RdtCollector(Broken(), "compute-0").collect())
    samples = [smp for fam in fams for smp in fam.samples]
    assert samples and all(smp.labels["host"] == "compute-0"
                           for smp in samples)
    assert all("host" not in smp.labels for fam in
               RdtCollector(Broken()).collect() for smp in fam.samples)


@pytest.mark.parametrize("text,override,want", [
    ("[DEFAULT]\nhost = cmp-7\n", None, "cmp-7"),
    ("[DEFAULT]\nhost = cmp-7\n", "given", "given"),
    ("[DEFAULT]\n", None, None),                   # Nova's default
])
def test_the_host_is_novas(tmp_path, text, override, want):
    import socket

    from nova_rdt.exporter import hostname
    conf = tmp_path / "nova.conf"
    conf.write_text(text)
    got = hostname.nova_host([str(conf)], override)
    assert got == (want or socket.gethostname())


def test_owner_of_a_name_libvirt_cuts_depends_on_the_id():
    # 70 characters with "_" and runs: libvirt keeps 64 - len("qemu-<id>-").
    name = "Tenant_A..web--frontend_" + "x" * 46
    rec = Record(UUID, name, 1, None, False, None, None, "web", "m1")
    r = identity.Resolver("nova-rdt-", [rec])
    safe = "TenantA.web-frontend" + "x" * 46
    for domid in (1, 42, 12345):
        machine = f"qemu-{domid}-{safe}"[:64]
        assert r.resolve(machine + "-vcpus_0").instance_name == "web"
        # the same text under an id of another length is another cut
        other = 10 * domid
        assert r.resolve(machine.replace(f"qemu-{domid}-", f"qemu-{other}-")
                         + "-vcpus_0") == identity.FOREIGN
