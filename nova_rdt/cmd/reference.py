"""The command reference, read from the parser itself.

doc/source/cli.rst shows it (through doc/source/_ext/nova_rdt_cli.py) and
the tests walk the same leaves, so the documented commands, options and
exit codes are the ones ``nova-rdt`` has: a new command or option, or one
without help or exit codes, shows up in both.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys


@dataclasses.dataclass(frozen=True)
class Leaf:
    """A command that runs (``nova-rdt hook install``)."""
    name: str                         # "hook install", "status upgrade check"
    parser: argparse.ArgumentParser
    exit_codes: dict

    @property
    def options(self) -> list[argparse.Action]:
        return [a for a in self.parser._actions
                if not isinstance(a, argparse._SubParsersAction)]


def _choices_word(parser: argparse.ArgumentParser) -> str:
    """The verb of a leaf whose only positional is one fixed word (the
    ``check`` of ``status upgrade check``)."""
    for a in parser._actions:
        if not a.option_strings and a.choices and len(a.choices) == 1 \
                and not isinstance(a, argparse._SubParsersAction):
            return " " + next(iter(a.choices))
    return ""


def leaves(parser: argparse.ArgumentParser | None = None) -> list[Leaf]:
    """Every runnable command, in the order of ``nova-rdt --help``; the
    lab's own parser stands in for its placeholder."""
    from nova_rdt.cmd import main as main_mod

    out: list[Leaf] = []

    def walk(p: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        subs = [a for a in p._actions
                if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            name = " ".join(path) + _choices_word(p)
            codes = p._defaults.get("exit_codes", {})
            if path == ("lab",):
                from nova_rdt.lab.demo import cli as lab_cli
                p = lab_cli.build_parser()
            out.append(Leaf(name, p, codes))
            return
        for sub in subs:
            for name, child in sub.choices.items():
                walk(child, (*path, name))

    walk(parser or main_mod.build_parser(), ())
    return out


# -- reStructuredText ---------------------------------------------------------

_RST_SPECIAL = str.maketrans({c: "\\" + c for c in "\\*`|_"})
# A flag in running text: a literal, so that Sphinx's smart quotes do not
# make an en dash of its "--".
_FLAG = re.compile(r"(?<![\w`-])(--?[a-z][a-z0-9-]*)")


def _text(s: str) -> str:
    """Help text as plain RST text: ``*.conf`` is not emphasis, and
    ``--config-file`` stays as typed."""
    text = " ".join(s.split()).translate(_RST_SPECIAL)
    return _FLAG.sub(r"``\1``", text).replace("'--'", "``--``")


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help with its %(default)s filled in, as argparse fills it."""
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    params = dict(vars(action), prog=parser.prog)
    if params.get("default") == sys.executable:
        # The interpreter that built the docs says nothing to a reader.
        params["default"] = "the Python running nova-rdt"
    params = {k: v for k, v in params.items() if v is not argparse.SUPPRESS}
    for k, v in params.items():
        if hasattr(v, "__name__"):
            params[k] = v.__name__
    if params.get("choices") is not None:
        params["choices"] = ", ".join(map(str, params["choices"]))
    return action.help % params


def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        return action.metavar or action.dest
    metavar = ""
    if action.nargs != 0:
        metavar = " " + (action.metavar or
                         (("{" + ",".join(map(str, action.choices)) + "}")
                          if action.choices else action.dest.upper()))
    return ", ".join(f"{o}{metavar}" for o in action.option_strings)


def _code_key(code) -> tuple[int, str]:
    return (code, "") if isinstance(code, int) else (1000, str(code))


def exit_code_table(items: list[Leaf] | None = None) -> list[str]:
    """One table: every command and what each of its exit codes means."""
    lines = [".. list-table:: Commands and exit codes",
             "   :header-rows: 1", "   :widths: 25 75", "",
             "   * - Command", "     - Exit status", ""]
    for leaf in items or leaves():
        lines.append(f"   * - ``nova-rdt {leaf.name}``")
        first = True
        for code in sorted(leaf.exit_codes, key=_code_key):
            bullet = "     - * " if first else "       * "
            lines.append(f"{bullet}``{code}``: "
                         f"{_text(leaf.exit_codes[code])}")
            first = False
        if first:
            lines.append("     - (not declared)")
        lines.append("")
    return lines


def command_reference(items: list[Leaf] | None = None) -> list[str]:
    """Per command: what it does, its usage, every option, its exit
    codes."""
    from nova_rdt.cmd import main as main_mod

    helps = {}

    def collect(p, path):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for ca in a._choices_actions:
                    helps[" ".join((*path, ca.dest))] = ca.help or ""
                for name, child in a.choices.items():
                    collect(child, (*path, name))

    collect(main_mod.build_parser(), ())
    lines: list[str] = []
    for leaf in items or leaves():
        title = f"nova-rdt {leaf.name}"
        lines += [title, "-" * len(title), ""]
        about = helps.get(leaf.name.removesuffix(" check"), "") or \
            helps.get(leaf.name, "")
        if about:
            lines += [_text(about[0].upper() + about[1:]) + ".", ""]
        usage = leaf.parser.format_usage().strip()
        lines += [".. code-block:: text", ""]
        lines += ["   " + ln for ln in usage.splitlines()] + [""]
        options = [a for a in leaf.options if a.help != argparse.SUPPRESS]
        if options:
            lines += [".. list-table::", "   :header-rows: 1",
                      "   :widths: 30 70", "", "   * - Option",
                      "     - Meaning"]
            for a in options:
                lines += [f"   * - ``{_flags(a)}``",
                          f"     - {_text(_help(leaf.parser, a)) or '-'}"]
            lines.append("")
        if leaf.exit_codes:
            lines += ["Exit status:", ""]
            for code in sorted(leaf.exit_codes, key=_code_key):
                lines.append(f"* ``{code}``: "
                             f"{_text(leaf.exit_codes[code])}")
            lines.append("")
    return lines
