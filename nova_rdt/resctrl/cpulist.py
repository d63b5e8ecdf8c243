"""The kernel's cpulist syntax (``0-3,8,10-11``), read with bounds.

One parser for every list nova-rdt reads: the kernel's own files
(``cpus_list``, ``shared_cpu_list``), a flavor's ``rdt:vcpus``, the hook's
domain XML and OVS' ``Cpus_allowed_list``.  Some of these come from
tenants or operators, so the bound is checked before a range is
expanded: ``0-999999999`` is refused in microseconds instead of costing
gigabytes.
"""

from __future__ import annotations

from collections.abc import Iterable

# The kernel's NR_CPUS maximum (CONFIG_NR_CPUS_RANGE_END) is 8192; x86's
# cpulist files never name a CPU at or above it.  A vCPU list from a
# flavor or a domain is bounded much lower by its caller.
DEFAULT_LIMIT = 8192

# Longer than any cpulist of DEFAULT_LIMIT CPUs written as single ids
# ("0,2,4,...,8190" is ~19 KiB): anything longer is refused unread.
MAX_TEXT = 64 * 1024

_DIGITS = frozenset("0123456789")


def _number(token: str, part: str, limit: int) -> int:
    # str.isdigit() accepts "²" and "٤"; int() accepts "４" and "1_0".
    # Only ASCII digits, at most as many as the limit has, are numbers.
    if not token or not _DIGITS.issuperset(token):
        raise ValueError(f"{part[:40]!r} is not a CPU number or range")
    if len(token) > len(str(limit)) or int(token) >= limit:
        raise ValueError(f"CPU {token[:20]} is out of range "
                         f"(0-{limit - 1})")
    return int(token)


def parse(text: str, limit: int = DEFAULT_LIMIT) -> set[int]:
    """CPU ids in ``text``, each below ``limit``.  Empty means none.

    A trailing newline (as the kernel writes its files) is accepted;
    spaces inside or around the entries are not.  Raises ValueError
    saying which part is wrong.
    """
    if not isinstance(text, str):
        raise ValueError(f"a CPU list must be text, not "
                         f"{type(text).__name__}")
    if len(text) > MAX_TEXT:
        raise ValueError(f"CPU list of {len(text)} characters refused "
                         f"(limit {MAX_TEXT})")
    body = text[:-1] if text.endswith("\n") else text
    cpus: set[int] = set()
    if not body:
        return cpus
    for part in body.split(","):
        lo, sep, hi = part.partition("-")
        a = _number(lo, part, limit)
        b = _number(hi, part, limit) if sep else a
        if b < a:
            raise ValueError(f"range {part!r} runs backwards")
        cpus.update(range(a, b + 1))
    return cpus


def format(cpus: Iterable[int]) -> str:
    """The shortest cpulist of ``cpus``: ``{0, 1, 2, 5}`` -> ``0-2,5``."""
    runs: list[list[int]] = []
    for c in sorted(set(cpus)):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
