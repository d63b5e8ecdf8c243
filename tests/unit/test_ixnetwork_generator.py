"""The IxNetwork backend through ixnetwork-restpy's own classes.

No IxNetwork API server exists here.  restpy runs unchanged (its
SessionAssistant, PortMapAssistant, StatViewAssistant and generated
classes); only its HTTP transport is replaced, with requests-mock, by a
small in-memory IxNetwork REST tree (``FakeIxNetwork``): selects, creates,
attribute patches, operations, CSV snapshots of the statistics views.  So
the names and types the generator sends are the ones restpy maps and
sends, and every one of them is then checked against restpy's generated
classes: the attribute maps and the types their docstrings document.
"""

from __future__ import annotations

import csv
import importlib
import inspect
import io
import json
import re
import urllib.parse

import pytest

restpy_base = pytest.importorskip(
    "ixnetwork_restpy.base",
    reason="ixnetwork-restpy is not installed: pip install "
           "nova-rdt[ixnetwork] (or -r test-requirements.txt)")
requests_mock = pytest.importorskip("requests_mock")

from nova_rdt.rfc2544 import engine  # noqa: E402
from nova_rdt.rfc2544 import search  # noqa: E402
from nova_rdt.rfc2544.generators import ixnetwork  # noqa: E402
from nova_rdt.rfc2544.model import SEED_BINS_US  # noqa: E402

HOST, PORT = "ixnet.lab", 11009
# Children that are lists of resources (an id each); every other child
# is a required singleton that the server creates when first selected.
LIST_KINDS = {"sessions", "vport", "trafficItem", "endpointSet",
              "configElement", "stack", "field", "tracking", "view",
              "chassis"}
BIN_COUNTS = [0, 100, 500, 300, 60, 20, 10, 6, 3, 1, 0]
CAPTIONS = {"storeForward": "Store-Forward", "cutThrough": "Cut-Through"}


class FakeIxNetwork:
    """An IxNetwork REST API server (Linux API server flavour), in
    memory, over a DUT that forwards ``capacity_pps``.  It already holds
    one session, someone else's."""

    def __init__(self, capacity_pps=2e6, caption="Store-Forward"):
        self.nodes: dict[str, dict] = {}
        self.ids: dict[str, int] = {}
        self.requests: list[tuple[str, str, object]] = []
        self.files: dict[str, bytes] = {}
        self.capacity = capacity_pps
        self.caption = caption
        self.root = None
        other = self._create("/api/v1/sessions", {
            "applicationType": "ixnrest", "sessionName": "someone-else"})
        self.nodes[other].update(state="ACTIVE", subState="IN USE")
        self._open(other)

    # -- HTTP -------------------------------------------------------------

    def answer(self, request, context):
        url = urllib.parse.urlsplit(request.url)
        path, query = url.path.rstrip("/"), urllib.parse.parse_qs(url.query)
        body = request.body
        if isinstance(body, bytes):
            body = body.decode()
        payload = json.loads(body) if body else None
        self.requests.append((request.method, path, payload))
        context.headers["server"] = "Jetty"
        if path.endswith("/files") and "filename" in query:
            name = query["filename"][0]
            if request.method == "DELETE":
                context.status_code = 204
                self.files.pop(name)
                return b""
            context.headers["Content-Type"] = "application/octet-stream"
            return self.files[name]
        status, doc = self._route(request.method, path, payload)
        context.status_code = status
        context.headers["Content-Type"] = "application/json"
        return json.dumps(doc).encode()

    def _route(self, method, path, payload):
        if path == "/api/v1/auth/session":
            if payload and payload.get("username"):
                return 200, {"apiKey": "k", "username": payload["username"]}
            return 401, {"errors": [{"detail": "credentials"}]}
        if path.endswith("/files"):
            return 200, {"absolute": "/root/ixnetwork"}
        if path.startswith("/ixnetworkweb/api/v1/sessions/"):
            self.nodes["/api/v1/sessions/" + path.rsplit("/", 1)[1]][
                "sessionName"] = payload["sessionName"]
            return 200, {}
        if path.endswith("/operations/select"):
            return 200, [self._select(s) for s in payload["selects"]]
        if "/operations/" in path:
            href, op = path.split("/operations/")
            return 200, self._operation(href, op, payload)
        if path.endswith("/ixnetwork/globals"):
            return 200, {"buildNumber": "9.30.2212.7", "username": "nfv"}
        if method == "OPTIONS":
            return 200, {}
        if method == "GET":
            if path == "/api/v1/sessions":
                return 200, [dict(n) for h, n in self.nodes.items()
                             if re.fullmatch(r"/api/v1/sessions/\d+", h)]
            return 200, dict(self.node(path))
        if method == "POST":
            return 201, {"links": [{"href": self._create(path, payload)}]}
        if method == "PATCH":
            for item in payload if isinstance(payload, list) else [payload]:
                item = dict(item)
                href = f"{path}/{item.pop('id')}" if "id" in item else path
                self.node(href).update(item)
            return 200, {}
        return 405, {"errors": [{"detail": f"{method} {path}"}]}

    # -- the tree -------------------------------------------------------

    def node(self, href):
        if href not in self.nodes:
            parent, name = href.rsplit("/", 1)
            if name in LIST_KINDS or name.isdigit():
                raise KeyError(href)
            self.node(parent)
            self.nodes[href] = {"href": href, "xpath": self._xpath(href)}
            if name == "traffic":
                self.nodes[href]["state"] = "unapplied"
        return self.nodes[href]

    def _xpath(self, href):
        rel = href.split("/ixnetwork", 1)[1] if "/ixnetwork" in href else ""
        return re.sub(r"/(\d+)", r"[\1]", rel) or "/"

    def _create(self, collection, payload):
        n = self.ids[collection] = self.ids.get(collection, 0) + 1
        href = f"{collection}/{n}"
        node = {"href": href, "id": n, "xpath": self._xpath(href),
                **(payload or {})}
        self.nodes[href] = node
        kind = collection.rsplit("/", 1)[1]
        if kind == "sessions":
            node.setdefault("state", "INITIAL")
            node.setdefault("subState", "")
        elif kind == "chassis":
            node["state"] = "ready"
        elif kind == "trafficItem":
            self._create(f"{href}/tracking", {"trackBy": []})
        elif kind == "endpointSet":
            # IxNetwork makes one config element per direction.
            item = self.nodes[collection.rsplit("/", 1)[0]]
            for _ in range(2 if item.get("biDirectional") else 1):
                ce = self._create(f"{item['href']}/configElement", {})
                stack = self._create(f"{ce}/stack",
                                     {"stackTypeId": "ethernet"})
                for field in ("destinationAddress", "sourceAddress",
                              "etherType"):
                    self._create(f"{stack}/field", {
                        "fieldTypeId": f"ethernet.header.{field}"})
        return href

    def _children(self, href, pattern):
        exact = re.fullmatch(r"\w+", pattern) is not None
        names = {h[len(href) + 1:].split("/")[0] for h in self.nodes
                 if h.startswith(href + "/")}
        if exact and pattern not in names and pattern not in LIST_KINDS:
            self.node(f"{href}/{pattern}")      # a required singleton
            names.add(pattern)
        out = {}
        for name in sorted(names):
            if (name != pattern) if exact else not re.search(pattern, name):
                continue
            if name in LIST_KINDS:
                out[name] = [n for h, n in self.nodes.items() if
                             re.fullmatch(rf"{re.escape(href)}/{name}/\d+", h)]
            else:
                out[name] = [self.node(f"{href}/{name}")]
        return out

    def _select(self, spec):
        node = dict(self.node(spec["from"]))
        for child in spec["children"]:
            for name, found in self._children(spec["from"],
                                              child["child"]).items():
                node[name] = [dict(n) for n in found if all(
                    re.search(f["regex"], str(n.get(f["property"], "")))
                    for f in child["filters"])]
        return node

    # -- operations -----------------------------------------------------

    def _operation(self, href, op, payload):
        if re.fullmatch(r"/api/v1/sessions/\d+", href):
            if op == "start":
                self.nodes[href].update(state="ACTIVE", subState="IN USE")
                self._open(href)
            elif op == "stop":
                for h in [h for h in self.nodes if h.startswith(href)]:
                    del self.nodes[h]
            return {}
        if op == "startstatelesstrafficblocking":
            # Blocking: the fixed-duration run is over when it returns.
            self.node(href)["state"] = "stopped"
        if op == "takecsvsnapshot":
            snap = self.node(f"{self.root}/statistics/csvSnapshot")
            views = snap["views"]
            view = self.nodes[views[0] if isinstance(views, list) else views]
            out = io.StringIO()
            csv.writer(out, lineterminator="\n").writerows(
                self._table(view["caption"]))
            self.files[snap["csvName"] + ".csv"] = out.getvalue().encode()
        return {"state": "SUCCESS", "result": "kVoid"}

    def _open(self, session):
        """A running session: its statistics views exist."""
        self.root = f"{session}/ixnetwork"
        for caption in ("Port Statistics", ixnetwork.ITEM_VIEW,
                        ixnetwork.FLOW_VIEW):
            v = self._create(f"{self.root}/statistics/view",
                             {"caption": caption})
            self.node(f"{v}/data")["isReady"] = True
            self.node(f"{v}/page")["columnCaptions"] = \
                self._table(caption)[0]

    def _table(self, caption):
        if caption == "Port Statistics":
            return [["Port Name", "Link State"]] + [
                [n, "Link Up"] for n in self.configured(r"/vport/\d+",
                                                        "name")]
        rates = self.configured(r"/configElement/\d+/frameRate", "rate")
        durations = self.configured(
            r"/configElement/\d+/transmissionControl", "duration")
        if not rates:
            return [["Tx Frames", "Rx Frames"]]
        lanes, duration = len(rates), durations[0]
        tx = int(sum(rates) * duration)
        rx = min(tx, int(self.capacity * duration))
        if caption == ixnetwork.ITEM_VIEW:
            return [["Traffic Item", "Tx Frames", "Rx Frames"],
                    [ixnetwork.TRAFFIC_ITEM, tx, rx]]
        c = self.caption
        head = ["Tx Port", "Tx Frames", "Rx Frames", f"{c} Min Latency (ns)",
                f"{c} Avg Latency (ns)", f"{c} Max Latency (ns)"] + [
            f"Latency Bin {i} Frames" for i in range(1, len(BIN_COUNTS) + 1)]
        return [head] + [[f"nova-rdt-{lane}", tx // lanes, rx // lanes, 2000,
                          9000 + 1000 * lane, 180000] + BIN_COUNTS
                         for lane in range(lanes)]

    # -- what the tests read --------------------------------------------

    def configured(self, path_end, key):
        """``key`` of every node whose href ends with ``path_end``."""
        return [n.get(key) for h, n in sorted(self.nodes.items())
                if re.search(path_end + "$", h)]

    def ops(self):
        return [path.split("/operations/")[1] for _m, path, _p in
                self.requests if "/operations/" in path
                and not path.endswith("/select")]


@pytest.fixture
def ix():
    with requests_mock.Mocker() as m:
        def make(**kw):
            fake = FakeIxNetwork(**kw)
            m.register_uri(requests_mock.ANY, re.compile(
                rf"https?://{re.escape(HOST)}:{PORT}/"), content=fake.answer)
            return fake
        yield make


def _gen(**kw):
    return ixnetwork.IxNetworkGenerator(
        HOST, ["10.0.0.5/1/1", "10.0.0.5/1/2"], api_port=PORT,
        username="nfv", password="pw", **kw)


def test_a_session_of_its_own_and_no_clear_config(ix):
    fake = ix()
    # Even named as the existing session, ours is a new one: the name is
    # a label, never a session to attach to.
    g = _gen(session_name="someone-else")
    g.trial(64, 1e6, 10)
    # A new session was added; the existing one was neither attached to
    # nor started, nor its configuration cleared.
    assert ("POST", "/api/v1/sessions", {"applicationType": "ixnrest"}) \
        in fake.requests
    assert fake.root == "/api/v1/sessions/2/ixnetwork"
    assert not any(p.startswith("/api/v1/sessions/1/") for _m, p, _b
                   in fake.requests)
    assert "newconfig" not in fake.ops()
    assert fake.nodes["/api/v1/sessions/2"]["sessionName"] == "someone-else"
    g.close()
    assert "/api/v1/sessions/2" not in fake.nodes
    assert "/api/v1/sessions/1" in fake.nodes
    assert g.session is None


def test_a_failed_set_up_removes_its_session(ix, monkeypatch):
    fake = ix()
    g = _gen()

    def no_ports(self):
        raise RuntimeError("port 10.0.0.5/1/2 is owned by another user")

    monkeypatch.setattr(ixnetwork.IxNetworkGenerator, "_set_up", no_ports)
    with pytest.raises(RuntimeError, match="owned"):
        g.trial(64, 1e6, 10)
    # Not reused half-made by the next call, and not left on the chassis.
    assert g.session is None
    assert "/api/v1/sessions/2" not in fake.nodes
    assert "/api/v1/sessions/1" in fake.nodes


def test_clear_config_only_when_asked(ix):
    fake = ix()
    _gen(clear_config=True).trial(64, 1e6, 10)
    assert fake.ops().count("newconfig") == 1
    assert any(p == "/api/v1/sessions/2/ixnetwork/operations/newconfig"
               for _m, p, _b in fake.requests)


def test_connect_maps_ports_and_builds_the_traffic_item(ix):
    fake = ix()
    _gen().trial(64, 1e6, 10)
    root = fake.root
    assert fake.configured(r"/vport/\d+", "name") == ["nova-rdt-0",
                                                      "nova-rdt-1"]
    imported = next(json.loads(b["Arg2"]) for _m, p, b in fake.requests
                    if p.endswith("resourceManager/operations/importconfig"))
    assert [v["location"] for v in imported] == ["10.0.0.5;1;1",
                                                 "10.0.0.5;1;2"]
    assert "connectports" in fake.ops()
    assert fake.configured(r"/availableHardware/chassis/\d+",
                           "hostname") == ["10.0.0.5"]
    item = fake.nodes[f"{root}/traffic/trafficItem/1"]
    assert (item["name"], item["biDirectional"], item["trafficType"]) == (
        "nova-rdt-rfc2544", True, "raw")
    ep = fake.nodes[f"{root}/traffic/trafficItem/1/endpointSet/1"]
    assert ep["sources"] == [f"{root}/vport/1/protocols"]
    assert ep["destinations"] == [f"{root}/vport/2/protocols"]
    # Both directions' elements: 2000 source MACs each, the count a string.
    src = [n for h, n in sorted(fake.nodes.items())
           if n.get("fieldTypeId") == "ethernet.header.sourceAddress"]
    assert len(src) == 2
    for n in src:
        assert (n["valueType"], n["countValue"], n["startValue"],
                n["stepValue"]) == ("increment", "2000", "00:00:5e:00:01:00",
                                    "00:00:00:00:00:01")
    assert fake.configured(r"/tracking/\d+", "trackBy") == [
        ["trackingenabled0"]]
    lat = fake.nodes[f"{root}/traffic/statistics/latency"]
    assert (lat["enabled"], lat["mode"]) == (True, "storeForward")


@pytest.mark.parametrize("bidirectional, lanes", [(True, 2), (False, 1)])
def test_a_trial_sets_every_config_element_then_runs_and_counts(
        ix, bidirectional, lanes):
    fake = ix(capacity_pps=8e5)
    t = _gen(bidirectional=bidirectional).trial(512, 1e6, 10)
    ce = r"/configElement/\d+"
    assert fake.configured(f"{ce}/frameSize", "type") == ["fixed"] * lanes
    assert fake.configured(f"{ce}/frameSize", "fixedSize") == [512] * lanes
    assert fake.configured(f"{ce}/frameRate", "type") == \
        ["framesPerSecond"] * lanes
    assert fake.configured(f"{ce}/frameRate", "rate") == [1e6 / lanes] * lanes
    assert fake.configured(f"{ce}/transmissionControl", "duration") == \
        [10] * lanes
    run = [o for o in fake.ops() if o in (
        "generate", "apply", "startstatelesstrafficblocking")]
    assert run == ["generate", "apply", "startstatelesstrafficblocking"]
    assert (t.tx, t.rx) == (10_000_000, 8_000_000)
    assert t.loss_ratio == pytest.approx(0.2)


@pytest.mark.parametrize("mode", sorted(CAPTIONS))
def test_latency_reads_the_configured_mode_and_closes_the_last_bin(ix, mode):
    fake = ix(caption=CAPTIONS[mode])
    r = _gen(latency_mode=mode).latency(64, 1e6, 10, SEED_BINS_US)
    assert fake.configured(r"/traffic/statistics/latency", "mode") == [mode]
    lb = fake.nodes[f"{fake.root}/traffic/trafficItem/1/tracking/1/"
                    "latencyBin"]
    limits = [*map(float, SEED_BINS_US), float(ixnetwork.LAST_BIN_LIMIT_US)]
    assert (lb["enabled"], lb["binLimits"], lb["numberOfBins"]) == (
        True, limits, 11)
    assert [n for _lo, _hi, n in r.bins] == [2 * c for c in BIN_COUNTS]
    assert (r.min_us, r.max_us) == (2.0, 180.0)
    assert r.avg_us == pytest.approx(9.5)
    # Percentiles from bins are the upper edge of their bin.
    assert r.percentiles_us["50"] == 75.0
    assert r.samples == 2000


def test_a_view_without_the_mode_columns_is_named_in_the_error(ix):
    ix(caption="Store-Forward")
    with pytest.raises(RuntimeError, match=r"'Cut-Through Min Latency"):
        _gen(latency_mode="cutThrough").latency(64, 1e6, 10, SEED_BINS_US)


@pytest.mark.parametrize("mode", ["mef", "forwardingDelay", "Store-Forward"])
def test_modes_with_unknown_captions_are_refused(mode):
    with pytest.raises(ValueError, match="latency_mode"):
        _gen(latency_mode=mode)


def test_the_engine_finds_the_dut_through_restpy(ix):
    ix(capacity_pps=3e6)
    g = _gen()
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
        ixnetwork.IxNetworkGenerator("s", ports)


# -- every name and type, against restpy's generated classes -------------

def restpy_class(href):
    """The generated class whose resources live at ``href``."""
    segs = [s for s in href.split("/ixnetwork", 1)[1].split("/")
            if s and not s.isdigit()]
    names = ["ixnetwork", *segs]
    package = "ixnetwork_restpy.testplatform.sessions." + ".".join(
        n.lower() for n in names)
    module = importlib.import_module(f"{package}.{names[-1].lower()}")
    for obj in vars(module).values():
        if inspect.isclass(obj) and issubclass(obj, restpy_base.Base) \
                and obj._SDM_NAME == names[-1]:
            return obj
    raise AssertionError(f"no restpy class for {href}")


def documented_type(cls, rest_name):
    """The type restpy documents for an attribute, e.g. 'list(number)'."""
    py = {v: k for k, v in cls._SDM_ATT_MAP.items()}.get(rest_name)
    assert py is not None, f"{cls.__name__} has no attribute {rest_name}"
    doc = getattr(cls, py).__doc__
    m = re.search(r"Returns\s*-+\s*-\s*(.+?):(?:\s|$)", doc)
    assert m, f"{cls.__name__}.{py}: no documented type"
    return m.group(1).strip()


def _ref_ok(value, allowed):
    value = re.sub(r"^/api/v1/sessions/\d+/", "/api/v1/sessions/1/", value)
    return value == "None" or any(value.startswith(a.strip())
                                  for a in allowed.split("|"))


def check_type(kind, value):
    number = (isinstance(value, (int, float))
              and not isinstance(value, bool))
    if kind == "str":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "number":
        return number
    if m := re.fullmatch(r"str\((.*)\)", kind):
        return value in [v.strip() for v in m.group(1).split("|")]
    if m := re.fullmatch(r"(?:str|obj)\[(.*)\]", kind):
        return isinstance(value, str) and _ref_ok(value, m.group(1))
    if m := re.fullmatch(r"list\((.*)\)", kind):
        return isinstance(value, list) and all(
            check_type(m.group(1), v) for v in value)
    raise AssertionError(f"a type form this test does not know: {kind}")


def test_every_attribute_type_and_operation_is_restpys(ix, monkeypatch):
    dropped = []
    map_locals = restpy_base.Base._map_locals

    def spy(self, sdm_att_map, locals_dict):
        given = locals_dict.get("kwargs", locals_dict)
        dropped.extend(f"{type(self).__name__}.{k}" for k, v in given.items()
                       if k != "self" and v is not None
                       and k not in sdm_att_map)
        return map_locals(self, sdm_att_map, locals_dict)

    monkeypatch.setattr(restpy_base.Base, "_map_locals", spy)
    fake = ix()
    g = _gen()
    g.latency(64, 1e6, 10, SEED_BINS_US)
    g.trial(1518, 1e5, 2)
    g.close()
    # restpy drops, without a word, a keyword its class does not map.
    assert dropped == []
    checked = set()
    for method, path, payload in fake.requests:
        if "/ixnetwork" not in path or path.endswith(("/select", "/files")) \
                or path.startswith("/ixnetworkweb/"):
            continue
        if "/operations/" in path:
            href, op = path.split("/operations/")
            cls = restpy_class(href)
            assert any(n.lower() == op for n in dir(cls)
                       if callable(getattr(cls, n))), f"{cls.__name__}.{op}"
            checked.add(f"{cls.__name__}.{op}()")
            continue
        if method not in ("POST", "PATCH") or payload is None:
            continue
        cls = restpy_class(path)
        for item in payload if isinstance(payload, list) else [payload]:
            for key, value in item.items():
                if key == "id" and method == "PATCH":
                    continue
                kind = documented_type(cls, key)
                assert check_type(kind, value), \
                    f"{cls.__name__}.{key} = {value!r}, documented {kind}"
                checked.add(f"{cls.__name__}.{key}")
    # What the generator itself sets and calls was among what was checked.
    for name in ("TrafficItem.name", "TrafficItem.biDirectional",
                 "TrafficItem.trafficType", "EndpointSet.sources",
                 "EndpointSet.destinations", "Field.valueType",
                 "Field.countValue", "Field.startValue", "Field.stepValue",
                 "Tracking.trackBy", "Latency.enabled", "Latency.mode",
                 "FrameSize.type", "FrameSize.fixedSize", "FrameRate.type",
                 "FrameRate.rate", "TransmissionControl.type",
                 "TransmissionControl.duration", "LatencyBin.binLimits",
                 "LatencyBin.numberOfBins", "LatencyBin.enabled",
                 "TrafficItem.generate()", "Traffic.apply()",
                 "Traffic.startstatelesstrafficblocking()"):
        assert name in checked, name


def test_the_type_check_catches_an_int_count(ix, monkeypatch):
    # CountValue is documented as a string: an int is what the check is
    # for (the backend once sent one).
    assert documented_type(restpy_class(
        "/api/v1/sessions/1/ixnetwork/traffic/trafficItem/1/configElement/1/"
        "stack/1/field/1"), "countValue") == "str"
    assert not check_type("str", 2000)
    assert not check_type("list(number)", [25.0, "x"])
    assert check_type("list(number)", [25.0, 2147483647])
