"""The package layout's promises, checked on the import graph.

doc/source/architecture.rst draws the layers; these tests keep the
drawing true: imports go down, never up, and what a compute node imports
needs neither the lab nor Nova's test tree nor the optional extras.
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PKG = ROOT / "nova_rdt"

# Each layer and the nova_rdt layers it may import (besides itself).
# Layer names are the first package below nova_rdt.
LOWER = {
    "resctrl": set(),
    "allocation": {"resctrl"},
    "emulator": {"resctrl"},
    "privsep": {"allocation", "resctrl", "host"},
    "host": {"allocation", "resctrl"},
    "hook": {"allocation", "resctrl", "host"},
    "conf": {"allocation", "resctrl", "host", "hook"},
    "api": {"allocation", "resctrl"},
    "scheduler": {"allocation", "resctrl", "conf"},
    "virt": {"allocation", "resctrl", "host", "privsep", "conf"},
    "web": set(),
    "exporter": {"allocation", "resctrl", "host", "conf", "web"},
    "rfc2544": set(),
    "controller": {"allocation", "resctrl", "host", "conf", "web"},
}
# Leaf modules at the top, importing only the standard library: every
# layer may import them.
LEAVES = {"failpoints", "cliargs", "naming", "exception"}


def _layer(path: pathlib.Path) -> str:
    rel = path.relative_to(PKG).parts
    return rel[0].removesuffix(".py") if len(rel) > 1 else "<top>"


def _imports(path: pathlib.Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "nova_rdt":
                for a in node.names:
                    yield f"nova_rdt.{a.name}"
            else:
                yield node.module


def _modules():
    return [p for p in sorted(PKG.rglob("*.py"))
            if "__pycache__" not in p.parts]


def test_imports_only_go_down():
    bad = []
    for path in _modules():
        layer = _layer(path)
        if layer not in LOWER:
            continue
        for mod in _imports(path):
            if not mod.startswith("nova_rdt."):
                continue
            target = mod.split(".")[1]
            if target == layer or target in LOWER[layer] or \
                    mod in {f"nova_rdt.{leaf}" for leaf in LEAVES}:
                continue
            bad.append(f"{path.relative_to(ROOT)} imports {mod}")
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_leaves_import_only_the_standard_library():
    """And nova_rdt.exception, itself a leaf that imports nothing else:
    a leaf's errors derive from the one base too."""
    bad = []
    for leaf in sorted(LEAVES):
        path = PKG / f"{leaf}.py"
        for mod in _imports(path):
            top = mod.split(".")[0]
            if top != "__future__" and top not in sys.stdlib_module_names \
                    and not (leaf != "exception"
                             and mod == "nova_rdt.exception"):
                bad.append(f"{path.relative_to(ROOT)} imports {mod}")
    assert not bad, "\n".join(bad)


def test_pure_core_does_no_io_and_imports_no_framework():
    # lxml builds and parses the metadata element in memory: no I/O.
    forbidden = ("os", "subprocess", "socket", "fcntl", "nova", "oslo_",
                 "libvirt")
    bad = []
    for path in (PKG / "allocation").rglob("*.py"):
        for mod in _imports(path):
            if any(mod == f or mod.startswith(f + ".") or
                   (f.endswith("_") and mod.startswith(f))
                   for f in forbidden):
                bad.append(f"{path.relative_to(ROOT)} imports {mod}")
    assert not bad, "\n".join(bad)


COMPUTE_NODE_MODULES = [
    "nova_rdt.resctrl", "nova_rdt.allocation.planner",
    "nova_rdt.allocation.placement", "nova_rdt.host.agent",
    "nova_rdt.hook.main", "nova_rdt.hook.install", "nova_rdt.privsep.resctrl",
    "nova_rdt.privsep.state", "nova_rdt.conf", "nova_rdt.exporter.server",
    "nova_rdt.exporter.sample", "nova_rdt.cmd.main",
]


def test_compute_node_code_needs_no_extras():
    """What a compute node runs imports neither the lab, Nova's test
    tree, nor the optional extras (matplotlib, mfusepy, yaml, tempest)."""
    blocked = ("nova_rdt.lab", "nova.tests", "matplotlib", "mfusepy",
               "yaml", "tempest", "jinja2")
    code = textwrap.dedent(f"""
        import importlib, sys
        BLOCKED = {blocked!r}
        class Block:
            def find_spec(self, name, path=None, target=None):
                if any(name == b or name.startswith(b + ".")
                       for b in BLOCKED):
                    raise ImportError("blocked for this test: " + name)
        sys.meta_path.insert(0, Block())
        for m in {COMPUTE_NODE_MODULES!r}:
            importlib.import_module(m)
    """)
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.parametrize("req", ["matplotlib", "mfusepy", "tempest",
                                 "PyYAML", "nova"])
def test_base_requirements_leave_extras_out(req):
    lines = [ln.split(">")[0].split("=")[0].split("<")[0].strip().lower()
             for ln in (ROOT / "requirements.txt").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    assert req.lower() not in lines
