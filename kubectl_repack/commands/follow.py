"""Following a RepackRun that someone else carries out (the in-cluster controller), shared by
`kubectl repack status NAME -w` and `kubectl repack apply`.

`follow()` only reads: it polls the run until it is finished (Succeeded or Failed) or the timeout
passes, and reports each change. Stopping to follow never stops the run. KeyboardInterrupt is
not caught here: the caller decides what Ctrl-C means (status -w and apply print how to follow
again and exit 130); a progress line left open on a terminal is ended first.
"""
from __future__ import annotations

import datetime as dt
import time
from typing import Callable, Optional, TextIO

# The run API and the error tree (both load the planner) are imported by the functions that use them:
# the commands package, this module included, is imported for --help and every TAB.


class _Silent:
    """A TextIO that drops everything: where progress goes with -o (the object is the whole output)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


SILENT = _Silent()


def progress_key(run: dict) -> tuple:
    """What a reader wants to hear about when it changes: phase, reason, message and the counts
    (relocations, evicted, replacements bound, rejected). While Pending the message is left out, so
    a message that counts down (cooldown) is reported once per reason, not at every poll."""
    from kubectl_repack.api.run import EVICTION_REJECTED, PHASE_PENDING, RunView

    view = RunView(run)
    st = view.status
    phase = view.phase or PHASE_PENDING
    relocs = view.relocations
    counts = (len(relocs), sum(r.eviction.evicted for r in relocs), sum(r.placement.placed for r in relocs),
              sum(r.eviction.phase == EVICTION_REJECTED for r in relocs))
    message = "" if phase == PHASE_PENDING else str(st.get("message") or "")
    return phase, view.reason, message, counts


def describe(run: dict) -> str:
    """One line: `Running (Executing): evictions 1/4, replacements bound 0/1: <message>`."""
    from kubectl_repack.api.run import RunView

    st = RunView(run).status
    phase, reason, _, (total, evicted, bound, rejected) = progress_key(run)
    text = f"{phase} ({reason})" if reason else phase
    if total:
        extra = f", {rejected} rejected" if rejected else ""
        text += f": evictions {evicted}/{total}{extra}, replacements bound {bound}/{evicted}"
    message = str(st.get("message") or "")
    if message:
        text += f"{';' if total else ':'} {message}"
    return text


def _elapsed(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s"


def follow(store, name: str, timeout: dt.timedelta, out: TextIO, tty: bool, poll: float = 1.0,
           sleep: Callable[[float], None] = time.sleep, now: Callable[[], float] = time.monotonic) -> dict:
    """Poll the RepackRun `name` through `store` (a kube.runs.RunStore, or anything with its
    `get(name)`) until it is finished or `timeout` has passed; return the last object read
    (finished or not: the caller tells by api.run.is_finished).

    Reports to `out`: one line per change of progress_key (phase, reason, message, relocation
    counts). With `tty`, the current line is rewritten in place (with the elapsed time) and a new
    line starts when the phase or reason changes; without, plain lines, only on change. `poll` is
    the pause between reads in seconds; `sleep` and `now` (a monotonic clock in seconds) are
    injectable for tests.

    The first read's errors propagate (NotFound: no such run). After it, a failed read (API server
    restarting, network) is reported and retried until the timeout; the run disappearing, or being
    re-created under the same name, raises NotFound.
    """
    from kubectl_repack.api.run import RunView, is_finished
    from kubectl_repack.errors import ClusterAPIError, NotFound

    start = now()
    deadline = start + timeout.total_seconds()
    shown: Optional[tuple] = None   # the progress_key last reported
    line_open = False               # a TTY line waiting to be rewritten or ended
    last_error = ""
    uid, seen = None, False
    run: dict = {}

    def write_line(text: str, rewrite: bool) -> None:
        nonlocal line_open
        if tty:
            if line_open and not rewrite:
                out.write("\n")
            out.write(f"\r\x1b[K{text}")
            line_open = True
        else:
            out.write(text + "\n")
        out.flush()

    try:
        while True:
            try:
                run = store.get(name)
            except NotFound:
                if not seen:   # never seen: the caller's name is wrong, not the run gone
                    raise
                raise NotFound(f"repackrun {name} was deleted while it was followed (kubectl delete, or "
                               "ttlSecondsAfterFinished)", 404) from None
            except ClusterAPIError as e:
                if not seen or now() >= deadline:   # a first read that fails is the caller's error
                    raise
                if str(e) != last_error:
                    last_error = str(e)
                    write_line(f"cannot read repackrun {name} ({e}); retrying", rewrite=False)
                    shown = None
                sleep(poll)
                continue
            last_error = ""
            run_uid = RunView(run).meta.get("uid")
            if not seen:
                uid, seen = run_uid, True
            elif run_uid != uid:
                raise NotFound(f"repackrun {name} was deleted and created again while it was followed "
                               f"(uid {uid} is now {run_uid})", 404)
            key = progress_key(run)
            if tty:
                same_step = shown is not None and shown[:2] == key[:2]
                write_line(f"{describe(run)} [{_elapsed(now() - start)}]", rewrite=same_step)
            elif key != shown:
                write_line(describe(run), rewrite=False)
            shown = key
            if is_finished(run) or now() >= deadline:
                return run
            sleep(max(0.0, min(poll, deadline - now())))
    finally:
        if line_open:
            out.write("\n")
            out.flush()
