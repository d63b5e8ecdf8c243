"""The IxNetwork generator, through ixnetwork-restpy's SessionAssistant.

Each engine trial is one fixed-duration run of a raw traffic item, not a
QuickTest ``Rfc2544throughput``: QuickTest runs its own binary search,
and the search is what nova-rdt does better (it starts from the rate the
DUT forwarded at overload, retries marginal losses and verifies the
result).  Frame counts come from the "Traffic Item Statistics" view;
store-and-forward latency and the latency bins from "Flow Statistics".

This backend has not been run against a live chassis: its tests check
the restpy calls it makes and its reading of the statistics views, at
the restpy boundary.  Column captions of the latency bins are matched
loosely (a caption with "Bin" and a number, in order) for that reason.
"""

from __future__ import annotations

import re
import time

from nova_rdt.rfc2544 import latency as latency_mod
from nova_rdt.rfc2544.model import LatencyResult
from nova_rdt.rfc2544.model import TrafficGenerator
from nova_rdt.rfc2544.model import Trial

TRAFFIC_ITEM = "nova-rdt-rfc2544"
ITEM_VIEW = "Traffic Item Statistics"
FLOW_VIEW = "Flow Statistics"
_PORT = re.compile(r"^(?P<chassis>[^/\s]+)/(?P<card>\d+)/(?P<port>\d+)$")
_BIN = re.compile(r"\bBin\b\D*(\d+)", re.IGNORECASE)
# Ethernet preamble + start delimiter + inter-frame gap, in bytes.
WIRE_OVERHEAD = 20


def parse_port(text: str) -> tuple[str, int, int]:
    m = _PORT.match(text.strip())
    if not m:
        raise ValueError(f"port {text!r} is not CHASSIS/CARD/PORT")
    return m.group("chassis"), int(m.group("card")), int(m.group("port"))


def line_rate_pps(speed_gbps: float, frame_size: int) -> float:
    return speed_gbps * 1e9 / ((frame_size + WIRE_OVERHEAD) * 8)


class IxNetworkGenerator(TrafficGenerator):
    name = "ixnetwork"

    def __init__(self, api_server: str, ports: list[str],
                 api_port: int | None = None, username: str = "admin",
                 password: str = "admin", session_name: str | None = None,
                 line_speed_gbps: float = 10.0, flows: int = 2000,
                 bidirectional: bool = True, latency_mode: str =
                 "storeForward", run_timeout: float = 120.0,
                 session_factory=None):
        if len(ports) != 2:
            raise ValueError("ports: give two, CHASSIS/CARD/PORT each")
        self.ports = [parse_port(p) for p in ports]
        if not 1 <= flows <= 1_000_000:
            raise ValueError("flows must be 1-1000000")
        self.api = dict(IpAddress=api_server, RestPort=api_port,
                        UserName=username, Password=password,
                        SessionName=session_name, ClearConfig=True,
                        LogLevel="info")
        self.speed = line_speed_gbps
        self.flows = flows
        self.bidirectional = bidirectional
        self.latency_mode = latency_mode
        self.run_timeout = run_timeout
        self._factory = session_factory
        self.session = None
        self._item = None
        self._bins: tuple[float, ...] | None = None

    # -- set-up -----------------------------------------------------------

    def _connect(self):
        if self.session is not None:
            return
        factory = self._factory
        if factory is None:
            from ixnetwork_restpy import SessionAssistant
            factory = SessionAssistant
        self.session = factory(**self.api)
        ix = self.session.Ixnetwork
        port_map = self.session.PortMapAssistant()
        for i, (chassis, card, port) in enumerate(self.ports):
            port_map.Map(IpAddress=chassis, CardId=card, PortId=port,
                         Name=f"nova-rdt-{i}")
        port_map.Connect(ForceOwnership=True)
        vports = ix.Vport.find()
        item = ix.Traffic.TrafficItem.add(
            Name=TRAFFIC_ITEM, BiDirectional=self.bidirectional,
            TrafficType="raw")
        item.EndpointSet.add(Sources=vports[0].Protocols.find(),
                             Destinations=vports[1].Protocols.find())
        ce = item.ConfigElement.find()[0]
        # The seed's 2000 flows: as many source MACs.
        src = ce.Stack.find(StackTypeId="^ethernet$").Field.find(
            FieldTypeId="ethernet.header.sourceAddress")
        src.update(ValueType="increment", StartValue="00:00:5e:00:01:00",
                   StepValue="00:00:00:00:00:01", CountValue=self.flows)
        item.Tracking.find()[0].TrackBy = ["trackingenabled0"]
        ix.Traffic.Statistics.Latency.update(Enabled=True,
                                             Mode=self.latency_mode)
        self._item = item

    def close(self) -> None:
        if self.session is not None:
            try:
                self.session.Session.remove()
            finally:
                self.session = None

    # -- the engine's interface ----------------------------------------

    def max_rate_pps(self, frame_size: int) -> float:
        lanes = 2 if self.bidirectional else 1
        return lanes * line_rate_pps(self.speed, frame_size)

    def _run(self, frame_size, rate_pps, duration, bins=None):
        self._connect()
        ix, item = self.session.Ixnetwork, self._item
        ce = item.ConfigElement.find()[0]
        per_direction = rate_pps / (2 if self.bidirectional else 1)
        ce.FrameSize.update(Type="fixed", FixedSize=frame_size)
        ce.FrameRate.update(Type="framesPerSecond", Rate=per_direction)
        ce.TransmissionControl.update(Type="fixedDuration",
                                      Duration=max(1, round(duration)))
        tracking = item.Tracking.find()[0]
        if bins is not None and bins != self._bins:
            tracking.LatencyBin.update(Enabled=True, BinLimits=list(bins),
                                       NumberOfBins=len(bins) + 1)
            self._bins = bins
        elif bins is None and self._bins is not None:
            tracking.LatencyBin.update(Enabled=False)
            self._bins = None
        item.Generate()
        ix.Traffic.Apply()
        ix.Traffic.StartStatelessTrafficBlocking()
        deadline = time.monotonic() + duration + self.run_timeout
        while ix.Traffic.State != "stopped":
            if time.monotonic() > deadline:
                ix.Traffic.StopStatelessTrafficBlocking()
                raise TimeoutError("IxNetwork traffic did not stop")
            time.sleep(0.5)

    def trial(self, frame_size: int, rate_pps: float,
              duration: float) -> Trial:
        self._run(frame_size, rate_pps, duration)
        row = self.session.StatViewAssistant(ITEM_VIEW).Rows[0]
        tx, rx = int(float(row["Tx Frames"])), int(float(row["Rx Frames"]))
        return Trial(rate_pps, duration, tx, rx)

    def latency(self, frame_size, rate_pps, duration, bins_us
                ) -> LatencyResult:
        edges = latency_mod.check_bins(bins_us)
        self._run(frame_size, rate_pps, duration, bins=edges)
        rows = self.session.StatViewAssistant(FLOW_VIEW).Rows
        counts = [0] * (len(edges) + 1)
        mins, maxs, avgs, weights = [], [], [], []
        tx = rx = 0
        for row in rows:
            cols = row.Columns if hasattr(row, "Columns") else list(row)
            tx += int(float(row["Tx Frames"]))
            rx += int(float(row["Rx Frames"]))
            mins.append(float(row["Store-Forward Min Latency (ns)"]) / 1000)
            maxs.append(float(row["Store-Forward Max Latency (ns)"]) / 1000)
            avgs.append(float(row["Store-Forward Avg Latency (ns)"]) / 1000)
            weights.append(int(float(row["Rx Frames"])))
            found = sorted((int(m.group(1)), c) for c in cols
                           if (m := _BIN.search(c)) and "frames" in c.lower())
            for i, (_n, caption) in enumerate(found[:len(counts)]):
                counts[i] += int(float(row[caption]))
        lows, highs = (0.0,) + edges, edges + (None,)
        total_w = sum(weights) or 1
        return latency_mod.from_bins(
            tuple(zip(lows, highs, counts)),
            min(mins) if mins else None,
            sum(a * w for a, w in zip(avgs, weights)) / total_w
            if avgs else None,
            max(maxs) if maxs else None, rate_pps, duration,
            lost=max(tx - rx, 0))
