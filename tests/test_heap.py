"""The C heap under the plugin (astrbot_plugin_ltm/heap.py): threads made
after the cap share few arenas; an operator's MALLOC_ARENA_MAX wins."""

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


def _arenas(mode: str, env: dict[str, str] | None = None) -> dict[str, object]:
    environment = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | (env or {})
    out = subprocess.run([sys.executable, "-c", ARENAS_AFTER_THREADS, mode], cwd=ROOT, env=environment,
                         capture_output=True, text=True, check=True, timeout=60)
    return json.loads(out.stdout)


@pytest.mark.skipif(not GLIBC, reason="mallopt and malloc_info are glibc's")
def test_threads_made_after_the_cap_share_two_arenas() -> None:
    free = _arenas("free")
    capped = _arenas("cap")
    assert capped == {"capped": True, "arenas": heap.ARENAS}
    assert free["capped"] is False and int(free["arenas"]) > heap.ARENAS  # type: ignore[call-overload]


@pytest.mark.skipif(not GLIBC, reason="mallopt and malloc_info are glibc's")
def test_an_operators_malloc_arena_max_is_left_as_set() -> None:
    assert _arenas("cap", {"MALLOC_ARENA_MAX": "4"})["capped"] is False


def test_without_glibc_nothing_is_capped_or_trimmed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_MALLOPT", None)
    monkeypatch.setattr(heap, "_TRIM", None)
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert heap.cap_arenas() is False
    heap.release_freed_memory()  # does nothing, raises nothing
