"""Traffic generators for the RFC 2544 engine, by name (see ``load``)."""

from __future__ import annotations

import inspect

TYPES = ("software", "ixnetwork", "simulated")


def _make(cls, options: dict):
    params = inspect.signature(cls.__init__).parameters
    for name, p in params.items():
        if name != "self" and p.default is p.empty and name not in options:
            raise ValueError(f"generator.{name} is required")
    for name in options:
        if name not in params:
            raise ValueError(f"generator.{name}: unknown option")
    return cls(**options)


def load(spec: dict):
    """A generator from its config mapping (``type`` picks it)."""
    kind = spec.get("type")
    options = {k: v for k, v in spec.items() if k != "type"}
    if kind == "software":
        from nova_rdt.rfc2544.generators.software import SoftwareGenerator
        return _make(SoftwareGenerator, options)
    if kind == "ixnetwork":
        from nova_rdt.rfc2544.generators.ixnetwork import IxNetworkGenerator
        return _make(IxNetworkGenerator, options)
    if kind == "simulated":
        from nova_rdt.rfc2544.simdut import SimulatedDut
        return _make(SimulatedDut, options)
    raise ValueError(f"generator.type must be software, ixnetwork or "
                     f"simulated, not {kind!r}")
