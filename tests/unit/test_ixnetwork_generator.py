"""The IxNetwork backend's translation to ixnetwork-restpy calls.

No IxNetwork server exists here: a recording stand-in for restpy's
SessionAssistant tree records every call and answers the statistics
views from a DUT of known capacity.  This checks what we send to restpy
and how we read its views, not IxNetwork itself.
"""

from __future__ import annotations

import pytest

from nova_rdt.rfc2544 import engine
from nova_rdt.rfc2544 import search
from nova_rdt.rfc2544.generators import ixnetwork
from nova_rdt.rfc2544.model import SEED_BINS_US


class Node:
    """A restpy node: child nodes by attribute, calls recorded as
    (parent path, method, kwargs)."""

    def __init__(self, rec, path, parent=None, name=None):
        self._rec, self._path, self._kids, self._vals = rec, path, {}, {}
        self._parent, self._name = parent, name

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._vals:
            return self._vals[name]
        if name == "State":
            return "stopped"
        return self._kids.setdefault(
            name, Node(self._rec, f"{self._path}.{name}", self, name))

    def __setattr__(self, name, value):
        if name.startswith("_"):
            return object.__setattr__(self, name, value)
        self._rec.append((f"{self._path}.{name}", "=", value))
        self._vals[name] = value

    def __getitem__(self, i):
        return self._kids.setdefault(f"[{i}]", Node(self._rec,
                                                    f"{self._path}[{i}]"))

    def __call__(self, *args, **kw):
        parent = self._parent
        self._rec.append((parent._path, self._name, kw or args))
        if self._name in ("find", "add"):
            return parent._kids.setdefault(
                f"{self._name}{sorted(kw.items(), key=str)}",
                Node(self._rec, f"{parent._path}.{self._name}"))
        return None


class Row(dict):
    @property
    def Columns(self):
        return list(self)


class FakeSession:
    """SessionAssistant's shape, over a DUT that forwards ``capacity``."""

    instances = []

    def __init__(self, capacity_pps=2e6, **kw):
        self.kwargs = kw
        self.calls = []
        self.capacity = capacity_pps
        self.Ixnetwork = Node(self.calls, "Ixnetwork")
        self.Session = Node(self.calls, "Session")
        self.portmap = Node(self.calls, "PortMap")
        FakeSession.instances.append(self)

    def PortMapAssistant(self):
        return self.portmap

    def _last(self, path_end, method="update"):
        for path, m, kw in reversed(self.calls):
            if path.endswith(path_end) and m == method:
                return kw
        raise AssertionError(f"no {method} on {path_end}")

    def StatViewAssistant(self, view):
        ce = "ConfigElement.find[0]"
        rate = self._last(f"{ce}.FrameRate")["Rate"]
        duration = self._last(f"{ce}.TransmissionControl")["Duration"]
        lanes = 2
        tx = int(rate * lanes * duration)
        rx = min(tx, int(self.capacity * duration))
        stats = Node(self.calls, f"View[{view}]")
        if view == ixnetwork.ITEM_VIEW:
            stats._vals["Rows"] = [Row({"Tx Frames": str(tx),
                                        "Rx Frames": str(rx)})]
        else:
            rows = []
            for direction in range(lanes):
                row = Row({"Tx Frames": str(tx // 2),
                           "Rx Frames": str(rx // 2),
                           "Store-Forward Min Latency (ns)": "2000",
                           "Store-Forward Avg Latency (ns)":
                               str(9000 + 1000 * direction),
                           "Store-Forward Max Latency (ns)": "180000"})
                counts = [0, 100, 500, 300, 60, 20, 10, 6, 3, 1, 0]
                for i, c in enumerate(counts, 1):
                    row[f"Latency Bin {i} Frames"] = str(c)
                rows.append(row)
            stats._vals["Rows"] = rows
        return stats


def _gen(**kw):
    FakeSession.instances.clear()
    cap = kw.pop("capacity_pps", 2e6)
    return ixnetwork.IxNetworkGenerator(
        "ixnet.lab", ["10.0.0.5/1/1", "10.0.0.5/1/2"], api_port=11009,
        username="nfv", password="pw",
        session_factory=lambda **a: FakeSession(cap, **a), **kw)


def test_connect_maps_ports_and_builds_the_traffic_item():
    g = _gen()
    g.trial(64, 1e6, 10)
    s = FakeSession.instances[0]
    assert s.kwargs == dict(IpAddress="ixnet.lab", RestPort=11009,
                            UserName="nfv", Password="pw", SessionName=None,
                            ClearConfig=True, LogLevel="info")
    maps = [kw for path, m, kw in s.calls if m == "Map"]
    assert maps == [dict(IpAddress="10.0.0.5", CardId=1, PortId=1,
                         Name="nova-rdt-0"),
                    dict(IpAddress="10.0.0.5", CardId=1, PortId=2,
                         Name="nova-rdt-1")]
    assert ("PortMap", "Connect", {"ForceOwnership": True}) in s.calls
    add = next(kw for path, m, kw in s.calls
               if path.endswith("TrafficItem") and m == "add")
    assert add == dict(Name="nova-rdt-rfc2544", BiDirectional=True,
                       TrafficType="raw")
    src = next(kw for path, m, kw in s.calls
               if m == "update" and "Field" in path)
    assert src["ValueType"] == "increment" and src["CountValue"] == 2000
    assert next(kw for path, m, kw in s.calls
                if path.endswith("Statistics.Latency")) == dict(
        Enabled=True, Mode="storeForward")


def test_a_trial_sets_size_rate_duration_then_runs_and_counts():
    g = _gen(capacity_pps=8e5)
    t = g.trial(512, 1e6, 10)
    s = FakeSession.instances[0]
    ce = [c for c in s.calls if "ConfigElement" in c[0]
          and c[1] == "update"]
    assert ("FrameSize", dict(Type="fixed", FixedSize=512)) in [
        (p.rsplit(".", 1)[1], kw) for p, _m, kw in ce]
    assert dict(Type="framesPerSecond", Rate=5e5) in [kw for *_x, kw in ce]
    assert dict(Type="fixedDuration", Duration=10) in [kw for *_x, kw in ce]
    order = [m for _p, m, _k in s.calls
             if m in ("Generate", "Apply", "StartStatelessTrafficBlocking")]
    assert order == ["Generate", "Apply", "StartStatelessTrafficBlocking"]
    assert (t.tx, t.rx) == (10_000_000, 8_000_000)
    assert t.loss_ratio == pytest.approx(0.2)


def test_latency_reads_bins_and_store_forward_latency():
    g = _gen()
    r = g.latency(64, 1e6, 10, SEED_BINS_US)
    s = FakeSession.instances[0]
    lb = next(kw for path, m, kw in s.calls if path.endswith("LatencyBin"))
    assert lb == dict(Enabled=True, BinLimits=list(map(float, SEED_BINS_US)),
                      NumberOfBins=11)
    assert [n for _lo, _hi, n in r.bins] == [0, 200, 1000, 600, 120, 40,
                                             20, 12, 6, 2, 0]
    assert (r.min_us, r.max_us) == (2.0, 180.0)
    assert r.avg_us == pytest.approx(9.5)
    # Percentiles from bins are the upper edge of their bin.
    assert r.percentiles_us["50"] == 75.0
    assert r.samples == 2000


def test_the_engine_finds_the_dut_through_the_translation():
    g = _gen(capacity_pps=3e6)
    cfg = engine.RunConfig(frame_sizes=(64,), search=search.SearchConfig(
        loss_tolerance=0.001, resolution=0.005), latency_duration=10)
    rep = engine.run(g, cfg)
    found = rep.frames[0].throughput
    assert found.rate_pps == pytest.approx(3e6 / 0.999, rel=0.006)
    assert found.trial_count <= 6
    assert g.max_rate_pps(64) == pytest.approx(2 * 14_880_952, rel=1e-6)


@pytest.mark.parametrize("ports", [["a/1/1"], ["a/1", "b/1/1"],
                                   ["a/x/1", "a/1/2"]])
def test_bad_ports_are_refused(ports):
    with pytest.raises(ValueError, match="port"):
        ixnetwork.IxNetworkGenerator("s", ports, session_factory=object)
