"""``nova-rdt rfc2544 run`` configuration: YAML (or CLI flags) into a
RunConfig and a generator spec, with errors that name the key and say
what is allowed.

.. code-block:: yaml

    label: cat-on
    frame_sizes: [64, 512, 1518]
    loss_tolerance: 0.001        # 0 for RFC 2544 proper
    resolution: 0.005
    trial_duration: 10
    initial_trial_duration: 1    # exploratory trials; 0: none
    goals:                       # RFC 9971 search goals, shared trials
      - {loss_ratio: 0, final_trial_duration: 60, duration_sum: 120}
      - {loss_ratio: 0.005, exceed_ratio: 0, final_trial_duration: 60}
    latency_duration: 10
    latency_bins_us: [25, 50, 75, 100, 150, 200, 250, 500, 750, 1000]
    generator:
      type: software             # software | ixnetwork | simulated
      tx_interface: veth0
      rx_interface: veth1
      netns: traffic
      max_rate_pps: 300000

The file is read with a size limit and parsed by a YAML loader that
refuses more than a few aliases and deep nesting: an alias bomb of a few
hundred bytes otherwise expands to gigabytes when it is walked.
"""

from __future__ import annotations

import dataclasses
import inspect
import math

import yaml

from nova_rdt import exception
from nova_rdt.rfc2544 import engine
from nova_rdt.rfc2544 import generators
from nova_rdt.rfc2544 import search

MAX_FILE_BYTES = 256 * 1024
MAX_ALIASES = 32
MAX_DEPTH = 16
MAX_NODES = 20_000
MAX_LIST = 64
MAX_SECONDS = 86_400.0
GENERATOR_TYPES = generators.TYPES

SEARCH_KEYS = {f.name for f in dataclasses.fields(search.SearchConfig)}
RUN_KEYS = {"label", "frame_sizes", "latency_duration", "latency_bins_us",
            "latency_load", "generator", "goals"}
GOAL_KEYS = ("name", "loss_ratio", "exceed_ratio", "final_trial_duration",
             "duration_sum")
_INT_KEYS = {"max_trials", "verify_repeats"}
# (lowest, highest, lowest allowed itself) per numeric key.
_RANGES = {
    "loss_tolerance": (0.0, 1.0, True, False),
    "resolution": (0.0, 1.0, False, False),
    "trial_duration": (0.0, MAX_SECONDS, False, True),
    "probe_duration": (0.0, MAX_SECONDS, False, True),
    "initial_trial_duration": (0.0, MAX_SECONDS, True, True),
    "exceed_ratio": (0.0, 1.0, True, False),
    "loss_ratio": (0.0, 1.0, True, False),
    "final_trial_duration": (0.0, MAX_SECONDS, False, True),
    "duration_sum": (0.0, 100 * MAX_SECONDS, False, True),
    "latency_duration": (0.0, MAX_SECONDS, False, True),
    "latency_load": (0.0, 1.0, False, True),
    "marginal_loss": (0.0, 1.0, True, False),
    "min_rate_pps": (0.0, 1e12, False, True),
    "max_trials": (2, 10_000, True, True),
    "verify_repeats": (0, 100, True, True),
}


class ConfigError(exception.NovaRdtError, ValueError):
    def __init__(self, key: str, reason: str):
        super().__init__(f"{key}: {reason}")
        self.key = key


# -- loading ---------------------------------------------------------------

class _LimitedLoader(yaml.SafeLoader):
    """SafeLoader that counts aliases, nodes and nesting as it composes."""

    def __init__(self, stream):
        super().__init__(stream)
        self._aliases = 0
        self._nodes = 0
        self._depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise ConfigError("(file)", f"more than {MAX_ALIASES} YAML "
                                            f"aliases (*name) are not allowed")
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise ConfigError("(file)", f"more than {MAX_NODES} YAML nodes")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise ConfigError("(file)", f"YAML nested deeper than "
                                            f"{MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def loads(text: str | bytes, source: str = "(config)") -> dict:
    """A YAML document into a mapping, within the limits above."""
    if len(text) > MAX_FILE_BYTES:
        raise ConfigError(source, f"larger than {MAX_FILE_BYTES} bytes")
    try:
        doc = yaml.load(text, Loader=_LimitedLoader)  # noqa: S506 (safe)
    except ConfigError as e:
        raise ConfigError(source, str(e).split(": ", 1)[1]) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" \
            if mark else ""
        what = getattr(e, "problem", None) or "not valid YAML"
        raise ConfigError(source, f"not valid YAML{where}: {what}") from None
    except (ValueError, OverflowError, RecursionError) as e:
        raise ConfigError(source, f"not valid YAML: {e}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ConfigError(source, "the top level must be a mapping of "
                                  "keys (label, frame_sizes, generator, ...)")
    return doc


def load_file(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            text = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(path, "no such file") from None
    except IsADirectoryError:
        raise ConfigError(path, "is a directory, not a YAML file") from None
    except OSError as e:
        raise ConfigError(path, f"cannot be read: {e.strerror}") from None
    try:
        text = text.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(path, "is not UTF-8 text") from None
    return loads(text, path)


# -- validation ------------------------------------------------------------

def _number(key: str, value, integer: bool = False):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = "an integer" if integer else "a number"
        raise ConfigError(key, f"must be {kind}, not {_show(value)}")
    if integer:
        if isinstance(value, float):
            raise ConfigError(key, f"must be a whole number, not {value!r}")
        return value
    if not math.isfinite(value):
        raise ConfigError(key, f"must be a finite number, not {value!r}")
    return float(value)


def _in_range(key: str, value):
    lo, hi, lo_ok, hi_ok = _RANGES[key]
    if value < lo or (value == lo and not lo_ok) or value > hi or \
            (value == hi and not hi_ok):
        raise ConfigError(key, f"{value!r} is outside "
                               f"{'[' if lo_ok else '('}{lo:g}, {hi:g}"
                               f"{']' if hi_ok else ')'}")
    return value


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _list(key: str, value) -> list:
    if not isinstance(value, (list, tuple)):
        raise ConfigError(key, f"must be a list, not {_show(value)}")
    if not value:
        raise ConfigError(key, "must not be empty")
    if len(value) > MAX_LIST:
        raise ConfigError(key, f"at most {MAX_LIST} entries")
    return list(value)


def _frame_sizes(value) -> tuple[int, ...]:
    sizes = []
    for s in _list("frame_sizes", value):
        s = _number("frame_sizes", s, integer=True)
        if not 64 <= s <= 9216:
            raise ConfigError("frame_sizes", f"{s} is not 64-9216 bytes")
        sizes.append(s)
    return tuple(sizes)


def _bins(value) -> tuple[float, ...]:
    edges = tuple(_number("latency_bins_us", b)
                  for b in _list("latency_bins_us", value))
    if any(b <= 0 for b in edges) or \
            any(b >= c for b, c in zip(edges, edges[1:])):
        raise ConfigError("latency_bins_us", "must be positive and "
                                             "increasing (µs)")
    return edges


def _generator(gen) -> dict:
    if not isinstance(gen, dict) or "type" not in gen:
        raise ConfigError("generator", "a mapping with a type ("
                          + ", ".join(GENERATOR_TYPES) + ") is required")
    kind = gen["type"]
    if kind not in GENERATOR_TYPES:
        raise ConfigError("generator.type", f"must be one of "
                          f"{', '.join(GENERATOR_TYPES)}, not {_show(kind)}")
    allowed = _generator_options(kind)
    for key, value in gen.items():
        if not isinstance(key, str):
            raise ConfigError("generator", f"option names must be strings, "
                                           f"not {_show(key)}")
        if key != "type" and key not in allowed:
            raise ConfigError(f"generator.{key}", "unknown option; allowed: "
                              + ", ".join(sorted(allowed)))
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"generator.{key}",
                              f"must be a finite number, not {value!r}")
    return dict(gen)


def _generator_options(kind: str) -> set[str]:
    if kind == "software":
        from nova_rdt.rfc2544.generators.software import SoftwareGenerator
        cls = SoftwareGenerator
    elif kind == "ixnetwork":
        from nova_rdt.rfc2544.generators.ixnetwork import IxNetworkGenerator
        cls = IxNetworkGenerator
    else:
        from nova_rdt.rfc2544.simdut import SimulatedDut
        cls = SimulatedDut
    params = inspect.signature(cls.__init__).parameters
    return {p for p in params if p != "self"}


def goals(value, scfg: search.SearchConfig) -> tuple:
    """The ``goals`` list: each a mapping of GOAL_KEYS.  A goal's final
    trial duration defaults to ``trial_duration``, its duration sum to
    that many seconds times (verify_repeats + 1)."""
    out = []
    for i, g in enumerate(_list("goals", value)):
        where = f"goals[{i}]"
        if not isinstance(g, dict):
            raise ConfigError(where, f"must be a mapping of "
                                     f"{', '.join(GOAL_KEYS)}, not "
                                     f"{_show(g)}")
        for key in g:
            if key not in GOAL_KEYS:
                raise ConfigError(f"{where}.{_show(key)}", "unknown key; "
                                  "allowed: " + ", ".join(GOAL_KEYS))
        kw = {}
        for key in GOAL_KEYS[1:]:
            if key in g:
                try:
                    kw[key] = _in_range(key, _number(key, g[key]))
                except ConfigError as e:
                    raise ConfigError(f"{where}.{key}",
                                      str(e).split(": ", 1)[1]) from None
        kw.setdefault("final_trial_duration", scfg.trial_duration)
        kw.setdefault("duration_sum", kw["final_trial_duration"] * (
            scfg.verify_repeats + 1))
        name = g.get("name", "")
        if not isinstance(name, str) or len(name) > 40:
            raise ConfigError(f"{where}.name", "at most 40 characters "
                                               "of text")
        try:
            out.append(search.SearchGoal(name=name, **kw))
        except ValueError as e:
            raise ConfigError(f"{where}.{str(e).split()[0]}",
                              str(e)) from None
    try:
        search.check_goals(out)
    except ValueError as e:
        raise ConfigError(str(e).split(":")[0], str(e)) from None
    return tuple(out)


def goal_from_text(text: str, where: str = "goal") -> dict:
    """``loss_ratio=0.005,duration_sum=120`` into a goal's mapping, as
    ``--goal`` and Tempest's ``search_goals`` take it (``goals()`` then
    checks it and names the key)."""
    goal: dict = {}
    for part in str(text).split(","):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ConfigError(where, f"{part!r} is not KEY=VALUE, e.g. "
                                     f"loss_ratio=0.005")
        if key == "name":
            goal[key] = value.strip()
            continue
        try:
            goal[key] = float(value)
        except ValueError:
            raise ConfigError(f"{where} {key}", f"{value!r} is not a "
                                                f"number") from None
    return goal


def scenario_overrides(search_goals, initial_trial_duration=None,
                       final_cap: float | None = None) -> dict:
    """The search keys a caller with its own options (Tempest's
    ``[nova_rdt] search_goals`` and ``initial_trial_duration``) lays
    over a run's document.  ``final_cap``: no goal's final trial
    duration (nor duration sum) beyond this many seconds per trial (a
    short run)."""
    out: dict = {}
    if initial_trial_duration is not None:
        out["initial_trial_duration"] = initial_trial_duration
    goals_ = [goal_from_text(g, f"search_goals[{i}]")
              for i, g in enumerate(search_goals or ())]
    if final_cap is not None:
        for g in goals_:
            final = g.get("final_trial_duration")
            if final is not None and final > final_cap:
                ratio = g.get("duration_sum", 2 * final) / final
                g["final_trial_duration"] = final_cap
                g["duration_sum"] = ratio * final_cap
    if goals_:
        out["goals"] = goals_
    return out


def parse(doc: dict) -> tuple[engine.RunConfig, dict]:
    if not isinstance(doc, dict):
        raise ConfigError("(top)", "expected a mapping")
    for key in doc:
        if not isinstance(key, str):
            raise ConfigError("(top)", f"keys must be strings, not "
                                       f"{_show(key)}")
    unknown = set(doc) - SEARCH_KEYS - RUN_KEYS
    if unknown:
        raise ConfigError(sorted(unknown)[0], "unknown key; allowed: "
                          + ", ".join(sorted(SEARCH_KEYS | RUN_KEYS)))
    gen = _generator(doc.get("generator"))
    sizes = _frame_sizes(doc.get("frame_sizes",
                                 list(engine.RunConfig.frame_sizes)))
    kw = {}
    for key in sorted(SEARCH_KEYS & set(doc)):
        value = _number(key, doc[key], integer=key in _INT_KEYS)
        kw[key] = _in_range(key, value)
    try:
        scfg = search.SearchConfig(**kw)
    except ValueError as e:
        raise ConfigError(str(e).split()[0], str(e)) from None
    run_goals = goals(doc["goals"], scfg) if "goals" in doc else ()
    label = doc.get("label", "")
    if not isinstance(label, (str, int, float)) or isinstance(label, bool):
        raise ConfigError("label", f"must be text, not {_show(label)}")
    label = str(label)
    if len(label) > 200 or any(ord(c) < 32 for c in label):
        raise ConfigError("label", "at most 200 printable characters")
    run = engine.RunConfig(
        frame_sizes=sizes, search=scfg,
        latency_duration=_in_range("latency_duration", _number(
            "latency_duration", doc.get("latency_duration", 10.0))),
        latency_bins_us=_bins(doc.get("latency_bins_us",
                                      list(engine.RunConfig.latency_bins_us))),
        latency_load=_in_range("latency_load", _number(
            "latency_load", doc.get("latency_load", 1.0))),
        label=label, goals=run_goals)
    return run, gen
