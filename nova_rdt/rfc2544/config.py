"""``nova-rdt rfc2544 run`` configuration: YAML (or CLI flags) into a
RunConfig and a generator spec, with errors that name the key.

.. code-block:: yaml

    label: cat-on
    frame_sizes: [64, 512, 1518]
    loss_tolerance: 0.001        # 0 for RFC 2544 proper
    resolution: 0.005
    trial_duration: 10
    latency_duration: 10
    latency_bins_us: [25, 50, 75, 100, 150, 200, 250, 500, 750, 1000]
    generator:
      type: software             # software | ixnetwork | simulated
      tx_interface: veth0
      rx_interface: veth1
      netns: traffic
      max_rate_pps: 300000
"""

from __future__ import annotations

import dataclasses

from nova_rdt.rfc2544 import engine
from nova_rdt.rfc2544 import search

SEARCH_KEYS = {f.name for f in dataclasses.fields(search.SearchConfig)}
RUN_KEYS = {"label", "frame_sizes", "latency_duration", "latency_bins_us",
            "latency_load", "generator"}


class ConfigError(ValueError):
    def __init__(self, key: str, reason: str):
        super().__init__(f"{key}: {reason}")
        self.key = key


def parse(doc: dict) -> tuple[engine.RunConfig, dict]:
    if not isinstance(doc, dict):
        raise ConfigError("(top)", "expected a mapping")
    unknown = set(doc) - SEARCH_KEYS - RUN_KEYS
    if unknown:
        raise ConfigError(sorted(unknown)[0], "unknown key")
    gen = doc.get("generator")
    if not isinstance(gen, dict) or "type" not in gen:
        raise ConfigError("generator", "a mapping with a type is required")
    try:
        sizes = tuple(int(s) for s in doc.get(
            "frame_sizes", engine.RunConfig.frame_sizes))
    except (TypeError, ValueError):
        raise ConfigError("frame_sizes", "a list of integers") from None
    for s in sizes:
        if not 64 <= s <= 9216:
            raise ConfigError("frame_sizes", f"{s} is not 64-9216 bytes")
    kw = {}
    for key in SEARCH_KEYS & set(doc):
        want = type(getattr(search.SearchConfig, key))
        try:
            kw[key] = want(doc[key])
        except (TypeError, ValueError):
            raise ConfigError(key, f"must be a {want.__name__}") from None
    try:
        scfg = search.SearchConfig(**kw)
    except ValueError as e:
        raise ConfigError(str(e).split()[0], str(e)) from None
    try:
        run = engine.RunConfig(
            frame_sizes=sizes, search=scfg,
            latency_duration=float(doc.get("latency_duration", 10.0)),
            latency_bins_us=tuple(doc.get("latency_bins_us",
                                          engine.RunConfig.latency_bins_us)),
            latency_load=float(doc.get("latency_load", 1.0)),
            label=str(doc.get("label", "")))
    except (TypeError, ValueError) as e:
        msg = str(e)
        key = next((k for k in ("latency_bins_us", "latency_load",
                                "latency_duration") if k.split("_")[1]
                    in msg), "latency")
        raise ConfigError(key, msg) from None
    return run, dict(gen)
