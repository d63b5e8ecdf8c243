"""The fail-safe record: each class's static values, and who holds it.

The controller writes this file (atomically) *before* its first change
to a class and after every change.  It names the controller's pid and
start time, so anyone can tell a running controller from a dead one.
:func:`restore` puts every class it lists back to its static values;
the controller calls it on stop, its guardian when it dies, and
``nova-rdt reconcile`` (or ``nova-rdt controller restore``) after a
crash of both.  The file is read as hostile input: only nova-rdt's class
groups it names are touched, and only with masks and MB values checked
against the host's capabilities.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os

from nova_rdt import exception
from nova_rdt import naming
from nova_rdt.controller import layout
from nova_rdt.host import procinfo
from nova_rdt.host import records
from nova_rdt.resctrl import cbm
from nova_rdt.resctrl import errors
from nova_rdt.resctrl.schemata import Schemata

LOG = logging.getLogger(__name__)
VERSION = 1
MAX_BYTES = 1 << 20


class StateError(exception.NovaRdtError, ValueError):
    pass


@dataclasses.dataclass
class ClassRecord:
    static: dict[str, dict[int, int]]
    current: dict[str, dict[int, int]]
    # Other groups' masks when the class was adopted: ways they already
    # shared with it then may be shared again on restore.
    shared: dict[str, dict[str, dict[int, int]]] = dataclasses.field(
        default_factory=dict)


@dataclasses.dataclass
class State:
    pid: int
    pid_start: int | None
    running: bool
    groups: dict[str, ClassRecord] = dataclasses.field(default_factory=dict)

    def to_json(self) -> str:
        def lines(d):
            return {r: {str(k): v for k, v in doms.items()}
                    for r, doms in d.items()}
        return json.dumps({
            "version": VERSION, "pid": self.pid,
            "pid_start": self.pid_start, "running": self.running,
            "groups": {g: {"static": lines(c.static),
                           "current": lines(c.current),
                           "shared": {o: lines(s) for o, s in
                                      sorted(c.shared.items())}}
                       for g, c in sorted(self.groups.items())},
        }, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> State:
        try:
            doc = json.loads(text)
            if doc.get("version") != VERSION:
                raise StateError(f"version {doc.get('version')!r}, "
                                 f"expected {VERSION}")
            groups = {}
            for name, rec in doc["groups"].items():
                if not naming.is_safe_group_name(name):
                    raise StateError(f"group {name[:40]!r} is not a group "
                                     f"name")
                shared = rec.get("shared", {})
                for other in shared:
                    if not naming.is_safe_group_name(other):
                        raise StateError(f"group {other[:40]!r} is not a "
                                         f"group name")
                groups[name] = ClassRecord(
                    _lines(rec["static"]), _lines(rec["current"]),
                    {o: _lines(s) for o, s in shared.items()})
            pid = doc["pid"]
            start = doc["pid_start"]
            if not isinstance(pid, int) or isinstance(pid, bool) \
                    or pid < 1 or not isinstance(doc["running"], bool) \
                    or not (start is None or (isinstance(start, int)
                                              and start >= 0)):
                raise StateError("pid, pid_start or running malformed")
            return cls(pid, start, doc["running"], groups)
        except StateError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise StateError(f"malformed: {e}") from None

    def owner_alive(self) -> bool:
        return self.running and procinfo.is_running(self.pid,
                                                    self.pid_start)


def _lines(d) -> dict[str, dict[int, int]]:
    out: dict[str, dict[int, int]] = {}
    for res, doms in d.items():
        if res not in ("L3", "L3CODE", "L3DATA", "L2", "L2CODE",
                       "L2DATA", "MB"):
            raise StateError(f"unknown resource {res[:20]!r}")
        out[res] = {}
        for k, v in doms.items():
            if not str(k).isdigit() or isinstance(v, bool) or \
                    not isinstance(v, int) or v < 0 or v >= 1 << 32:
                raise StateError(f"{res} domain {k!r}={v!r} malformed")
            out[res][int(k)] = v
    return out


def load(path: str) -> State | None:
    try:
        with open(path) as f:
            text = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StateError(f"{path}: {e.strerror or e}") from None
    if len(text) > MAX_BYTES:
        raise StateError(f"{path}: larger than {MAX_BYTES} bytes")
    try:
        return State.from_json(text)
    except StateError as e:
        raise StateError(f"{path}: {e}") from None


def save(path: str, state: State) -> None:
    d = os.path.dirname(path) or "."
    os.makedirs(d, exist_ok=True)
    # Durable, not just atomic: restore() must find the static values
    # after a power cut too.  0600 as tempfile.mkstemp made it before.
    records.write_durably(path, state.to_json().encode(), mode=0o600)


def checked_static(fs, caps, name: str,
                   static: dict[str, dict[int, int]]) -> Schemata:
    """The static values of class group ``name``, only if the host would
    take them and the group is nova-rdt's class group."""
    if naming.class_of_group(fs.prefix, name) is None:
        raise StateError(f"{name} is not a nova-rdt class group")
    lines: dict[str, dict[int, int]] = {}
    for res, doms in static.items():
        if res in caps.cache:
            r = caps.cache[res]
            for mask in doms.values():
                cbm.check(mask, r.cbm_len, r.min_cbm_bits,
                          r.sparse_masks)
        elif res not in caps.bandwidth:
            raise StateError(f"{name}: {res} is not on this host")
        lines[res] = dict(doms)
    return Schemata(lines)


def restore(fs, path: str, force: bool = False) -> list[str]:
    """Put every class the state file lists back to its static values.

    Does nothing while the controller that wrote it is running, or
    after it stopped cleanly (it restored then), unless ``force`` (the
    controller itself, on its way out).  Returns the
    groups restored; a group that is gone is skipped.  Marks the file
    not running, so a second call is harmless.
    """
    state = load(path)
    if state is None:
        return []
    if not force and not state.running:
        return []          # stopped cleanly: already restored
    if not force and state.owner_alive():
        LOG.info("controller %d is running; its classes stay as they are",
                 state.pid)
        return []
    caps = fs.capabilities()
    done = []
    with fs.locked():
        ctrl = [g for g in fs.groups(with_mon=False) if not g.is_root]
        for name, rec in sorted(state.groups.items()):
            try:
                schemata = checked_static(fs, caps, name, rec.static)
                g = fs.group(name)
                used = layout.new_sharing(
                    {o.name: o.schemata() for o in ctrl if o.name != name},
                    {o: Schemata(s) for o, s in rec.shared.items()})
                now = g.schemata()
                if layout.regains_taken_ways(schemata, now, used):
                    LOG.error("%s: some of its static ways are now another "
                              "group's; restoring its MB only", name)
                    schemata = layout.keep_caches(schemata, now)
                fs.write_schemata(g, schemata)
            except errors.GroupNotFound:
                continue
            except (StateError, cbm.CbmError, errors.ResctrlError) as e:
                LOG.error("cannot restore %s: %s", name, e)
                continue
            rec.current = {r: dict(d) for r, d in rec.static.items()}
            done.append(name)
            LOG.info("restored %s to its static values", name)
    state.running = False
    save(path, state)
    return done
