"""etc/ceilometer/event_definitions.yaml against what nova-rdt emits.

Every event type the exporter and the controller send has a Ceilometer
event definition (the last matching one, as Ceilometer picks it), each of
its traits reads a field the payload has, with Ceilometer's own JSONPath
reader (jsonpath-rw-ext, as ceilometer/declarative.py uses it) on the
notification body Ceilometer sees, and every scalar field of a payload is
a trait.  The exporter's bodies are doc/notification_samples/, which
tests/unit/test_notification_payloads.py holds to what it emits.
"""

from __future__ import annotations

import fnmatch
import json
import os

from oslo_versionedobjects import fields as ovo_fields
import pytest
import yaml

from nova_rdt.controller import notify
from nova_rdt.exporter import payloads

parser = pytest.importorskip(
    "jsonpath_rw_ext.parser",
    reason="needs jsonpath-rw-ext, Ceilometer's JSONPath reader "
           "(pip install -r test-requirements.txt)")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
DEFINITIONS = os.path.join(REPO, "etc", "ceilometer",
                           "event_definitions.yaml")
SAMPLES = os.path.join(REPO, "doc", "notification_samples")
DATA = "payload.'nova_object.data'."
TYPES = {"text", "int", "float", "datetime"}


def _definitions() -> list[dict]:
    with open(DEFINITIONS) as f:
        return yaml.safe_load(f)


def _jsonpath(fields) -> str:
    # As ceilometer.declarative.Definition joins a list of paths.
    if isinstance(fields, list):
        return fields[0] if len(fields) == 1 else \
            "|".join(f"({p})" for p in fields)
    return fields


def _definition_for(event_type: str) -> dict | None:
    """The definition Ceilometer uses: the last one that matches."""
    for d in reversed(_definitions()):
        types = d["event_type"]
        types = [types] if isinstance(types, str) else types
        inc = [t for t in types if not t.startswith("!")] or ["*"]
        exc = [t[1:] for t in types if t.startswith("!")]
        if any(fnmatch.fnmatch(event_type, t) for t in inc) and \
                not any(fnmatch.fnmatch(event_type, t) for t in exc):
            return d
    return None


def _body(event_type: str, payload: dict, publisher: str) -> dict:
    """A notification as Ceilometer's listener hands it to the converter."""
    return {"event_type": event_type, "payload": payload,
            "publisher_id": publisher, "priority": "INFO", "ctxt": {},
            "metadata": {"message_id": "m", "timestamp":
                         "2026-01-01 00:00:00.000000"}}


def _controller_body() -> dict:
    payload = notify.payload(
        host="compute-0", policy="bandwidth-share",
        group="nova-rdt-class-lp", rdt_class="lp", reason="protected "
        "instance over its share", outcome="lowered", dry_run=False, mb=20,
        previous_mb=40, l3_ways=2, previous_l3_ways=2,
        bandwidth_bytes=1.5e9)
    return _body(notify.EVENT_TYPE, payload, "nova-rdt-controller:compute-0")


def _emitted() -> dict[str, tuple[dict, type]]:
    """event type -> (a body as sent, its payload class)."""
    out = {}
    for event_type, cls in payloads.EVENTS.items():
        path = os.path.join(SAMPLES, event_type.replace(".", "-") + ".json")
        with open(path) as f:
            sample = json.load(f)
        assert sample["payload"]["nova_object.name"] == cls.__name__
        out[event_type] = (_body(event_type, sample["payload"],
                                 sample["publisher_id"]), cls)
    out[notify.EVENT_TYPE] = (_controller_body(),
                              notify.RdtControllerDecisionPayload)
    return out


EMITTED = _emitted()


def test_the_file_is_what_ceilometer_loads():
    defs = _definitions()
    assert isinstance(defs, list) and defs
    for d in defs:
        assert set(d) == {"event_type", "traits"}, d
        for name, trait in d["traits"].items():
            assert set(trait) <= {"type", "fields"}, name
            assert trait.get("type", "text") in TYPES, name
            parser.ExtentedJsonPathParser().parse(_jsonpath(trait["fields"]))


@pytest.mark.parametrize("event_type", sorted(EMITTED))
def test_every_emitted_event_has_traits_its_payload_holds(event_type):
    body, cls = EMITTED[event_type]
    d = _definition_for(event_type)
    assert d is not None, f"{event_type}: no event definition"
    assert d["event_type"] != "*"
    for name, trait in d["traits"].items():
        path = _jsonpath(trait["fields"])
        for one in (trait["fields"] if isinstance(trait["fields"], list)
                    else [trait["fields"]]):
            if one.startswith(DATA):
                assert one[len(DATA):] in cls.fields, (
                    f"{event_type} trait {name}: {cls.__name__} has no "
                    f"field {one[len(DATA):]!r}")
        matches = parser.ExtentedJsonPathParser().parse(path).find(body)
        assert matches, f"{event_type} trait {name}: {path} finds nothing"
        value = next((m.value for m in matches if m.value is not None),
                     None)
        kind = trait.get("type", "text")
        if value is not None and kind in ("int", "float"):
            # Ceilometer's Trait.convert_value: int() or float().
            assert not isinstance(value, (str, dict, list)), (name, value)
            {"int": int, "float": float}[kind](value)


@pytest.mark.parametrize("event_type", sorted(EMITTED))
def test_every_scalar_field_is_a_trait(event_type):
    """A field added to a payload gets a trait, or this fails."""
    _body, cls = EMITTED[event_type]
    read = set()
    for trait in _definition_for(event_type)["traits"].values():
        for one in (trait["fields"] if isinstance(trait["fields"], list)
                    else [trait["fields"]]):
            if one.startswith(DATA):
                read.add(one[len(DATA):])
    scalar = {name for name, f in cls.fields.items()
              if isinstance(f, (ovo_fields.StringField,
                                ovo_fields.IntegerField,
                                ovo_fields.FloatField,
                                ovo_fields.BooleanField))}
    assert scalar - read == set(), f"{event_type}: no trait for " \
        f"{sorted(scalar - read)}"


def test_nothing_but_rdt_events_is_matched():
    """Appended to Ceilometer's own file, these change nothing else."""
    for d in _definitions():
        types = d["event_type"]
        for t in [types] if isinstance(types, str) else types:
            assert t.startswith("rdt."), t
