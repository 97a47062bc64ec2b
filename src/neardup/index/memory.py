"""What an open index does about the memory of its process: no garbage collection while a
batch builds its objects, the index's objects out of the collector's sight after, and the
heap's freed blocks given back to the system after the steps that free many.

Why a module of its own: the opening, a batch, a merge and a save of the graph each call
these at their own moments; none of them is about the index's state or files.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
from collections.abc import Iterator

import pyarrow as pa


@contextlib.contextmanager
def no_collection() -> Iterator[None]:
    """No garbage collection while a batch builds its objects: they form no cycles, and a
    collection in the middle would walk every object the batch made so far, again and
    again. `freeze_objects` puts them out of reach after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def freeze_objects() -> None:
    """Move the index's objects out of the garbage collector's sight (`gc.freeze`).

    A million pages are millions of long-lived dicts, sets and page objects; without this,
    every full collection walks them all (about a second at a million pages), and a request
    that happens to trigger one waits for it: the p99 of `/status`. They form no cycles to
    collect, and objects dropped later are still freed by reference counting."""
    gc.collect(0)
    gc.freeze()


def unfreeze_objects() -> None:
    """What `freeze_objects` hid is collectable again (and finalised at exit)."""
    gc.unfreeze()


def return_freed() -> None:
    """Give the C heap's free pages back to the system (glibc's `malloc_trim`) after
    opening, a merge or a save of the graph. Each makes and frees large blocks (opening
    reads each segment, joins them and copies the columns into the page table; a merge
    and a save fold many rows); glibc keeps those freed blocks for later (its mmap
    threshold rises with each large block freed): about 0.75 KB a page at 100 k pages
    after opening, 169 MB at the end of adding a million pages, never used again.
    Elsewhere than glibc there is nothing to call."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    pa.default_memory_pool().release_unused()  # Arrow's own allocator, likewise


# An index left open at exit is finalised like any object (its writer lock released).
atexit.register(gc.unfreeze)
