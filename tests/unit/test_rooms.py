"""The rules of rooms (:mod:`nova_rdt.host.rooms`): pure, and the file
format as hostile input."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import pytest

from nova_rdt.host import rooms

UUID = "5739af97-f801-4ee1-ace0-5bcd858b3407"
BOOT = "0b8f3c1e-2d4a-4f6b-9c7d-1e2f3a4b5c6d"
HZ = 100


def _room(**change):
    data = dict(uuid=UUID, name="s3", schemata="L3:0=180;1=180\n",
                boot_id=BOOT, pid=4242, pid_start=9_000, made=10_000)
    data.update(change)
    return rooms.Room(**data)


def _facts(now=10_100, living=(), qemu=None, boot=BOOT):
    return rooms.Facts(boot, now, HZ, frozenset(living), qemu or {})


LIMIT = rooms.STALE_AFTER_TIMEOUTS * 10 * HZ      # hook_timeout 10 s


@pytest.mark.parametrize("facts,why", [
    (_facts(), None),
    (_facts(boot="1b8f3c1e-2d4a-4f6b-9c7d-1e2f3a4b5c6d"), "before this boot"),
    (_facts(living={UUID}), "runs with its record"),
    (_facts(living={"0d3f1a9e-5b1c-4f57-9e0c-6a8d9f1b2c3d"}), None),
    (_facts(now=9_999), "after now"),
    (_facts(now=10_000 + LIMIT), None),
    (_facts(now=10_001 + LIMIT), "no QEMU of its start"),
    # A QEMU of this start (forked after 'prepare' was invoked) still
    # starting.
    (_facts(now=10_001 + LIMIT, qemu={"s3": 10_050}), None),
    (_facts(now=10_001 + LIMIT, qemu={"s3": 9_000}), None),
    # The pid file names an older process: not this start's QEMU.
    (_facts(now=10_001 + LIMIT, qemu={"s3": 8_999}), "no QEMU"),
    (_facts(now=10_001 + LIMIT, qemu={"other": 10_050}), "no QEMU"),
    # The boot id could not be read: the other rules still hold.
    (_facts(boot=None), None),
])
def test_stale(facts, why):
    got = rooms.stale(_room(), facts, 10.0)
    if why is None:
        assert got is None
    else:
        assert got is not None and why in got


@pytest.mark.parametrize("pid,start,dropped", [
    (4242, 9_000, True),         # the process that made it
    (4243, 9_001, True),         # invoked after the prepare
    (4243, 9_000, False),        # the same tick: kept (see dropped_by)
    (4243, 8_999, False),        # an earlier run's release, late
    (4243, None, True),          # its own start unknown: as before rooms
])
def test_dropped_by(pid, start, dropped):
    assert rooms.dropped_by(_room(), rooms.Invocation(pid, start)) is dropped


def test_kept_free_is_the_union():
    a = _room(schemata="L3:0=180;1=180\n")
    b = _room(uuid="0d3f1a9e-5b1c-4f57-9e0c-6a8d9f1b2c3d",
              schemata="L3:0=c00\nL3CODE:1=3\n")
    free = rooms.kept_free([a, b])
    assert free.domains("L3") == {0: 0xd80, 1: 0x180}
    assert free.domains("L3CODE") == {1: 0x3}
    assert rooms.held([a, b]) == {("L3", 0): 0xd80, ("L3", 1): 0x180,
                                  ("L3CODE", 1): 0x3}
    assert rooms.kept_free([]) is None and rooms.held([]) == {}
    assert rooms.merged(None, None) is None
    assert rooms.merged(free, None).domains("L3") == free.domains("L3")


@given(st.lists(st.dictionaries(st.integers(0, 3),
                                st.integers(1, (1 << 20) - 1),
                                min_size=1, max_size=4),
                min_size=1, max_size=5))
def test_kept_free_covers_each_room_and_nothing_else(per_room):
    rs = [_room(schemata="L3:" + ";".join(f"{c}={m:x}"
                                          for c, m in sorted(d.items()))
                + "\n") for d in per_room]
    free = rooms.kept_free(rs).domains("L3")
    for cid, mask in free.items():
        want = 0
        for d in per_room:
            want |= d.get(cid, 0)
        assert mask == want


@pytest.mark.parametrize("change,why", [
    ({"uuid": UUID.upper()}, "not a uuid"),
    ({"uuid": 7}, "not a uuid"),
    ({"name": "a/b"}, "unsafe"),
    ({"name": ""}, "name"),
    ({"name": "x" * 500}, "refused"),
    ({"boot_id": "boot"}, "boot id"),
    ({"pid": 0}, "pid"),
    ({"pid": True}, "pid"),
    ({"pid_start": -1}, "pid_start"),
    ({"pid_start": 1.5}, "pid_start"),
    ({"made": 8_999}, "made"),
    ({"made": None}, "made"),
    ({"schemata": "L3:0=zz\n"}, "schemata"),
    ({"schemata": "MB:0=100\n"}, "not a cache"),
    ({"schemata": "L2:0=3\n"}, "not a cache"),
    ({"schemata": "L3:0=0\n"}, "no way free"),
    ({"schemata": "L3:99999=1\n"}, "cache id"),
    ({"schemata": "x" * 5000}, "schemata"),
    ({"schemata": None}, "schemata"),
])
def test_a_room_nova_rdt_did_not_write_is_refused(change, why):
    with pytest.raises(rooms.RoomError, match=why):
        _room(**change)


def _raw(**change):
    data = dict(uuid=UUID, name="s3", schemata="L3:0=180\n",
                boot_id=BOOT, pid=4242, pid_start=9_000, made=10_000)
    data.update(change)
    return json.dumps(data).encode()


def test_parse_checks_the_file_name_and_the_fields():
    assert rooms.Room.parse(_raw(), f"{UUID}.json").name == "s3"
    with pytest.raises(rooms.RoomError, match="file name"):
        rooms.Room.parse(_raw(), "0d3f1a9e-5b1c-4f57-9e0c-6a8d9f1b2c3d.json")
    with pytest.raises(rooms.RoomError, match="fields"):
        rooms.Room.parse(_raw(extra=1), f"{UUID}.json")
    with pytest.raises(rooms.RoomError, match="fields"):
        rooms.Room.parse(b'{"uuid": "x"}', f"{UUID}.json")
    with pytest.raises(rooms.RoomError, match="larger"):
        rooms.Room.parse(_raw() + b" " * rooms.MAX_ROOM_BYTES,
                         f"{UUID}.json")
    with pytest.raises(rooms.RoomError, match="not JSON"):
        rooms.Room.parse(b"[" * 8000, f"{UUID}.json")
    with pytest.raises(rooms.RoomError, match="JSON object"):
        rooms.Room.parse(b"[]", f"{UUID}.json")
    room = _room()
    assert rooms.Room.parse(room.to_json(), f"{UUID}.json") == room


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=40),
    lambda kids: st.lists(kids, max_size=4)
    | st.dictionaries(st.text(max_size=12), kids, max_size=6),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(
    ["uuid", "name", "schemata", "boot_id", "pid", "pid_start", "made",
     "x"]),
    _json, max_size=8) | _json)
def test_hostile_json_is_refused_in_one_error(data):
    raw = json.dumps(data).encode()
    try:
        rooms.Room.parse(raw, f"{UUID}.json")
    except rooms.RoomError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_hostile_bytes_are_refused_in_one_error(raw):
    try:
        rooms.Room.parse(raw, f"{UUID}.json")
    except rooms.RoomError:
        pass
