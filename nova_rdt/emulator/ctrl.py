"""A control group's allocation: schemata, size and mode, pseudo-locking.

Mirrors rdtgroup_schemata_write()/parse_line()/parse_cbm()/parse_bw()/
bw_validate()/cbm_validate() (ctrlmondata.c), rdtgroup_cbm_overlaps(),
rdtgroup_mode_write(), rdtgroup_size_show() (rdtgroup.c) and
rdtgroup_locksetup_enter()/exit() and rdtgroup_pseudo_lock_create()
(pseudo_lock.c), with the messages and errno they produce.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from nova_rdt.emulator import kparse
from nova_rdt.emulator.state import EXCLUSIVE
from nova_rdt.emulator.state import KMALLOC_MAX_SIZE
from nova_rdt.emulator.state import LOCKED
from nova_rdt.emulator.state import LOCKSETUP
from nova_rdt.emulator.state import SHAREABLE
from nova_rdt.emulator.state import U32_MAX
from nova_rdt.emulator.state import Group
from nova_rdt.emulator.state import KernelError
from nova_rdt.emulator.state import PseudoLock
from nova_rdt.emulator.state import Schema

if TYPE_CHECKING:
    from nova_rdt.emulator.kernel import ResctrlKernel

MODES = (SHAREABLE, EXCLUSIVE, LOCKSETUP, LOCKED)


# -- show ------------------------------------------------------------------

def show_schemata(k: ResctrlKernel, g: Group, caller: int) -> str:
    """rdtgroup_schemata_show() and show_doms()."""
    if g.mode == LOCKSETUP:
        return "".join(f"{s.name}:uninitialized\n" for s in k.schemas)
    if g.mode == LOCKED:
        plr = g.plr
        return f"{_res_name(plr.schema)}:{plr.domain}={plr.cbm:x}\n"
    lines = []
    for s in k.schemas:
        if g.closid >= s.num_closid:
            continue
        vals = k.ctrl_val[(s.name, g.closid)]
        doms = [_format_value(k, s, d, vals[d]) for d in k.domains_of(s)]
        lines.append(f"{s.name:>{k.name_width}}:" + ";".join(doms) + "\n")
    return "".join(lines)


def _format_value(k: ResctrlKernel, s: Schema, d: int, v: int) -> str:
    if k.version.unpadded_values:
        return f"{d}={v:x}" if s.cache else f"{d}={v}"
    w = k.data_width
    return f"{d}={v:0{w}x}" if s.cache else f"{d}={v:>{w}}"


def _res_name(schema: str) -> str:
    """plr->s->res->name: the resource, not the CDP schema."""
    return schema[:-4] if schema.endswith(("CODE", "DATA")) else schema


def show_size(k: ResctrlKernel, g: Group, caller: int) -> str:
    """rdtgroup_size_show(): bytes per domain; MB lines as the value."""
    if g.mode == LOCKED:
        plr = g.plr
        size = cbm_to_size(k, k.schema(plr.schema), plr.cbm)
        return (f"{plr.schema:>{k.name_width}}:"
                f"{plr.domain}={size}\n")
    lines = []
    for s in k.schemas:
        vals = k.ctrl_val.get((s.name, g.closid), {})
        doms = []
        for d in k.domains_of(s):
            if g.mode == LOCKSETUP:
                size = 0
            elif s.cache:
                size = cbm_to_size(k, s, vals.get(d, 0))
            else:
                size = vals.get(d, 0)
            doms.append(f"{d}={size}")
        lines.append(f"{s.name:>{k.name_width}}:" + ";".join(doms) + "\n")
    return "".join(lines)


def cbm_to_size(k: ResctrlKernel, s: Schema, cbm: int) -> int:
    """rdtgroup_cbm_to_size(): the domain's cache size (its level's, from
    cacheinfo) / cbm_len * bits set."""
    return s.size // s.cbm_len * bin(cbm).count("1")


def show_mode(k: ResctrlKernel, g: Group, caller: int) -> str:
    return g.mode + "\n"


# -- schemata write --------------------------------------------------------

def write_schemata(k: ResctrlKernel, g: Group, text: str, caller: int):
    """rdtgroup_schemata_write(): every line staged, then all applied."""
    if not text.endswith("\n"):
        raise KernelError(errno.EINVAL)          # before the clear
    text = text[:-1].split("\0", 1)[0]
    k.status.clear()
    if g.mode == LOCKED:
        k.fail(errno.EINVAL, "Resource group is pseudo-locked\n")
    staged: dict[tuple[str, int], int] = {}
    for tok in text.split("\n"):
        resname, sep, rest = tok.partition(":")
        resname = kparse.strim(resname)
        if not sep:
            k.fail(errno.EINVAL, "Missing ':'\n")
        if rest == "":
            k.fail(errno.EINVAL, f"Missing '{resname}' value\n")
        s = k.schema(resname)
        if s is None or g.closid >= s.num_closid:
            k.fail(errno.EINVAL,
                   f"Unknown or unsupported resource name '{resname}'\n")
        _parse_line(k, s, rest, g, staged)
    for (name, d), v in staged.items():
        k.ctrl_val[(name, g.closid)][d] = v
    if g.mode == LOCKSETUP:
        _pseudo_lock_create(k, g)


def _parse_line(k: ResctrlKernel, s: Schema, line: str, g: Group,
                staged: dict) -> None:
    """parse_line(): "id=val;id=val", ids decimal and known."""
    if g.mode == LOCKSETUP and not s.cache:
        k.fail(errno.EINVAL, "Cannot pseudo-lock MBA resource\n")
    while line:
        dom, _, line = line.partition(";")
        ident, sep, val = dom.partition("=")
        dom_id = kparse.kstrtoul(ident, 10)
        if not sep or dom_id is None:
            k.fail(errno.EINVAL, "Missing '=' or non-numeric domain\n")
        val = kparse.strim(val)
        if dom_id not in k.domains_of(s):
            # No domain of this resource has the id (an L3 id on an L2
            # line, say): no message.
            raise KernelError(errno.EINVAL)
        if s.cache:
            _parse_cbm(k, s, val, g, dom_id, staged)
        else:
            _parse_bw(k, s, val, g, dom_id, staged)
        if g.mode == LOCKSETUP:
            # One region per group: the rest of the line is ignored.
            g.plr = PseudoLock(s.name, dom_id, staged[(s.name, dom_id)])
            return


def _parse_bw(k: ResctrlKernel, s: Schema, val: str, g: Group, dom: int,
              staged: dict) -> None:
    """parse_bw() and bw_validate()."""
    if (s.name, dom) in staged:
        k.fail(errno.EINVAL, f"Duplicate domain {dom}\n")
    mbps = k.profile.mba_mbps
    if k.version.mb_u32:
        bw = kparse.kstrtou32(val, 10)
        if bw is None:
            k.fail(errno.EINVAL, f"Invalid MB value {val}\n")
        if not mbps:
            _check_bw_range(k, s, bw)
            bw = -(-bw // s.bw_gran) * s.bw_gran
    else:
        bw = kparse.kstrtoul(val, 10)
        if bw is None:
            k.fail(errno.EINVAL, f"Non-decimal digit in MB value {val}\n")
        if not mbps:
            _check_bw_range(k, s, bw)
        bw = -(-bw // s.bw_gran) * s.bw_gran
    if mbps and k.version.mbps_set_at_parse:
        # The software controller's value is stored at once, not staged:
        # a later error leaves it written, and no duplicate is detected.
        k.ctrl_val[(s.name, g.closid)][dom] = bw & U32_MAX
        return
    staged[(s.name, dom)] = bw & U32_MAX


def _check_bw_range(k: ResctrlKernel, s: Schema, bw: int) -> None:
    if bw < s.min_bw or bw > s.max_bw:
        k.fail(errno.EINVAL,
               f"MB value {bw} out of range [{s.min_bw},{s.max_bw}]\n")


def _parse_cbm(k: ResctrlKernel, s: Schema, val: str, g: Group, dom: int,
               staged: dict) -> None:
    """parse_cbm() and cbm_validate()."""
    if (s.name, dom) in staged:
        k.fail(errno.EINVAL, f"Duplicate domain {dom}\n")
    if g.mode == LOCKSETUP and k.locked_in_hierarchy(s, dom):
        k.fail(errno.EINVAL, "Pseudo-locked region in hierarchy\n")
    v = kparse.kstrtoul(val, 16)
    if v is None:
        k.fail(errno.EINVAL, f"Non-hex character in the mask {val}\n")
    full = (1 << s.cbm_len) - 1
    if (s.min_cbm_bits > 0 and v == 0) or v > full:
        k.fail(errno.EINVAL, "Mask out of range\n")
    first = (v & -v).bit_length() - 1 if v else s.cbm_len
    zero = first
    while zero < s.cbm_len and v >> zero & 1:
        zero += 1
    if not s.sparse and v >> zero:
        k.fail(errno.EINVAL, f"The mask {v:x} has non-consecutive 1-bits\n")
    if zero - first < s.min_cbm_bits:
        k.fail(errno.EINVAL,
               f"Need at least {s.min_cbm_bits} bits in the mask\n")
    if g.mode in (EXCLUSIVE, SHAREABLE) and k.plr_cbm(dom, s.level) & v:
        k.fail(errno.EINVAL, "CBM overlaps with pseudo-locked region\n")
    if cbm_overlaps(k, s, dom, v, g.closid, exclusive=True):
        k.fail(errno.EINVAL, "Overlaps with exclusive group\n")
    if g.mode in (EXCLUSIVE, LOCKSETUP) and cbm_overlaps(
            k, s, dom, v, g.closid, exclusive=False):
        k.fail(errno.EINVAL, "Overlaps with other group\n")
    staged[(s.name, dom)] = v


def cbm_overlaps(k: ResctrlKernel, s: Schema, dom: int, cbm: int,
                 closid: int, exclusive: bool) -> bool:
    """rdtgroup_cbm_overlaps(): this type, then the CDP peer type."""
    for name in (s.name, s.peer):
        if name is not None and _overlaps(k, s, name, dom, cbm, closid,
                                          exclusive):
            return True
    return False


def _overlaps(k, s, name, dom, cbm, closid, exclusive) -> bool:
    """__rdtgroup_cbm_overlaps()."""
    if not exclusive and cbm & s.shareable_bits:
        return True
    for other in sorted(k.closids_used):
        if other == closid:
            continue
        mode = k.group_by_closid(other).mode
        if mode == LOCKSETUP:
            continue
        if cbm & k.ctrl_val[(name, other)][dom]:
            if not exclusive or mode == EXCLUSIVE:
                return True
    return False


# -- mba_MBps_event ----------------------------------------------------------

def show_mbps_event(k: ResctrlKernel, g: Group, caller: int) -> str:
    """rdtgroup_mba_mbps_event_show()."""
    return g.mba_mbps_event + "\n"


def write_mbps_event(k: ResctrlKernel, g: Group, text: str,
                     caller: int) -> None:
    """rdtgroup_mba_mbps_event_write(): only an enabled MBM event."""
    if not text.endswith("\n"):
        raise KernelError(errno.EINVAL)
    ev = text[:-1].split("\0", 1)[0]
    k.status.clear()
    if ev not in ("mbm_local_bytes", "mbm_total_bytes") or \
            ev not in k.profile.monitor.features:
        k.fail(errno.EINVAL, f"Unsupported event id '{ev}'\n")
    g.mba_mbps_event = ev


# -- mode ------------------------------------------------------------------

def write_mode(k: ResctrlKernel, g: Group, text: str, caller: int) -> None:
    """rdtgroup_mode_write()."""
    if not text.endswith("\n"):
        raise KernelError(errno.EINVAL)
    want = text[:-1].split("\0", 1)[0]
    k.status.clear()
    if want == g.mode and want in MODES:
        return
    if g.mode == LOCKED:
        k.fail(errno.EINVAL, "Cannot change pseudo-locked group\n")
    if want == SHAREABLE:
        if g.mode == LOCKSETUP:
            _locksetup_exit(k, g)
        g.mode = SHAREABLE
    elif want == EXCLUSIVE:
        _test_exclusive(k, g)
        if g.mode == LOCKSETUP:
            _locksetup_exit(k, g)
        g.mode = EXCLUSIVE
    elif want == LOCKSETUP:
        _locksetup_enter(k, g)
        g.mode = LOCKSETUP
    else:
        k.fail(errno.EINVAL, "Unknown or unsupported mode\n")


def _test_exclusive(k: ResctrlKernel, g: Group) -> None:
    """rdtgroup_mode_test_exclusive()."""
    caches = [s for s in k.schemas if s.cache]
    for s in caches:
        for d in k.domains_of(s):
            own = k.ctrl_val[(s.name, g.closid)][d]
            if cbm_overlaps(k, s, d, own, g.closid, exclusive=False):
                k.fail(errno.EINVAL, "Schemata overlaps\n")
    if not caches:
        k.fail(errno.EINVAL, "Cannot be exclusive without CAT/CDP\n")


def _locksetup_enter(k: ResctrlKernel, g: Group) -> None:
    """rdtgroup_locksetup_enter(): the refusals, in the kernel's order."""
    if g is k.root:
        k.fail(errno.EINVAL, "Cannot pseudo-lock default group\n")
    if k.profile.cdp:
        k.fail(errno.EINVAL, "CDP enabled\n")
    if not k.profile.pseudo_locking:
        # get_prefetch_disable_bits() knows only Broadwell-X and the
        # Goldmont Atoms.
        k.fail(errno.EINVAL, "Pseudo-locking not supported\n")
    if g.mon:
        k.fail(errno.EINVAL, "Monitoring in progress\n")
    if any(m.ctrl is g for m in k.members().values()):
        k.fail(errno.EINVAL, "Tasks assigned to resource group\n")
    if g.cpus:
        k.fail(errno.EINVAL, "CPUs assigned to resource group\n")
    g.plr = PseudoLock()
    # The RMID is not needed by a pseudo-locked region.
    k.free_rmid(g.rmid)
    g.rmid = 0


def _locksetup_exit(k: ResctrlKernel, g: Group) -> None:
    """rdtgroup_locksetup_exit(): a fresh RMID, restrictions lifted."""
    if k.profile.monitor:
        g.rmid = k.alloc_rmid()
        k.reset_counters(g.rmid)
    g.plr = None


def _pseudo_lock_create(k: ResctrlKernel, g: Group) -> None:
    """rdtgroup_pseudo_lock_create(): on success the group is locked and
    its CLOSID freed; on failure it stays in locksetup with the region
    cleared (pseudo_lock_region_clear())."""
    plr = g.plr
    size = cbm_to_size(k, k.schema(plr.schema), plr.cbm)
    if size > KMALLOC_MAX_SIZE:
        # pseudo_lock_region_alloc()
        g.plr = PseudoLock()
        k.fail(errno.E2BIG, "Requested region exceeds maximum size\n")
    g.mode = LOCKED
    k.closids_used.discard(g.closid)
