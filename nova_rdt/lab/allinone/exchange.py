"""The user's own tools against the cloud, recorded as typed and printed.

Each command runs as a user's shell would run it: ``openstack ...``
with ``OS_CLIENT_CONFIG_FILE`` and ``OS_CLOUD`` from the lab's exports,
and nothing else of the lab's.  :class:`Shell` keeps the transcript
(:meth:`Shell.transcript`), which the lab writes to
``<out>/cloud/exchange.txt``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import sys
import time


@dataclasses.dataclass
class Entry:
    typed: str
    printed: str
    status: int
    seconds: float


class Shell:
    def __init__(self, clouds_yaml: str, cloud: str, env: dict | None = None):
        bindir = os.path.dirname(sys.executable)
        base = dict(env or os.environ)
        base["PATH"] = f"{bindir}:{base.get('PATH', '/usr/bin:/bin')}"
        # A user's shell: no OS_* of whoever started the lab.
        for key in [k for k in base if k.startswith("OS_")]:
            del base[key]
        base["OS_CLIENT_CONFIG_FILE"] = clouds_yaml
        self.env = base
        self.cloud = cloud
        self.entries: list[Entry] = []

    def __call__(self, command: str, cloud: str | None = None,
                 timeout: float = 300.0, record: bool = True) -> Entry:
        """Run ``command`` (as typed: ``openstack flavor list``)."""
        env = dict(self.env, OS_CLOUD=cloud or self.cloud)
        typed = command if cloud in (None, self.cloud) \
            else f"OS_CLOUD={cloud} {command}"
        t0 = time.monotonic()
        res = subprocess.run(shlex.split(command), env=env,
                             capture_output=True, text=True,
                             timeout=timeout)
        entry = Entry(typed, (res.stdout + res.stderr).rstrip("\n"),
                      res.returncode, round(time.monotonic() - t0, 1))
        if record:
            self.entries.append(entry)
        return entry

    def json(self, command: str, cloud: str | None = None):
        """A command with ``-f json``, parsed (not in the transcript)."""
        e = self(command + " -f json", cloud, record=False)
        if e.status != 0:
            raise RuntimeError(f"{command}: {e.printed[-1000:]}")
        return json.loads(e.printed)

    def transcript(self) -> str:
        out = []
        for e in self.entries:
            out.append(f"$ {e.typed}")
            if e.printed:
                out.append(e.printed)
            out.append(f"# exit status {e.status}, {e.seconds} s")
            out.append("")
        return "\n".join(out)
