"""The IxNetwork generator, through ixnetwork-restpy's SessionAssistant.

Each engine trial is one fixed-duration run of a raw traffic item, not a
QuickTest ``Rfc2544throughput``: QuickTest runs its own binary search,
and the search is what nova-rdt does better (it starts from the rate the
DUT forwarded at overload, retries marginal losses and verifies the
result).  Frame counts come from the "Traffic Item Statistics" view;
latency (in the configured mode's columns) and the latency bins from
"Flow Statistics".

The generator works in a session of its own: restpy creates a new one
when neither a session id nor a name to look up is given, so another
user's session and its configuration on the same API server are never
touched, and the session is removed at the end.  The two test ports are
taken with ``ForceOwnership``, as a run needs them: they must be this
test's ports, not another user's.  The new session's configuration is
cleared only when ``clear_config`` asks for it.

This backend has not been run against a live chassis: its tests drive
restpy's own classes over a fake HTTP transport, so every attribute and
operation it uses is restpy's, with restpy's documented types.  Column
captions of the latency bins are matched loosely (a caption with "Bin"
and a number, in order) for that reason.
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
# The column prefix of each latency mode, as IxNetwork captions its
# statistics ("Store-Forward Avg Latency (ns)").  Only the modes whose
# captions are known are accepted: a guessed caption would fail only at
# the first latency run, against a chassis.
LATENCY_CAPTIONS = {"storeForward": "Store-Forward",
                    "cutThrough": "Cut-Through"}
# restpy documents BinLimits as the upper limit of each bin, the last one
# included; the engine's last bin is open (">1000 us").  It is closed at
# the largest signed 32-bit value (us), a limit no latency reaches.
LAST_BIN_LIMIT_US = 2147483647
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


def bin_limits(edges: tuple[float, ...]) -> list[float]:
    """restpy's BinLimits for the engine's edges: every bin's upper limit."""
    return [*edges, float(LAST_BIN_LIMIT_US)]


def _cell(row, caption: str) -> float:
    # restpy's Row treats a caption it does not hold as a regex over the
    # cells: check the caption first, and name it when it is missing.
    if caption not in row.Columns:
        raise RuntimeError(f"IxNetwork view has no column {caption!r}; "
                           f"columns: {', '.join(row.Columns)}")
    return float(row[caption])


class IxNetworkGenerator(TrafficGenerator):
    name = "ixnetwork"

    def __init__(self, api_server: str, ports: list[str],
                 api_port: int | None = None, username: str = "admin",
                 password: str = "admin", session_name: str | None = None,
                 line_speed_gbps: float = 10.0, flows: int = 2000,
                 bidirectional: bool = True, latency_mode: str =
                 "storeForward", run_timeout: float = 120.0,
                 clear_config: bool = False):
        if len(ports) != 2:
            raise ValueError("ports: give two, CHASSIS/CARD/PORT each")
        self.ports = [parse_port(p) for p in ports]
        if not 1 <= flows <= 1_000_000:
            raise ValueError("flows must be 1-1000000")
        if latency_mode not in LATENCY_CAPTIONS:
            raise ValueError(f"latency_mode must be one of "
                             f"{', '.join(LATENCY_CAPTIONS)}, not "
                             f"{latency_mode!r}")
        if not isinstance(clear_config, bool):
            raise ValueError("clear_config must be true or false")
        # SessionId and SessionName stay None: restpy then adds a new
        # session instead of attaching to an existing one.
        self.api = dict(IpAddress=api_server, RestPort=api_port,
                        UserName=username, Password=password,
                        ClearConfig=clear_config, LogLevel="info")
        self.session_name = session_name
        self.speed = line_speed_gbps
        self.flows = flows
        self.bidirectional = bidirectional
        self.latency_mode = latency_mode
        self.run_timeout = run_timeout
        self.session = None
        self._item = None
        self._bins: tuple[float, ...] | None = None

    # -- set-up -----------------------------------------------------------

    def _connect(self):
        if self.session is not None:
            return
        from ixnetwork_restpy import SessionAssistant
        self.session = SessionAssistant(**self.api)
        try:
            self._set_up()
        except BaseException:
            # A half-made session would be reused by the next call, and
            # the chassis would keep it (and the ports it took).
            self.close()
            raise

    def _set_up(self):
        if self.session_name:
            # A label for the operator's session list; never looked up.
            self.session.Session.Name = self.session_name
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
        # One config element per direction of a bidirectional item: the
        # seed's 2000 flows, as many source MACs, each way.
        for ce in item.ConfigElement.find():
            src = ce.Stack.find(StackTypeId="^ethernet$").Field.find(
                FieldTypeId=r"^ethernet\.header\.sourceAddress$")
            src.update(ValueType="increment",
                       StartValue="00:00:5e:00:01:00",
                       StepValue="00:00:00:00:00:01",
                       CountValue=str(self.flows))
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
        per_direction = rate_pps / (2 if self.bidirectional else 1)
        # Every direction's config element, not only the first.
        for ce in item.ConfigElement.find():
            ce.FrameSize.update(Type="fixed", FixedSize=frame_size)
            ce.FrameRate.update(Type="framesPerSecond", Rate=per_direction)
            ce.TransmissionControl.update(Type="fixedDuration",
                                          Duration=max(1, round(duration)))
        tracking = item.Tracking.find()[0]
        if bins is not None and bins != self._bins:
            limits = bin_limits(bins)
            tracking.LatencyBin.update(Enabled=True, BinLimits=limits,
                                       NumberOfBins=len(limits))
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
        tx, rx = int(_cell(row, "Tx Frames")), int(_cell(row, "Rx Frames"))
        return Trial(rate_pps, duration, tx, rx)

    def latency(self, frame_size, rate_pps, duration, bins_us
                ) -> LatencyResult:
        edges = latency_mod.check_bins(bins_us)
        self._run(frame_size, rate_pps, duration, bins=edges)
        rows = self.session.StatViewAssistant(FLOW_VIEW).Rows
        mode = LATENCY_CAPTIONS[self.latency_mode]
        counts = [0] * (len(edges) + 1)
        mins, maxs, avgs, weights = [], [], [], []
        tx = rx = 0
        # restpy's Row is one cursor over the rows: iterating moves it.
        for row in rows:
            tx += int(_cell(row, "Tx Frames"))
            rx += int(_cell(row, "Rx Frames"))
            mins.append(_cell(row, f"{mode} Min Latency (ns)") / 1000)
            maxs.append(_cell(row, f"{mode} Max Latency (ns)") / 1000)
            avgs.append(_cell(row, f"{mode} Avg Latency (ns)") / 1000)
            weights.append(int(_cell(row, "Rx Frames")))
            found = sorted((int(m.group(1)), c) for c in row.Columns
                           if (m := _BIN.search(c)) and "frames" in c.lower())
            for i, (_n, caption) in enumerate(found[:len(counts)]):
                counts[i] += int(_cell(row, caption))
        lows, highs = (0.0,) + edges, edges + (None,)
        total_w = sum(weights) or 1
        return latency_mod.from_bins(
            tuple(zip(lows, highs, counts)),
            min(mins) if mins else None,
            sum(a * w for a, w in zip(avgs, weights)) / total_w
            if avgs else None,
            max(maxs) if maxs else None, rate_pps, duration,
            lost=max(tx - rx, 0))
