"""Stage 3, first half: the scenario's flavors through Nova's API, and
the API's answer to one bad ``rdt:`` spec."""

from __future__ import annotations

import json

from nova.tests.functional.api import client as api_client


def create(cloud, scenario, say) -> dict[str, str]:
    """Flavor name -> id, as ``openstack flavor create`` would make them."""
    ids = {}
    for f in scenario.flavors:
        ids[f.name] = cloud._create_flavor(
            name=f.name, vcpu=f.vcpus, memory_mb=512, disk=1, ephemeral=0,
            extra_spec=f.specs)
        say(f"openstack flavor create {f.name} --vcpus {f.vcpus} "
            + " ".join(f"--property {k}={v}" for k, v in f.specs.items()))
    return ids


def try_bad_spec(cloud, flavor_id: str, key: str, value: str) -> str:
    """What the API says to ``flavor set --property key=value``."""
    try:
        cloud.admin_api.post_extra_spec(flavor_id,
                                        {"extra_specs": {key: value}})
    except api_client.OpenStackApiException as e:
        body = e.response.text if e.response is not None else str(e)
        msg = body
        if body.startswith("{"):
            msg = json.loads(body).get("badRequest", {}).get("message", body)
        status = e.response.status_code if e.response is not None else "?"
        return f"HTTP {status}: {msg}"
    return "accepted (unexpected)"
