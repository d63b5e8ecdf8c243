"""Frames through the guest: sent on one host-side NIC, counted on the
other, with raw AF_PACKET sockets.

Run inside the network namespace that holds the guest's tap devices
(``ip netns exec NS python -m nova_rdt.lab.guest.frames ...``); prints
one JSON object ``{"sent": N, "received": M}``.  The frames carry a
private EtherType and a run tag so that anything else on the wire (the
guest's own chatter) is not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import struct
import sys
import time

# IEEE 802 "local experimental" EtherType.
ETHERTYPE = 0x88B5
# Locally administered unicast addresses: the guest bridge has not
# learnt the destination, so it floods the frame to its other port.
DST = bytes.fromhex("020000000b02")
SRC = bytes.fromhex("020000000a01")
MAGIC = b"nova-rdt-guest"


def frame(tag: int, seq: int, size: int = 64) -> bytes:
    """An Ethernet frame (without FCS, so ``size - 4`` bytes) carrying
    ``tag`` and ``seq``."""
    payload = MAGIC + struct.pack("!IQ", tag, seq)
    body = DST + SRC + struct.pack("!H", ETHERTYPE) + payload
    return body + b"\0" * max(0, size - 4 - len(body))


def parse(data: bytes, tag: int) -> int | None:
    """The sequence number of one of our frames with ``tag``, else None."""
    if len(data) < 14 + len(MAGIC) + 12:
        return None
    if struct.unpack_from("!H", data, 12)[0] != ETHERTYPE:
        return None
    if data[14:14 + len(MAGIC)] != MAGIC:
        return None
    got_tag, seq = struct.unpack_from("!IQ", data, 14 + len(MAGIC))
    return seq if got_tag == tag else None


# Room for every frame of a run even if we are slow to read (a busy
# 2-core host): each queued frame costs its truesize, ~2.3 KiB for 1 KiB
# frames, and the default buffer (~208 KiB) would drop some of 200.
RCVBUF = 8 << 20
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)


def _open(ifname: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                      socket.htons(ETHERTYPE))
    try:
        # Above rmem_max: needs CAP_NET_ADMIN, which raw sockets imply.
        s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)
    except OSError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
    s.bind((ifname, ETHERTYPE))
    return s


def _warm_up(tx: socket.socket, rx: socket.socket, deadline: float) -> bool:
    """Sends single frames until one crosses: the first frames after the
    host-side link comes up are lost on the way to the guest, and those
    must not count against the path.  False if none crossed in time."""
    tag = int.from_bytes(os.urandom(4), "big")
    seq = 0
    while time.monotonic() < deadline:
        tx.send(frame(tag, seq))
        seq += 1
        poll_end = min(deadline, time.monotonic() + 0.1)
        while (left := poll_end - time.monotonic()) > 0:
            if not select.select([rx], [], [], left)[0]:
                break
            if parse(rx.recv(65536), tag) is not None:
                return True
    return False


def run(send_if: str, recv_if: str, count: int, size: int,
        wait: float, warmup: float = 0.0) -> dict:
    tag = int.from_bytes(os.urandom(4), "big")
    rx = _open(recv_if)
    tx = _open(send_if)
    seen: set[int] = set()
    try:
        if warmup > 0 and not _warm_up(tx, rx, time.monotonic() + warmup):
            return {"sent": 0, "received": 0, "send_if": send_if,
                    "recv_if": recv_if, "warmed_up": False}
        t0 = time.monotonic()
        for seq in range(count):
            tx.send(frame(tag, seq, size))
        t_sent = last_rx = time.monotonic()
        deadline = t_sent + wait
        while len(seen) < count:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([rx], [], [], left)[0]:
                break
            seq = parse(rx.recv(65536), tag)
            if seq is not None:
                seen.add(seq)
                last_rx = time.monotonic()
    finally:
        tx.close()
        rx.close()
    # The receive side's rate over the whole burst: with more offered
    # than the path carries, the forwarding rate at overload.
    span = max(last_rx - t0, 1e-9)
    return {"sent": count, "received": len(seen), "send_if": send_if,
            "recv_if": recv_if, "warmed_up": warmup > 0,
            "offered_pps": round(count / max(t_sent - t0, 1e-9)),
            "received_pps": round(len(seen) / span) if seen else 0}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m nova_rdt.lab.guest.frames")
    p.add_argument("--send", required=True, help="interface to send on")
    p.add_argument("--recv", required=True, help="interface to count on")
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--wait", type=float, default=5.0,
                   help="seconds to wait for the last frame")
    p.add_argument("--warmup", type=float, default=0.0,
                   help="first send single frames for up to this many "
                   "seconds until one crosses (not counted)")
    args = p.parse_args(argv)
    if args.count < 1 or not 64 <= args.size <= 1518:
        p.error("--count must be >= 1 and --size 64..1518")
    try:
        result = run(args.send, args.recv, args.count, args.size, args.wait,
                     args.warmup)
    except OSError as e:
        print(f"nova-rdt guest frames: {args.send}: {e}",
              file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
