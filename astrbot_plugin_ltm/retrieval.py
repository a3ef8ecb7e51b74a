"""Candidate retrieval for the read path, behind one interface.

A retriever ranks, for a query, the memories and the raw turns of the
scopes it finds relevant. The reader fuses the rankings of several
retrievers (reciprocal rank) and adds the scope's most important memories,
which matter even when the message shares no word with them ("hi!" should
still get the user's name).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Protocol

from .db import Database
from .keywords import MEMORIES, TURNS
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


@dataclass
class Found:
    """A retriever's answer: row ids, best first."""

    memories: list[int] = field(default_factory=list)  # items of the scopes (the reader keeps the usable)
    turns: list[int] = field(default_factory=list)  # events of the scopes (the reader checks which may be shown)


class Retriever(Protocol):
    name: str

    async def search(self, db: Database, scopes: list[Scope], query: Query, limit: int) -> Found:
        """At most ``limit`` memories and ``limit`` turns of ``scopes``."""
        ...


class KeywordRetriever:
    """BM25 over the facts' and the turns' search tokens (CJK bigrams
    included), per scope (keywords.py). Memories come in any status: the
    reader keeps the active ones."""

    name = "keyword"

    async def search(self, db: Database, scopes: list[Scope], query: Query, limit: int) -> Found:
        if not query.tokens:
            return Found()
        memories, turns = await asyncio.gather(
            db.keywords.search(db.load, scopes, MEMORIES, query.tokens, limit),
            db.keywords.search(db.load, scopes, TURNS, query.tokens, limit),
        )
        return Found([rowid for rowid, _ in memories], [rowid for rowid, _ in turns])


class VectorRetriever:
    """Cosine similarity in the scopes' FAISS namespaces of memories and of
    turns, from one embedding of the query.

    Keyword-only when there is no embedder, or when the query cannot be
    embedded within the timeout: then this returns nothing for the turn.
    """

    name = "vector"

    def __init__(self, service: VectorService) -> None:
        self.service = service

    async def search(self, db: Database, scopes: list[Scope], query: Query, limit: int) -> Found:
        if not query.text.strip():
            return Found()
        hits = await self.service.query(scopes, query.text, limit)
        return Found(_best_first(hits.memories), _best_first(hits.turns))


def _best_first(sims: dict[int, float]) -> list[int]:
    return sorted(sims, key=lambda rowid: (-sims[rowid], rowid))
