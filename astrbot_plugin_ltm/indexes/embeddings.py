"""The embedding provider as the plugin uses it: calls bounded by timeouts,
a failing provider warned about once (everything then runs keyword-only,
nothing raises), and the two searches that start with an embedding — the
reader's query and the writer's semantic match.

What the log says about vector search is true when it is said: a missing
provider (the embedder raises LookupError) is reported only when a read
goes without it, because AstrBot loads its providers after its plugins and
the background fill's first call at start comes a moment too early."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from ..enums import Corpus
from ..extension_points import Embedder
from ..logs import log
from ..scope import Scope
from ..storing.tables import MemoryItem
from ..storing.vector_rows import normalise
from .namespaces import COLD_WAIT
from .vectors import VectorIndex

# Cosine above which two facts of a scope say the same (docs/decisions.md#d18).
SEMANTIC_MATCH = 0.85
PRIMED_FACTS = 1024  # candidate facts' vectors kept between prime() and their write


@dataclass
class VectorHits:
    """Row id -> cosine similarity, per corpus."""

    memories: dict[int, float] = field(default_factory=dict)
    turns: dict[int, float] = field(default_factory=dict)


class Embeddings:
    def __init__(self, embedder: Embedder | None, index: VectorIndex, query_timeout: float = 2.0) -> None:
        self.embedder = embedder
        self.index = index
        self.query_timeout = query_timeout
        self._warned = False
        self._absent: str | None = None  # why there is no provider, until one answers
        self._announced = ""  # the model "vector search on" was logged for
        self._primed: OrderedDict[str, np.ndarray] = OrderedDict()

    @property
    def model(self) -> str:
        """The vector space: vectors of another model are never compared."""
        return (getattr(self.embedder, "model_id", "") or "") if self.embedder else ""

    def _unavailable(self, why: str) -> None:
        if not self._warned:
            log.warning("ltm: vector search unavailable (%s); keyword-only", why)
            self._warned = True

    async def embed(self, texts: list[str], timeout: float | None = None) -> np.ndarray | None:
        """Normalised vectors of ``texts``; None when there is no provider or it fails."""
        if self.embedder is None or not texts:
            return None
        try:
            vectors = await asyncio.wait_for(self.embedder.embed(texts), timeout)
        except asyncio.CancelledError:
            raise
        except LookupError as exc:  # no provider, or none loaded yet: said by query()
            self._absent = str(exc) or "no embedding provider"
            log.debug("ltm: no embedding provider yet (%s)", self._absent)
            return None
        except Exception as exc:
            self._unavailable(f"{type(exc).__name__}: {exc}")
            return None
        self._absent = None
        self._warned = False
        if self.model and self.model != self._announced:
            log.info("ltm: vector search on (embedding model %s)", self.model)
            self._announced = self.model
        return normalise(vectors)

    async def query(self, scopes: list[Scope], text: str, k: int) -> VectorHits:
        """Memories and turns near ``text``: one embedding call, bounded by
        ``query_timeout``, and a search of each corpus's namespaces."""
        vector = await self.embed([text], timeout=self.query_timeout)
        if vector is None and self._absent is not None:
            self._unavailable(self._absent)  # a person's turn goes without it: now it is true
        if vector is None or not self.model:
            return VectorHits()
        hits = await self.index.search_corpora(scopes, self.model, vector, k, (Corpus.MEMORIES, Corpus.TURNS),
                                               wait=COLD_WAIT)
        return VectorHits(hits[Corpus.MEMORIES], hits[Corpus.TURNS])

    async def find(self, session: AsyncSession, scope: Scope, fact: str) -> MemoryItem | None:
        """The writer's semantic match: a memory of ``scope`` whose fact's
        cosine with ``fact`` is above SEMANTIC_MATCH."""
        vector = self._primed.get(fact)
        if vector is None:
            found = await self.embed([fact], timeout=self.query_timeout)
            if found is None:
                return None
            vector = found[0]
        hits = await self.index.search([scope], self.model, vector[None, :], 1)
        best = max(hits.items(), key=lambda hit: hit[1], default=None)
        if best is None or best[1] <= SEMANTIC_MATCH:
            return None
        return await session.get(MemoryItem, best[0])

    async def prime(self, facts: list[str]) -> None:
        """Embed candidate facts before their write transaction opens, so a
        slow provider never holds the database's write lock."""
        todo = [f for f in dict.fromkeys(facts) if f not in self._primed]
        vectors = await self.embed(todo, timeout=self.query_timeout * 4)
        if vectors is None:
            return
        for fact, vector in zip(todo, vectors, strict=True):
            self._primed[fact] = vector
        while len(self._primed) > PRIMED_FACTS:
            self._primed.popitem(last=False)

    def primed(self, fact: str) -> np.ndarray | None:
        """The vector prime() made of ``fact``, if it is still kept."""
        return self._primed.get(fact)
