"""Test frames for the software generator: pure.

Bulk frames and probe frames carry different local-experimental
EtherTypes (IEEE 802 reserves 0x88B5 and 0x88B6 for that), so the
receiver's BPF filter can wake it for probes only.  A probe carries its
sequence number and send time (CLOCK_REALTIME ns, the clock of kernel
receive timestamps).
"""

from __future__ import annotations

import struct

BULK_ETHERTYPE = 0x88B5
PROBE_ETHERTYPE = 0x88B6
MIN_FRAME, MAX_FRAME = 64, 1518
FCS = 4
_PROBE = struct.Struct("!QQ")      # sequence, send time ns


def mac_bytes(mac: str) -> bytes:
    parts = mac.split(":")
    if len(parts) != 6:
        raise ValueError(f"bad MAC address {mac!r}")
    return bytes(int(p, 16) for p in parts)


def check_size(frame_size: int) -> int:
    if not MIN_FRAME <= frame_size <= MAX_FRAME:
        raise ValueError(f"frame size {frame_size} is outside "
                         f"{MIN_FRAME}-{MAX_FRAME} bytes")
    return frame_size


def bulk(dst: bytes, src: bytes, frame_size: int) -> bytes:
    """A frame of ``frame_size`` bytes on the wire (FCS added by the NIC)."""
    body = frame_size - FCS - 14
    return dst + src + struct.pack("!H", BULK_ETHERTYPE) + bytes(body)


def probe_header(dst: bytes, src: bytes) -> bytes:
    return dst + src + struct.pack("!H", PROBE_ETHERTYPE)


def probe(header: bytes, frame_size: int, seq: int, sent_ns: int) -> bytes:
    stamp = _PROBE.pack(seq, sent_ns)
    return header + stamp + bytes(frame_size - FCS - 14 - len(stamp))


def parse_probe(frame: bytes) -> tuple[int, int] | None:
    if len(frame) < 14 + _PROBE.size or \
            struct.unpack_from("!H", frame, 12)[0] != PROBE_ETHERTYPE:
        return None
    return _PROBE.unpack_from(frame, 14)


def probe_filter() -> bytes:
    """Classic BPF: accept EtherType PROBE_ETHERTYPE, drop the rest."""
    insns = [(0x28, 0, 0, 12),                      # ldh [12]
             (0x15, 0, 1, PROBE_ETHERTYPE),         # jeq #probe, accept
             (0x06, 0, 0, 0x40000),                 # ret #262144
             (0x06, 0, 0, 0)]                       # ret #0
    return b"".join(struct.pack("HBBI", *i) for i in insns)
