"""``--short``: the user's tools against the running cloud, and what
they must have done underneath.

The exchange (:mod:`.exchange`): ``openstack flavor create/set`` with a
good and a bad ``rdt:`` value (the bad one at the CLI's default
microversion and at 2.86), a member's 403, ``openstack server create
--nic none --wait`` of an ``rdt:`` flavor, ``openstack server delete
--wait``, ``openstack resource provider trait list``.  Underneath: the
domain libvirt holds carries the ``<cachetune>`` nova-compute wrote
(read from the instance's ``libvirt.xml``, Nova's own copy of what it
defined), the resctrl group libvirt made holds the flavor's ways on
every cache the element names, and the group is gone after the delete.
Then a real ``tempest run --regex tempest_plugin`` in the served
workspace.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import time

from lxml import etree

FLAVOR = "rdt.small"
SERVER = "rdt-vm"
WAYS = 2
BAD = "lots"
#: How long the guest's console is read after ACTIVE.
CONSOLE_WAIT = 10.0


@dataclasses.dataclass
class Check:
    name: str
    ok: bool | None
    detail: str

    def line(self) -> str:
        mark = {True: "ok  ", False: "FAIL", None: "skip"}[self.ok]
        return f"  {mark} {self.name}: {self.detail}"


class Checks:
    def __init__(self, cloud, shell, out_dir: str, say):
        self.cloud = cloud
        self.sh = shell
        self.out_dir = out_dir
        self.say = say
        self.results: list[Check] = []
        self.facts: dict = {}

    def check(self, name: str, ok: bool | None, detail: str) -> bool:
        c = Check(name, ok, detail)
        self.results.append(c)
        self.say(c.line())
        return bool(ok)

    # -- the exchange ---------------------------------------------------

    def flavors(self) -> None:
        sh = self.sh
        e = sh(f"openstack flavor create {FLAVOR} --vcpus 1 --ram 128 "
               f"--disk 1 --property rdt:l3_cache_ways={WAYS}")
        self.check("flavor create with rdt:l3_cache_ways", e.status == 0
                   and f"rdt:l3_cache_ways='{WAYS}'" in e.printed,
                   _first(e.printed, "properties") or e.printed[-300:])
        e = sh(f"openstack flavor set {FLAVOR} --property "
               f"rdt:l3_cache_ways={BAD}")
        self.facts["bad_value_default_microversion"] = e.printed
        self.check("flavor set with a bad value (CLI default "
                   "microversion)", e.status != 0
                   and "rdt:l3_cache_ways" in e.printed, _one(e.printed))
        e = sh(f"openstack --os-compute-api-version 2.86 flavor set "
               f"{FLAVOR} --property rdt:l3_cache_ways={BAD}")
        self.facts["bad_value_2.86"] = e.printed
        self.check("flavor set with a bad value (2.86)", e.status != 0
                   and "rdt:l3_cache_ways" in e.printed, _one(e.printed))
        spec = self.sh.json(f"openstack flavor show {FLAVOR}")
        props = spec.get("properties") or {}
        self.check("the bad value was not stored",
                   props.get("rdt:l3_cache_ways") == str(WAYS),
                   f"properties {props}")
        from nova_rdt.lab.allinone import serve
        e = sh(f"openstack flavor set {FLAVOR} --property "
               f"rdt:l3_cache_ways=3", cloud=serve.MEMBER_CLOUD)
        self.check("a member may not set rdt: keys", e.status != 0
                   and "403" in e.printed, _one(e.printed))
        e = sh("openstack flavor create member.rdt --vcpus 1 --ram 128 "
               "--disk 1 --property rdt:l3_cache_ways=1",
               cloud=serve.MEMBER_CLOUD)
        self.check("a member may not create flavors", e.status != 0
                   and "403" in e.printed, _one(e.printed))

    def server(self) -> None:
        from nova_rdt.lab.allinone import cloud as cloud_mod
        sh = self.sh
        e = sh(f"openstack server create --flavor {FLAVOR} --image "
               f"{cloud_mod.IMAGE} --nic none --wait {SERVER}",
               timeout=400)
        active = e.status == 0 and re.search(r"\|\s*status\s*\|\s*ACTIVE",
                                             e.printed)
        self.check("server create --nic none --wait", bool(active),
                   _first(e.printed, "status") or e.printed[-500:])
        if not active:
            fault = self._fault()
            refusal = _libvirt_refusal(
                self.cloud.services["nova-compute"]["log"])
            if self.cloud.machine.virt_type == "qemu" and refusal:
                # TCG: libvirt refuses Nova's <cachetune> at defineXML.
                # The user's fault does not say so (Nova reschedules and
                # reports the retries); nova-compute's log does.
                self.facts["libvirt_refusal"] = refusal
                self.results[-1] = Check(
                    self.results[-1].name, None,
                    f"TCG: libvirt refused Nova's domain ({refusal}, in "
                    f"nova-compute's log); the fault says: "
                    f"{fault.get('message')}")
                self.say(self.results[-1].line())
                sh(f"openstack server delete --wait {SERVER}", timeout=300)
            return
        srv = sh.json(f"openstack server show {SERVER}")
        name = srv.get("OS-EXT-SRV-ATTR:instance_name")
        uuid = srv["id"]
        self.facts["server"] = {"id": uuid, "instance_name": name,
                                "host": srv.get("OS-EXT-SRV-ATTR:host")}
        nova_xml = self._nova_xml(uuid)
        libvirt_xml = self.cloud.lab.libvirt.virsh("dumpxml", name)
        # The persistent definition: what defineXML stored, before the
        # start added ids, aliases and the running domain's state.
        inactive_xml = self.cloud.lab.libvirt.virsh("dumpxml", "--inactive",
                                                    name)
        self._write("domain-nova.xml", nova_xml or "")
        self._write("domain-libvirt.xml", libvirt_xml)
        self._write("domain-libvirt-inactive.xml", inactive_xml)
        tune_nova = _rdt_elements(nova_xml) if nova_xml else []
        self.check("Nova wrote <cachetune>", any(
            t.startswith("<cachetune") for t in tune_nova),
            "; ".join(tune_nova) or "no RDT element in Nova's domain XML")
        missing, _ = compare_domains(nova_xml or "<domain/>", inactive_xml)
        self.facts["nova_xml_not_in_libvirt_inactive"] = missing
        self.check("libvirt's definition (dumpxml --inactive) holds the "
                   "domain XML nova-compute defined",
                   bool(nova_xml) and not missing,
                   "every element and attribute Nova wrote is there, "
                   "<cachetune> unchanged" if not missing else
                   f"missing: {missing[:5]}")
        missing, added = compare_domains(nova_xml or "<domain/>",
                                         libvirt_xml)
        self.facts["libvirt_added"] = added
        self.facts["nova_xml_not_in_libvirt"] = missing
        self.check("libvirt holds the domain XML nova-compute defined",
                   bool(nova_xml) and not missing,
                   (f"every element and attribute Nova wrote is there; "
                    f"libvirt added {len(added)} (its defaults and "
                    f"addresses), RDT: "
                    + "; ".join(a for a in added if "tune" in a))
                   if not missing else f"missing: {missing[:5]}")
        groups = self._groups_of(name)
        self.facts["resctrl_groups"] = groups
        wanted = _cache_ids(nova_xml) if nova_xml else []
        bad = []
        for group, schemata in groups.items():
            masks = _l3_masks(schemata)
            for cid in wanted:
                ways = bin(masks.get(cid, 0)).count("1")
                if ways != WAYS:
                    bad.append(f"{group} cache {cid}: {ways} ways")
        self.check("the resctrl group holds the flavor's ways",
                   bool(groups) and bool(wanted) and not bad,
                   "; ".join(bad) if bad else
                   "; ".join(f"{g}: {s.strip()}" for g, s in groups.items())
                   or "no group for the domain")
        self._console(uuid)
        e = sh(f"openstack server delete --wait {SERVER}", timeout=300)
        self.check("server delete --wait", e.status == 0,
                   e.printed or "(prints nothing)")
        left = self._groups_of(name)
        self.check("the domain's resctrl group is gone", not left,
                   f"left: {sorted(left)}" if left else
                   f"{', '.join(sorted(groups))} removed")

    def no_valid_host(self) -> None:
        """More ways than a cache has: the scheduler refuses.  The fault
        says "No valid host" with RDTFilter's reason (the filter raises
        it for a request's first instance); nova-scheduler's log has the
        filter's per-host reasons too."""
        sh = self.sh
        ways = _cbm_len(self.cloud.lab.resctrl_root)
        e = sh(f"openstack flavor create rdt.huge --vcpus 1 --ram 128 "
               f"--disk 1 --property rdt:l3_cache_ways={ways}")
        if e.status != 0:
            self.check("a flavor asking every way", False, _one(e.printed))
            return
        e = sh(f"openstack server create --flavor rdt.huge --image "
               f"{_image()} --nic none --wait {SERVER}-huge", timeout=300)
        srv = sh.json(f"openstack server show {SERVER}-huge")
        fault = (srv.get("fault") or {}).get("message", "")
        reasons = _filter_reasons(
            self.cloud.services["nova-scheduler"]["log"])
        host = self.cloud.hypervisor or ""
        self.facts["no_valid_host"] = {"fault": fault,
                                       "rdtfilter_reason": reasons[-1:]}
        self.check(f"rdt:l3_cache_ways={ways} (every way) is No valid "
                   f"host with RDTFilter's reason in the fault",
                   e.status != 0 and srv.get("status") == "ERROR"
                   and "No valid host" in fault and "RDTFilter:" in fault
                   and not (host and re.search(
                       rf"(?<![\w.-]){re.escape(host)}(?![\w.-])",
                       fault)),
                   f"fault: {fault!r}; RDTFilter in nova-scheduler's log: "
                   f"{reasons[-1] if reasons else 'nothing'}")
        sh(f"openstack server delete --wait {SERVER}-huge", timeout=300)
        sh("openstack flavor delete rdt.huge")

    def traits(self) -> None:
        sh = self.sh
        rps = sh.json("openstack resource provider list")
        if not rps:
            self.check("CUSTOM_RDT_* traits", False, "no resource provider")
            return
        rp = rps[0]
        e = sh(f"openstack resource provider trait list {rp['uuid']}")
        rdt = sorted(set(re.findall(r"CUSTOM_RDT_\w+", e.printed)))
        self.facts["traits"] = rdt
        self.check("resource provider trait list shows CUSTOM_RDT_*",
                   e.status == 0 and bool(rdt), ", ".join(rdt) or
                   e.printed[-300:])

    # -- underneath -----------------------------------------------------

    def _nova_xml(self, uuid: str) -> str | None:
        """The domain XML nova-compute built for the server, from its own
        debug log (``End _get_guest_xml xml=...``: the document it hands
        to libvirt's defineXML)."""
        return nova_guest_xml(self.cloud.services["nova-compute"]["log"],
                              uuid)

    def _groups_of(self, domain: str) -> dict[str, str]:
        """resctrl groups named after the domain (libvirt's
        ``qemu-<id>-<name>-vcpus_<list>``) -> their schemata."""
        root = self.cloud.lab.resctrl_root
        out = {}
        for entry in sorted(os.listdir(root)):
            if domain in entry and os.path.isdir(os.path.join(root, entry)):
                with open(os.path.join(root, entry, "schemata")) as f:
                    out[entry] = f.read()
        return out

    def _console(self, uuid: str) -> None:
        """The guest runs: its console (``console.log``, which virtlogd
        writes from the domain's serial port) shows the line the image
        prints once it runs (the Linux guest's init)."""
        guest = self.cloud.guest
        want = guest.ready_line if guest else "nova-rdt-guest:"
        path = os.path.join(self.cloud.nova.data, "instances", uuid,
                            "console.log")
        deadline = time.monotonic() + CONSOLE_WAIT
        text = ""
        while time.monotonic() < deadline:
            try:
                with open(path, errors="replace") as f:
                    text = f.read()
            except OSError:
                text = ""
            if want in text:
                break
            time.sleep(1)
        lines = [ln for ln in text.splitlines() if ln.strip()]
        self.facts["guest_console"] = lines[-5:]
        ran = want in text
        kind = guest.kind if guest else "guest"
        self.check(f"the guest runs ({kind} image, libvirt domain type "
                   f"{self.cloud.machine.virt_type})", ran,
                   f"its console says {want!r}" if ran else
                   f"no {want!r} in {CONSOLE_WAIT:.0f} s; {len(lines)} "
                   f"lines" + (f", last: {lines[-1][:120]!r}" if lines
                               else ""))

    def _fault(self) -> dict:
        try:
            srv = self.sh.json(f"openstack server show {SERVER}")
        except RuntimeError as e:
            self.say(f"  server show: {e}")
            return {}
        fault = srv.get("fault") or {}
        self.say(f"  fault: {fault.get('message', fault)}")
        self.facts["fault"] = fault
        return fault

    def _write(self, name: str, text: str) -> None:
        d = os.path.join(self.out_dir, "cloud")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, name), "w") as f:
            f.write(text)


def _image() -> str:
    from nova_rdt.lab.allinone import cloud as cloud_mod
    return cloud_mod.IMAGE


def _cbm_len(root: str) -> int:
    """Ways of the L3 cache (``info/L3/cbm_mask``'s bits)."""
    for res in ("L3", "L3DATA"):
        try:
            with open(os.path.join(root, "info", res, "cbm_mask")) as f:
                return bin(int(f.read().strip(), 16)).count("1")
        except OSError:
            continue
    raise RuntimeError(f"no L3 in {root}/info")


def _libvirt_refusal(log_path: str) -> str | None:
    """libvirt's error for a domain with resctrl elements that is not a
    KVM domain (qemuValidateDomainDef), as nova-compute logged it."""
    try:
        with open(log_path, errors="replace") as f:
            for line in f:
                m = re.search(r"libvirtError: (unsupported configuration: "
                              r"cachetune is only supported for KVM "
                              r"domains)", line)
                if m:
                    return m.group(1)
    except OSError:
        pass
    return None


def _filter_reasons(log_path: str) -> list[str]:
    """RDTFilter's reasons for refusing a host (its debug lines)."""
    out = []
    with open(log_path, errors="replace") as f:
        for line in f:
            # oslo.log ends a debug line with " <function> <file>:<line>".
            m = re.search(r"RDTFilter: (.* fails: .*?)(?: \w+ \S+\.py:\d+)?$",
                          line.rstrip())
            if m:
                out.append(m.group(1)[:400])
    return out


def tempest_run(workspace: str, env: dict, regex: str = "tempest_plugin",
                timeout: float = 900.0) -> dict:
    """``tempest run --regex tempest_plugin`` in the workspace; the counts
    and each skip's reason, from its own output."""
    bindir = os.path.dirname(sys.executable)
    argv = [os.path.join(bindir, "tempest"), "run", "--regex", regex,
            "--concurrency", "1"]
    t0 = time.monotonic()
    res = subprocess.run(argv, cwd=workspace, env=env, capture_output=True,
                         text=True, timeout=timeout)
    out = res.stdout + res.stderr
    with open(os.path.join(workspace, "tempest-run.txt"), "w") as f:
        f.write(out)
    counts = {}
    for key in ("Passed", "Skipped", "Failed", "Expected Fail",
                "Unexpected Success"):
        m = re.search(rf"^\s*- {key}: (\d+)", out, re.M)
        counts[key.lower().replace(" ", "_")] = int(m.group(1)) if m else 0
    skips = re.findall(r"^\{\d+\} (.+?) \.\.\. SKIPPED: (.*)$", out, re.M)
    failures = re.findall(r"^\{\d+\} (\S+) \[[^\]]*\] \.\.\. FAILED", out,
                          re.M)
    return {"command": " ".join(["tempest", *argv[1:]]),
            "status": res.returncode, "seconds":
            round(time.monotonic() - t0, 1), **counts,
            "skips": [{"test": t, "reason": r} for t, r in skips],
            "failures": failures, "output": "tempest-run.txt",
            "lines": own_lines(out)}


def own_lines(out: str) -> list[str]:
    """Tempest's own verdict lines (one per test, ``... ok``, ``...
    SKIPPED: why``, ``... FAILED``) and its Totals block, as it printed
    them."""
    lines = [ln for ln in out.splitlines()
             if re.match(r"^\{\d+\} \S+.* \.\.\. (ok|SKIPPED|FAILED)", ln)]
    m = re.search(r"^=+\nTotals\n=+\n(.*?)(?:\n\s*\n|\n=+\n|\Z)", out,
                  re.M | re.S)
    if m:
        lines += ["Totals"] + [ln for ln in m.group(1).splitlines()
                               if ln.strip()]
    return lines


def _one(text: str) -> str:
    """The line of the CLI's output that says what happened."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "rdt:" in ln or "403" in ln or "Forbidden" in ln:
            return ln[:400]
    return (lines[-1] if lines else "")[:400]


def _first(text: str, field: str) -> str:
    for ln in text.splitlines():
        if re.match(rf"\|\s*{field}\s*\|", ln):
            return ln.strip()
    return ""


def nova_guest_xml(log_path: str, uuid: str) -> str | None:
    """The last domain XML nova-compute logged for instance ``uuid``."""
    marker = "End _get_guest_xml xml="
    found = None
    with open(log_path, errors="replace") as f:
        lines = iter(f)
        for line in lines:
            if marker not in line or f"[instance: {uuid}]" not in line:
                continue
            doc = [line.split(marker, 1)[1].rstrip("\n")]
            for more in lines:
                doc.append(more.rstrip("\n"))
                if more.strip() == "</domain>":
                    break
            found = "\n".join(doc)
    return found


def _path(el) -> str:
    parts = []
    while el is not None and isinstance(el.tag, str):
        parts.append(el.tag)
        el = el.getparent()
    return "/".join(reversed(parts))


#: Values libvirt rewrites to their canonical form when it defines a
#: domain: (element path, attribute) -> whether libvirt's value is
#: Nova's, canonical.  The machine type alias "pc" becomes the versioned
#: machine it stands for ("pc-i440fx-7.2").
CANONICAL = {("domain/os/type", "machine"):
             lambda nova, libvirt: libvirt.startswith(nova + "-")}


def _contains(nova, libvirt, missing: list) -> bool:
    """Whether ``libvirt`` holds ``nova``: every attribute with its value,
    the text, and each child matched by a distinct child of libvirt's."""
    ok = True
    for k, v in nova.attrib.items():
        same = CANONICAL.get((_path(nova), k))
        if same is not None and libvirt.get(k) is not None and \
                same(v, libvirt.get(k)):
            continue
        if libvirt.get(k) != v:
            missing.append(f"{_path(nova)}@{k}={v!r} (libvirt: "
                           f"{libvirt.get(k)!r})")
            ok = False
    if (nova.text or "").strip() and \
            (nova.text or "").strip() != (libvirt.text or "").strip():
        missing.append(f"{_path(nova)} text {nova.text.strip()!r}")
        ok = False
    theirs = [c for c in libvirt if isinstance(c.tag, str)]
    used: set[int] = set()
    for child in nova:
        if not isinstance(child.tag, str):
            continue
        candidates = [i for i, c in enumerate(theirs)
                      if c.tag == child.tag and i not in used]
        for i in candidates:
            if _contains(child, theirs[i], []):
                used.add(i)
                break
        else:
            if candidates:
                _contains(child, theirs[candidates[0]], missing)
            else:
                missing.append(f"{_path(child)} (no such element)")
            ok = False
    return ok


def _added(nova, libvirt, out: list) -> None:
    for k, v in libvirt.attrib.items():
        if k not in nova.attrib:
            out.append(f"{_path(libvirt)}@{k}={v}")
    tags = [c.tag for c in nova if isinstance(c.tag, str)]
    for c in libvirt:
        if not isinstance(c.tag, str):
            continue
        if c.tag in tags:
            tags.remove(c.tag)
            match = next(n for n in nova if n.tag == c.tag)
            _added(match, c, out)
        else:
            out.append(_canon(c) if "tune" in c.tag or c.tag == "monitor"
                       else _path(c))


def compare_domains(nova_xml: str, libvirt_xml: str
                    ) -> tuple[list[str], list[str]]:
    """(what Nova wrote that libvirt's copy lacks, what libvirt added)."""
    parser = etree.XMLParser(remove_blank_text=True)
    nova = etree.fromstring(nova_xml.encode(), parser)
    libvirt = etree.fromstring(libvirt_xml.encode(), parser)
    missing: list[str] = []
    _contains(nova, libvirt, missing)
    added: list[str] = []
    _added(nova, libvirt, added)
    return missing, added


def _canon(el) -> str:
    """An element as one line: sorted attributes, no whitespace text."""
    attrs = "".join(f' {k}="{v}"' for k, v in sorted(el.attrib.items()))
    kids = "".join(_canon(c) for c in el if isinstance(c.tag, str))
    text = (el.text or "").strip()
    if not kids and not text:
        return f"<{el.tag}{attrs}/>"
    return f"<{el.tag}{attrs}>{text}{kids}</{el.tag}>"


def _tune(xml: str) -> list:
    doc = etree.fromstring(xml.encode())
    return [el for el in doc.iterfind("cputune/*")
            if el.tag in ("cachetune", "memorytune")]


def _rdt_elements(xml: str) -> list[str]:
    """The domain's <cachetune>/<memorytune> elements, canonical."""
    return [_canon(el) for el in _tune(xml)]


def _cache_ids(xml: str) -> list[int]:
    """Cache ids the domain's <cachetune> elements name."""
    return sorted({int(c.get("id")) for el in _tune(xml)
                   if el.tag == "cachetune" for c in el.iterfind("cache")})


def _l3_masks(schemata: str) -> dict[int, int]:
    for line in schemata.splitlines():
        res, _, rest = line.strip().partition(":")
        if res in ("L3", "L3DATA"):
            return {int(k): int(v, 16) for k, v in
                    (p.split("=") for p in rest.split(";") if "=" in p)}
    return {}
