"""What is already remembered about a batch's people, shown to the
extraction model so that it can say which known fact a new statement
updates or repeats (the writer then supersedes or confirms it).

The nearest facts by keywords and by embedding come first, then the facts
about names, then the most recently confirmed: a statement in another
language than the fact it changes shares no keyword with it, and most
scopes hold few enough memories that the recent ones are all of them."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select

from ..enums import SHOWN_ROLES, Corpus, Status
from ..indexes.embeddings import Embeddings
from ..indexes.keywords import KeywordIndex
from ..scope import Scope
from ..storing.database import Database
from ..storing.tables import MemoryEvent, MemoryItem
from ..text import query_tokens
from .candidates import KnownFact

KNOWN_FACTS = 15  # per batch: a few hundred prompt tokens (docs/decisions.md#d42)
NAME_FACTS = 3  # the names people gave: the model names them by these


class KnownFacts:
    """The scope's current memories nearest a batch: by keywords, by
    embedding when there is one, and the facts about names."""

    def __init__(self, db: Database, keywords: KeywordIndex | None, embeddings: Embeddings | None) -> None:
        self._db = db
        self._keywords = keywords
        self._embeddings = embeddings

    async def about(self, scope: Scope, events: Sequence[MemoryEvent]) -> list[KnownFact]:
        said = "\n".join(str((e.content or {}).get("text") or (e.content or {}).get("result") or "")
                         for e in events if e.source_role in SHOWN_ROLES)
        ranked: list[int] = []
        if self._keywords is not None:
            tokens = query_tokens(said)
            ranked += [rowid for rowid, _ in await self._keywords.search([scope], Corpus.MEMORIES, tokens,
                                                                         KNOWN_FACTS)]
        if self._embeddings is not None:
            hits = (await self._embeddings.query([scope], said, KNOWN_FACTS)).memories
            ranked += sorted(hits, key=lambda rowid: -hits[rowid])
        async with self._db.read() as session:
            current = (MemoryItem.scope == scope.kind, MemoryItem.scope_id == scope.id,
                       MemoryItem.status.in_((Status.ACTIVE, Status.SHADOW)))
            wanted = list(dict.fromkeys(ranked))
            near = (await session.execute(select(MemoryItem).where(*current, MemoryItem.id.in_(wanted)))
                    ).scalars().all() if wanted else []
            names = (await session.execute(select(MemoryItem).where(
                *current, MemoryItem.fact_key.like("%name%")).order_by(MemoryItem.updated_at.desc())
                .limit(NAME_FACTS))).scalars().all()
            recent = (await session.execute(select(MemoryItem).where(*current)
                                            .order_by(MemoryItem.updated_at.desc()).limit(KNOWN_FACTS))).scalars().all()
        order = {rowid: n for n, rowid in enumerate(wanted)}
        chosen = [*sorted(near, key=lambda i: order.get(i.id or 0, 0)), *names, *recent]
        unique = list({i.memory_id: i for i in chosen}.values())[:KNOWN_FACTS]
        return [KnownFact(i.memory_id, i.fact_key, i.fact, i.valid_from) for i in unique]
