"""An opt-in pause of Python's cyclic garbage collector for callers that load and plan large
clusters: both make many short-lived tuples and no cycles worth collecting, and the collector's
passes over them cost seconds at 10,000 nodes. The planner never toggles the process-wide
collector itself (it is a pure library); a CLI or benchmark may wrap its own work in this.
"""
import contextlib
import gc


@contextlib.contextmanager
def paused_gc(freeze=False):
    """Disable cyclic GC for the block, then restore whatever state it had.

    `freeze`: afterwards, the collector never looks at the objects alive then (gc.freeze), so its
    first pass does not walk the millions made in the block (0.5 s at 10,000 nodes). Only for a
    short-lived process (a CLI command): a cycle among those objects is never collected."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if enabled:
            gc.enable()
