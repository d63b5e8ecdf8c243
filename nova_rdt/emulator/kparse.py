"""The kernel's string parsers and bitmap printers resctrl relies on.

Pure functions with the kernel's edge cases: kstrto*() (lib/kstrtox.c),
bitmap_parselist() and bitmap_parse() (lib/bitmap-str.c, before 6.2 in
lib/bitmap.c) behind cpulist_parse()/cpumask_parse(), and the "%*pb" /
"%*pbl" printers.  Parsers return a value or an errno, never raise.
"""

from __future__ import annotations

import errno

_HEX = "0123456789abcdefABCDEF"
_DEC = "0123456789"
_SPACE = " \t\n\v\f\r"


def kstrtoull(s: str, base: int) -> int | None:
    """kstrtoull(): optional '+', "0x" for base 16 (and 0/8 for base 0),
    digits, one optional trailing newline; None on any error (EINVAL or
    ERANGE alike)."""
    if s.endswith("\n"):
        s = s[:-1]
    if s.startswith("+"):
        s = s[1:]
    if base == 0:
        if s[:2].lower() == "0x" and len(s) > 2 and s[2] in _HEX:
            base, s = 16, s[2:]
        elif s.startswith("0") and len(s) > 1:
            base, s = 8, s[1:]
        else:
            base = 10
    elif base == 16 and s[:2].lower() == "0x":
        s = s[2:]
    digits = {16: _HEX, 10: _DEC, 8: "01234567"}[base]
    if not s or any(c not in digits for c in s):
        return None
    v = int(s, base)
    return v if v < 1 << 64 else None


def kstrtoul(s: str, base: int) -> int | None:
    return kstrtoull(s, base)


def kstrtou32(s: str, base: int) -> int | None:
    v = kstrtoull(s, base)
    return v if v is not None and v <= 0xFFFFFFFF else None


def kstrtouint(s: str, base: int) -> int | None:
    return kstrtou32(s, base)


def kstrtoint(s: str, base: int) -> int | None:
    """kstrtoint(): a leading '-' is allowed; the result must fit an int."""
    neg = s.startswith("-")
    if neg and s[1:2] == "+":
        return None                     # _kstrtoull() takes no sign
    v = kstrtoull(s[1:] if neg else s, base)
    if v is None:
        return None
    v = -v if neg else v
    return v if -(1 << 31) <= v < (1 << 31) else None


def strim(s: str) -> str:
    """strim()/strstrip(): leading and trailing whitespace removed."""
    return s.strip(_SPACE)


# -- cpulist_parse() ---------------------------------------------------------

def _end_of_str(c: str) -> bool:
    return c in ("", "\0", "\n")


def _end_of_region(c: str) -> bool:
    return (c != "" and c in _SPACE) or c == "," or _end_of_str(c)


def _getnum(s: str, i: int, lastbit: int) -> tuple[int, int] | int:
    """bitmap_getnum(): (value, next index), or an errno."""
    if s[i:i + 1] == "N":
        return lastbit, i + 1
    j = i
    while j < len(s) and s[j] in _DEC:
        j += 1
    if j == i:
        return errno.EINVAL
    n = int(s[i:j])
    if n >= 1 << 32:
        return errno.EOVERFLOW
    return n, j


def parse_cpulist(text: str, nbits: int) -> set[int] | int:
    """bitmap_parselist(): "0-3,8", "all", "N", "0-N:2/4"; a set or errno.

    Regions are separated by commas or whitespace; a newline or NUL ends
    the list.  EINVAL for syntax, ERANGE past the last CPU, EOVERFLOW for
    a number over 32 bits.
    """
    cpus: set[int] = set()
    lastbit = nbits - 1
    n = len(text)

    def at(k):
        return text[k] if k < n else ""

    i = 0
    while True:
        # bitmap_find_region()
        while not _end_of_str(at(i)) and _end_of_region(at(i)):
            i += 1
        if _end_of_str(at(i)):
            return cpus
        got = _parse_region(text, i, lastbit, at)
        if isinstance(got, int):
            return got
        (start, end, off, group), i = got
        err = _check_and_set(cpus, start, end, off, group, nbits)
        if err:
            return err


def _parse_region(text, i, lastbit, at):
    """bitmap_parse_region(): ((start, end, off, group_len), next) or errno."""
    if text[i:i + 3].lower() == "all":
        start, end, i = 0, lastbit, i + 3
    else:
        got = _getnum(text, i, lastbit)
        if isinstance(got, int):
            return got
        start, i = got
        if _end_of_region(at(i)):
            return (start, start, start + 1, start + 1), i
        if at(i) != "-":
            return errno.EINVAL
        got = _getnum(text, i + 1, lastbit)
        if isinstance(got, int):
            return got
        end, i = got
    # check_pattern
    if _end_of_region(at(i)):
        return (start, end, end + 1, end + 1), i
    if at(i) != ":":
        return errno.EINVAL
    got = _getnum(text, i + 1, lastbit)
    if isinstance(got, int):
        return got
    off, i = got
    if at(i) != "/":
        return errno.EINVAL
    got = _getnum(text, i + 1, lastbit)
    if isinstance(got, int):
        return got
    group, i = got
    if not _end_of_region(at(i)):
        # The next bitmap_find_region() stops on it and bitmap_getnum()
        # refuses it: the same EINVAL, one step later.
        return errno.EINVAL
    return (start, end, off, group), i


def _check_and_set(cpus, start, end, off, group, nbits) -> int:
    """bitmap_check_region() and bitmap_set_region()."""
    if start > end or group == 0 or off > group:
        return errno.EINVAL
    if end >= nbits:
        return errno.ERANGE
    s = start
    while s <= end:
        cpus.update(range(s, s + min(end - s + 1, off)))
        s += group
    return 0


# -- cpumask_parse() ---------------------------------------------------------

def parse_cpumask(text: str, nbits: int) -> set[int] | int:
    """bitmap_parse(): hex, in comma-separated 32-bit chunks, read from the
    end; a newline ends it.  EINVAL for a non-hex digit, EOVERFLOW for a
    chunk over 8 digits or bits past ``nbits``."""
    text = text.split("\n", 1)[0].split("\0", 1)[0]
    if not text:
        return set()
    value = 0
    shift = 0
    end = len(text) - 1
    chunks = (nbits + 31) // 32
    while True:
        # bitmap_get_x32_reverse()
        chunk = 0
        for i in range(0, 32, 4):
            c = text[end] if end >= 0 else ""
            if not c or c not in _HEX:
                return errno.EINVAL
            chunk |= int(c, 16) << i
            end -= 1
            if end < 0 or text[end] in _SPACE + ",":
                break
        else:
            if end >= 0 and text[end] in _HEX:
                return errno.EOVERFLOW
        value |= chunk << shift
        shift += 32
        # bitmap_find_region_reverse()
        while end >= 0 and text[end] in _SPACE + ",":
            end -= 1
        if end < 0:
            break
        chunks -= 1
        if chunks <= 0:
            return errno.EOVERFLOW
    if value >> nbits:
        return errno.EOVERFLOW
    return {i for i in range(nbits) if value >> i & 1}


# -- printers ----------------------------------------------------------------

def format_cpumask(cpus, nbits: int) -> str:
    """"%*pb": hex in 32-bit chunks, most significant first, the first
    chunk only as wide as its bits need."""
    value = sum(1 << c for c in cpus)
    nchunks = max((nbits + 31) // 32, 1)
    first_bits = nbits - 32 * (nchunks - 1)
    out = []
    for i in reversed(range(nchunks)):
        width = (first_bits + 3) // 4 if i == nchunks - 1 else 8
        out.append(f"{(value >> (32 * i)) & 0xFFFFFFFF:0{width}x}")
    return ",".join(out)


def format_cpulist(cpus) -> str:
    """"%*pbl": ranges, ascending."""
    out, run = [], []
    for c in sorted(set(cpus)):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(_range(run))
        run = [c]
    if run:
        out.append(_range(run))
    return ",".join(out)


def _range(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"
