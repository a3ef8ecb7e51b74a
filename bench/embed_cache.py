"""An on-disk cache of embeddings for the benchmarks (``bench.locomo``).

A replay of a long history embeds the same texts in every run (each turn's
passages, the baselines' turns, the questions); with MiniLM on two cores
that was most of an hour for the LongMemEval dev split. Here a vector is
kept in SQLite, keyed by the model's id and the SHA-256 of the exact text,
so a second run embeds only what changed (a new way of cutting passages
gives new texts, hence new keys: nothing stale is ever served).

Safe for concurrent runs (``--jobs``, other checkouts): WAL mode, a busy
timeout, and ``INSERT OR IGNORE`` (two processes embedding the same text
store the same vector once). The vectors are float32 bytes, exactly what
the model gave, so figures with and without the cache are the same.

Default place: ``~/.cache/astrbot_plugin_ltm/bench_embeddings.sqlite``
(shared by every checkout of the repository); ``LTM_BENCH_CACHE`` or
``bench.locomo --embed-cache PATH`` moves it, ``--no-embed-cache`` skips it.
"""

from __future__ import annotations

import hashlib
import os
import random
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_PATH = Path(os.environ.get(
    "LTM_BENCH_CACHE", str(Path.home() / ".cache" / "astrbot_plugin_ltm" / "bench_embeddings.sqlite")))
# SQLite's default limit of bound parameters is 32766; stay far below it.
_LOOKUP_CHUNK = 500


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


class EmbeddingStore:
    """model id + text -> vector, in one SQLite file."""

    def __init__(self, path: str | Path = DEFAULT_PATH) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Used from the event loop and from worker threads (embed_sync).
        self._conn = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False)
        self._lock = threading.Lock()
        with self._lock:
            self._set_up()

    def _set_up(self) -> None:
        # Two processes making a new file at once (``--jobs`` workers) can
        # each hold a read lock and want the write lock: SQLite answers one
        # "database is locked" at once, without waiting (it would deadlock).
        # Try again, as its busy timeout would have.
        for attempt in range(100):
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.execute(
                    "CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, key BLOB NOT NULL, "
                    "vector BLOB NOT NULL, PRIMARY KEY (model, key)) WITHOUT ROWID")
                self._conn.commit()
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == 99:
                    raise
                self._conn.rollback()
                time.sleep(0.01 + random.random() * 0.05)

    def get(self, model: str, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        with self._lock:
            for i in range(0, len(keys), _LOOKUP_CHUNK):
                chunk = keys[i:i + _LOOKUP_CHUNK]
                rows = self._conn.execute(
                    f"SELECT key, vector FROM vectors WHERE model = ? AND key IN ({','.join('?' * len(chunk))})",
                    [model, *chunk]).fetchall()
                for key, blob in rows:
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put(self, model: str, rows: list[tuple[bytes, np.ndarray]]) -> None:
        if not rows:
            return
        with self._lock:
            self._conn.executemany(
                "INSERT OR IGNORE INTO vectors (model, key, vector) VALUES (?, ?, ?)",
                [(model, key, np.ascontiguousarray(vec, dtype=np.float32).tobytes()) for key, vec in rows])
            self._conn.commit()

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class CachedEmbedder:
    """An embedder whose vectors come from an :class:`EmbeddingStore` when
    known; the others are embedded by ``inner`` (one call for all the
    misses, in their order) and stored. Same ``model_id`` as ``inner``."""

    def __init__(self, inner: Any, store: EmbeddingStore) -> None:
        self.inner = inner
        self.store = store
        self.model_id: str = inner.model_id
        self.dim = getattr(inner, "dim", None)
        self.hits = 0
        self.misses = 0

    def _split(self, texts: list[str]) -> tuple[list[bytes], dict[bytes, np.ndarray], list[int]]:
        keys = [text_key(t) for t in texts]
        known = self.store.get(self.model_id, list(dict.fromkeys(keys)))
        todo: list[int] = []
        seen: set[bytes] = set()
        for i, k in enumerate(keys):
            if k not in known and k not in seen:  # a text twice in one call is embedded once
                seen.add(k)
                todo.append(i)
        return keys, known, todo

    def _join(self, texts: list[str], keys: list[bytes], known: dict[bytes, np.ndarray],
              todo: list[int], fresh: np.ndarray) -> np.ndarray:
        new = [(keys[i], np.asarray(fresh[n], dtype=np.float32)) for n, i in enumerate(todo)]
        self.store.put(self.model_id, new)
        known.update(new)
        self.hits += len(texts) - len(todo)
        self.misses += len(todo)
        if not texts:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        return np.stack([known[k] for k in keys]).astype(np.float32, copy=False)

    async def embed(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        keys, known, todo = self._split(texts)
        fresh = np.asarray(await self.inner.embed([texts[i] for i in todo]), dtype=np.float32) if todo else None
        return self._join(texts, keys, known, todo, fresh if fresh is not None else np.zeros((0, 0)))

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        keys, known, todo = self._split(texts)
        fresh = np.asarray(self.inner.embed_sync([texts[i] for i in todo]), dtype=np.float32) if todo else None
        return self._join(texts, keys, known, todo, fresh if fresh is not None else np.zeros((0, 0)))


def cached(factory: Any, path: str | Path = DEFAULT_PATH) -> CachedEmbedder:
    """``factory()``'s embedder behind the cache at ``path`` (a picklable
    way to build one in a worker process: ``functools.partial(cached, ...)``)."""
    return CachedEmbedder(factory(), EmbeddingStore(path))
