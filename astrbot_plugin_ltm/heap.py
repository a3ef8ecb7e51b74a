"""Giving the heap's free pages back to the system.

glibc's malloc keeps what is freed in its arenas, one per thread that
allocated: namespaces loaded on the index threads and later evicted, rows
read, batches written. A free chunk between two live ones is never handed
back, so resident memory ratchets up with the peaks of a long run even
though the plugin's caches stay within their bounds (docs/decisions.md#d142).
``malloc_trim`` releases the free pages of every arena; on a C library
without it (musl, macOS, Windows) nothing is done.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
from collections.abc import Callable

from .background import BackgroundTask

TRIM_EVERY = 120.0  # seconds; a trim of a few hundred MB of heap takes milliseconds, on a thread


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


MALLOC_TRIM = _malloc_trim()


class HeapTrim:
    """A background task that trims the heap every ``every`` seconds."""

    def __init__(self, every: float = TRIM_EVERY, trim: Callable[[int], int] | None = MALLOC_TRIM) -> None:
        self._trim = trim
        self.trims = 0  # trims done (diagnostics, tests)
        self.task = BackgroundTask("heap-trim", self.step, every=every)

    @property
    def available(self) -> bool:
        return self._trim is not None

    async def step(self) -> None:
        if self._trim is not None:
            await asyncio.to_thread(self._trim, 0)
            self.trims += 1
