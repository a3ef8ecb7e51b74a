"""Where a process's memory goes, cheaply enough to ask once a window.

RSS alone cannot tell a cache filling towards its bound from a leak; these
figures split it: the heap malloc hands out and the free space it keeps,
SQLite's own allocations (its page caches), the plugin's text caches, and
Python's live blocks.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import sys
from typing import Any


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def _libc_mallinfo2() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):  # not glibc, or glibc < 2.33
        return None
    fn.restype = _MallInfo2
    return fn


def _sqlite_memory_used() -> Any:
    try:
        import _sqlite3

        fn = ctypes.CDLL(_sqlite3.__file__).sqlite3_memory_used
    except (ImportError, OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int64
    return fn


_MALLINFO = _libc_mallinfo2()
_SQLITE_USED = _sqlite_memory_used()


def deep_bytes(value: Any, depth: int = 3) -> int:
    """sys.getsizeof of ``value`` and, a few levels down, what it holds."""
    size = sys.getsizeof(value)
    # A copy first: a cache filled by another thread (the read threads' token
    # counts) must not change under the iteration.
    if depth and isinstance(value, (tuple, list, frozenset, set)):
        size += sum(deep_bytes(v, depth - 1) for v in _copied(lambda: list(value)))
    elif depth and isinstance(value, dict):
        size += sum(deep_bytes(k, depth - 1) + deep_bytes(v, depth - 1)
                    for k, v in _copied(lambda: list(value.items())))
    return size


def _copied(take: Any) -> list[Any]:
    for _ in range(10):
        try:
            return list(take())
        except RuntimeError:  # changed size during the copy: try again
            continue
    return []


def lru_cache_bytes(cache: Any) -> int:
    """The bytes a functools.lru_cache's keys and values hold. A bounded
    cache's dict maps each key to a link gc cannot see into; the cache
    itself shows gc each link's key and value, so the values are counted
    from there (the keys once, from the dict)."""
    referents = gc.get_referents(cache)
    tables = [ref for ref in referents if isinstance(ref, dict)]  # the cache's dict and the wrapper's __dict__
    keys = {id(key) for table in tables for key in table}
    values = [ref for ref in referents if id(ref) not in keys and not isinstance(ref, (dict, type))
              and type(ref) is not object and not callable(ref)]  # not its type, function or marker
    return sum(deep_bytes(table) for table in tables) + sum(deep_bytes(value) for value in values)


def text_caches(package: str = "astrbot_plugin_ltm") -> dict[str, dict[str, int]]:
    """Every functools.lru_cache of ``package`` alive: its entries and the
    bytes its keys and values hold (found through gc)."""
    out: dict[str, dict[str, int]] = {}
    for obj in gc.get_objects():
        if not isinstance(obj, functools._lru_cache_wrapper):
            continue
        wrapped = getattr(obj, "__wrapped__", None)
        module = getattr(wrapped, "__module__", "") or ""
        if not module.startswith(package):
            continue
        name = f"{module.removeprefix(package + '.')}.{getattr(wrapped, '__qualname__', '?')}"
        held = lru_cache_bytes(obj)
        entry = out.setdefault(name, {"entries": 0, "bytes": 0})
        entry["entries"] += obj.cache_info().currsize
        entry["bytes"] += held
    return out


def account() -> dict[str, Any]:
    """The split, in MB (None where this platform cannot say)."""
    out: dict[str, Any] = {"python_blocks": sys.getallocatedblocks()}
    if _MALLINFO is not None:
        info = _MALLINFO()
        out["malloc_in_use_mb"] = (info.uordblks + info.hblkhd) / 2**20
        out["malloc_free_kept_mb"] = info.fordblks / 2**20
    out["sqlite_mb"] = _SQLITE_USED() / 2**20 if _SQLITE_USED is not None else None
    caches = text_caches()
    out["text_caches_mb"] = sum(c["bytes"] for c in caches.values()) / 2**20
    out["text_caches"] = {k: {"entries": v["entries"], "mb": round(v["bytes"] / 2**20, 2)}
                          for k, v in sorted(caches.items(), key=lambda kv: -kv[1]["bytes"])}
    return out
