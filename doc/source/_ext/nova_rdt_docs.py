"""Sphinx directives that render nova-rdt's reference from the code.

* ``.. nova-rdt-exit-codes::``: the table of every command and its exit
  codes, from each parser's ``exit_codes``;
* ``.. nova-rdt-commands::``: every command's usage, options and exit
  codes, from the parser;
* ``.. nova-rdt-options:: module:function``: the options a ``list_opts``
  style function returns, as oslo.config's ``show-options`` renders an
  entry point's (for groups no entry point lists, such as the privsep
  context's ``[nova_rdt_privileged]``).
"""

from __future__ import annotations

import importlib

from docutils import nodes
from docutils.parsers import rst
from docutils.statemachine import StringList
from sphinx.util.nodes import nested_parse_with_titles


def _render(directive, lines):
    node = nodes.section()
    node.document = directive.state.document
    source = directive.state.document.current_source
    nested_parse_with_titles(directive.state,
                             StringList(lines, source), node)
    return node.children


class ExitCodes(rst.Directive):
    def run(self):
        from nova_rdt.cmd import reference
        return _render(self, reference.exit_code_table())


class Commands(rst.Directive):
    def run(self):
        from nova_rdt.cmd import reference
        return _render(self, reference.command_reference())


class Options(rst.Directive):
    required_arguments = 1

    def run(self):
        # oslo.config's own formatter, so that these groups read (and
        # cross-reference) exactly as show-options' do.
        from oslo_config import cfg
        from oslo_config import sphinxext

        module, _, func = self.arguments[0].partition(":")
        lines = []
        for group, opts in getattr(importlib.import_module(module), func)():
            name = group.name if isinstance(group, cfg.OptGroup) else group
            lines += list(sphinxext._format_group_opts(
                None, name, group if isinstance(group, cfg.OptGroup)
                else None, opts))
        return _render(self, lines)


def setup(app):
    app.add_directive("nova-rdt-exit-codes", ExitCodes)
    app.add_directive("nova-rdt-commands", Commands)
    app.add_directive("nova-rdt-options", Options)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
