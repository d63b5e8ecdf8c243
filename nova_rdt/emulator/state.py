"""The model's data: schemas, groups, the last_cmd_status buffer, errors."""

from __future__ import annotations

import dataclasses
import os

from nova_rdt import exception

U32_MAX = 0xFFFFFFFF
PAGE_SIZE = 4096                # kernfs atomic_write_len for resctrl files
STATUS_SIZE = 512               # last_cmd_status_buf[512]
MON_SCALE = 64                  # x86_cache_occ_scale on Intel server parts
# KMALLOC_MAX_SIZE on x86-64 (4 KiB pages, SLUB): the largest region
# pseudo_lock_region_alloc() accepts.
KMALLOC_MAX_SIZE = 4 * 1024 * 1024

SHAREABLE = "shareable"
EXCLUSIVE = "exclusive"
LOCKSETUP = "pseudo-locksetup"
LOCKED = "pseudo-locked"


class KernelError(exception.NovaRdtError):
    def __init__(self, err: int):
        self.errno = err
        super().__init__(os.strerror(err))


@dataclasses.dataclass
class Schema:
    name: str                   # "L3", "L3CODE", "L3DATA", "L2", ..., "MB"
    cache: bool
    num_closid: int
    level: int = 3              # the cache level whose ids are its domains
    size: int = 0               # bytes per cache domain
    cbm_len: int = 0
    min_cbm_bits: int = 0
    shareable_bits: int = 0
    sparse: bool = False
    peer: str | None = None     # the CDP partner: L3CODE <-> L3DATA
    max_bw: int = 0
    min_bw: int = 0
    bw_gran: int = 1
    delay_linear: bool = True
    throttle_mode: str | None = None
    data_width: int = 3


@dataclasses.dataclass
class PseudoLock:
    """struct pseudo_lock_region: what a locksetup group asked for."""
    schema: str | None = None
    domain: int | None = None
    cbm: int = 0


@dataclasses.dataclass(eq=False)
class Group:
    name: str
    closid: int
    rmid: int
    parent: Group | None = None           # set for monitor groups
    mode: str = SHAREABLE
    cpus: set[int] = dataclasses.field(default_factory=set)
    mon: dict[str, Group] = dataclasses.field(default_factory=dict)
    mba_mbps_event: str = "mbm_local_bytes"
    plr: PseudoLock | None = None

    @property
    def ctrl(self) -> Group:
        return self.parent or self

    @property
    def is_mon(self) -> bool:
        return self.parent is not None


@dataclasses.dataclass
class Counter:
    total: float = 0.0
    local: float = 0.0
    occupancy: float = 0.0


class StatusBuffer:
    """last_cmd_status: a seq_buf of 512 bytes, "ok" when empty."""

    def __init__(self):
        self._parts: list[str] = []
        self._len = 0

    def clear(self) -> None:
        self._parts, self._len = [], 0

    def puts(self, text: str) -> None:
        # seq_buf: a message that does not fit marks the buffer overflowed
        # and is not stored.
        if self._len + len(text) < STATUS_SIZE:
            self._parts.append(text)
            self._len += len(text)

    def show(self) -> str:
        return "".join(self._parts) or "ok\n"
