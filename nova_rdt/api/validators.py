"""Nova API validators for the ``rdt:`` extra specs (per key).

Registered through the ``nova.api.extra_spec_validators`` entry point, so
``openstack flavor set --property rdt:l3_cache_ways=lots`` gets an HTTP 400
naming the key (microversion 2.86 and later, as for Nova's own specs).
The rules that span keys, or need the flavor's vCPU count, are checked by
:mod:`nova_rdt.api.flavor_check`, which sees the whole flavor.
"""

from __future__ import annotations

from nova import exception
from nova.api.validation.extra_specs import base

from nova_rdt.allocation import spec

_NODE = [{"name": "node", "pattern": r"\d+",
          "description": "guest NUMA node the value applies to"}]

_DESCRIPTIONS = {
    "l3_cache_ways": "Unified L3 cache for the instance, in ways.",
    "l3_cache_size": "Unified L3 cache for the instance, with its unit: "
                     "B, KiB or MiB, such as 6656KiB or 2.75MiB (a whole "
                     "number of the host's ways).  A bare number is "
                     "refused.",
    "l3_code_ways": "CDP: L3 for code, in ways (with rdt:l3_data_*).",
    "l3_code_size": "CDP: L3 for code, with its unit (B, KiB or MiB).",
    "l3_data_ways": "CDP: L3 for data, in ways (with rdt:l3_code_*).",
    "l3_data_size": "CDP: L3 for data, with its unit (B, KiB or MiB).",
    "mb_percent": "Memory bandwidth cap, percent of the link (1-100).",
    "mb_mbps": "Memory bandwidth cap in MBps (hosts mounted with "
               "mba_MBps).",
    "vcpus": "vCPUs the allocation covers: 'all' or a list such as 2-3.",
    "monitor": "CMT/MBM monitoring of the instance (true/false).",
    "pmd_share": "Let the OVS-DPDK PMD class of service overlap the "
                 "instance's ways (true/false).",
    "class": "Join a shared best-effort class group instead of getting "
             "ways of its own (e.g. low_priority).",
    "slo": "Protect the instance under nova-rdt controller: best-effort "
           "classes are throttled when it suffers (latency).",
}


class RdtValidator(base.ExtraSpecValidator):
    """Checks one rdt: key with the same parser the driver uses, as the
    API reads it: sizes need their unit."""

    def validate(self, name, value):
        super().validate(name, value)
        try:
            spec.check_value(name, value, units_required=True)
        except spec.SpecError as e:
            raise exception.ValidationError(
                f"Validation failed; {e.key}: {e.reason}.") from None


def _validators():
    out = []
    for key in spec.NODE_KEYS + spec.PLAIN_KEYS:
        desc = _DESCRIPTIONS[key]
        value = {"type": str, "description": desc}
        out.append(RdtValidator(name=spec.PREFIX + key, description=desc,
                                value=value))
        if key in spec.NODE_KEYS:
            out.append(RdtValidator(
                name=f"{spec.PREFIX}{key}.{{node}}",
                description=desc + " For guest NUMA node {node} only.",
                value=value, parameters=_NODE))
    return out


EXTRA_SPEC_VALIDATORS = _validators()


def register():
    return EXTRA_SPEC_VALIDATORS
