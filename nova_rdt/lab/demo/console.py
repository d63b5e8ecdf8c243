"""What ``nova-rdt lab`` shows, and where everything else goes.

The console gets stage headings, progress, tables and the summary.  The
log records of the harness and the libraries (Nova's request logs,
matplotlib's font scoring, ...) and Python warnings go to a log file in
the report directory: the reader of the console should not have to dig
the stages out of them.
"""

from __future__ import annotations

import logging
import sys

LOG_FILE = "lab.log"

#: Loggers whose DEBUG records are noise even in the log file.
_CHATTY = ("matplotlib", "PIL")


class Console:
    """Prints the lab's stages and progress lines."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stdout
        #: The last stage said (the run's clean-up is the next one).
        self.last_stage = 0

    def stage(self, n: int, title: str) -> None:
        self.last_stage = n
        self(f"\n== {n}. {title} " + "=" * max(0, 60 - len(title)))

    def __call__(self, text: str = "") -> None:
        self.stream.write(text + "\n")
        self.stream.flush()


class LogFile:
    """The root logger and Python's warnings, into one file.

    Nova's test framework sets up oslo.log (a stdout handler) when it is
    imported, and its fixtures swap the root handlers while a test runs:
    :meth:`claim` takes the root logger back after either.  Closing
    restores the handlers found at opening.
    """

    def __init__(self, path: str):
        self.path = path
        self.handler = logging.FileHandler(path, encoding="utf-8")
        self.handler.setFormatter(logging.Formatter(
            "%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        self._saved = (list(root.handlers), root.level)
        self._chatty = {name: logging.getLogger(name).level
                        for name in _CHATTY}
        logging.captureWarnings(True)
        for name in _CHATTY:
            logging.getLogger(name).setLevel(logging.INFO)
        self.claim()

    def claim(self) -> None:
        """Make this file the root logger's only handler again."""
        root = logging.getLogger()
        for h in list(root.handlers):
            if h is not self.handler:
                root.removeHandler(h)
        if self.handler not in root.handlers:
            root.addHandler(self.handler)
        root.setLevel(logging.DEBUG)

    def close(self) -> None:
        root = logging.getLogger()
        root.removeHandler(self.handler)
        handlers, level = self._saved
        for h in handlers:
            root.addHandler(h)
        root.setLevel(level)
        for name, lvl in self._chatty.items():
            logging.getLogger(name).setLevel(lvl)
        logging.captureWarnings(False)
        self.handler.close()

    def __enter__(self) -> LogFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
