"""An in-memory model of the kernel's resctrl filesystem.

It mirrors fs/resctrl (Linux 6.1, Debian 12's kernel) closely enough that
libvirt and nova-rdt cannot tell it from the real thing: the same files,
formats, check order, errno values and ``last_cmd_status`` texts.  Each
rule cites the kernel function it mirrors.  Pure logic: the FUSE adaptor
(:mod:`nova_rdt.emulator.fusefs`) only maps paths and errors.

What it does not model: pseudo-locking (the mode is refused as on a kernel
without CONFIG_RESCTRL_FS_PSEUDO_LOCK), L2 CAT, SMBA and BMEC event
configuration.  Monitoring counters are simulated from the tasks in each
group, so they move while work is assigned.
"""

from __future__ import annotations

import dataclasses
import errno
import math
import os
import time
from collections.abc import Callable

from nova_rdt.emulator.profiles import Profile
from nova_rdt.resctrl.capabilities import format_cpu_list

U32_MAX = 0xFFFFFFFF
MON_SCALE = 64                  # x86_cache_occ_scale on Intel server parts
LIMBO_SECONDS = 1.0             # the limbo worker runs about once a second
# Simulated workload: what one busy thread does to each counter.
TASK_BANDWIDTH = 256 * 1024 * 1024      # bytes/s of memory traffic
TASK_FOOTPRINT = 4 * 1024 * 1024        # bytes of LLC it wants
LOCAL_FRACTION = 0.75
OCCUPANCY_TAU = 0.5                     # seconds to settle 63% of the way
# Counters advance in steps of at least this much time: a scrape reading
# hundreds of counters then ticks a few times, not once per file.
TICK_MIN = 0.005


class KernelError(Exception):
    def __init__(self, err: int):
        self.errno = err
        super().__init__(os.strerror(err))


@dataclasses.dataclass
class _Schema:
    name: str                  # "L3", "L3CODE", "L3DATA", "MB"
    cache: bool
    num_closid: int
    cbm_len: int = 0
    min_cbm_bits: int = 0
    shareable_bits: int = 0
    sparse: bool = False
    peer: str | None = None    # the CDP partner: L3CODE <-> L3DATA
    max_bw: int = 0
    min_bw: int = 0
    bw_gran: int = 1
    delay_linear: bool = True
    throttle_mode: str | None = None
    data_width: int = 3


@dataclasses.dataclass(eq=False)
class _Group:
    name: str
    closid: int
    rmid: int
    parent: _Group | None = None          # set for monitor groups
    mode: str = "shareable"
    cpus: set[int] = dataclasses.field(default_factory=set)
    mon: dict[str, _Group] = dataclasses.field(default_factory=dict)

    @property
    def ctrl(self) -> _Group:
        return self.parent or self


@dataclasses.dataclass
class _Counter:
    total: float = 0.0
    local: float = 0.0
    occupancy: float = 0.0


class ResctrlKernel:
    """The filesystem, addressed by paths relative to the mount point."""

    def __init__(self, profile: Profile,
                 clock: Callable[[], float] = time.monotonic,
                 task_exists: Callable[[int], bool] | None = None,
                 all_tasks: Callable[[], list[int]] | None = None):
        self.profile = profile
        self.clock = clock
        self.task_exists = task_exists or _proc_task_exists
        self.all_tasks = all_tasks or _proc_all_tasks
        self.domains = list(range(profile.domains))
        self.cpus_online = set(range(profile.num_cpus))
        self.schemas = self._make_schemas()
        self.last_cmd: list[str] = []
        # (schema name, closid) -> {domain: value}; only allocated closids.
        self.ctrl_val: dict[tuple[str, int], dict[int, int]] = {}
        self.root = _Group("", 0, 0, cpus=set(self.cpus_online))
        self.groups: dict[str, _Group] = {}
        self._closids_used = {0}
        self._set_defaults(0)
        mon = profile.monitor
        self.rmid_free = list(range(1, mon.num_rmids)) if mon else []
        self.rmid_limbo: list[tuple[float, int]] = []
        self.task_group: dict[int, _Group] = {}
        self.counters: dict[tuple[int, int], _Counter] = {}
        self._last_tick = clock()
        self.mba_mbps_event = "mbm_local_bytes"
        self.max_threshold_occupancy = (
            (profile.l3.size // mon.num_rmids) // MON_SCALE * MON_SCALE
            if mon else 0)
        # Test seam: (group path, domain, event) forced to read "Unavailable".
        self.unavailable: set[tuple[str, int, str]] = set()

    # -- setup -----------------------------------------------------------

    def _make_schemas(self) -> list[_Schema]:
        p, l3 = self.profile, self.profile.l3
        made = []

        def cache(name, peer=None, div=1):
            return _Schema(name=name, cache=True,
                           num_closid=l3.num_closids // div,
                           cbm_len=l3.cbm_len, min_cbm_bits=l3.min_cbm_bits,
                           shareable_bits=l3.shareable_bits,
                           sparse=l3.sparse_masks, peer=peer,
                           data_width=(l3.cbm_len + 3) // 4)
        # schemata_list_add() walks L3, L2, MB, SMBA with list_add(), so the
        # kernel shows them in reverse: MB first, L3DATA before L3CODE.
        if p.cdp:
            made += [cache("L3CODE", "L3DATA", 2), cache("L3DATA", "L3CODE", 2)]
        else:
            made.append(cache("L3"))
        for bw in p.bandwidth:
            made.append(_Schema(
                name=bw.name, cache=False, num_closid=bw.num_closids,
                max_bw=bw.max_bandwidth, min_bw=bw.min_bandwidth,
                bw_gran=bw.bandwidth_gran, delay_linear=bw.delay_linear,
                throttle_mode=bw.thread_throttle_mode,
                data_width=bw.data_width))
        made.reverse()
        return made

    def schema(self, name: str) -> _Schema | None:
        return next((s for s in self.schemas if s.name == name), None)

    @property
    def closids_supported(self) -> int:
        """closid_init(): the minimum num_closid over every schema."""
        return min(s.num_closid for s in self.schemas)

    @property
    def name_width(self) -> int:
        """max_name_width: +4 for a CDP-capable L3 mounted without CDP."""
        w = max(len(s.name) for s in self.schemas)
        if self.profile.l3.cdp_capable and not self.profile.cdp:
            w = max(w, len("L3") + 4)
        return w

    @property
    def data_width(self) -> int:
        return max(s.data_width for s in self.schemas)

    def _set_defaults(self, closid: int) -> None:
        for s in self.schemas:
            if s.cache:
                v = (1 << s.cbm_len) - 1
            else:
                v = U32_MAX if self.profile.mba_mbps else s.max_bw
            self.ctrl_val[(s.name, closid)] = {d: v for d in self.domains}

    # -- status ----------------------------------------------------------

    def _clear(self) -> None:
        self.last_cmd = []

    def _fail(self, err: int, *msgs: str):
        self.last_cmd.extend(msgs)
        raise KernelError(err)

    def last_cmd_status(self) -> str:
        """rdt_last_cmd_status_show(): the buffer, or "ok" when empty."""
        text = "".join(self.last_cmd)
        return text if text else "ok\n"

    # -- path resolution -------------------------------------------------

    def _resolve(self, path: str):
        """Map a path to ("dir"|"file", what, group, extra)."""
        parts = [p for p in path.split("/") if p]
        if not parts:
            return "dir", "group", self.root, None
        if parts[0] == "info":
            return self._resolve_info(parts[1:])
        g = self.root
        i = 0
        if parts[0] in self.groups:
            g = self.groups[parts[0]]
            i = 1
        rest = parts[i:]
        if not rest:
            return "dir", "group", g, None
        if rest[0] == "mon_groups" and self.profile.monitor:
            if len(rest) == 1:
                return "dir", "mon_groups", g, None
            m = g.mon.get(rest[1])
            if m is None:
                raise KernelError(errno.ENOENT)
            return self._resolve_in_group(m, rest[2:])
        return self._resolve_in_group(g, rest)

    def _resolve_in_group(self, g: _Group, rest: list[str]):
        if not rest:
            return "dir", "group", g, None
        name = rest[0]
        if name == "mon_data" and self.profile.monitor:
            if len(rest) == 1:
                return "dir", "mon_data", g, None
            dom = self._mon_dir_domain(rest[1])
            if dom is None:
                raise KernelError(errno.ENOENT)
            if len(rest) == 2:
                return "dir", "mon_domain", g, dom
            if len(rest) == 3 and rest[2] in self.profile.monitor.features:
                return "file", "mon_event", g, (dom, rest[2])
            raise KernelError(errno.ENOENT)
        if len(rest) == 1 and name in self._group_files(g):
            return "file", name, g, None
        raise KernelError(errno.ENOENT)

    def _resolve_info(self, rest: list[str]):
        if not rest:
            return "dir", "info", None, None
        if rest == ["last_cmd_status"]:
            return "file", "last_cmd_status", None, None
        name = rest[0]
        if name not in self._info_dirs():
            raise KernelError(errno.ENOENT)
        if len(rest) == 1:
            return "dir", "info_res", None, name
        if len(rest) == 2 and rest[1] in self._info_files(name):
            return "file", "info_file", None, (name, rest[1])
        raise KernelError(errno.ENOENT)

    def _mon_dir_domain(self, name: str) -> int | None:
        prefix = "mon_L3_"
        if not name.startswith(prefix):
            return None
        try:
            dom = int(name[len(prefix):])
        except ValueError:
            return None
        return dom if dom in self.domains and name == _mon_dir(dom) else None

    def _group_files(self, g: _Group) -> list[str]:
        files = ["cpus", "cpus_list", "tasks"]
        if g.parent is None:
            files += ["schemata", "mode", "size"]
            if self.profile.mba_mbps and self.profile.monitor:
                files.append("mba_MBps_event")
        return files

    def _group_dirs(self, g: _Group) -> list[str]:
        dirs = []
        if self.profile.monitor:
            if g.parent is None:
                dirs.append("mon_groups")
            dirs.append("mon_data")
        return dirs

    def _info_dirs(self) -> list[str]:
        names = [s.name for s in self.schemas]
        if self.profile.monitor:
            names.append("L3_MON")
        return names

    def _info_files(self, name: str) -> list[str]:
        if name == "L3_MON":
            return ["max_threshold_occupancy", "mon_features", "num_rmids"]
        s = self.schema(name)
        if s.cache:
            return ["bit_usage", "cbm_mask", "min_cbm_bits", "num_closids",
                    "shareable_bits", "sparse_masks"]
        files = ["bandwidth_gran", "delay_linear", "min_bandwidth",
                 "num_closids"]
        if s.throttle_mode:
            files.append("thread_throttle_mode")
        return files

    # -- the VFS surface -------------------------------------------------

    def stat(self, path: str) -> tuple[str, bool]:
        """("dir"|"file", writable)."""
        kind, what, _, extra = self._resolve(path)
        if kind == "dir":
            return kind, True
        if what == "info_file":
            return kind, extra[1] == "max_threshold_occupancy"
        return kind, what not in ("size", "mon_event", "last_cmd_status")

    def listdir(self, path: str) -> list[str]:
        kind, what, g, extra = self._resolve(path)
        if kind != "dir":
            raise KernelError(errno.ENOTDIR)
        if what == "info":
            return ["last_cmd_status"] + self._info_dirs()
        if what == "info_res":
            return self._info_files(extra)
        if what == "mon_groups":
            return list(g.mon)
        if what == "mon_data":
            return [_mon_dir(d) for d in self.domains]
        if what == "mon_domain":
            return list(self.profile.monitor.features)
        names = self._group_files(g) + self._group_dirs(g)
        if g is self.root:
            names = ["info"] + names + list(self.groups)
        return names

    def read(self, path: str) -> str:
        kind, what, g, extra = self._resolve(path)
        if kind != "file":
            raise KernelError(errno.EISDIR)
        if what == "last_cmd_status":
            return self.last_cmd_status()
        if what == "info_file":
            return self._read_info(*extra)
        if what == "mon_event":
            return self._read_mon(g, *extra)
        return getattr(self, "_show_" + what)(g)

    def write(self, path: str, data: bytes, caller: int = 0) -> int:
        kind, what, g, extra = self._resolve(path)
        if kind != "file":
            raise KernelError(errno.EISDIR)
        if what == "info_file" and extra[1] == "max_threshold_occupancy":
            return self._write_threshold(data)
        handler = getattr(self, "_write_" + what, None)
        if handler is None or what == "info_file":
            raise KernelError(errno.EACCES)
        text = data.decode("ascii", errors="replace")
        handler(g, text, caller) if what == "tasks" else handler(g, text)
        return len(data)

    # -- info/ -----------------------------------------------------------

    def _read_info(self, res: str, name: str) -> str:
        if res == "L3_MON":
            mon = self.profile.monitor
            return {
                "num_rmids": f"{mon.num_rmids}\n",
                "mon_features": "".join(f + "\n" for f in mon.features),
                "max_threshold_occupancy": f"{self.max_threshold_occupancy}\n",
            }[name]
        s = self.schema(res)
        if s.cache:
            return {
                "num_closids": f"{s.num_closid}\n",
                "cbm_mask": f"{(1 << s.cbm_len) - 1:x}\n",
                "min_cbm_bits": f"{s.min_cbm_bits}\n",
                "shareable_bits": f"{s.shareable_bits:x}\n",
                "sparse_masks": f"{int(s.sparse)}\n",
                "bit_usage": self._bit_usage(s),
            }[name]
        return {
            "num_closids": f"{s.num_closid}\n",
            "bandwidth_gran": f"{s.bw_gran}\n",
            "min_bandwidth": f"{s.min_bw}\n",
            "delay_linear": f"{int(s.delay_linear)}\n",
            "thread_throttle_mode": f"{s.throttle_mode}\n",
        }[name]

    def _write_threshold(self, data: bytes) -> int:
        # max_threshold_occupancy_write(): kstrtouint base 0, no last_cmd.
        try:
            v = int(data.decode().strip(), 0)
        except ValueError:
            raise KernelError(errno.EINVAL) from None
        if v < 0 or v > self.profile.l3.size:
            raise KernelError(errno.EINVAL)
        self.max_threshold_occupancy = v // MON_SCALE * MON_SCALE
        return len(data)

    def _bit_usage(self, s: _Schema) -> str:
        """rdt_bit_usage_show(): one letter per way, most significant first."""
        out = []
        for d in self.domains:
            shareable = exclusive = 0
            for closid in sorted(self._closids_used):
                g = self._group_by_closid(closid)
                for name in (s.name, s.peer):
                    if name is None:
                        continue
                    v = self.ctrl_val[(name, closid)][d]
                    if g.mode == "exclusive":
                        exclusive |= v
                    else:
                        shareable |= v
            hw = s.shareable_bits
            chars = []
            for i in reversed(range(s.cbm_len)):
                bit = 1 << i
                if hw & bit and (shareable | exclusive) & bit:
                    chars.append("X")
                elif hw & bit:
                    chars.append("H")
                elif shareable & bit:
                    chars.append("S")
                elif exclusive & bit:
                    chars.append("E")
                else:
                    chars.append("0")
            out.append(f"{d}={''.join(chars)}")
        return ";".join(out) + "\n"

    # -- mkdir / rmdir ---------------------------------------------------

    def mkdir(self, path: str) -> None:
        parts = [p for p in path.split("/") if p]
        name = parts[-1]
        parent = "/".join(parts[:-1])
        if "\n" in name:
            raise KernelError(errno.EINVAL)          # rdtgroup_mkdir()
        kind, what, g, _ = self._resolve(parent)
        try:
            self._resolve(path)
            raise KernelError(errno.EEXIST)          # the VFS, before resctrl
        except KernelError as e:
            if e.errno != errno.ENOENT:
                raise
        if kind == "dir" and what == "group" and g is self.root:
            return self._mkdir_ctrl(name)
        if kind == "dir" and what == "mon_groups" and name != "mon_groups":
            return self._mkdir_mon(g, name)
        raise KernelError(errno.EPERM)              # no message

    def _mkdir_ctrl(self, name: str) -> None:
        """rdtgroup_mkdir_ctrl_mon()."""
        self._clear()
        closid = next((c for c in range(self.closids_supported)
                       if c not in self._closids_used), None)
        if closid is None:
            self._fail(errno.ENOSPC, "Out of CLOSIDs\n")
        rmid = self._alloc_rmid() if self.profile.monitor else 0
        init = self._init_alloc(closid)
        if isinstance(init, str):
            self._free_rmid(rmid)
            self._fail(errno.ENOSPC, init)
        self._closids_used.add(closid)
        for key, doms in init.items():
            self.ctrl_val[(key, closid)] = doms
        self.groups[name] = _Group(name, closid, rmid)
        self._reset_counters(rmid)

    def _mkdir_mon(self, parent: _Group, name: str) -> None:
        """rdtgroup_mkdir_mon()."""
        self._clear()
        rmid = self._alloc_rmid()
        parent.mon[name] = _Group(name, parent.closid, rmid, parent=parent)
        self._reset_counters(rmid)

    def _alloc_rmid(self) -> int:
        """alloc_rmid(): ENOSPC when none, EBUSY while some are in limbo."""
        now = self.clock()
        while self.rmid_limbo and self.rmid_limbo[0][0] <= now:
            self.rmid_free.append(self.rmid_limbo.pop(0)[1])
        if not self.rmid_free:
            self._fail(errno.EBUSY if self.rmid_limbo else errno.ENOSPC,
                       "Out of RMIDs\n")
        return self.rmid_free.pop(0)

    def _free_rmid(self, rmid: int) -> None:
        """free_rmid(): to limbo while llc_occupancy may still be dirty."""
        if not rmid:
            return
        if "llc_occupancy" in self.profile.monitor.features:
            self.rmid_limbo.append((self.clock() + LIMBO_SECONDS, rmid))
        else:
            self.rmid_free.append(rmid)
        self.counters = {k: v for k, v in self.counters.items()
                         if k[0] != rmid}

    def _init_alloc(self, closid: int):
        """rdtgroup_init_alloc(): shareable + unused ways, lowest run only."""
        init: dict[str, dict[int, int]] = {}
        for s in self.schemas:
            if not s.cache:
                v = U32_MAX if self.profile.mba_mbps else s.max_bw
                init[s.name] = {d: v for d in self.domains}
                continue
            full = (1 << s.cbm_len) - 1
            init[s.name] = {}
            for d in self.domains:
                new = used = s.shareable_bits
                for other in self._closids_used:
                    for name in (s.name, s.peer):
                        if name is None:
                            continue
                        v = self.ctrl_val[(name, other)][d]
                        used |= v
                        if self._group_by_closid(other).mode == "shareable":
                            new |= v
                new |= ~used & full
                new = _ensure_valid(new, s.cbm_len)
                if bin(new).count("1") < s.min_cbm_bits:
                    return f"No space on {s.name}:{d}\n"
                init[s.name][d] = new
        return init

    def rmdir(self, path: str) -> None:
        parts = [p for p in path.split("/") if p]
        kind, what, g, _ = self._resolve(path)
        if kind != "dir":
            raise KernelError(errno.ENOTDIR)
        if what != "group" or g is self.root:
            raise KernelError(errno.EPERM if parts else errno.EBUSY)
        self._tick()
        if g.parent is None:
            # rdtgroup_rmdir_ctrl(): tasks (its monitor groups' too) and
            # CPUs go to the default group; all its RMIDs are freed.
            for tid, tg in list(self.task_group.items()):
                if tg.ctrl is g:
                    del self.task_group[tid]
            self.root.cpus |= g.cpus
            for m in g.mon.values():
                self._free_rmid(m.rmid)
            self._free_rmid(g.rmid)
            self._closids_used.discard(g.closid)
            for s in self.schemas:
                self.ctrl_val.pop((s.name, g.closid), None)
            del self.groups[g.name]
        else:
            # rdtgroup_rmdir_mon(): tasks go to the parent control group.
            for tid, tg in list(self.task_group.items()):
                if tg is g:
                    self._assign(tid, g.parent)
            self._free_rmid(g.rmid)
            del g.parent.mon[g.name]

    def _group_by_closid(self, closid: int) -> _Group:
        if closid == 0:
            return self.root
        return next(g for g in self.groups.values() if g.closid == closid)

    # -- schemata --------------------------------------------------------

    def _show_schemata(self, g: _Group) -> str:
        """rdtgroup_schemata_show() / show_doms(), 6.1 tabular format."""
        lines = []
        for s in self.schemas:
            if g.closid >= s.num_closid:
                continue
            vals = self.ctrl_val[(s.name, g.closid)]
            if s.cache:
                doms = [f"{d}={vals[d]:0{self.data_width}x}"
                        for d in self.domains]
            else:
                doms = [f"{d}={vals[d]:>{self.data_width}}"
                        for d in self.domains]
            lines.append(f"{s.name:>{self.name_width}}:" + ";".join(doms))
        return "".join(line + "\n" for line in lines)

    def _show_size(self, g: _Group) -> str:
        lines = []
        for s in self.schemas:
            vals = self.ctrl_val[(s.name, g.closid)]
            if s.cache:
                per_way = self.profile.l3.size // s.cbm_len
                doms = [f"{d}={per_way * bin(vals[d]).count('1')}"
                        for d in self.domains]
            else:
                doms = [f"{d}={vals[d]}" for d in self.domains]
            lines.append(f"{s.name:>{self.name_width}}:" + ";".join(doms))
        return "".join(line + "\n" for line in lines)

    def _write_schemata(self, g: _Group, text: str) -> None:
        """rdtgroup_schemata_write(): all lines staged, then all applied."""
        if not text.endswith("\n"):
            raise KernelError(errno.EINVAL)          # no message
        text = text[:-1]
        self._clear()
        staged: dict[tuple[str, int], int] = {}
        for tok in text.split("\n"):
            resname, sep, rest = tok.partition(":")
            resname = resname.strip()
            if not sep:
                self._fail(errno.EINVAL, "Missing ':'\n")
            if rest == "":
                self._fail(errno.EINVAL, f"Missing '{resname}' value\n")
            s = self.schema(resname)
            if s is None or g.closid >= s.num_closid:
                self._fail(errno.EINVAL, "Unknown or unsupported resource "
                                         f"name '{resname}'\n")
            self._parse_line(s, rest, g, staged)
        for (name, d), v in staged.items():
            self.ctrl_val[(name, g.closid)][d] = v

    def _parse_line(self, s: _Schema, line: str, g: _Group,
                    staged: dict) -> None:
        """parse_line(): "id=val;id=val", ids decimal and known."""
        while line:
            dom, _, line = line.partition(";")
            ident, sep, val = dom.partition("=")
            if not sep or not _kstrtoul(ident, 10):
                self._fail(errno.EINVAL,
                           "Missing '=' or non-numeric domain\n")
            dom_id = int(ident)
            if dom_id not in self.domains:
                raise KernelError(errno.EINVAL)      # no message
            if (s.name, dom_id) in staged:
                self._fail(errno.EINVAL, f"Duplicate domain {dom_id}\n")
            val = val.strip()
            staged[(s.name, dom_id)] = (
                self._parse_cbm(s, val, g, dom_id) if s.cache
                else self._parse_bw(s, val))

    def _parse_bw(self, s: _Schema, val: str) -> int:
        """bw_validate()."""
        if not _kstrtoul(val, 10) or int(val) > U32_MAX:
            self._fail(errno.EINVAL, f"Invalid MB value {val}\n")
        bw = int(val)
        if self.profile.mba_mbps:
            return bw
        if bw < s.min_bw or bw > s.max_bw:
            self._fail(errno.EINVAL, f"MB value {bw} out of range "
                                     f"[{s.min_bw},{s.max_bw}]\n")
        return -(-bw // s.bw_gran) * s.bw_gran

    def _parse_cbm(self, s: _Schema, val: str, g: _Group, dom: int) -> int:
        """parse_cbm() and cbm_validate()."""
        hexval = val[2:] if val[:2].lower() == "0x" else val
        if not _kstrtoul(hexval, 16):
            self._fail(errno.EINVAL, f"Non-hex character in the mask {val}\n")
        v = int(hexval, 16)
        full = (1 << s.cbm_len) - 1
        if (s.min_cbm_bits > 0 and v == 0) or v > full:
            self._fail(errno.EINVAL, "Mask out of range\n")
        first = (v & -v).bit_length() - 1 if v else s.cbm_len
        zero = first
        while zero < s.cbm_len and v >> zero & 1:
            zero += 1
        if not s.sparse and (v >> zero):
            self._fail(errno.EINVAL,
                       f"The mask {v:x} has non-consecutive 1-bits\n")
        if zero - first < s.min_cbm_bits:
            self._fail(errno.EINVAL,
                       f"Need at least {s.min_cbm_bits} bits in the mask\n")
        if self._cbm_overlaps(s, dom, v, g.closid, exclusive=True):
            self._fail(errno.EINVAL, "Overlaps with exclusive group\n")
        if g.mode == "exclusive" and self._cbm_overlaps(
                s, dom, v, g.closid, exclusive=False):
            self._fail(errno.EINVAL, "Overlaps with other group\n")
        return v

    def _cbm_overlaps(self, s: _Schema, dom: int, cbm: int, closid: int,
                      exclusive: bool) -> bool:
        """rdtgroup_cbm_overlaps(): this type and the CDP peer type."""
        if not exclusive and cbm & s.shareable_bits:
            return True
        for other in self._closids_used:
            if other == closid:
                continue
            mode = self._group_by_closid(other).mode
            for name in (s.name, s.peer):
                if name is None:
                    continue
                if cbm & self.ctrl_val[(name, other)][dom]:
                    if not exclusive or mode == "exclusive":
                        return True
        return False

    # -- mode ------------------------------------------------------------

    def _show_mode(self, g: _Group) -> str:
        return g.mode + "\n"

    def _write_mode(self, g: _Group, text: str) -> None:
        """rdtgroup_mode_write()."""
        if not text.endswith("\n"):
            raise KernelError(errno.EINVAL)
        mode = text[:-1]
        self._clear()
        if mode == g.mode:
            return
        if mode == "shareable":
            g.mode = mode
            return
        if mode == "exclusive":
            caches = [s for s in self.schemas if s.cache]
            if not caches:
                self._fail(errno.EINVAL,
                           "Cannot be exclusive without CAT/CDP\n")
            for s in caches:
                for d in self.domains:
                    own = self.ctrl_val[(s.name, g.closid)][d]
                    if self._cbm_overlaps(s, d, own, g.closid, False):
                        self._fail(errno.EINVAL, "Schemata overlaps\n")
            g.mode = mode
            return
        self._fail(errno.EINVAL, "Unknown or unsupported mode\n")

    # -- cpus ------------------------------------------------------------

    def _show_cpus(self, g: _Group) -> str:
        return _format_cpumask(g.cpus, self.profile.num_cpus) + "\n"

    def _show_cpus_list(self, g: _Group) -> str:
        return format_cpu_list(g.cpus) + "\n"

    def _write_cpus(self, g: _Group, text: str) -> None:
        self._set_cpus(g, _parse_cpumask(text, self.profile.num_cpus))

    def _write_cpus_list(self, g: _Group, text: str) -> None:
        self._set_cpus(g, _parse_cpulist(text, self.profile.num_cpus))

    def _set_cpus(self, g: _Group, parsed) -> None:
        """rdtgroup_cpus_write(), cpus_ctrl_write(), cpus_mon_write()."""
        self._clear()
        if isinstance(parsed, int):
            self._fail(parsed, "Bad CPU list/mask\n")
        new = parsed
        if new - self.cpus_online:
            self._fail(errno.EINVAL, "Can only assign online CPUs\n")
        if g.parent is not None:
            if new - g.parent.cpus:
                self._fail(errno.EINVAL, "Can only add CPUs to mongroup "
                                         "that belong to parent\n")
            for sib in g.parent.mon.values():
                if sib is not g:
                    sib.cpus -= new
            g.cpus = set(new)
            return
        dropped = g.cpus - new
        if dropped and g is self.root:
            self._fail(errno.EINVAL, "Can't drop CPUs from default group\n")
        self.root.cpus |= dropped
        added = new - g.cpus
        for other in [self.root] + list(self.groups.values()):
            if other is not g and other.cpus & added:
                other.cpus -= added
                for m in other.mon.values():
                    m.cpus &= other.cpus
        g.cpus = set(new)
        for m in g.mon.values():
            m.cpus = set()

    # -- tasks -----------------------------------------------------------

    def _live_assignments(self) -> dict[int, _Group]:
        for tid in [t for t in self.task_group if not self.task_exists(t)]:
            del self.task_group[tid]
        return self.task_group

    def _show_tasks(self, g: _Group) -> str:
        assigned = self._live_assignments()
        if g is self.root:
            tids = [t for t in self.all_tasks()
                    if t not in assigned]
        elif g.parent is None:
            tids = [t for t, tg in assigned.items() if tg.ctrl is g]
        else:
            tids = [t for t, tg in assigned.items() if tg is g]
        return "".join(f"{t}\n" for t in sorted(tids))

    def _write_tasks(self, g: _Group, text: str, caller: int) -> None:
        """rdtgroup_tasks_write(): a comma list; earlier ids stay moved."""
        self._clear()
        self._tick()
        buf = text
        while buf and buf[0] not in "\0\n":
            tok, _, buf = buf.partition(",")
            tok = tok.strip()
            pid = _kstrtoint0(tok)
            if pid is None:
                self._fail(errno.EINVAL, f"Task list parsing error pid {tok}\n")
            if pid < 0:
                self._fail(errno.EINVAL, f"Invalid pid {pid}\n")
            if pid == 0:
                pid = caller
            if not self.task_exists(pid):
                self._fail(errno.ESRCH, f"No task {pid}\n",
                           f"Error while processing task {pid}\n")
            current = self.task_group.get(pid, self.root)
            if g.parent is not None and current.ctrl is not g.parent:
                self._fail(errno.EINVAL,
                           "Can't move task to different control group\n",
                           f"Error while processing task {pid}\n")
            self._assign(pid, g)

    def _assign(self, tid: int, g: _Group) -> None:
        if g is self.root:
            self.task_group.pop(tid, None)
        else:
            self.task_group[tid] = g

    def _show_mba_MBps_event(self, g: _Group) -> str:
        return self.mba_mbps_event + "\n"

    def _write_mba_MBps_event(self, g: _Group, text: str) -> None:
        if not text.endswith("\n"):
            raise KernelError(errno.EINVAL)
        self._clear()
        ev = text[:-1]
        if ev not in ("mbm_local_bytes", "mbm_total_bytes") or \
                ev not in self.profile.monitor.features:
            self._fail(errno.EINVAL, f"Unsupported event id '{ev}'\n")
        self.mba_mbps_event = ev

    # -- monitoring ------------------------------------------------------

    def _reset_counters(self, rmid: int) -> None:
        for d in self.domains:
            self.counters[(rmid, d)] = _Counter()

    def _rmid_groups(self):
        yield self.root
        for g in self.groups.values():
            yield g
            yield from g.mon.values()

    def _tick(self) -> None:
        """Advance the simulated counters to now, at the current activity."""
        now = self.clock()
        dt = now - self._last_tick
        if dt < TICK_MIN:
            return
        self._last_tick = now
        busy: dict[int, int] = {}
        for tg in self._live_assignments().values():
            busy[tg.rmid] = busy.get(tg.rmid, 0) + 1
        ways = self.profile.l3.size // self.profile.l3.cbm_len
        settle = 1 - math.exp(-dt / OCCUPANCY_TAU)
        for g in self._rmid_groups():
            n = busy.get(g.rmid, 0)
            for d in self.domains:
                c = self.counters.setdefault((g.rmid, d), _Counter())
                share = n / len(self.domains)
                rate = share * TASK_BANDWIDTH * self._bw_factor(g.ctrl, d)
                c.total += rate * dt
                c.local += rate * dt * LOCAL_FRACTION
                cap = ways * self._cache_ways(g.ctrl, d)
                target = min(cap, share * TASK_FOOTPRINT)
                c.occupancy += (target - c.occupancy) * settle

    def _bw_factor(self, g: _Group, d: int) -> float:
        mb = next((s for s in self.schemas if not s.cache), None)
        if mb is None:
            return 1.0
        v = self.ctrl_val[(mb.name, g.closid)][d]
        if self.profile.mba_mbps:
            return min(1.0, v * 1024 * 1024 / TASK_BANDWIDTH)
        return min(1.0, v / mb.max_bw) if mb.max_bw else 1.0

    def _cache_ways(self, g: _Group, d: int) -> int:
        mask = 0
        for s in self.schemas:
            if s.cache:
                mask |= self.ctrl_val[(s.name, g.closid)][d]
        return bin(mask).count("1")

    def _read_mon(self, g: _Group, dom: int, event: str) -> str:
        """rdtgroup_mondata_show(): a control group sums its monitor groups."""
        self._tick()
        if (self._path_of(g), dom, event) in self.unavailable:
            return "Unavailable\n"
        members = [g] + (list(g.mon.values()) if g.parent is None else [])
        total = 0
        for m in members:
            c = self.counters.get((m.rmid, dom), _Counter())
            total += int({"llc_occupancy": c.occupancy,
                          "mbm_total_bytes": c.total,
                          "mbm_local_bytes": c.local}[event])
        return f"{total // MON_SCALE * MON_SCALE}\n"

    def _path_of(self, g: _Group) -> str:
        if g.parent is None:
            return g.name
        return f"{g.parent.name}/mon_groups/{g.name}".lstrip("/")


def _mon_dir(dom: int) -> str:
    return f"mon_L3_{dom:02d}"


def _ensure_valid(cbm: int, cbm_len: int) -> int:
    """cbm_ensure_valid(): keep the lowest run of ones only."""
    if not cbm:
        return 0
    first = (cbm & -cbm).bit_length() - 1
    end = first
    while end < cbm_len and cbm >> end & 1:
        end += 1
    return ((1 << (end - first)) - 1) << first


def _kstrtoul(s: str, base: int) -> bool:
    """kstrtoul(): digits only, one optional trailing newline."""
    if s.endswith("\n"):
        s = s[:-1]
    digits = "0123456789abcdefABCDEF" if base == 16 else "0123456789"
    return bool(s) and all(c in digits for c in s)


def _kstrtoint0(s: str) -> int | None:
    """kstrtoint(s, 0): optional sign, 0x hex, leading-0 octal, decimal."""
    try:
        sign = -1 if s.startswith("-") else 1
        body = s[1:] if s[:1] in "+-" else s
        if body[:2].lower() == "0x":
            v = int(body[2:], 16)
        elif body.startswith("0") and len(body) > 1:
            v = int(body[1:], 8)
        else:
            if not body.isdigit():
                return None
            v = int(body, 10)
    except ValueError:
        return None
    v *= sign
    return v if -(1 << 31) <= v < (1 << 31) else None


def _format_cpumask(cpus, nbits: int) -> str:
    """%*pb: hex in 32-bit chunks, most significant first, comma-separated."""
    value = sum(1 << c for c in cpus)
    nchunks = (nbits + 31) // 32
    first_bits = nbits - 32 * (nchunks - 1)
    chunks = []
    for i in reversed(range(nchunks)):
        width = (first_bits + 3) // 4 if i == nchunks - 1 else 8
        chunks.append(f"{(value >> (32 * i)) & 0xFFFFFFFF:0{width}x}")
    return ",".join(chunks)


def _parse_cpulist(text: str, nbits: int):
    """cpulist_parse(): a set, or an errno (EINVAL syntax, ERANGE range)."""
    text = text.split("\n", 1)[0].strip()
    cpus: set[int] = set()
    if not text:
        return cpus
    for part in text.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            return errno.EINVAL
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a:
            return errno.EINVAL
        if b >= nbits:
            return errno.ERANGE
        cpus.update(range(a, b + 1))
    return cpus


def _parse_cpumask(text: str, nbits: int):
    """cpumask_parse(): hex in comma-separated 32-bit chunks."""
    text = text.split("\n", 1)[0].strip().rstrip(",")
    if not text:
        return set()
    value = 0
    for chunk in text.split(","):
        if not chunk or len(chunk) > 8 or not _kstrtoul(chunk, 16):
            return errno.EOVERFLOW if len(chunk) > 8 else errno.EINVAL
        value = (value << 32) | int(chunk, 16)
    if value >> nbits:
        return errno.EOVERFLOW
    return {i for i in range(nbits) if value >> i & 1}


def _proc_task_exists(tid: int) -> bool:
    return tid > 0 and os.path.exists(f"/proc/{tid}")


def _proc_all_tasks() -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                out.extend(int(t) for t in os.listdir(f"/proc/{pid}/task"))
            except OSError:
                continue
    return out
