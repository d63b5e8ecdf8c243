"""One software trial, run inside the traffic namespace:

    python -m nova_rdt.rfc2544.generators.swworker --tx IF --rx IF \\
        --frame-size N --rate PPS --duration S [--probe-rate PPS]

Sends paced frames on ``--tx`` with an AF_PACKET socket that bypasses the
qdisc, counts with the interfaces' kernel counters (``/proc/net/dev`` of
this namespace) and, with ``--probe-rate``, mixes in probe frames whose
latency is the kernel receive timestamp (SO_TIMESTAMPNS) minus the send
stamp they carry.  The receiver's BPF filter passes probes only, so bulk
frames never wake it.  Prints one JSON object.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import socket
import struct
import sys
import threading
import time

from nova_rdt.rfc2544.generators import frames

SOL_PACKET = 263
PACKET_QDISC_BYPASS = 20
SO_ATTACH_FILTER = 26
SO_TIMESTAMPNS = 35
ETH_P_ALL = 0x0003
BATCH = 32


def counters(iface: str) -> tuple[int, int]:
    """(rx_packets, tx_packets) of ``iface`` in this namespace."""
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == iface:
                v = rest.split()
                return int(v[1]), int(v[9])
    raise SystemExit(f"no interface {iface} in this namespace")


def mac_of(iface: str) -> bytes:
    with open(f"/sys/class/net/{iface}/address") as f:
        return frames.mac_bytes(f.read().strip())


class Receiver(threading.Thread):
    def __init__(self, iface: str, stop: threading.Event):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                                  socket.htons(ETH_P_ALL))
        prog = frames.probe_filter()
        buf = ctypes.create_string_buffer(prog)
        fprog = struct.pack("HL", len(prog) // 8, ctypes.addressof(buf))
        self._prog = buf                         # keep it alive
        self.sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock.bind((iface, 0))
        self.sock.settimeout(0.2)
        self.stop = stop
        self.latencies_us: list[float] = []
        self.seen: set[int] = set()

    def run(self):
        while not self.stop.is_set():
            try:
                data, anc, _f, addr = self.sock.recvmsg(2048,
                                                        socket.CMSG_LEN(16))
            except (socket.timeout, BlockingIOError):
                continue
            if addr[2] == socket.PACKET_OUTGOING:
                continue
            p = frames.parse_probe(data)
            if p is None:
                continue
            seq, sent = p
            for level, kind, cdata in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = struct.unpack("qq", cdata[:16])
                    if seq not in self.seen:
                        self.seen.add(seq)
                        self.latencies_us.append(
                            (sec * 1_000_000_000 + nsec - sent) / 1000)


def run(args) -> dict:
    size = frames.check_size(args.frame_size)
    dst = frames.mac_bytes(args.dst_mac) if args.dst_mac else mac_of(args.rx)
    src = mac_of(args.tx)
    bulk = frames.bulk(dst, src, size)
    header = frames.probe_header(dst, src)
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    tx.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)
    tx.bind((args.tx, 0))
    stop = threading.Event()
    receiver = None
    if args.probe_rate:
        receiver = Receiver(args.rx, stop)
        receiver.start()
    # Warm-up: let OVS learn/settle before counting.
    for _ in range(64):
        tx.send(bulk)
    time.sleep(args.settle)
    rx0, _ = counters(args.rx)
    _, tx0 = counters(args.tx)
    sent = failed = probes = 0
    probe_every = (max(1, int(args.rate / args.probe_rate))
                   if args.probe_rate else 0)
    start = time.monotonic()
    end = start + args.duration
    send, now, clock_ns = tx.send, time.monotonic, time.clock_gettime_ns
    realtime = time.CLOCK_REALTIME
    while True:
        t = now()
        if t >= end:
            break
        due = int((t - start) * args.rate) + 1
        n = min(due - sent, BATCH)
        if n <= 0:
            # Ahead of schedule: yield briefly rather than spin.
            time.sleep(min(0.0002, end - t))
            continue
        for _ in range(n):
            try:
                if probe_every and sent % probe_every == 0:
                    send(frames.probe(header, size, probes,
                                      clock_ns(realtime)))
                    probes += 1
                else:
                    send(bulk)
            except OSError:
                failed += 1        # the veth queue was full: not sent
            sent += 1
    elapsed = now() - start
    time.sleep(args.drain)
    rx1, _ = counters(args.rx)
    _, tx1 = counters(args.tx)
    stop.set()
    if receiver:
        receiver.join(1.0)
    return {"offered_pps": args.rate, "duration": elapsed,
            "tx": tx1 - tx0, "rx": rx1 - rx0, "send_failures": failed,
            "attempted": sent, "probes": probes,
            "latencies_us": receiver.latencies_us if receiver else []}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tx", required=True)
    ap.add_argument("--rx", required=True)
    ap.add_argument("--dst-mac")
    ap.add_argument("--frame-size", type=int, default=64)
    ap.add_argument("--rate", type=float, required=True)
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--probe-rate", type=float, default=0.0)
    ap.add_argument("--settle", type=float, default=0.2)
    ap.add_argument("--drain", type=float, default=0.2)
    args = ap.parse_args(argv)
    json.dump(run(args), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
