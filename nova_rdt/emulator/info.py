"""info/: what the hardware offers, and bit_usage.

Each show function mirrors the rdt_*_show() of the same name in
rdtgroup.c; only max_threshold_occupancy is writable.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from nova_rdt.emulator import kparse
from nova_rdt.emulator.state import EXCLUSIVE
from nova_rdt.emulator.state import MON_SCALE
from nova_rdt.emulator.state import SHAREABLE
from nova_rdt.emulator.state import KernelError

if TYPE_CHECKING:
    from nova_rdt.emulator.kernel import ResctrlKernel


def show(k: ResctrlKernel, res: str, name: str) -> str:
    if res == "L3_MON":
        mon = k.profile.monitor
        return {
            "num_rmids": lambda: f"{mon.num_rmids}\n",
            "mon_features": lambda: "".join(f + "\n" for f in mon.features),
            "max_threshold_occupancy":
                lambda: f"{k.max_threshold_occupancy}\n",
        }[name]()
    s = k.schema(res)
    table = {
        "num_closids": lambda: f"{s.num_closid}\n",
        "cbm_mask": lambda: f"{(1 << s.cbm_len) - 1:x}\n",
        "min_cbm_bits": lambda: f"{s.min_cbm_bits}\n",
        "shareable_bits": lambda: f"{s.shareable_bits:x}\n",
        "sparse_masks": lambda: f"{int(s.sparse)}\n",
        "bit_usage": lambda: bit_usage(k, res),
        "bandwidth_gran": lambda: f"{s.bw_gran}\n",
        "min_bandwidth": lambda: f"{s.min_bw}\n",
        "delay_linear": lambda: f"{int(s.delay_linear)}\n",
        "thread_throttle_mode": lambda: f"{s.throttle_mode}\n",
    }
    return table[name]()


def write_threshold(k: ResctrlKernel, text: str) -> None:
    """max_threshold_occ_write(): kstrtouint(buf, 0), no last_cmd_status;
    the value is rounded down to the counter scale."""
    v = kparse.kstrtouint(text, 0)
    if v is None or v > k.profile.l3.size:
        raise KernelError(errno.EINVAL)
    k.max_threshold_occupancy = v // MON_SCALE * MON_SCALE


def bit_usage(k: ResctrlKernel, res: str) -> str:
    """rdt_bit_usage_show(): one letter per way, most significant first.

    Only this schema's own configuration counts (s->conf_type): under CDP
    L3CODE and L3DATA each show their own usage.  A group in
    pseudo-locksetup is skipped; a pseudo-locked region shows as P.
    """
    s = k.schema(res)
    out = []
    for d in k.domains_of(s):
        sw_shareable = exclusive = 0
        for closid in sorted(k.closids_used):
            g = k.group_by_closid(closid)
            v = k.ctrl_val[(s.name, closid)][d]
            if g.mode == SHAREABLE:
                sw_shareable |= v
            elif g.mode == EXCLUSIVE:
                exclusive |= v
        locked = k.plr_cbm(d, s.level)
        hw = s.shareable_bits
        chars = []
        for i in reversed(range(s.cbm_len)):
            bit = 1 << i
            if hw & bit and sw_shareable & bit:
                chars.append("X")
            elif hw & bit:
                chars.append("H")
            elif sw_shareable & bit:
                chars.append("S")
            elif exclusive & bit:
                chars.append("E")
            elif locked & bit:
                chars.append("P")
            else:
                chars.append("0")
        out.append(f"{d}={''.join(chars)}")
    return ";".join(out) + "\n"

