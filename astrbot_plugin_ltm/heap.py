"""The C heap under the plugin: freed memory handed back, threads kept to few arenas.

glibc keeps freed memory in one arena per thread, so resident memory ratchets up
with each peak while live memory stays flat (docs/decisions.md#d142). Each remedy
is glibc's and does nothing elsewhere; the operator's MALLOC_* variables win.
glibc raises its mmap threshold as large blocks are freed, after which they stay
resident as free space: hence a fixed one (docs/decisions.md#d166).
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
    """Hand back the pages freed memory left empty (``malloc_trim``); ctypes lets the GIL go."""
    if _TRIM is not None:
        _TRIM(0)


def cap_arenas() -> bool:
    """At most ARENAS arenas for the threads made from now on; whether the cap was set."""
    if _MALLOPT is None or os.environ.get("MALLOC_ARENA_MAX"):
        return False
    return bool(_MALLOPT(_M_ARENA_MAX, ARENAS))


def map_large_blocks() -> bool:
    """Blocks of MAPPED_FROM bytes or more are mapped on their own from now on; whether it was set."""
    if _MALLOPT is None or os.environ.get("MALLOC_MMAP_THRESHOLD_"):
        return False
    return bool(_MALLOPT(_M_MMAP_THRESHOLD, MAPPED_FROM))
