"""The C heap under the plugin: freed memory handed back, threads kept to
few arenas.

glibc's malloc keeps what is freed for reuse, in one arena per thread that
allocated (up to 8 per core). A namespace built on a loader thread and
evicted later, rows read on a read thread, a batch written on the writer
thread: each leaves free chunks between live ones in its own arena, and
resident memory ratchets up with every peak of a long run while the live
memory stays flat (docs/decisions.md#d142). Three remedies, all glibc's and
all doing nothing on another C library (musl, macOS, Windows):

- :func:`release_freed_memory` after a large load or eviction
  (``malloc_trim``: the pages free chunks leave empty go back);
- :func:`cap_arenas` once at start (``mallopt(M_ARENA_MAX)``): threads made
  from then on share a few arenas. An operator's ``MALLOC_ARENA_MAX`` wins.
- :func:`map_large_blocks` once at start (``mallopt(M_MMAP_THRESHOLD)``):
  glibc raises the size from which a block is mapped on its own each time
  such a block is freed; then a namespace's arrays and a batch's rows land
  in the arenas and stay resident as free space after they go
  (docs/decisions.md#d166). An operator's ``MALLOC_MMAP_THRESHOLD_`` wins.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from typing import Any

ARENAS = 2  # a Python process's threads mostly wait for the GIL: two arenas are seldom contended
MAPPED_FROM = 256 * 1024  # bytes: a block this large is mapped on its own and unmapped when freed
_M_ARENA_MAX = -8  # malloc.h
_M_MMAP_THRESHOLD = -3


def _libc_function(name: str) -> Callable[..., Any] | None:
    try:
        fn: Callable[..., Any] = getattr(ctypes.CDLL("libc.so.6"), name)  # glibc only
    except (OSError, AttributeError):
        return None
    return fn


_TRIM = _libc_function("malloc_trim")
_MALLOPT = _libc_function("mallopt")


def release_freed_memory() -> None:
    """Hand back to the system the pages that freed memory left empty.
    glibc keeps them for reuse, so a process that built a large namespace
    (its rows, tokens and copies are freed at the end) stays that large
    for good. ctypes lets the GIL go."""
    if _TRIM is not None:
        _TRIM(0)


def cap_arenas(arenas: int = ARENAS) -> bool:
    """At most ``arenas`` malloc arenas for the threads made from now on
    (the plugin's loaders, readers and writer), unless the operator set
    ``MALLOC_ARENA_MAX``. Whether the cap was set."""
    if _MALLOPT is None or os.environ.get("MALLOC_ARENA_MAX"):
        return False
    return bool(_MALLOPT(_M_ARENA_MAX, arenas))


def map_large_blocks(threshold: int = MAPPED_FROM) -> bool:
    """Blocks of ``threshold`` bytes or more are mapped on their own from
    now on, whatever was freed before, unless the operator set
    ``MALLOC_MMAP_THRESHOLD_``. Whether it was set."""
    if _MALLOPT is None or os.environ.get("MALLOC_MMAP_THRESHOLD_"):
        return False
    return bool(_MALLOPT(_M_MMAP_THRESHOLD, threshold))
