"""Candidate retrieval for the read path, behind one interface
(extension_points.Retriever): each retriever ranks the memories and the
turns of the scopes a message reads; the reader fuses their rankings."""

from __future__ import annotations

import asyncio

from ..enums import Corpus
from ..extension_points import Found, Query
from ..indexes.embeddings import Embeddings
from ..indexes.keywords import KeywordIndex
from ..scope import Scope


class KeywordRetriever:
    """BM25 over the facts' and turns' search tokens, per scope (indexes.keywords)."""

    name = "keyword"

    def __init__(self, index: KeywordIndex) -> None:
        self.index = index

    async def search(self, scopes: list[Scope], query: Query, limit: int) -> Found:
        if not query.tokens:
            return Found()
        memories, turns = await asyncio.gather(
            self.index.search(scopes, Corpus.MEMORIES, query.tokens, limit),
            self.index.search(scopes, Corpus.TURNS, query.tokens, limit),
        )
        return Found([rowid for rowid, _ in memories], [rowid for rowid, _ in turns])


class VectorRetriever:
    """Cosine search of the scopes' namespaces; nothing without an embedding in time."""

    name = "vector"

    def __init__(self, embeddings: Embeddings) -> None:
        self.embeddings = embeddings

    async def search(self, scopes: list[Scope], query: Query, limit: int) -> Found:
        if not query.text.strip():
            return Found()
        hits = await self.embeddings.query(scopes, query.text, limit)
        return Found(_best_first(hits.memories), _best_first(hits.turns))


def _best_first(sims: dict[int, float]) -> list[int]:
    return sorted(sims, key=lambda rowid: (-sims[rowid], rowid))
