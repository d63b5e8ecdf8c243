"""L3 sizes carry their unit at the API (issue 31).

A bare ``rdt:l3_cache_size`` (``2816``) used to pass the API as 2816
bytes and fail in the scheduler (not a whole number of ways); a StarlingX
``hw:cache_l3=2816`` copied over means 2816 KiB.  Nova's per-key
validators and the paste filter now refuse it naming the key and the
unit; stored flavors that predate the rule still read as bytes in the
scheduler and the driver, so no running instance changes meaning.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
import pytest

from nova_rdt.allocation import spec

KEY = "rdt:l3_cache_size"


@pytest.mark.parametrize("value,size", [
    ("2816KiB", 2816 << 10), ("2.75MiB", 2816 << 10), ("0.5MiB", 1 << 19),
    ("1.5KiB", 1536), ("13MiB", 13 << 20), ("2816K", 2816 << 10),
    ("4096B", 4096), ("4096MiB", 1 << 32),
])
def test_sizes_with_units(value, size):
    assert spec.parse_size(KEY, value, units_required=True) == size
    assert spec.parse_size(KEY, value) == size


@pytest.mark.parametrize("value,words", [
    ("2816", ["has no unit", "2816KiB (or 2.75MiB) if it counts KiB",
              "hw:cache_l3", "2816B if it counts bytes"]),
    ("6815744", ["has no unit", "6815744B if it counts bytes"]),
    ("2.5", ["has no unit", "KiB or MiB"]),
    ("1.2B", ["not a whole number of bytes"]),
    ("0.0000001MiB", ["not a size"]),      # 7 decimals
    ("00.5MiB", ["not a size"]), ("0MiB", ["not a size"]),
    (".5MiB", ["not a size"]), ("2.MiB", ["not a size"]),
    ("0.0001KiB", ["not a whole number of bytes"]),
])
def test_the_api_reading_refuses_naming_the_key(value, words):
    with pytest.raises(spec.SpecError) as e:
        spec.check_value(KEY, value, units_required=True)
    assert e.value.key == KEY
    for w in words:
        assert w in e.value.reason, (w, e.value.reason)


def test_the_hint_never_suggests_an_out_of_range_size():
    # 6815744 KiB is 6.5 GiB, beyond any L3: only bytes are suggested.
    with pytest.raises(spec.SpecError) as e:
        spec.parse_size(KEY, "6815744", units_required=True)
    assert "KiB if" not in e.value.reason
    with pytest.raises(spec.SpecError) as e:
        spec.parse_size(KEY, "99999999999", units_required=True)
    assert e.value.reason.endswith("sizes need B, KiB or MiB")


def test_stored_flavors_still_read_bare_numbers_as_bytes():
    """The scheduler and the driver call parse() without the API's
    flag: a flavor stored before units were required keeps its meaning."""
    req = spec.parse({KEY: "6815744"}, vcpus=2)
    assert req.nodes[0].cache.size == 6815744
    with pytest.raises(spec.SpecError, match="has no unit"):
        spec.parse({KEY: "6815744"}, vcpus=2, units_required=True)
    with pytest.raises(spec.SpecError, match="rdt:l3_data_size.*no unit"):
        spec.parse({"rdt:l3_code_size": "1MiB", "rdt:l3_data_size": "1024"},
                   vcpus=2, units_required=True)


@given(st.integers(1, 4096 << 10), st.sampled_from(["KiB", "MiB"]),
       st.integers(0, 3))
def test_decimal_sizes_are_exact(kib, unit, places):
    """Whatever decimal is accepted equals its exact byte count; any that
    is not a whole number of bytes is refused, never rounded."""
    scale = 1 if unit == "KiB" else 1024
    whole, rest = divmod(kib, scale)
    text = f"{whole}.{str(rest * 10 ** places // scale).zfill(places)}" \
        if places else str(kib // scale)
    value = f"{text}{unit}"
    try:
        size = spec.parse_size(KEY, value, units_required=True)
    except spec.SpecError as e:
        assert "whole number of bytes" in e.reason or \
            "between 1KiB" in e.reason or "not a size" in e.reason, e.reason
        return
    from fractions import Fraction
    assert Fraction(text) * (1024 if unit == "KiB" else 1 << 20) == size


def test_nova_validators_refuse_a_bare_size():
    nova = pytest.importorskip("nova", reason="needs nova (the nova extra)")
    del nova
    from nova import exception
    from nova.api.validation.extra_specs import validators

    validators.load_validators()
    for key in (KEY, "rdt:l3_cache_size.1", "rdt:l3_code_size",
                "rdt:l3_data_size.0"):
        with pytest.raises(exception.ValidationError) as e:
            validators.validate(key, "2816")
        assert key in str(e.value) and "has no unit" in str(e.value)
        validators.validate(key, "2816KiB")


def test_the_paste_filter_refuses_a_bare_size():
    pytest.importorskip("webob", reason="needs webob (the nova extra)")
    from nova_rdt.api import flavor_check

    msg = flavor_check.check({KEY: "2816"}, vcpus=2)
    assert msg.startswith(f"Validation failed for extra spec {KEY}: ")
    assert "has no unit" in msg
    assert flavor_check.check({KEY: "2816KiB"}, vcpus=2) is None
