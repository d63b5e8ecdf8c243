"""One software trial, run inside the traffic namespace:

    python -m nova_rdt.rfc2544.generators.swworker --tx IF --rx IF \\
        --frame-size N --rate PPS --duration S [--probe-rate PPS] \\
        [--flows N] [--bidirectional] [--sender auto|native|python]

This is the control plane.  The bulk frames come from the compiled
sender, ``nova-rdt-pktgen`` (PACKET_MMAP TX rings, batched, paced; see
``native/pktgen.c`` and :mod:`.pktgen`), or, when that is not built, from
the Python sender here (an AF_PACKET socket that bypasses the qdisc, a
few hundred kpps at most), and the output says which.  Counts come from
the interfaces' kernel counters (``/proc/net/dev`` of this namespace);
with ``--probe-rate``, probe frames are sent beside the bulk and their
latency is the kernel receive timestamp (SO_TIMESTAMPNS) minus the send
stamp they carry.  The receiver's BPF filter passes probes only, so bulk
frames never wake it.  Prints one JSON object.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

from nova_rdt.rfc2544.generators import frames
from nova_rdt.rfc2544.generators import pktgen

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
            except (TimeoutError, BlockingIOError):
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


def _socket(iface: str) -> socket.socket:
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    tx.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)
    tx.bind((iface, 0))
    return tx


def _ends(args) -> list[str]:
    return [args.tx, args.rx] if args.bidirectional else [args.tx]


def _snapshot(args) -> tuple[int, int]:
    """(frames sent, frames received) over every direction in use."""
    tx = rx = 0
    for out, back in ((args.tx, args.rx), (args.rx, args.tx))[
            :2 if args.bidirectional else 1]:
        tx += counters(out)[1]
        rx += counters(back)[0]
    return tx, rx


def _python_sender(args, size, bulk_frames, probe):
    """Paced sends from Python: the fallback.  Returns (elapsed, sent,
    failed, probes)."""
    socks = [_socket(i) for i in _ends(args)]
    sends = [s.send for s in socks]
    sent = failed = probes = 0
    probe_every = (max(1, int(args.rate / args.probe_rate))
                   if args.probe_rate else 0)
    start = time.monotonic()
    end = start + args.duration
    now = time.monotonic
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
            k = sent % len(sends)
            try:
                if probe_every and sent % probe_every == 0 and k == 0:
                    sends[0](probe(probes))
                    probes += 1
                else:
                    sends[k](bulk_frames[k])
            except OSError:
                failed += 1        # the veth queue was full: not sent
            sent += 1
    return now() - start, sent, failed, probes


class _Prober(threading.Thread):
    """Probe frames at ``rate`` beside the native sender's bulk."""

    def __init__(self, iface, rate, probe, stop):
        super().__init__(daemon=True)
        self.sock = _socket(iface)
        self.period = 1 / rate
        self.probe = probe
        self.stop = stop
        self.sent = 0

    def run(self):
        nxt = time.monotonic()
        while not self.stop.is_set():
            try:
                self.sock.send(self.probe(self.sent))
            except OSError:
                pass
            self.sent += 1
            nxt += self.period
            self.stop.wait(max(0.0, nxt - time.monotonic()))


def _native_sender(path, args, size, probe):
    argv = [path, "--tx", ",".join(_ends(args)), "--rate",
            f"{args.rate:.3f}", "--duration", str(args.duration),
            "--size", str(size), "--flows", str(args.flows)]
    if args.bulk_dst_mac:
        argv += ["--dst-mac", args.bulk_dst_mac]
    if args.threads:
        argv += ["--threads", str(args.threads)]
    stop = threading.Event()
    prober = None
    if args.probe_rate:
        prober = _Prober(args.tx, args.probe_rate, probe, stop)
        prober.start()
    try:
        res = subprocess.run(argv, capture_output=True, text=True,
                             timeout=args.duration + 30)
    finally:
        stop.set()
        if prober:
            prober.join(1.0)
    if res.returncode != 0:
        raise SystemExit(f"{pktgen.NAME} failed: "
                         f"{res.stderr.strip()[-500:]}")
    out = json.loads(res.stdout)
    return out, (prober.sent if prober else 0)


def run(args) -> dict:
    size = frames.check_size(args.frame_size)
    dst = frames.mac_bytes(args.dst_mac) if args.dst_mac else mac_of(args.rx)
    src = mac_of(args.tx)
    bulk_frames = [frames.bulk(dst, src, size)]
    if args.bidirectional:
        bulk_frames.append(frames.bulk(frames.mac_bytes(args.dst_mac)
                                       if args.dst_mac else src,
                                       mac_of(args.rx), size))
    header = frames.probe_header(dst, src)
    clock_ns, realtime = time.clock_gettime_ns, time.CLOCK_REALTIME

    def probe(seq):
        return frames.probe(header, size, seq, clock_ns(realtime))

    path, why = (None, "--sender python") if args.sender == "python" \
        else pktgen.find()
    if args.sender == "native" and path is None:
        raise SystemExit(f"the native sender is required: {why}")
    stop = threading.Event()
    receiver = None
    if args.probe_rate:
        receiver = Receiver(args.rx, stop)
        receiver.start()
    # Warm-up: let OVS learn/settle before counting.
    warm = _socket(args.tx)
    for _ in range(64):
        warm.send(bulk_frames[0])
    time.sleep(args.settle)
    tx0, rx0 = _snapshot(args)
    result = {"offered_pps": args.rate, "flows": args.flows,
              "bidirectional": args.bidirectional}
    if path:
        out, probes = _native_sender(path, args, size, probe)
        elapsed, attempted, failed = out["duration"], out["sent"], \
            out["refused"]
        result.update(sender="native", sender_note=path, native=out)
    else:
        elapsed, attempted, failed, probes = _python_sender(
            args, size, bulk_frames, probe)
        result.update(sender="python",
                      sender_note=f"Python sender (slow): {why}")
    time.sleep(args.drain)
    tx1, rx1 = _snapshot(args)
    stop.set()
    if receiver:
        receiver.join(1.0)
    result.update(duration=elapsed, tx=tx1 - tx0, rx=rx1 - rx0,
                  send_failures=failed, attempted=attempted, probes=probes,
                  latencies_us=receiver.latencies_us if receiver else [])
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tx", required=True)
    ap.add_argument("--rx", required=True)
    ap.add_argument("--dst-mac")
    ap.add_argument("--frame-size", type=int, default=64)
    ap.add_argument("--rate", type=float, required=True)
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--probe-rate", type=float, default=0.0)
    ap.add_argument("--flows", type=int, default=2000,
                    help="flows of the compiled sender (MAC, IP, ports)")
    ap.add_argument("--bidirectional", action="store_true",
                    help="both directions at once, half the rate each")
    ap.add_argument("--bulk-dst-mac",
                    help="destination MAC of the compiled sender's frames "
                         "(default: varied per flow, of no interface)")
    ap.add_argument("--sender", choices=["auto", "native", "python"],
                    default="auto")
    ap.add_argument("--cpus",
                    help="CPUs to run on, comma-separated (the compiled "
                         "sender runs a thread per CPU)")
    ap.add_argument("--threads", type=int, default=0,
                    help="sending threads of the compiled sender "
                         "(default: one per CPU)")
    ap.add_argument("--settle", type=float, default=0.2)
    ap.add_argument("--drain", type=float, default=0.2)
    args = ap.parse_args(argv)
    if args.cpus:
        try:
            cpus = {int(c) for c in args.cpus.split(",")}
            os.sched_setaffinity(0, cpus)
        except (ValueError, OSError) as e:
            ap.error(f"--cpus {args.cpus}: {e}")
    json.dump(run(args), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
