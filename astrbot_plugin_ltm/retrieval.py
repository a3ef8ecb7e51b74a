"""Candidate retrieval for the read path, behind one interface.

A retriever returns, for a query, the items it finds relevant with a
similarity in 0..1. The reader fuses several retrievers and adds the
scope's most important items, which matter even when the message shares
no word with them ("hi!" should still get the user's name).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .db import Database, fts_search
from .policy import Status
from .scope import Scope
from .text import query_tokens
from .vectors import VectorService


@dataclass(frozen=True)
class Query:
    """A message to find memories for, tokenised once per read."""

    text: str
    tokens: list[str]

    @classmethod
    def of(cls, text: str) -> Query:
        return cls(text, query_tokens(text))


class Retriever(Protocol):
    name: str

    async def search(self, db: Database, scopes: list[Scope], query: Query, limit: int) -> dict[int, float]:
        """Item rowid -> similarity in 0..1, for active items of ``scopes``."""
        ...


class KeywordRetriever:
    """SQLite FTS5 over the facts' search tokens (CJK bigrams included).

    BM25 is unbounded, so it is scaled by the best score of the query: the
    top keyword hit gets similarity 1.
    """

    name = "keyword"

    async def search(self, db: Database, scopes: list[Scope], query: Query, limit: int) -> dict[int, float]:
        if not query.tokens:
            return {}
        pairs = [(s.kind, s.id) for s in scopes]
        hits = await db.run(lambda conn: fts_search(conn, query.tokens, pairs, (Status.ACTIVE,), limit))
        if not hits:
            return {}
        best = max(score for _, score in hits) or 1.0
        return {rowid: max(0.0, score / best) for rowid, score in hits}


class VectorRetriever:
    """Cosine similarity from the scope's FAISS namespaces (negative → 0).

    Keyword-only when there is no embedder, or when the query cannot be
    embedded within the timeout: then this returns nothing for the turn.
    """

    name = "vector"

    def __init__(self, service: VectorService) -> None:
        self.service = service

    async def search(self, db: Database, scopes: list[Scope], query: Query, limit: int) -> dict[int, float]:
        if not query.text.strip():
            return {}
        hits = await self.service.query(scopes, query.text, limit)
        return {rowid: max(0.0, sim) for rowid, sim in hits.items()}
