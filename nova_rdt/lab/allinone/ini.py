"""INI files for the services (oslo.config, paste, uWSGI) from dicts.

A value that is a list becomes one line per item (oslo.config's
multi-valued options); None leaves the option out; booleans are written
as oslo.config spells them.
"""

from __future__ import annotations

from collections.abc import Mapping
import os


def _text(value) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(value)


def render(sections: Mapping[str, Mapping[str, object]]) -> str:
    lines: list[str] = []
    for name, options in sections.items():
        if lines:
            lines.append("")
        lines.append(f"[{name}]")
        for key, value in options.items():
            if value is None:
                continue
            values = value if isinstance(value, (list, tuple)) else [value]
            lines += [f"{key} = {_text(v)}" for v in values]
    return "\n".join(lines) + "\n"


def write(path: str, sections: Mapping[str, Mapping[str, object]],
          mode: int = 0o640) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(render(sections))
    os.chmod(path, mode)
    return path
