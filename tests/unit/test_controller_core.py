"""The controller's pure core: units, masks, layout, policies, governor."""

from __future__ import annotations

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import pytest

from nova_rdt.controller import governor as gov_mod
from nova_rdt.controller import layout
from nova_rdt.controller import masks
from nova_rdt.controller import model as m
from nova_rdt.controller import policy as pol
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl.schemata import Schemata

PERCENT = m.MbUnits(m.PERCENT, min=10, gran=10, max=100)
AMD = m.MbUnits(m.PERCENT, min=1, gran=1, max=2048)
MBPS = m.MbUnits(m.MBPS, min=1, gran=1, max=None)
units_st = st.sampled_from([PERCENT, AMD, MBPS,
                            m.MbUnits(m.PERCENT, min=5, gran=3, max=100)])


# -- MB units ---------------------------------------------------------------

@given(units_st, st.floats(min_value=-10, max_value=5000,
                           allow_nan=False))
def test_floor_and_ceil_are_valid_and_on_the_right_side(u, v):
    lo, hi = u.floor(v), u.ceil(v)
    assert u.valid(lo) and u.valid(hi)
    top = u.max - u.max % u.gran if u.max is not None else None
    if u.lowest <= v and (top is None or v <= top):
        assert lo <= v <= hi
        assert hi - lo < 2 * u.gran


def test_units_refuse_nonsense():
    with pytest.raises(ValueError, match="percent or MBps"):
        m.MbUnits("GBps", 1)
    with pytest.raises(ValueError, match="positive"):
        m.MbUnits(m.PERCENT, 0)
    assert not PERCENT.valid(15) and PERCENT.valid(20)
    assert not PERCENT.valid(110) and MBPS.valid(10 ** 6)


# -- masks ------------------------------------------------------------------

@st.composite
def static_masks(draw):
    cbm_len = draw(st.integers(4, 20))
    min_bits = draw(st.integers(1, 3))
    sparse = draw(st.booleans())
    if sparse:
        mask = draw(st.integers(1, (1 << cbm_len) - 1))
        try:
            cbm.check(mask, cbm_len, min_bits, True)
        except cbm.CbmError:
            mask = ((1 << min_bits) - 1)
    else:
        length = draw(st.integers(min_bits, cbm_len))
        start = draw(st.integers(0, cbm_len - length))
        mask = ((1 << length) - 1) << start
    return mask, cbm_len, min_bits, sparse


@given(static_masks(), st.data())
def test_class_mask_stays_inside_static_and_valid(sm, data):
    static, cbm_len, min_bits, sparse = sm
    ways = data.draw(st.integers(min_bits, cbm.popcount(static)))
    mask = masks.class_mask(static, ways, cbm_len, min_bits, sparse)
    assert mask & ~static == 0
    assert cbm.popcount(mask) == ways
    cbm.check(mask, cbm_len, min_bits, sparse)       # kernel would accept
    if cbm.is_contiguous(static):
        assert cbm.is_contiguous(mask)
        assert mask & -mask == static & -static      # anchored low


@given(static_masks())
def test_class_mask_refuses_below_min_cbm_bits(sm):
    static, cbm_len, min_bits, sparse = sm
    if min_bits > 1:
        with pytest.raises(cbm.CbmError, match="Need at least"):
            masks.class_mask(static, min_bits - 1, cbm_len, min_bits, sparse)
    with pytest.raises(ValueError):
        masks.lowest_bits(static, cbm.popcount(static) + 1)


# -- layout -----------------------------------------------------------------

@st.composite
def class_schematas(draw):
    cbm_len = 11
    min_bits = draw(st.integers(1, 2))
    res_names = draw(st.sampled_from([("L3",), ("L3CODE", "L3DATA")]))
    lines = {}
    for r in res_names:
        lines[r] = {}
        for d in (0, 1):
            length = draw(st.integers(min_bits, 6))
            start = draw(st.integers(0, cbm_len - length))
            lines[r][d] = ((1 << length) - 1) << start
    with_mb = draw(st.booleans())
    if with_mb:
        lines["MB"] = {0: draw(st.sampled_from([30, 50, 100])),
                       1: draw(st.sampled_from([30, 50, 100]))}
    rules = {r: layout.CacheRules(cbm_len, min_bits, False)
             for r in res_names}
    return Schemata(lines), rules, min_bits


@given(class_schematas(), st.data())
def test_target_is_inside_static_and_reads_back(cs, data):
    static, rules, min_bits = cs
    sw = layout.static_ways(static)
    ways = data.draw(st.integers(min_bits, sw))
    mb = data.draw(st.sampled_from([None, 10, 20, 60, 100]))
    t = layout.target(static, mb, ways, rules)
    for r in static.resources():
        for d, sv in static.domains(r).items():
            tv = t.get(r, d)
            if r == "MB":
                assert tv <= sv
                assert tv == (sv if mb is None else min(mb, sv))
            else:
                assert tv & ~sv == 0
                cbm.check(tv, 11, min_bits, False)
    assert layout.current_ways(static, t) == ways
    assert layout.current_ways(static, static) == sw
    c = layout.observe("c", static, t)
    assert c.static_ways == sw and c.ways == ways


# -- governor ---------------------------------------------------------------

def cls(mb=100, ways=4, static_mb=100, static_ways=4, bw=None, name="lp"):
    return m.ClassState(name, mb, static_mb, ways, static_ways, bw)


decisions_st = st.lists(st.tuples(
    st.floats(0, 200), st.integers(-3, 12),
    st.sampled_from([m.SLO_VIOLATED, m.SLO_SLACK, m.BW_OVER_SHARE])),
    min_size=1, max_size=30)


@settings(max_examples=200)
@given(decisions_st, units_st, st.integers(1, 3), st.floats(0, 5),
       st.integers(1, 4))
def test_governor_keeps_bounds_rate_and_hysteresis(seq, units, ways_min,
                                                   interval, hold):
    static_mb = units.floor(100)
    bounds = m.Bounds(mb_min=20, ways_min=ways_min)
    g = gov_mod.Governor(bounds, units, min_cbm_bits=2,
                         min_interval=interval, raise_hold=hold)
    state = cls(mb=static_mb, static_mb=static_mb, ways=8, static_ways=8)
    last_change = None
    asks = 0
    for t, (mb, ways, reason) in enumerate(seq):
        obs = m.Observation(float(t), (state,))
        acts = g.filter(obs, [m.Decision("lp", int(mb), ways, reason)])
        for a in acts:
            assert a.mb <= static_mb and units.valid(a.mb) or \
                a.mb == static_mb
            assert a.mb >= min(units.ceil(20), static_mb)
            assert max(ways_min, 2) <= a.ways <= 8
            up = a.mb > state.mb or a.ways > state.ways
            down = a.mb < state.mb or a.ways < state.ways
            if up and not down:
                asks += 1
            if a.applied:
                urgent = a.reason == m.SLO_VIOLATED and not up
                if last_change is not None and not urgent:
                    assert t - last_change >= interval
                if up and not down:
                    assert asks >= hold
                last_change = t
                asks = 0
                state = cls(mb=a.mb, ways=a.ways, static_mb=static_mb,
                            static_ways=8)
        if not acts:
            asks = 0


def test_governor_holds_then_applies():
    g = gov_mod.Governor(m.Bounds(mb_min=10), PERCENT, min_interval=10,
                         raise_hold=2)
    c = cls(mb=50)
    up = [m.Decision("lp", 60, 4, m.SLO_SLACK)]
    a = g.filter(m.Observation(0.0, (c,)), up)
    assert a[0].held == m.HOLD_HYSTERESIS and not a[0].applied
    a = g.filter(m.Observation(1.0, (c,)), up)
    assert a[0].applied and a[0].mb == 60
    c = cls(mb=60)
    down = [m.Decision("lp", 40, 4, m.BW_OVER_SHARE)]
    a = g.filter(m.Observation(2.0, (c,)), down)
    assert a[0].held == m.HOLD_RATE
    urgent = [m.Decision("lp", 10, 1, m.SLO_VIOLATED)]
    a = g.filter(m.Observation(3.0, (c,)), urgent)
    assert a[0].applied and (a[0].mb, a[0].ways) == (10, 1)
    # Unknown classes and no-ops produce nothing.
    assert g.filter(m.Observation(4.0, (c,)),
                    [m.Decision("other", 10, 1, m.SLO_VIOLATED),
                     m.Decision("lp", 60, 4, m.SLO_SLACK)]) == []


# -- policies ---------------------------------------------------------------

def prot(slo, target=1.0, bw=None):
    return m.ProtectedState("vm", bandwidth=bw, slo=slo, slo_target=target)


def test_slack_policy_cuts_on_violation_and_gives_back_with_slack():
    p = pol.SlackPolicy(low_slack=0.1, high_slack=0.3)
    b = m.Bounds(mb_min=10, mb_step=10, ways_min=1)
    c = cls(mb=100, ways=4)
    d = p.decide(m.Observation(0, (c,), (prot(1.5),)), b, PERCENT)
    assert (d[0].mb, d[0].ways, d[0].reason) == (10, 1, m.SLO_VIOLATED)
    d = p.decide(m.Observation(0, (c,), (prot(0.95),)), b, PERCENT)
    assert (d[0].mb, d[0].ways, d[0].reason) == (90, 4, m.SLO_LOW_SLACK)
    low = cls(mb=10, ways=4)
    d = p.decide(m.Observation(0, (low,), (prot(0.95),)), b, PERCENT)
    assert (d[0].mb, d[0].ways) == (10, 3)          # MB at floor: a way
    # In the band: hold.
    assert p.decide(m.Observation(0, (low,), (prot(0.8),)), b, PERCENT) == []
    shrunk = cls(mb=10, ways=2)
    d = p.decide(m.Observation(0, (shrunk,), (prot(0.5),)), b, PERCENT)
    assert (d[0].mb, d[0].ways, d[0].reason) == (10, 3, m.SLO_SLACK)
    d = p.decide(m.Observation(0, (low,), (prot(0.5),)), b, PERCENT)
    assert (d[0].mb, d[0].ways) == (20, 4)
    # At static with slack: nothing.  No signal: nothing.
    assert p.decide(m.Observation(0, (c,), (prot(0.5),)), b, PERCENT) == []
    assert p.decide(m.Observation(0, (c,), (prot(None),)), b, PERCENT) == []
    # The worst protected instance decides.
    d = p.decide(m.Observation(0, (c,), (prot(0.5), prot(2.0))), b,
                 PERCENT)
    assert d[0].reason == m.SLO_VIOLATED


def test_bandwidth_share_policy():
    gb = 1e9
    p = pol.BandwidthSharePolicy(capacity=100 * gb, utilisation=0.7)
    b = m.Bounds(mb_min=10, mb_step=10)
    # Protected uses 40: best effort may use 30 in total, 15 per class.
    hot = cls(mb=100, bw=30 * gb, name="a")
    idle = cls(mb=50, bw=1 * gb, name="b")
    d = {x.cls: x for x in p.decide(m.Observation(
        0, (hot, idle), (prot(None, bw=40 * gb),)), b, PERCENT)}
    assert d["a"].mb == 50 and d["a"].reason == m.BW_OVER_SHARE
    # Idle-ish: straight back towards the middle of the band, capped.
    assert d["b"].mb == 100 and d["b"].reason == m.BW_UNDER_SHARE
    near = cls(mb=40, bw=10 * gb, name="c")
    d = p.decide(m.Observation(0, (near,), (prot(None, bw=40 * gb),)), b,
                 PERCENT)
    # share 30, aim 30 * 0.875 = 26.25: 40 * 26.25 / 10 = 105 -> 100.
    assert d[0].mb == 100
    mid = cls(mb=40, bw=20 * gb, name="c")
    d = p.decide(m.Observation(0, (mid,), (prot(None, bw=40 * gb),)), b,
                 PERCENT)
    assert d[0].mb == 50                   # 40 * 26.25 / 20 = 52.5 -> 50
    # Inside the band: nothing.
    held = cls(mb=40, bw=25 * gb, name="c")
    assert p.decide(m.Observation(0, (held,), (prot(None, bw=40 * gb),)),
                    b, PERCENT) == []
    # Protected alone above the target: best effort to the floor.
    d = p.decide(m.Observation(0, (hot,), (prot(None, bw=90 * gb),)), b,
                 PERCENT)
    assert d[0].mb == 10
    # Learned capacity: nothing seen yet, nothing decided.
    q = pol.BandwidthSharePolicy()
    assert q.decide(m.Observation(0, (cls(bw=0.0),)), b, PERCENT) == []


def test_static_policy_restores():
    d = pol.StaticPolicy().decide(m.Observation(0, (cls(mb=10, ways=1),
                                                    cls(name="x"))),
                                  m.Bounds(mb_min=10), PERCENT)
    assert [(x.cls, x.mb, x.ways, x.reason) for x in d] == \
        [("lp", 100, 4, m.RESTORE)]


def test_make_names_the_choices():
    assert pol.make("slack").name == "slack"
    with pytest.raises(ValueError, match="bandwidth-share, slack, static"):
        pol.make("heracles")


observations = st.builds(
    lambda mb, ways, bw, pbw, slo: m.Observation(
        0.0, (cls(mb=mb, ways=ways, bw=bw),),
        (m.ProtectedState("vm", bandwidth=pbw, slo=slo, slo_target=1.0),)),
    st.sampled_from([10, 20, 50, 100]), st.integers(1, 4),
    st.one_of(st.none(), st.floats(0, 1e11)),
    st.one_of(st.none(), st.floats(0, 1e11)),
    st.one_of(st.none(), st.floats(0, 5)))


@given(observations, st.sampled_from(["slack", "bandwidth-share",
                                      "static"]))
def test_any_policy_through_the_governor_stays_in_bounds(obs, name):
    p = pol.make(name)
    b = m.Bounds(mb_min=10, ways_min=1)
    g = gov_mod.Governor(b, PERCENT)
    for a in g.filter(obs, p.decide(obs, b, PERCENT)):
        assert 10 <= a.mb <= 100 and PERCENT.valid(a.mb)
        assert 1 <= a.ways <= 4
        assert a.cls == "lp"


@given(st.integers(1, 0x7ff), st.integers(1, 0x7ff), st.integers(0, 0x7ff),
       st.integers(0, 0x7ff))
def test_growth_never_regains_a_way_someone_took(cur, target, other, before):
    cur_s = Schemata({"L3": {0: cur}})
    tgt_s = Schemata({"L3": {0: target}, "MB": {0: 50}})
    used = layout.new_sharing({"g": Schemata({"L3": {0: other}})},
                              {"g": Schemata({"L3": {0: before}})})
    assert used == {("L3", 0): other & ~before}
    blocked = layout.regains_taken_ways(tgt_s, cur_s, used)
    assert blocked == bool(target & ~cur & other & ~before)
    kept = layout.keep_caches(tgt_s, cur_s)
    assert kept.get("L3", 0) == cur and kept.get("MB", 0) == 50
    # A group that was not there at adoption counts whole.
    assert layout.new_sharing({"new": Schemata({"L3": {0: other}})}, {}) \
        == {("L3", 0): other}


def test_a_display_name_two_tenants_share_names_no_instance():
    """``protected = web-1`` on a host with two tenants' web-1: neither is
    taken for the other; a uuid or a domain name names exactly one."""
    from types import SimpleNamespace as R

    from nova_rdt.controller.daemon import instance_group
    recs = [R(uuid="u-a", name="instance-1", instance_name="web-1",
              group="qemu-1-instance-1-vcpus_0"),
            R(uuid="u-b", name="instance-2", instance_name="web-1",
              group="qemu-2-instance-2-vcpus_0"),
            R(uuid="u-c", name="instance-3", instance_name="db",
              group="qemu-3-instance-3-vcpus_0")]
    assert instance_group("web-1", recs) == (None, ["u-a", "u-b"])
    assert instance_group("u-b", recs) == ("qemu-2-instance-2-vcpus_0", [])
    assert instance_group("instance-1", recs) == \
        ("qemu-1-instance-1-vcpus_0", [])
    assert instance_group("db", recs) == ("qemu-3-instance-3-vcpus_0", [])
    assert instance_group("nobody", recs) == (None, [])
