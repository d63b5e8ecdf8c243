"""The exporter's page in a real headless Chromium, on the ONP layout."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from lxml import html
import pytest

from tests.functional.exporter import onp
from tests.functional.exporter.proc import ExporterProcess

pytestmark = pytest.mark.fuse

ARTIFACTS = os.environ.get("NOVA_RDT_ARTIFACTS", "/tmp/nova-rdt-artifacts")


def _chromium():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("no chromium (apt-get install chromium)")
    return exe


def _browse(exe, url, *args, timeout=90):
    with tempfile.TemporaryDirectory(prefix="nova-rdt-chromium-") as profile:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses.
        cmd = [exe, "--headless=new", "--no-sandbox", "--disable-gpu",
               "--disable-dev-shm-usage", "--no-first-run",
               f"--user-data-dir={profile}", "--hide-scrollbars",
               "--virtual-time-budget=5000", *args, url]
        res = subprocess.run(cmd, capture_output=True, text=True,
                             timeout=timeout, env={**os.environ,
                                                   "HOME": profile})
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


@pytest.mark.parametrize("emulator", ["e5-2658-v3"], indirect=True)
def test_way_map_shows_the_onp_owners(emulator, tmp_path):
    exe = _chromium()
    onp.write_layout(emulator.mountpoint, str(tmp_path))
    exp = ExporterProcess(emulator.mountpoint, emulator.sysfs_cpu,
                          str(tmp_path), host="compute-onp").start()
    url = exp.url + "/"
    try:
        dom = html.fromstring(_browse(exe, url, "--dump-dom"))
        os.makedirs(ARTIFACTS, exist_ok=True)
        png = os.path.join(ARTIFACTS, "waymap-onp.png")
        if os.path.exists(png):
            os.unlink(png)
        _browse(exe, url, f"--screenshot={png}", "--window-size=1100,760")
    finally:
        exp.stop()

    assert dom.body.get("data-ready") == "1"
    assert dom.get_element_by_id("host").text_content() == "compute-onp"
    for cache_id in (0, 1):
        cells = dom.xpath(f"//div[@data-cache='L3:{cache_id}']"
                          f"//div[@data-way]")
        owners = {int(c.get("data-way")): set(
            filter(None, c.get("data-owners").split("|"))) for c in cells}
        assert sorted(owners) == list(range(20))
        for way, who in owners.items():
            want = set()
            if onp.ROOT_MASK >> way & 1:
                want.add("/")
            for group, mask, *_ in (onp.PMD, onp.VM0, onp.VM1):
                if mask >> way & 1:
                    want.add(group)
            assert who == want, (cache_id, way)
        # Table 3-1's relations, as drawn: the PMD overlaps both VMs,
        # the VMs never overlap each other, the OS overlaps nobody.
        overlap = sorted(w for w, who in owners.items()
                         if onp.PMD[0] in who and len(who) == 2)
        assert overlap == list(range(4, 20))
    legend = {s.get("data-group"): s.text_content()
              for s in dom.xpath("//div[@id='legend']/span[@data-group]")}
    assert "vm0 (instance)" in legend[onp.VM0[0]]
    assert "OVS PMD (pmd)" in legend[onp.PMD[0]]
    with open(png, "rb") as f:
        head = f.read(8)
    assert head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(png) > 10_000
