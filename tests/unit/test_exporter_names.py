"""The exporter's metric names and labels: Prometheus's conventions, the
previous release's names kept, tenants kept apart (project, uuid)."""

from __future__ import annotations

import re
import types

from prometheus_client import CollectorRegistry
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from nova_rdt.exporter import identity
from nova_rdt.exporter import metrics
from nova_rdt.exporter.live import Bandwidth
from nova_rdt.exporter.sample import GroupSample
from nova_rdt.exporter.sample import HostSample
from nova_rdt.hook import hookinput
from nova_rdt.host.records import Record
from nova_rdt.resctrl.monitoring import Reading

A = "6f1a3c86-5b1e-4c55-9a3a-00000000000a"
B = "6f1a3c86-5b1e-4c55-9a3a-00000000000b"
PA, PB = "1c7e0a2b9d3f4e5a8b6c7d8e9f0a1b2c", "2d8f1b3cae404f6b9c7d8e9fa0b1c2d3"
GA = "qemu-3-instance-0000000a-vcpus_0"
GB = "qemu-4-instance-0000000b-vcpus_0"


def _caps(units="percent"):
    mon = types.SimpleNamespace(features=(
        "llc_occupancy", "mbm_total_bytes", "mbm_local_bytes"))
    return types.SimpleNamespace(
        cache={"L3CODE": None, "L3DATA": None},
        bandwidth={"MB": types.SimpleNamespace(units=units)},
        mba_mbps=units == "MBps", monitoring={"L3_MON": mon}, clos_count=8)


def _exposition(units="percent", mb=50):
    recs = [Record(A, "instance-0000000a", 1, None, False, None, GA,
                   "web-1", "m1", project_id=PA, project_name="alpha"),
            Record(B, "instance-0000000b", 2, None, False, None, GB,
                   "web-1", "m1", project_id=PB, project_name="beta")]
    r = identity.Resolver("nova-rdt-", recs)

    def g(name):
        return GroupSample(name, True, r.resolve(name),
                           {"L3CODE": {0: 0x3}, "L3DATA": {0: 0xc},
                            "MB": {0: mb}}, 1,
                           (Reading("L3", 0, 4096, 10, 5),))

    sample = HostSample(_caps(units), (g(GA), g(GB)), 0.0, 0.0)
    bw = {(GA, 0): Bandwidth(1000, 700, 0, 0),
          (GB, 0): Bandwidth(24, 20, 0, 0)}
    collector = metrics.RdtCollector(None, "compute-0")

    class Families:
        def collect(self):
            yield from collector._availability(sample)
            for fam in collector._groups(sample, bw):
                yield metrics.with_host(fam, "compute-0")

    reg = CollectorRegistry()
    reg.register(Families())
    return generate_latest(reg).decode()


def _samples(text):
    return [s for fam in text_string_to_metric_families(text)
            for s in fam.samples]


def test_names_follow_prometheus_conventions():
    text = _exposition()
    current = {s.name for s in _samples(text)} - set(metrics.DEPRECATED)
    assert "nova_rdt_memory_bandwidth_bytes_total" in current
    for name in current:
        # One _total, only at the end of a counter; no repeated word.
        assert name.count("_total") <= 1, name
        words = name.split("_")
        assert all(a != b for a, b in zip(words, words[1:])), name
        assert not name.startswith("nova_rdt_rdt_"), name
    # No unit in a label.
    for s in _samples(text):
        if s.name not in metrics.DEPRECATED:
            assert "unit" not in s.labels, s


def test_deprecated_names_are_still_served_with_their_successors():
    names = {s.name for s in _samples(_exposition())}
    assert set(metrics.DEPRECATED) <= names
    for old, new in metrics.DEPRECATED.items():
        for successor in re.findall(r"nova_rdt_\w+", new):
            # group_mb_bytes_per_second is only on MBps/AMD mounts.
            if successor != "nova_rdt_group_mb_bytes_per_second":
                assert successor in names, (old, successor)
    mbps = {s.name for s in _samples(_exposition("MBps", 2048))}
    assert "nova_rdt_group_mb_bytes_per_second" in mbps


def test_mb_in_base_units():
    def values(units, v):
        return {s.name: s.value for s in _samples(_exposition(units, v))
                if s.name.startswith("nova_rdt_group_mb_")}

    assert values("percent", 30) == {"nova_rdt_group_mb_ratio": 0.3}
    assert values("MBps", 2048) == {
        "nova_rdt_group_mb_bytes_per_second": 2048 * 2 ** 20}
    assert values("1/8GBps", 16) == {
        "nova_rdt_group_mb_bytes_per_second": 2 * 2 ** 30}


def test_two_tenants_web_1_are_two_series_with_their_projects():
    occ = [s for s in _samples(_exposition())
           if s.name == "nova_rdt_llc_occupancy_bytes"]
    assert len(occ) == 2
    assert {(s.labels["instance_uuid"], s.labels["project_id"],
             s.labels["project_name"], s.labels["instance_name"],
             s.labels["host"]) for s in occ} == {
        (A, PA, "alpha", "web-1", "compute-0"),
        (B, PB, "beta", "web-1", "compute-0")}
    # Under CDP the way masks carry their type: code and data.
    ways = [s for s in _samples(_exposition())
            if s.name == "nova_rdt_group_l3_ways"]
    assert {s.labels["type"] for s in ways} == {"code", "data"}


def test_the_hook_reads_novas_owner_project():
    ns = hookinput.NOVA_NS
    xml = f"""<domain type='kvm'><name>instance-0000000a</name>
      <uuid>{A}</uuid><metadata>
      <nova:instance xmlns:nova="{ns}">
        <nova:name>web-1</nova:name>
        <nova:flavor name="m1"/>
        <nova:owner>
          <nova:user uuid="0f1e2d3c4b5a69788796a5b4c3d2e1f0">alice</nova:user>
          <nova:project uuid="{PA}">alpha</nova:project>
        </nova:owner>
      </nova:instance></metadata></domain>"""
    ev = hookinput.parse(["instance-0000000a", "started", "begin", "-"],
                         xml.encode())
    assert (ev.instance_name, ev.project_id, ev.project_name) == (
        "web-1", PA, "alpha")
    # Older domains (or another writer) without an owner: no project.
    bare = xml.split("<nova:owner>")[0] + "</nova:instance></metadata>" \
        "</domain>"
    ev = hookinput.parse(["instance-0000000a", "started"], bare.encode())
    assert (ev.project_id, ev.project_name) == (None, None)


def test_records_keep_the_project_and_read_older_ones():
    rec = Record(A, "instance-0000000a", 1, None, False, None, GA, "web-1",
                 "m1", project_id=PA, project_name="alpha")
    import dataclasses

    assert Record.from_dict(dataclasses.asdict(rec)) == rec
    old = dataclasses.asdict(rec)
    del old["project_id"], old["project_name"]
    assert Record.from_dict(old).project_id is None
    ident = identity.Resolver("nova-rdt-", [Record.from_dict(old)]).resolve(
        GA)
    assert (ident.instance_uuid, ident.project_id) == (A, "")
