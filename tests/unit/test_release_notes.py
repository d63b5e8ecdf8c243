"""Release notes: ``reno lint`` passes, and every note is one reno can
publish (its name, its sections, RST that renders without a warning).

Each user-visible change comes with a note in releasenotes/notes
(``reno new <slug>``); ``tox -e releasenotes`` builds them.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
NOTES = os.path.join(REPO, "releasenotes", "notes")
NAME = re.compile(r"^[a-z0-9][a-z0-9-]*-[0-9a-f]{16}\.yaml$")
SECTIONS = {"prelude", "features", "issues", "upgrade", "deprecations",
            "critical", "security", "fixes", "other"}


def _reno() -> str:
    exe = os.path.join(os.path.dirname(sys.executable), "reno")
    found = exe if os.access(exe, os.X_OK) else shutil.which("reno")
    if found is None:
        pytest.skip(f"reno is not installed beside {sys.executable} nor on "
                    "PATH: pip install -r test-requirements.txt")
    return found


def _notes() -> list[str]:
    return sorted(n for n in os.listdir(NOTES) if n.endswith(".yaml"))


def test_reno_lint_passes():
    res = subprocess.run([_reno(), "lint"], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    for bad in ("unrecognized section", "UID collision"):
        assert bad not in res.stderr, res.stderr


def test_there_are_notes():
    assert len(_notes()) >= 1


@pytest.mark.parametrize("name", _notes())
def test_each_note_is_publishable(name):
    docutils = pytest.importorskip("docutils.core")
    assert NAME.match(name), (
        f"{name}: name it <slug>-<16 hex>.yaml ('reno new <slug>')")
    with open(os.path.join(NOTES, name)) as f:
        doc = yaml.safe_load(f)
    assert isinstance(doc, dict) and doc, name
    assert set(doc) <= SECTIONS, set(doc) - SECTIONS
    for section, items in doc.items():
        entries = [items] if section == "prelude" else items
        assert isinstance(entries, list) and entries, (name, section)
        for text in entries:
            assert isinstance(text, str) and text.strip(), (name, section)
            errors = io.StringIO()
            docutils.publish_doctree(
                text, settings_overrides={"warning_stream": errors,
                                          "report_level": 2})
            assert errors.getvalue() == "", (name, section,
                                             errors.getvalue())
