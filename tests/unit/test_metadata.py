"""The metadata record: what the driver writes is what the hook reads."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from lxml import etree
import pytest

from nova_rdt import naming
from nova_rdt.allocation import metadata as md

records = st.builds(
    md.RdtMetadata,
    vcpus=st.frozensets(st.integers(0, md.MAX_VCPU), max_size=40),
    pmd_share=st.booleans(),
    rdt_class=st.one_of(st.none(), st.from_regex(naming.CLASS_NAME_RE,
                                                 fullmatch=True)),
    monitor=st.booleans(),
    slo=st.sampled_from([None, *md.SLO_VALUES]),
    cache=st.lists(st.tuples(st.integers(0, md.MAX_ID),
                             st.sampled_from(md.CACHE_TYPES),
                             st.integers(0, 64)), max_size=4),
    mb=st.lists(st.tuples(st.integers(0, md.MAX_ID),
                          st.integers(1, md.MAX_VALUE),
                          st.sampled_from(md.MB_UNITS)), max_size=4),
)


@given(records)
def test_round_trip_through_text(rec):
    text = etree.tostring(rec.format_dom())
    assert md.RdtMetadata.parse_dom(etree.fromstring(text)) == rec


def test_driver_config_object_writes_the_same_element():
    config = pytest.importorskip("nova_rdt.virt.config")
    obj = config.LibvirtConfigGuestMetaNovaRdt()
    obj.vcpus, obj.pmd_share, obj.rdt_class = {0, 1, 3}, True, "low"
    obj.mb = [(0, 2000, "MBps"), (1, 50, "percent")]
    parsed = md.RdtMetadata.parse_dom(etree.fromstring(obj.to_xml()))
    assert parsed.vcpus == {0, 1, 3} and parsed.pmd_share
    assert parsed.rdt_class == "low"
    assert parsed.mb_mbps() == ((0, 2000),)
    back = config.LibvirtConfigGuestMetaNovaRdt()
    back.parse_dom(etree.fromstring(obj.to_xml()))
    assert back.vcpus == obj.vcpus and back.mb == obj.mb


def _el(body: str, version: str = "1") -> etree._Element:
    return etree.fromstring(
        f'<r:instance xmlns:r="{naming.METADATA_NS}" version="{version}">'
        f"{body}</r:instance>")


@pytest.mark.parametrize("body, version", [
    ("", "2"),
    ("<r:vcpus>0-99999999</r:vcpus>", "1"),
    ("<r:vcpus>\u00b2</r:vcpus>", "1"),
    ("<r:vcpus>3-1</r:vcpus>", "1"),
    ("<r:class>../x</r:class>", "1"),
    ("<r:class>low\n</r:class>", "1"),
    ("<r:pmd-share>yes</r:pmd-share>", "1"),
    ("<r:slo>throughput</r:slo>", "1"),
    ('<r:mb id="0" value="0" unit="MBps"/>', "1"),
    ('<r:mb id="0" value="1" unit="GBps"/>', "1"),
    ('<r:mb id="0" value="1' + "0" * 5000 + '" unit="MBps"/>', "1"),
    ('<r:cache id="0" type="l2" ways="1"/>', "1"),
])
def test_hostile_records_are_refused(body, version):
    with pytest.raises(md.MetadataError):
        md.RdtMetadata.parse_dom(_el(body, version))


def test_slo_travels_from_flavor_to_the_hooks_record():
    from nova_rdt.allocation import spec
    from nova_rdt.hook import hookinput
    from nova_rdt.host import records

    req = spec.parse({"rdt:slo": "latency", "rdt:l3_cache_ways": "2"}, 4, 1)
    assert req.slo == "latency"
    rec = md.RdtMetadata(vcpus=frozenset({0}), slo=req.slo)
    managed = hookinput.parse_managed(
        etree.fromstring(etree.tostring(rec.format_dom())))
    assert managed.slo == "latency"
    r = records.Record(uuid="4f2c7b8e-0d6a-4c1e-9b7a-2f0e3d5c6a1b",
                       name="vm", pid=1, pid_start=None, pmd_share=False,
                       rdt_class=None, group=None, slo=managed.slo)
    assert records.Record.from_dict(
        {**r.__dict__}).slo == "latency"
    with pytest.raises(records.RecordError):
        records.Record.from_dict({**r.__dict__, "slo": "x"})


@pytest.mark.parametrize("specs, key", [
    ({"rdt:slo": "throughput"}, "rdt:slo"),
    ({"rdt:slo": "latency", "rdt:class": "low"}, "rdt:slo"),
])
def test_bad_slo_names_the_key(specs, key):
    from nova_rdt.allocation import spec
    with pytest.raises(spec.SpecError) as e:
        spec.parse(specs, 4, 1)
    assert e.value.key == key
