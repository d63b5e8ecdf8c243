"""Schemata parsing, formatting and partial updates."""

from hypothesis import given
from hypothesis import strategies as st
import pytest

from nova_rdt.resctrl.schemata import Schemata
from nova_rdt.resctrl.schemata import SchemataSyntaxError

domains = st.dictionaries(st.integers(0, 255), st.integers(0, 0xFFFFF),
                          min_size=1, max_size=8)
schematas = st.builds(
    Schemata,
    st.dictionaries(st.sampled_from(["L3", "L3CODE", "L3DATA", "L2", "MB",
                                     "SMBA"]), domains, max_size=4))


@given(schematas)
def test_round_trip(s):
    assert Schemata.parse(s.format()) == s


@given(schematas)
def test_written_text_always_ends_with_newline(s):
    text = s.format()
    assert text == "" or text.endswith("\n")


@given(schematas, schematas)
def test_merge_is_a_per_domain_overlay(base, update):
    merged = base.merged(update)
    for res in set(base.lines) | set(update.lines):
        for dom in set(base.domains(res)) | set(update.domains(res)):
            want = update.get(res, dom)
            if want is None:
                want = base.get(res, dom)
            assert merged.get(res, dom) == want


def test_parses_the_kernels_padded_output():
    # Before 6.15 show_doms() right-aligns names and pads values.
    text = "    MB:0= 10;1=100\n    L3:0=0007ff;1=00000f\n"
    s = Schemata.parse(text)
    assert s.lines == {"MB": {0: 10, 1: 100}, "L3": {0: 0x7FF, 1: 0xF}}
    assert s.resources() == ["MB", "L3"]


@pytest.mark.parametrize("kernel", ["5.14", "6.1", "6.8", "6.14", "6.16"])
@pytest.mark.parametrize("profile", ["gold-6252", "amd-epyc",
                                     "gold-6252-cdp", "e5-2658-v3"])
def test_reads_every_releases_output_alike(kernel, profile):
    """Padded (before 6.15) or not, aligned names or not: the same
    numbers."""
    from tests.kernel_fixtures import make_kernel
    k, _, _ = make_kernel(profile, kernel=kernel)
    k.mkdir("g")
    cache = [s for s in k.schemas if s.cache]
    line = "".join(f"{s.name}:0=3\n" for s in cache)
    if k.schema("MB"):
        line += "MB:1=20\n" if profile != "amd-epyc" else "MB:1=7\n"
    k.write("g/schemata", line.encode())
    s = Schemata.parse(k.read("g/schemata"))
    for c in cache:
        assert s.get(c.name, 0) == 3
        assert s.get(c.name, 1) == (1 << c.cbm_len) - 1
    if k.schema("MB"):
        assert s.get("MB", 1) == (20 if profile != "amd-epyc" else 7)


@pytest.mark.parametrize("text", [
    "    MB:0= 20;1=100\n    L3:0=003;1=7ff\n",          # 6.1, Intel
    "    MB:0=20;1=100\n    L3:0=3;1=7ff\n",            # 6.15 on
    "    MB:0=  20;1=2048\n    L3:0=0003;1=ffff\n",     # AMD, 6.1
])
def test_padded_and_unpadded_parse_the_same(text):
    s = Schemata.parse(text)
    assert s.get("MB", 0) == 20 and s.get("L3", 0) == 3


def test_cdp_lines():
    s = Schemata.parse("L3DATA:0=ff;1=ff\nL3CODE:0=f0;1=f\n")
    assert s.get("L3CODE", 0) == 0xF0 and s.get("L3DATA", 1) == 0xFF


def test_partial_update_keeps_other_domains():
    base = Schemata.parse("L3:0=7ff;1=7ff\nMB:0=100;1=100\n")
    merged = base.merged(Schemata({"L3": {1: 0x3}}))
    assert merged.format() == "L3:0=7ff;1=3\nMB:0=100;1=100\n"


@pytest.mark.parametrize("text, why", [
    ("L3 0=7ff\n", "missing 'NAME:'"),
    ("L3:0=zz\n", "bad domain entry"),
    ("L3:0=7ff;0=3\n", "domain 0 given twice"),
    ("L3:0=1\nL3:1=1\n", "given twice"),
    ("MB:\n", "no domains"),
    ("MB:x=10\n", "bad domain entry"),
])
def test_syntax_errors_name_the_problem(text, why):
    with pytest.raises(SchemataSyntaxError, match=why):
        Schemata.parse(text)
