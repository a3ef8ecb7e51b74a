"""The C heap under the plugin (astrbot_plugin_ltm/heap.py): threads made
after the cap share few arenas; large blocks are mapped on their own and
leave no free space behind; the operator's MALLOC_* settings win."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from astrbot_plugin_ltm import heap

GLIBC = heap._MALLOPT is not None
ROOT = Path(__file__).resolve().parents[1]

# Eight threads alive at once, each allocating from malloc (2 KB objects pass Python's small-object
# allocator), then the arenas counted from glibc's malloc_info.
ARENAS_AFTER_THREADS = r"""
import ctypes, json, sys, threading
from astrbot_plugin_ltm.heap import cap_arenas
capped = cap_arenas() if sys.argv[1] == "cap" else False
allocated, done = threading.Semaphore(0), threading.Event()
def work():
    kept = [bytes(2000) + bytes([i % 256]) for i in range(500)]
    allocated.release()
    done.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for _ in threads: allocated.acquire()
libc = ctypes.CDLL("libc.so.6")
libc.open_memstream.restype = ctypes.c_void_p
buf, size = ctypes.c_char_p(), ctypes.c_size_t()
fp = libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
libc.malloc_info(0, ctypes.c_void_p(fp)); libc.fclose(ctypes.c_void_p(fp))
done.set()
for t in threads: t.join()
print(json.dumps({"capped": capped, "arenas": ctypes.string_at(buf, size.value).decode().count("<heap nr=")}))
"""


def _run(script: str, mode: str, setting: str, env: dict[str, str] | None) -> dict[str, object]:
    """``script`` in a fresh interpreter, without the operator's ``setting`` unless ``env`` sets it."""
    environment = {k: v for k, v in os.environ.items() if k != setting} | (env or {})
    out = subprocess.run([sys.executable, "-c", script, mode], cwd=ROOT, env=environment,
                         capture_output=True, text=True, check=True, timeout=60)
    return json.loads(out.stdout)


def _arenas(mode: str, env: dict[str, str] | None = None) -> dict[str, object]:
    return _run(ARENAS_AFTER_THREADS, mode, "MALLOC_ARENA_MAX", env)


@pytest.mark.skipif(not GLIBC, reason="mallopt and malloc_info are glibc's")
def test_threads_made_after_the_cap_share_two_arenas() -> None:
    free = _arenas("free")
    capped = _arenas("cap")
    assert capped == {"capped": True, "arenas": heap.ARENAS}
    assert free["capped"] is False and int(free["arenas"]) > heap.ARENAS  # type: ignore[call-overload]


# Large blocks freed between live ones: what glibc keeps free afterwards (mallinfo2's fordblks).
KEPT_FREE_AFTER_LARGE_BLOCKS = r"""
import ctypes, json, sys
from astrbot_plugin_ltm.heap import map_large_blocks
mapped = map_large_blocks() if sys.argv[1] == "map" else False
class MI(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                               "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL("libc.so.6"); libc.mallinfo2.restype = MI
libc.malloc.restype = ctypes.c_void_p; libc.free.argtypes = [ctypes.c_void_p]
libc.free(libc.malloc(8 << 20))  # a namespace built and evicted: glibc raises its threshold past 8 MB
blocks, pins = [], []
for _ in range(10):  # then another's arrays, each followed by something that lives on
    blocks.append(libc.malloc(2 << 20)); pins.append(libc.malloc(64 << 10))
for block in blocks:
    libc.free(block)
print(json.dumps({"mapped": mapped, "kept_free_mb": libc.mallinfo2().fordblks / 2**20}))
"""


def _kept_free(mode: str, env: dict[str, str] | None = None) -> dict[str, object]:
    return _run(KEPT_FREE_AFTER_LARGE_BLOCKS, mode, "MALLOC_MMAP_THRESHOLD_", env)


@pytest.mark.skipif(not GLIBC, reason="mallopt and mallinfo2 are glibc's")
def test_large_blocks_freed_between_live_ones_leave_no_free_space_resident() -> None:
    free, mapped = _kept_free("free"), _kept_free("map")
    assert free["mapped"] is False and float(free["kept_free_mb"]) > 15  # type: ignore[arg-type]
    assert mapped["mapped"] is True and float(mapped["kept_free_mb"]) < 5  # type: ignore[arg-type]


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_an_operators_malloc_mmap_threshold_is_left_as_set() -> None:
    assert _kept_free("map", {"MALLOC_MMAP_THRESHOLD_": "1048576"})["mapped"] is False


@pytest.mark.skipif(not GLIBC, reason="mallopt and malloc_info are glibc's")
def test_an_operators_malloc_arena_max_is_left_as_set() -> None:
    assert _arenas("cap", {"MALLOC_ARENA_MAX": "4"})["capped"] is False


def test_without_glibc_nothing_is_capped_or_trimmed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_MALLOPT", None)
    monkeypatch.setattr(heap, "_TRIM", None)
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    assert heap.cap_arenas() is False and heap.map_large_blocks() is False
    heap.release_freed_memory()  # does nothing, raises nothing
