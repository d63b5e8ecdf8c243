"""The failpoint API: off by default, armed by env or fixture, and every
``hit()`` in the tree names a registered point."""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from nova_rdt import failpoints as fp

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean():
    fp.disarm()
    yield
    fp.disarm()


def _hit_literals():
    """(file, name) of every failpoints.hit("...") call in nova_rdt."""
    out = []
    for path in sorted((ROOT / "nova_rdt").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            f = node.func
            called = (f.attr if isinstance(f, ast.Attribute)
                      else f.id if isinstance(f, ast.Name) else None)
            owner = (f.value.id if isinstance(f, ast.Attribute)
                     and isinstance(f.value, ast.Name) else None)
            if called != "hit" or owner not in ("failpoints", "fp"):
                continue
            arg = node.args[0]
            assert isinstance(arg, ast.Constant) and \
                isinstance(arg.value, str), \
                f"{path}:{node.lineno}: hit() takes a literal name"
            out.append((f"{path.relative_to(ROOT)}:{node.lineno}",
                        arg.value))
    return out


def test_every_hit_in_the_tree_is_registered():
    hits = _hit_literals()
    unknown = [f"{where}: {name}" for where, name in hits
               if name not in fp.REGISTRY]
    assert not unknown, "\n".join(unknown)


def test_every_registered_point_is_placed_somewhere():
    placed = {name for _where, name in _hit_literals()}
    assert set(fp.REGISTRY) - placed == set()


def test_the_brief_s_points_exist():
    for name in ("driver.after_claim", "driver.after_define",
                 "migration.before_xml_rewrite",
                 "migration.after_xml_rewrite", "migration.dest_claim",
                 "migration.source_release",
                 "agent.between_schemata_and_record", "agent.pmd_update",
                 "agent.class_update", "records.write", "records.rename",
                 "reconcile.remove"):
        assert name in fp.REGISTRY


def test_names_are_dotted_and_described():
    for name, what in fp.REGISTRY.items():
        area, _, step = name.partition(".")
        assert area and step and name == name.lower(), name
        assert what.strip() and "\n" not in what, name


def test_off_by_default_hit_is_a_no_op():
    for name in fp.REGISTRY:
        fp.hit(name)


@pytest.mark.parametrize("name", sorted(fp.REGISTRY))
def test_raise_names_the_point(name):
    with fp.armed({name: "raise"}):
        with pytest.raises(fp.FailpointError) as e:
            fp.hit(name)
    assert e.value.name == name and name in str(e.value)
    assert isinstance(e.value, RuntimeError)
    fp.hit(name)                  # disarmed on leaving the block


def test_die_is_past_every_except_exception():
    # What an in-process harness arms for a service that should "exit".
    with fp.armed({"driver.after_claim": "die"}):
        with pytest.raises(fp.FailpointDied) as e:
            try:
                fp.hit("driver.after_claim")
            except Exception:               # a service's own handler
                pytest.fail("die was caught as an Exception")
        assert fp.counts() == {"driver.after_claim": 1}
    assert e.value.name == "driver.after_claim"


def test_nth_hit_only():
    with fp.armed({"records.write": "3*raise"}):
        fp.hit("records.write")
        fp.hit("records.write")
        with pytest.raises(fp.FailpointError):
            fp.hit("records.write")
        fp.hit("records.write")   # the 4th passes


def test_trace_counts_without_failing():
    with fp.armed({"records.write": "trace", "records.rename": "2*raise"}):
        for _ in range(3):
            fp.hit("records.write")
        fp.hit("records.rename")
        assert fp.counts() == {"records.write": 3, "records.rename": 1}
    assert fp.counts() == {}


def test_armed_restores_what_was_armed_before():
    fp.arm({"records.rename": "raise"})
    with fp.armed({"records.write": "raise"}):
        assert fp.active() == {"records.rename": "raise",
                               "records.write": "raise"}
    assert fp.active() == {"records.rename": "raise"}
    fp.disarm("records.rename")
    assert fp.active() == {}


@pytest.mark.parametrize("text,why", [
    ("nope.point=raise", "'nope.point' is not a failpoint"),
    ("records.write", "is not name=action"),
    ("records.write=explode", "action 'explode'"),
    ("records.write=0*raise", "count '0'"),
    ("records.write=x*raise", "count 'x'"),
    ("=raise", "is not name=action"),
])
def test_arm_refuses_bad_values_naming_them(text, why):
    with pytest.raises(fp.FailpointConfigError, match=why):
        fp.arm(text)
    assert fp.active() == {}


def test_parse_accepts_several_and_spaces():
    assert fp.parse(" records.write = raise ; reconcile.remove=2*exit;") \
        == {"records.write": ("raise", None),
            "reconcile.remove": ("exit", 2)}


def _child(env_value: str | None, body: str):
    env = dict(os.environ)
    env.pop(fp.ENV, None)
    if env_value is not None:
        env[fp.ENV] = env_value
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(body)], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=60)


def test_env_exit_uses_the_exit_code():
    r = _child("records.write=exit", """
        from nova_rdt import failpoints
        failpoints.hit("records.rename")
        failpoints.hit("records.write")
        print("not reached")
    """)
    assert r.returncode == fp.EXIT_CODE
    assert "not reached" not in r.stdout
    assert "failpoint records.write fired" in r.stderr


def test_env_raise_and_count():
    r = _child("reconcile.remove=2*raise", """
        from nova_rdt import failpoints
        failpoints.hit("reconcile.remove")
        print("first passed")
        try:
            failpoints.hit("reconcile.remove")
        except failpoints.FailpointError as e:
            print("raised:", e)
    """)
    assert r.returncode == 0, r.stderr
    assert "first passed" in r.stdout
    assert "raised: failpoint reconcile.remove fired" in r.stdout


def test_env_hang_until_killed():
    env = dict(os.environ, **{fp.ENV: "agent.pmd_update=hang"})
    p = subprocess.Popen(
        [sys.executable, "-c", "from nova_rdt import failpoints\n"
         "print('ready', flush=True)\n"
         "failpoints.hit('agent.pmd_update')\nprint('not reached')"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        with pytest.raises(subprocess.TimeoutExpired):
            p.wait(timeout=1.0)
    finally:
        p.kill()
        p.wait(timeout=10)
        p.stdout.close()
    assert p.returncode == -9


def test_bad_env_value_is_said_once_and_ignored():
    r = _child("records.write=explode;driver.after_claim=raise", """
        from nova_rdt import failpoints
        import importlib
        failpoints.hit("records.write")
        failpoints.hit("driver.after_claim")
        print("alive", failpoints.active())
    """)
    assert r.returncode == 0, r.stderr
    assert "alive {}" in r.stdout
    assert r.stderr.count(fp.ENV) == 1
    assert "action 'explode'" in r.stderr
    assert "Traceback" not in r.stderr
