"""RDTFilter on Nova's real HostState/RequestSpec, and the API validators."""

import json
import logging

import pytest

nova = pytest.importorskip("nova", reason="needs nova (the nova extra)")

from nova import exception  # noqa: E402
from nova import objects  # noqa: E402
from nova.api.validation.extra_specs import validators as nova_validators  # noqa
from nova.scheduler import host_manager  # noqa: E402

from nova_rdt.api import flavor_check  # noqa: E402
from nova_rdt.scheduler import filter as rdt_filter  # noqa: E402
from tests.unit.test_planner import published  # noqa: E402
from tests.unit.test_planner import state as bare_state  # noqa: E402

objects.register_all()


def spec_obj(extra, vcpus=4):
    return objects.RequestSpec(flavor=objects.Flavor(
        flavorid="f", vcpus=vcpus, extra_specs=extra), numa_topology=None)


def state(**kw):
    """A host state as a compute of this release publishes it."""
    return published(bare_state(**kw))


def host(stats, name="h"):
    hs = host_manager.HostState(name, "n", "cell")
    hs.stats = stats
    return hs


def test_filter_passes_plain_requests_everywhere_and_rdt_only_where_it_fits():
    f = rdt_filter.RDTFilter()
    roomy, full = host(state().to_stats()), host(
        state(used=(0x7ff, 0x3)).to_stats())
    plain = host({"uptime": "1"})
    assert all(f.host_passes(h, spec_obj({})) for h in (roomy, full, plain))
    want = spec_obj({"rdt:l3_cache_ways": "4"})
    assert [f.host_passes(h, want) for h in (roomy, full, plain)] == \
        [True, False, False]


def test_filter_reparses_a_host_only_when_its_stats_are_replaced():
    f = rdt_filter.RDTFilter()
    h = host(state().to_stats())
    want = spec_obj({"rdt:l3_cache_ways": "4"})
    assert f.host_passes(h, want)
    h.stats = state(used=(0x7ff, 0x7ff)).to_stats()    # an update
    assert not f.host_passes(h, want)


def test_a_host_without_the_solver_input_gets_no_rdt_request(caplog):
    """An older compute (its document has no solver input): refused for
    every rdt: request, the log naming it and the fix once per document;
    plain requests still go there."""
    f = rdt_filter.RDTFilter()
    old = host(bare_state().to_stats(), name="old-compute")
    new = host(state().to_stats(), name="new-compute")
    want = spec_obj({"rdt:l3_cache_ways": "4"})
    with caplog.at_level(logging.WARNING, logger=rdt_filter.__name__):
        assert f.filter_all([old, new], want) == [new]
        assert f.filter_all([old, new], want) == [new]
    warned = [r.getMessage() for r in caplog.records
              if "old-compute" in r.getMessage()]
    assert warned == [
        "RDTFilter: compute old-compute publishes no nova-rdt solver input "
        "(nova-rdt older than the scheduler's, or not yet reported): "
        "upgrade nova-rdt on it; it gets no rdt: request until then"]
    assert f.filter_all([old], spec_obj({})) == [old]
    # Alone, it is the instance's fault, without the host's name.
    with pytest.raises(exception.NoValidHost) as e:
        f.run_filter_for_index(0)
        f.filter_all([old], want)
    assert "no nova-rdt solver input" in str(e.value)
    assert "old-compute" not in str(e.value)


def test_a_document_this_scheduler_cannot_read_says_upgrade_it(caplog):
    doc = json.loads(state().to_stats()["rdt"])
    doc["v"] = 99
    newer = host({"rdt": json.dumps(doc)}, name="newer-compute")
    f = rdt_filter.RDTFilter()
    with caplog.at_level(logging.WARNING, logger=rdt_filter.__name__):
        assert not f.host_passes(newer, spec_obj({"rdt:l3_cache_ways": "4"}))
    assert "compute newer-compute publishes an RDT state this scheduler " \
        "cannot read (nova-rdt newer than the scheduler's): upgrade " \
        "nova-rdt on the schedulers" in caplog.text


def test_filter_refuses_a_flavor_with_a_bad_spec():
    f = rdt_filter.RDTFilter()
    assert not f.host_passes(host(state().to_stats()),
                             spec_obj({"rdt:l3_cache_ways": "lots"}))


@pytest.fixture(scope="module")
def validate():
    nova_validators.load_validators()
    return nova_validators.validate


@pytest.mark.parametrize("key,value,why", [
    ("rdt:l3_cache_ways", "lots", "must be 1-64"),
    ("rdt:mb_percent", "0", "must be 1-100"),
    ("rdt:mb_percent", "101", "must be 1-100"),
    ("rdt:vcpus", "3-1", "vCPU"),
    ("rdt:l3_cache_size", "12 parsecs", "not a size"),
    ("rdt:monitor", "maybe", "not true or false"),
    ("rdt:class", "../../x", "must be 1-32"),
    ("rdt:l3_cache_ways.x", "2", "valid extra spec"),
    ("rdt:no_such_key", "1", "valid extra spec"),
])
def test_validators_name_the_key_and_say_why(validate, key, value, why):
    with pytest.raises(exception.ValidationError) as e:
        validate(key, value)
    assert why in str(e.value)


@pytest.mark.parametrize("key,value", [
    ("rdt:l3_cache_ways", "4"), ("rdt:l3_cache_size.1", "6656KiB"),
    ("rdt:mb_percent", "50"), ("rdt:vcpus", "all"), ("rdt:vcpus", "2-3"),
    ("rdt:pmd_share", "true"), ("rdt:class", "low_priority")])
def test_validators_accept_good_values(validate, key, value):
    validate(key, value)


@pytest.mark.parametrize("current,method,key,body,why", [
    ({"rdt:l3_cache_ways": "2"}, "POST", None,
     b'{"extra_specs": {"rdt:l3_code_ways": "1", "rdt:l3_data_ways": "1"}}',
     "rdt:l3_code_ways: CDP code/data sizes cannot be mixed"),
    ({}, "POST", None, b'{"extra_specs": {"rdt:vcpus": "0-7"}}',
     "rdt:vcpus: vCPU 7 is out of range"),
    ({"rdt:l3_code_ways": "1", "rdt:l3_data_ways": "1"}, "DELETE",
     "rdt:l3_data_ways", b"", "CDP needs both"),
    ({}, "PUT", "rdt:l3_cache_ways.2", b'{"rdt:l3_cache_ways.2": "1"}',
     "the flavor has 1 NUMA node"),
])
def test_whole_flavor_check(current, method, key, body, why):
    after = flavor_check.merged_specs(method, key, body, current)
    msg = flavor_check.check(after, vcpus=4)
    assert msg is not None and why in msg


def test_whole_flavor_check_passes_consistent_flavors():
    after = flavor_check.merged_specs(
        "POST", None, b'{"extra_specs": {"rdt:vcpus": "2-3", '
        b'"rdt:l3_cache_ways": "2", "hw:cpu_policy": "dedicated"}}', {})
    assert flavor_check.check(after, vcpus=4) is None
