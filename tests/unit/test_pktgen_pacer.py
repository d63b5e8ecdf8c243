"""The compiled sender's pacer (native/pacer.h), built as a shared
library and driven with simulated schedules: when the sender runs, and
how many frames the kernel takes each time.

The rules under test: a trial owes round(rate x duration) frames and
never sends more; a sender that gets the CPU often enough sends exactly
that; one kept off the CPU makes up at most its window and gives up the
rest, and every frame is accounted for as sent, given up or still owed.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import pytest

HEADER = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "nova_rdt", "rfc2544", "generators",
    "native", "pacer.h")


class Pacer(ctypes.Structure):
    _fields_ = [("rate", ctypes.c_double), ("duration", ctypes.c_double),
                ("window_s", ctypes.c_double), ("total", ctypes.c_uint64),
                ("window", ctypes.c_uint64), ("batch", ctypes.c_uint64),
                ("lag", ctypes.c_uint64), ("sent", ctypes.c_uint64),
                ("skipped", ctypes.c_uint64), ("late", ctypes.c_uint64)]


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    if not shutil.which("gcc"):
        pytest.skip("needs gcc to build native/pacer.h")
    so = str(tmp_path_factory.mktemp("pacer") / "libpacer.so")
    # PACER_API empty: the header's functions become exported ones.
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-shared",
                    "-fPIC", "-DPACER_API=", "-x", "c", HEADER, "-o", so],
                   check=True)
    lib = ctypes.CDLL(so)
    P = ctypes.POINTER(Pacer)
    d, u64 = ctypes.c_double, ctypes.c_uint64
    for name, args, res in (
            ("pacer_init", [P, d, d, d, u64], None),
            ("pacer_due", [P, d], u64), ("pacer_owed", [P, d], u64),
            ("pacer_plan", [P, d, u64], u64),
            ("pacer_sent", [P, d, u64], None),
            ("pacer_unsend", [P, u64], None),
            ("pacer_next", [P], d), ("pacer_done", [P, d], ctypes.c_int),
            ("pacer_unsent", [P], u64)):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
    return lib


def _new(lib, rate, duration, window_s, batch):
    p = Pacer()
    lib.pacer_init(ctypes.byref(p), rate, duration, window_s, batch)
    return p


def _simulate(lib, p, wakeups, take):
    """The senders' loop (as in pktgen.c's run()): at each wake-up time
    (seconds since the start) it sends what the pacer plans, as much as
    ``take(t)`` lets it, until the pacer is done; between wake-ups it
    is off the CPU.  Checks the invariants at every step."""
    ref = ctypes.byref(p)
    for t in wakeups:
        if lib.pacer_done(ref, t):
            break
        while True:
            due = lib.pacer_due(ref, t)
            n = lib.pacer_plan(ref, t, 256)
            # Owed beyond the window is given up, never sent.
            assert lib.pacer_owed(ref, t) <= p.window
            assert p.sent + p.skipped <= due <= p.total
            if not n:
                # On time: the next batch is due later than now.
                assert lib.pacer_next(ref) > t or \
                    p.sent + p.skipped == p.total
                break
            # As pktgen.c's threads do: count the plan as sent (so no
            # other thread sends it too), then give back what the
            # kernel's ring had no room for.
            lib.pacer_sent(ref, t, n)
            k = min(n, take(t))
            if k < n:
                lib.pacer_unsend(ref, n - k)
                assert p.late <= p.sent
                break
    return p


rates = st.floats(min_value=1.0, max_value=20e6)


@settings(max_examples=200, deadline=None)
@given(rate=rates, duration=st.floats(min_value=0.01, max_value=5.0))
def test_due_counts_the_trial_and_no_more(lib, rate, duration):
    p = _new(lib, rate, duration, 0.05, 8)
    ref = ctypes.byref(p)
    assert p.total == int(rate * duration + 0.5)
    assert lib.pacer_due(ref, -1.0) == 0
    assert lib.pacer_due(ref, 0.0) == min(1, p.total)
    assert lib.pacer_due(ref, duration) == p.total
    assert lib.pacer_due(ref, duration * 10) == p.total
    ts = sorted([duration * x / 7 for x in range(8)])
    dues = [lib.pacer_due(ref, t) for t in ts]
    assert dues == sorted(dues)


@settings(max_examples=150, deadline=None)
@given(rate=st.floats(min_value=100.0, max_value=2e6),
       batch=st.integers(min_value=1, max_value=128),
       window_s=st.floats(min_value=0.002, max_value=0.2))
def test_a_sender_on_time_sends_exactly_what_is_owed(lib, rate, batch,
                                                     window_s):
    """Woken whenever the pacer says the next batch is due, with room in
    the ring: every frame sent, none given up, none late."""
    p = _new(lib, rate, 0.2, window_s, batch)
    ref = ctypes.byref(p)
    t = 0.0
    while not lib.pacer_done(ref, t):
        n = lib.pacer_plan(ref, t, 256)
        if n:
            lib.pacer_sent(ref, t, n)
        else:
            t = max(t, lib.pacer_next(ref))
    assert p.sent == p.total and p.skipped == 0 and p.late == 0
    assert lib.pacer_unsent(ref) == 0


@settings(max_examples=150, deadline=None)
@given(rate=st.floats(min_value=100.0, max_value=2e6),
       duration=st.floats(min_value=0.05, max_value=1.0),
       window_s=st.floats(min_value=0.005, max_value=0.1),
       gaps=st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1,
                     max_size=60))
def test_kept_off_the_cpu_within_the_window_nothing_is_lost(
        lib, rate, duration, window_s, gaps):
    """Wake-ups at most 90% of a window apart (the rest of the window
    covers the rounding of due counts), with a fast kernel: every frame
    of the trial is sent, some of them late."""
    p = _new(lib, rate, duration, window_s, 16)
    step = 0.9 * window_s
    times, t = [], 0.0
    for g in gaps * (int(duration / (step * 0.5 + 1e-9)) // len(gaps) + 2):
        t += g * step
        times.append(t)
        if t > duration + window_s:
            break
    times.append(duration)
    times.sort()
    # Wake-ups at most `step` apart, however the gaps fell.
    filled, last = [], 0.0
    for t in times:
        while t - last > step:
            last += step
            filled.append(last)
        filled.append(t)
        last = t
    _simulate(lib, p, filled, lambda t: 10 ** 9)
    assert p.skipped == 0
    assert p.sent == p.total


@settings(max_examples=200, deadline=None)
@given(rate=rates, duration=st.floats(min_value=0.01, max_value=2.0),
       window_s=st.floats(min_value=0.0, max_value=0.2),
       batch=st.integers(min_value=1, max_value=256),
       wakeups=st.lists(st.floats(min_value=0.0, max_value=2.5),
                        max_size=80),
       capacity=st.integers(min_value=0, max_value=5000))
def test_every_frame_is_accounted_for(lib, rate, duration, window_s, batch,
                                      wakeups, capacity):
    """Any schedule, any kernel speed: sent + given up + still owed is
    the trial's count, and what was sent was never early."""
    p = _new(lib, rate, duration, window_s, batch)
    _simulate(lib, p, sorted(wakeups) + [duration + window_s],
              lambda t: capacity)
    assert p.sent + p.skipped + lib.pacer_unsent(ctypes.byref(p)) == \
        p.total
    assert p.late <= p.sent


def test_a_long_stall_gives_up_all_but_the_window(lib):
    """100 kpps, 50 ms window, off the CPU from 0 to 0.5 s: at 0.5 s
    50,001 frames are due, 5,000 are sent at once (late), the rest are
    given up, and the trial then finishes on time."""
    p = _new(lib, 100_000, 1.0, 0.05, 2)
    ref = ctypes.byref(p)
    assert lib.pacer_plan(ref, 0.5, 10 ** 6) == 5000
    assert p.skipped == 50_001 - 5000
    lib.pacer_sent(ref, 0.5, 5000)
    # All but the last millisecond's worth (the lag) were late.
    assert p.late == 5000 - 100
    t = 0.5
    while not lib.pacer_done(ref, t):
        n = lib.pacer_plan(ref, t, 256)
        if n:
            lib.pacer_sent(ref, t, n)
        else:
            t = lib.pacer_next(ref)
    assert p.sent == 100_000 - p.skipped
    assert lib.pacer_unsent(ref) == 0


def test_a_sender_too_slow_stops_a_window_after_the_end(lib):
    """Asked for more than it can send, it stops at duration + window
    and says what it still owed."""
    p = _new(lib, 1_000_000, 1.0, 0.05, 128)
    ref = ctypes.byref(p)
    t = 0.0
    while not lib.pacer_done(ref, t):
        n = lib.pacer_plan(ref, t, 256)
        lib.pacer_sent(ref, t, min(n, 100))     # 100 frames per 1 ms
        t += 0.001
    assert t == pytest.approx(1.05, abs=0.0011)
    assert p.sent == pytest.approx(105_000, abs=200)
    assert lib.pacer_unsent(ref) > 0
    assert p.sent + p.skipped + lib.pacer_unsent(ref) == p.total
