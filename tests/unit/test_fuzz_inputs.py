"""Fuzzing what nova-rdt reads from others (issue 16): the hook's input,
schemata, state records, hook settings and CPU lists.

Each parser either gives a value or refuses with its own error type (a
ValueError subclass the caller turns into one line); nothing else may
escape.  Bounded examples keep it to a few seconds.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from nova_rdt.hook import hookinput
from nova_rdt.host import records as records_mod
from nova_rdt.host.settings import HookSettings
from nova_rdt.host.settings import SettingsError
from nova_rdt.resctrl import cpulist
from nova_rdt.resctrl.schemata import Schemata
from nova_rdt.resctrl.schemata import SchemataSyntaxError

FUZZ = settings(max_examples=100, deadline=None,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])
NS = "http://openstack.org/xmlns/libvirt/nova-rdt/1.0"
UUID = "6f1a3c86-5b1e-4c55-9a3a-1b2c3d4e5f60"
NASTY = st.sampled_from(["0", "1", "4095", "4096", "0-3", "²", "٤", "",
                         " 1", "1\n", "-1", "9" * 30, "true", "false",
                         "yes", "low", "Bad", "x/y", "&amp;", "0,,1",
                         "0-99999999", "MBps", "percent", "both"])
TEXT = st.one_of(NASTY, st.text(max_size=15).filter(
    lambda t: all(c.isprintable() and c not in "<>&'\"" for c in t)))


def _meta(vcpus, cls, pmd, mon, mbs, caches, version):
    parts = [f"<r:vcpus>{vcpus}</r:vcpus>" if vcpus is not None else "",
             f"<r:class>{cls}</r:class>" if cls is not None else "",
             f"<r:pmd-share>{pmd}</r:pmd-share>" if pmd is not None else "",
             f"<r:monitor>{mon}</r:monitor>" if mon is not None else ""]
    parts += [f"<r:mb id='{i}' value='{v}' unit='{u}'/>" for i, v, u in mbs]
    parts += [f"<r:cache id='{i}' type='{t}' ways='{w}'/>"
              for i, t, w in caches]
    return (f"<r:instance xmlns:r='{NS}' version='{version}'>"
            f"{''.join(parts)}</r:instance>")


METADATA = st.builds(
    _meta, st.none() | TEXT, st.none() | TEXT, st.none() | TEXT,
    st.none() | TEXT, st.lists(st.tuples(TEXT, TEXT, TEXT), max_size=3),
    st.lists(st.tuples(TEXT, TEXT, TEXT), max_size=3),
    st.sampled_from(["1", "1", "2", ""]))


@FUZZ
@given(st.sampled_from(["vm", "../x", "a/b", "", "x" * 300, "vm\n", "é"]),
       st.sampled_from(["started", "prepare", "release", "stopped", "",
                        "reconnect"]),
       METADATA, st.sampled_from([UUID, "x", "", UUID.upper()]))
def test_hook_input_is_an_event_or_refused(name, op, meta, uuid):
    xml = (f"<domain><name>{name}</name><uuid>{uuid}</uuid>"
           f"<metadata>{meta}</metadata></domain>").encode()
    try:
        ev = hookinput.parse([name, op, "begin", "-"], xml)
    except hookinput.HookInputError as e:
        assert str(e)
        return
    if ev is not None and ev.managed is not None:
        assert all(0 <= c <= 4095 for c in ev.managed.vcpus)
        assert all(0 < v <= 0xFFFFFFFF for _i, v in ev.managed.mb_mbps)
        assert ev.uuid == UUID


@FUZZ
@given(st.binary(max_size=300))
def test_hook_input_bytes(data):
    try:
        hookinput.parse(["vm", "started"], data)
    except hookinput.HookInputError:
        pass


SCHEMATA_TEXT = st.lists(
    st.sampled_from(["L3", "MB", "L3CODE", "L3DATA", "L2", "", " ", ":",
                     "=", ";", "0", "1", "ff", "7ff", "g", "-", "\n",
                     "9" * 40, "²", "0x1", "_"]),
    max_size=30).map("".join)


@FUZZ
@given(st.one_of(SCHEMATA_TEXT, st.text(max_size=60)))
def test_schemata_parse_or_syntax_error(text):
    try:
        s = Schemata.parse(text)
    except SchemataSyntaxError:
        return
    assert Schemata.parse(s.format()) == s


@FUZZ
@given(st.dictionaries(
    st.sampled_from(["uuid", "name", "pid", "pid_start", "pmd_share",
                     "rdt_class", "group", "instance_name", "flavor", "x"]),
    st.one_of(st.none(), st.booleans(), st.integers(-5, 1 << 70),
              st.floats(allow_nan=True), TEXT,
              st.sampled_from([UUID, "qemu-1-vm-vcpus_0",
                               "qemu-1-vm-vcpus_0/../COS1", "nova-rdt-x"]),
              st.lists(st.integers(), max_size=2)),
    max_size=10))
def test_records_are_a_record_or_refused(data):
    try:
        rec = records_mod.Record.from_dict(data)
    except records_mod.RecordError as e:
        assert str(e)
        return
    if rec.group is not None:
        assert "/" not in rec.group and rec.group.startswith("qemu-")


@FUZZ
@given(st.binary(max_size=200))
def test_record_files_are_read_or_named(tmp_path_factory, data):
    recs = records_mod.Records(str(tmp_path_factory.mktemp("state")))
    import os
    os.makedirs(recs.dir)
    with open(os.path.join(recs.dir, f"{UUID}.json"), "wb") as f:
        f.write(data)
    good, bad = recs.all()
    assert len(good) + len(bad) == 1


@FUZZ
@given(st.dictionaries(
    st.sampled_from(["hook_timeout", "lock_timeout", "reserved_host_ways",
                     "pmd_shared_ways", "group_prefix", "classes",
                     "pmd_cos", "state_path", "log_file"]),
    st.one_of(st.none(), st.booleans(), st.integers(-2, 100),
              st.floats(allow_nan=True, allow_infinity=True), TEXT,
              st.lists(TEXT, max_size=2)),
    max_size=4))
def test_settings_json_is_settings_or_refused(data):
    try:
        s = HookSettings.from_dict(json.loads(json.dumps(data)))
    except SettingsError as e:
        assert str(e)
        return
    assert 0.5 <= s.hook_timeout <= 3600


@FUZZ
@given(st.one_of(
    st.lists(st.sampled_from(list("0123456789,-\n ") + ["²", "٤", "99999"]),
             max_size=25).map("".join),
    st.text(max_size=20)),
    st.integers(1, 9000))
def test_cpulist_is_bounded(text, limit):
    try:
        cpus = cpulist.parse(text, limit)
    except ValueError:
        return
    assert all(0 <= c < limit for c in cpus)
    assert cpulist.parse(cpulist.format(cpus), limit) == cpus
