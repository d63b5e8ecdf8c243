"""The exporter under slow clients: are they closed in time, does
``/metrics`` stay fast?

    .venv/bin/python -m benchmarks.bench_exporter_slowclients \\
        [--clients 200] [--timeout 2] [--rounds 3]

Starts ``nova-rdt exporter`` as its own process (as operators run it)
over a copy of the emulator's Gold 6252 model, with ``--client-timeout``.
Each round first times ``/metrics`` alone (the peer), then opens
``--clients`` connections that send a request line and then one header
byte every quarter timeout, never finishing (each byte would reset a
per-read timeout), and times ``/metrics`` every 50 ms while they hang.
Prints, per round, when each slow client was closed relative to the
timeout, and ``/metrics`` latency with and without them (median, p95,
max, and the ratio of the medians).
"""

from __future__ import annotations

import argparse
import os
import re
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tree(tmp: str) -> tuple[str, str]:
    sys.path.insert(0, REPO)
    from nova_rdt.emulator import topology
    from tests.kernel_fixtures import make_kernel
    from tests.kernel_fixtures import materialize

    k, _, _ = make_kernel("gold-6252")
    for i in range(6):
        k.mkdir(f"qemu-{i + 1}-instance-{i + 1}-vcpus_0")
    return (materialize(k, os.path.join(tmp, "resctrl")),
            topology.write_tree(k.profile, os.path.join(tmp, "cpu")))


def _start(root: str, cpu: str, timeout: float, tmp: str):
    proc = subprocess.Popen(
        [sys.executable, "-m", "nova_rdt.cmd.main", "exporter",
         "--no-config-files", "--port", "0", "--listen", "127.0.0.1",
         "--resctrl-root", root,
         "--sysfs-cpu-root", cpu, "--state-path", os.path.join(tmp, "st"),
         "--notify-interval", "0", "--client-timeout", str(timeout)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        cwd=REPO)
    line = proc.stdout.readline()
    m = re.search(r"on (http://[\d.]+:\d+)/", line)
    if not m:
        proc.kill()
        raise SystemExit(f"exporter did not start: {line}")
    # Drained, so that its log can never block it on a full pipe.
    proc.log = []
    threading.Thread(target=lambda: proc.log.extend(proc.stdout),
                     daemon=True).start()
    return proc, m.group(1)


def _scrape(url: str) -> float:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        r.read()
        assert r.status == 200
    return time.perf_counter() - t0


def _stats(xs: list[float]) -> str:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, int(len(xs) * 0.95))]
    return (f"median {statistics.median(xs) * 1000:7.1f} ms  p95 "
            f"{p95 * 1000:7.1f} ms  max {xs[-1] * 1000:7.1f} ms  "
            f"(n={len(xs)})")


def _slow_clients(addr, n: int, timeout: float) -> list[float]:
    """Open ``n`` trickling clients in one thread; seconds until each was
    closed by the server (inf if it was not within 3 timeouts)."""
    socks, opened, closed = [], {}, {}
    for _ in range(n):
        s = socket.create_connection(addr)
        s.sendall(b"GET /metrics HTTP/1.1\r\n")
        s.setblocking(False)
        opened[s] = time.monotonic()
        socks.append(s)
    end = time.monotonic() + 3 * timeout
    next_byte = time.monotonic()
    while len(closed) < n and time.monotonic() < end:
        live = [s for s in socks if s not in closed]
        if time.monotonic() >= next_byte:
            for s in live:
                try:
                    s.send(b"X")
                except OSError:
                    closed.setdefault(s, time.monotonic())
            next_byte = time.monotonic() + timeout / 4
        ready, _w, _x = select.select(
            [s for s in live if s not in closed], [], [], 0.01)
        for s in ready:
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:
                closed.setdefault(s, time.monotonic())
    out = [closed.get(s, float("inf")) - opened[s] for s in socks]
    for s in socks:
        s.close()
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clients", type=int, default=200)
    p.add_argument("--timeout", type=float, default=2.0)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root, cpu = _tree(tmp)
        proc, url = _start(root, cpu, args.timeout, tmp)
        host, port = url[len("http://"):].rsplit(":", 1)
        try:
            for _ in range(5):
                _scrape(url)                   # warm up
            all_alone, all_busy, all_closed = [], [], []
            for rnd in range(args.rounds):
                alone = [_scrape(url) for _ in range(40)]
                result: list[float] = []
                t = threading.Thread(target=lambda out=result: out.extend(
                    _slow_clients((host, int(port)), args.clients,
                                  args.timeout)))
                t.start()
                busy = []
                time.sleep(0.05)
                while t.is_alive():
                    busy.append(_scrape(url))
                    time.sleep(0.05)
                t.join()
                closed = sorted(result)
                late = [c for c in closed if c > args.timeout + 0.5]
                print(f"round {rnd + 1}: {len(closed)} slow clients closed "
                      f"after median {statistics.median(closed):.2f} s, "
                      f"max {closed[-1]:.2f} s (timeout {args.timeout} s; "
                      f"{len(late)} later than timeout + 0.5 s)")
                print(f"  /metrics alone:             {_stats(alone)}")
                print(f"  /metrics with slow clients: {_stats(busy)}")
                all_alone += alone
                all_busy += busy
                all_closed += closed
            ratio = statistics.median(all_busy) / statistics.median(all_alone)
            print(f"all rounds: slow clients closed within "
                  f"{max(all_closed):.2f} s of a {args.timeout} s timeout; "
                  f"/metrics max {max(all_busy) * 1000:.1f} ms under load; "
                  f"median ratio busy/alone {ratio:.2f}")
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            print(f"exporter log: {len(proc.log)} lines"
                  + "".join(f"\n  {x.rstrip()}" for x in proc.log[:5]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
