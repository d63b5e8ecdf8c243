"""What the isolation procedure needs from a cloud.

Two implementations exist: ``tempest_plugin``'s ``TempestCloud`` (a real
cloud through Tempest's clients) and the Host lab's (its in-process
Nova, vhost-user ports on its OVS-DPDK).  Every method blocks until the
action is done, so the procedure holds no polling logic of its own.
"""

from __future__ import annotations

import typing

#: The roles :meth:`IsolationCloud.boot` is asked for.
FORWARDING = "forwarding"
NOISY = "noisy"
ROLES = (FORWARDING, NOISY)

#: Allowed values of each :meth:`IsolationCloud.facts` key.
FACTS = {
    "accel": ("kvm", "tcg", "unknown"),
    "forwarder": ("testpmd", "kernel", "unknown"),
    "rdt": ("emulated", "real", "unknown"),
}

#: Keys every dict of :meth:`IsolationCloud.measure` carries.
FRAME_KEYS = ("frame_size", "throughput_pps", "converged",
              "generator_limited", "avg_latency_us", "p99_us", "bins")


@typing.runtime_checkable
class IsolationCloud(typing.Protocol):
    """A cloud the isolation procedure can drive.

    Errors: raise any exception with a message that names the server or
    flavor; the procedure cleans up and lets it through.
    """

    def facts(self) -> dict:
        """``{"accel": kvm|tcg|unknown, "forwarder": testpmd|kernel|
        unknown, "rdt": emulated|real|unknown}``, more keys allowed.

        Asked after the first forwarding VM is ACTIVE (the forwarder and
        the accelerator may only be known once a guest runs) and again
        at the end; the last answer goes into the summary.
        """

    def create_flavor(self, name: str, vcpus: int, ram_mb: int,
                      specs: dict[str, str]) -> str:
        """Create a flavor with these extra specs; returns its id."""

    def boot(self, name: str, flavor_id: str, role: str) -> str:
        """Start booting a server for ``role`` (``"forwarding"`` or
        ``"noisy"``); returns its id.  The cloud picks image, NICs and
        user data (a cloud-init image gets
        :func:`nova_rdt.isolation.userdata.for_role`).  The noisy
        neighbour starts its load as soon as it runs."""

    def wait_active(self, server_id: str) -> None:
        """Return once the server is ACTIVE and its workload runs
        (forwarder up, noisy load started); raise on ERROR/timeout."""

    def host_of(self, server_id: str) -> str:
        """The compute host the server runs on."""

    def pause(self, server_id: str) -> None:
        """Pause the server; return once it is PAUSED."""

    def unpause(self, server_id: str) -> None:
        """Unpause the server; return once it is ACTIVE again."""

    def delete(self, server_id: str) -> None:
        """Delete the server; return once it is gone."""

    def delete_flavor(self, flavor_id: str) -> None:
        """Delete the flavor."""

    def measure(self, forwarding_id: str, frame_sizes: list[int],
                short: bool) -> list[dict]:
        """RFC 2544 through the forwarding VM: throughput at the
        configured loss tolerance, then latency at the rate found, one
        dict per frame size with at least :data:`FRAME_KEYS`:
        ``frame_size, throughput_pps, converged, generator_limited,
        avg_latency_us, p99_us`` (None when not measured) and ``bins:
        [{from_us, to_us, count}]`` (``to_us`` None for the last bin).

        Optional keys: ``sent`` and ``received``, the frames the
        generator sent and got back over all throughput trials; with
        them the procedure checks the VM's port counters account for
        the frames.  ``short``: the cloud's quick mode (CI).
        """

    def port_counters(self, server_id: str) -> dict | None:
        """Cumulative ``{"rx": int, "tx": int}`` frames over the VM's
        dataplane ports, seen from the guest: ``rx`` entered the guest,
        ``tx`` left it (OVS counts a vhost-user port the other way
        round: its ``tx_packets`` went into the guest).  None if the
        cloud cannot tell."""

    def load(self, server_id: str) -> dict | None:
        """Cumulative load figures of the server, e.g. ``{"cpu_time_ns":
        int}`` (the guest's CPU time over all vCPUs); None if unknown.
        ``cpu_time_ns`` is judged; ``rdt_group``, ``mbm_total_bytes``,
        ``mbm_local_bytes`` and ``llc_occupancy_bytes`` (the server's
        resctrl group counters, None without a group) feed the
        non-binding ``neighbour_counters`` verdict; other keys are
        recorded."""


def check_facts(facts: dict) -> dict:
    """``facts`` with the known keys checked; a missing key is
    ``"unknown"``.  Raises ValueError naming the key and value."""
    out = dict(facts or {})
    for key, allowed in FACTS.items():
        value = out.setdefault(key, "unknown")
        if value not in allowed:
            raise ValueError(f"cloud facts: {key}={value!r} is not one of "
                             f"{', '.join(allowed)}")
    return out
