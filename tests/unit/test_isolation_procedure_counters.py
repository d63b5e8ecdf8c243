"""The neighbour's resctrl group counters in the isolation procedure:
recorded per condition, judged (not binding) busy vs idle, and said to
be not reported by a cloud without them."""

from hypothesis import given
from hypothesis import strategies as st
import pytest

from nova_rdt.isolation import cloud as cloud_mod
from nova_rdt.isolation import procedure
from tests.unit.test_isolation_procedure import FakeCloud
from tests.unit.test_isolation_procedure import run


class CountingCloud(FakeCloud):
    """The noisy neighbour's group (rdt on only) moves ``mbm`` bytes per
    CPU second of its load; occupancy follows whether it ran."""

    def __init__(self, mbm=1e9, mbm_supported=True, **kw):
        super().__init__(**kw)
        self.mbm, self.mbm_supported = mbm, mbm_supported

    def load(self, sid):
        out = super().load(sid)
        if out is None:
            return None
        s = self.servers[sid]
        on = "rdt:l3_cache_ways" in self.flavors[s["flavor"]]["specs"]
        if not on:
            return {**out, "rdt_group": None, "mbm_total_bytes": None,
                    "mbm_local_bytes": None, "llc_occupancy_bytes": None}
        total = int(s["cpu"] / 1e9 * self.mbm)
        return {**out, "rdt_group": f"qemu-1-{sid}-vcpus_0",
                "mbm_total_bytes": total if self.mbm_supported else None,
                "mbm_local_bytes": None,
                "llc_occupancy_bytes": (3 << 20) if s["status"] == "ACTIVE"
                else 0}


def _by(summary):
    return {(c["rdt"], c["neighbour"]): c["neighbour_load"]["counters"]
            for c in summary["conditions"]}


def _counter_verdicts(summary):
    return {v["rdt"]: v for v in summary["verdicts"]
            if v["check"] == "neighbour_counters"}


def test_rates_are_recorded_per_condition_and_busy_beats_idle():
    summary = run(CountingCloud())
    by = _by(summary)
    assert by[("off", "busy")]["rdt_group"] is None
    assert by[("off", "busy")]["mbm_total_bytes_per_s"] is None
    busy, idle = by[("on", "busy")], by[("on", "idle")]
    # One vCPU busy for the 5 s measure() takes: 1 GB/s.
    assert busy["mbm_total_bytes_per_s"] == pytest.approx(1e9)
    assert idle["mbm_total_bytes_per_s"] == 0
    v = _counter_verdicts(summary)
    assert v["on"]["ok"] is True and v["on"]["binding"] is False
    assert "1000.00 MB/s busy vs 0.00 MB/s idle" in v["on"]["detail"]
    assert v["off"]["ok"] is None and "no resctrl group" in \
        v["off"]["detail"]


def test_a_group_that_did_not_move_fails_the_verdict_not_the_run():
    # The load runs (CPU time) but the group's counters do not move:
    # the vCPUs are not in the group.
    summary = run(CountingCloud(mbm=0))
    v = _counter_verdicts(summary)["on"]
    assert v["ok"] is False and "busy did not show more" in v["detail"]
    assert summary["ok"] is True


def test_without_mbm_the_occupancy_is_compared():
    summary = run(CountingCloud(mbm_supported=False))
    v = _counter_verdicts(summary)["on"]
    assert v["ok"] is True and "LLC occupancy 3.00 MiB busy" in v["detail"]


def test_a_cloud_without_counters_says_not_reported():
    summary = run(FakeCloud())
    assert all(c is None for c in _by(summary).values())
    v = _counter_verdicts(summary)
    assert set(v) == {"off", "on"}
    assert all(x["ok"] is None and x["detail"].startswith("not reported")
               for x in v.values())


@given(a=st.integers(0, 2**50), b=st.integers(0, 2**50),
       seconds=st.floats(0.001, 1e4))
def test_group_counters_delta_and_rate(a, b, seconds):
    out = procedure.group_counters(
        {"rdt_group": "g", "mbm_total_bytes": a},
        {"rdt_group": "g", "mbm_total_bytes": b,
         "llc_occupancy_bytes": 7}, seconds)
    if b >= a:
        assert out["mbm_total_bytes"] == b - a
        assert out["mbm_total_bytes_per_s"] == pytest.approx(
            (b - a) / seconds, abs=0.1)
    else:
        # A counter that went back was reset: no rate from it.
        assert out["mbm_total_bytes"] is None
        assert out["mbm_total_bytes_per_s"] is None
    assert out["llc_occupancy_bytes"] == 7
    assert out["mbm_local_bytes"] is None


def test_group_counters_absent_is_none():
    assert procedure.group_counters({"cpu_time_ns": 1}, {"cpu_time_ns": 2},
                                    1.0) is None
    assert procedure.group_counters(None, None, 1.0) is None


def test_counting_cloud_is_an_isolation_cloud():
    assert isinstance(CountingCloud(), cloud_mod.IsolationCloud)
