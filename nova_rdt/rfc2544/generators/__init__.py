"""Traffic generators for the RFC 2544 engine, by name (see ``load``)."""

from __future__ import annotations


def load(spec: dict):
    """A generator from its config mapping (``type`` picks it)."""
    kind = spec.get("type")
    options = {k: v for k, v in spec.items() if k != "type"}
    if kind == "software":
        from nova_rdt.rfc2544.generators.software import SoftwareGenerator
        return SoftwareGenerator(**options)
    if kind == "ixnetwork":
        from nova_rdt.rfc2544.generators.ixnetwork import IxNetworkGenerator
        return IxNetworkGenerator(**options)
    if kind == "simulated":
        from nova_rdt.rfc2544.simdut import SimulatedDut
        return SimulatedDut(**options)
    raise ValueError(f"generator.type must be software, ixnetwork or "
                     f"simulated, not {kind!r}")
