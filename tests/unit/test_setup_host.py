"""``tools/setup-host.sh``'s Debian package step on a machine that lacks
packages, which CI's machines (holding every package) never show.

The script runs from a copy of ``tools/`` in a scratch checkout, with
fake ``dpkg-query``, ``apt-get`` and ``id`` first on ``PATH``.  The fake
``dpkg-query`` behaves as the real one does on a bare machine: it prints
what it knows, says "no packages found matching" for the rest, and then
exits 1.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "tools", "setup-host.sh")

FAKE_DPKG_QUERY = r"""#!/bin/bash
# dpkg-query -W -f=FORMAT PKG...: FORMAT is ignored, "${Package} ${Status}".
rc=0
for p in "$@"; do
    case "$p" in -*) continue ;; esac
    if grep -qxF "$p" "$FAKE_STATE/installed"; then
        echo "$p install ok installed"
    elif grep -qxF "$p" "$FAKE_STATE/removed" 2>/dev/null; then
        echo "$p deinstall ok config-files"
    else
        echo "dpkg-query: no packages found matching $p" >&2
        rc=1
    fi
done
exit $rc
"""

FAKE_APT_GET = r"""#!/bin/bash
echo "apt-get $*" >> "$FAKE_STATE/apt-calls"
if [ "$1" = install ]; then
    if [ -n "${FAKE_APT_FAIL:-}" ]; then
        echo "E: $FAKE_APT_FAIL" >&2
        exit 100
    fi
    for p in "$@"; do
        case "$p" in -*|install) continue ;; esac
        [ -n "${FAKE_APT_SKIP:-}" ] && [ "$p" = "$FAKE_APT_SKIP" ] && continue
        echo "$p" >> "$FAKE_STATE/installed"
    done
fi
exit 0
"""

FAKE_ID = "#!/bin/sh\necho 0\n"


def _packages() -> list[str]:
    text = open(SCRIPT).read()
    body = re.search(r"^packages=\((.*?)\)", text, re.S | re.M).group(1)
    return body.split()


@pytest.fixture
def host(tmp_path):
    """A scratch checkout and a fake host; returns run(installed, **env)."""
    top = tmp_path / "checkout"
    (top / "tools").mkdir(parents=True)
    shutil.copy(SCRIPT, top / "tools" / "setup-host.sh")
    fake = tmp_path / "bin"
    fake.mkdir()
    for name, text in (("dpkg-query", FAKE_DPKG_QUERY),
                       ("apt-get", FAKE_APT_GET), ("id", FAKE_ID)):
        (fake / name).write_text(text)
        (fake / name).chmod(0o755)
    state = tmp_path / "state"
    state.mkdir()

    def run(installed, removed=(), **env):
        (state / "installed").write_text("".join(f"{p}\n"
                                                 for p in installed))
        (state / "removed").write_text("".join(f"{p}\n" for p in removed))
        res = subprocess.run(
            [str(top / "tools" / "setup-host.sh"), "--packages-only"],
            capture_output=True, text=True, timeout=60,
            # Any directory: the script finds its checkout by itself.
            cwd=tmp_path,
            env={"PATH": f"{fake}:/usr/bin:/bin", "FAKE_STATE": str(state),
                 "NOVA_RDT_POLICY_RC_D": str(tmp_path / "policy-rc.d"),
                 **env})
        calls = (state / "apt-calls").read_text().splitlines() \
            if (state / "apt-calls").exists() else []
        return res, calls
    return run


def test_the_package_list_matches_bindep():
    bindep = open(os.path.join(REPO, "bindep.txt")).read()
    listed = {line.split()[0] for line in bindep.splitlines()
              if line.strip() and not line.startswith("#")}
    assert listed <= set(_packages())


def test_one_missing_package_is_installed_and_named(host):
    everything = _packages()
    res, calls = host([p for p in everything if p != "shellcheck"])
    assert res.returncode == 0, res.stdout + res.stderr
    assert "setup-host: installing Debian packages: shellcheck" in res.stdout
    installs = [c for c in calls if c.startswith("apt-get install")]
    assert len(installs) == 1 and installs[0].split()[-1] == "shellcheck"
    assert installs[0].split().count("shellcheck") == 1
    # The package lists are refreshed first, on a machine that may never
    # have had them.
    assert calls[0].startswith("apt-get update")


def test_a_removed_package_with_config_files_left_counts_as_missing(host):
    everything = _packages()
    res, calls = host([p for p in everything if p != "prometheus"],
                      removed=["prometheus"])
    assert res.returncode == 0, res.stderr
    assert any(c.startswith("apt-get install") and "prometheus" in c
               for c in calls)


def test_nothing_missing_calls_no_apt_get_and_says_nothing(host):
    res, calls = host(_packages())
    assert res.returncode == 0, res.stderr
    assert calls == []
    assert res.stdout == "" and res.stderr == ""


def test_a_bare_machine_gets_every_package(host):
    res, calls = host(["python3", "git"])
    assert res.returncode == 0, res.stderr
    install = next(c for c in calls if c.startswith("apt-get install"))
    assert set(install.split()) >= set(_packages()) - {"python3", "git"}
    assert "python3" not in install.split()


def test_a_failing_apt_get_shows_its_command_and_message(host):
    res, _calls = host([p for p in _packages() if p != "shellcheck"],
                       FAKE_APT_FAIL="Unable to locate package shellcheck")
    assert res.returncode == 100
    assert "apt-get install" in res.stderr
    assert "E: Unable to locate package shellcheck" in res.stderr
    assert "exit status 100" in res.stderr


def test_a_package_apt_get_skipped_is_named(host):
    res, _calls = host([p for p in _packages() if p != "shellcheck"],
                       FAKE_APT_SKIP="shellcheck")
    assert res.returncode == 1
    assert "apt-get did not install: shellcheck" in res.stderr


def test_policy_rc_d_is_removed_after_the_install(host, tmp_path):
    res, _calls = host([p for p in _packages() if p != "shellcheck"])
    assert res.returncode == 0
    assert not (tmp_path / "policy-rc.d").exists()
