"""Each package's docstring lists what the package holds, one line each,
and nothing that is gone (issue 38: two listed removed modules)."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

PKG = pathlib.Path(__file__).resolve().parents[2] / "nova_rdt"
ENTRY = re.compile(r"^\* ``(\w+)``: ", re.MULTILINE)


def _listed_packages() -> list[pathlib.Path]:
    return sorted(p.parent for p in PKG.glob("*/__init__.py")
                  if ENTRY.search(_doc(p.parent)))


def _doc(package: pathlib.Path) -> str:
    tree = ast.parse((package / "__init__.py").read_text())
    return ast.get_docstring(tree) or ""


def _held(package: pathlib.Path) -> set[str]:
    modules = {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
    packages = {p.name for p in package.iterdir()
                if (p / "__init__.py").is_file()}
    return modules | packages


def test_the_packages_issue_38_named_list_their_modules():
    names = {p.name for p in _listed_packages()}
    assert {"allocation", "hook", "host", "virt", "resctrl"} <= names


@pytest.mark.parametrize("package", _listed_packages(),
                         ids=lambda p: p.name)
def test_a_package_docstring_lists_exactly_what_is_there(package):
    listed = ENTRY.findall(_doc(package))
    assert len(listed) == len(set(listed)), "listed twice"
    assert set(listed) == _held(package)


@pytest.mark.parametrize("package", _listed_packages(),
                         ids=lambda p: p.name)
def test_each_entry_is_one_line(package):
    doc = _doc(package)
    for m in ENTRY.finditer(doc):
        line_end = doc.index("\n", m.start()) if "\n" in doc[m.start():] \
            else len(doc)
        following = doc[line_end + 1:line_end + 2]
        # The next line is another entry, a blank line or the end.
        assert following in ("*", "\n", ""), doc[m.start():line_end]
