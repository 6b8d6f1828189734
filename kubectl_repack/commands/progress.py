"""Progress of a long `plan` on stderr: which objects are being listed, which planning round runs.

A large cluster takes seconds to list and to plan; on a terminal one status line, redrawn in place
and cleared before the result is printed, says where the command is. Anywhere else (a pipe, a file,
a CI log, a test's captured output) it prints nothing: those readers want the result only.
"""
from __future__ import annotations

import sys
import time
from typing import Callable, Optional, TextIO

REDRAW_SECONDS = 0.1    # at most ten redraws a second: the planner reports every round
CLEAR = "\r\033[K"      # back to the start of the line, erase it


def is_terminal(stream) -> bool:
    """Whether `stream` is an interactive terminal."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


class Progress:
    """A callable for kube.objects.list_objects and planner.plan that draws one line on `stream`
    (default stderr) when it is a terminal, and does nothing otherwise."""

    def __init__(self, stream: Optional[TextIO] = None, clock: Callable[[], float] = time.monotonic,
                 enabled: Optional[bool] = None):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = is_terminal(self.stream) if enabled is None else enabled
        self.clock = clock
        self._last = float("-inf")
        self._shown = False

    def __call__(self, what: str, k, n=None) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if now - self._last < REDRAW_SECONDS:
            return
        self._last = now
        self._draw(self.text(what, k, n))

    @staticmethod
    def text(what: str, k, n=None) -> str:
        """The status line for one report."""
        if what == "listing":
            return f"listing {k}: {n:,}"
        if what == "round":
            return f"planning: round {k:,} of at most {max(k, n or 0):,}"
        if what == "alternative":
            return f"planning: trying alternative plan {k:,}"
        return f"{what} {k}"

    def step(self, text: str) -> None:
        """Show a phase that reports nothing on its own (e.g. loading the objects)."""
        if self.enabled:
            self._last = self.clock()
            self._draw(text)

    def _draw(self, text: str) -> None:
        try:
            self.stream.write(CLEAR + text)
            self.stream.flush()
            self._shown = True
        except (OSError, ValueError):  # the terminal went away: progress is not worth an error
            self.enabled = False

    def done(self) -> None:
        """Erase the line (before the result is printed)."""
        if self._shown:
            try:
                self.stream.write(CLEAR)
                self.stream.flush()
            except (OSError, ValueError):
                pass
            self._shown = False
