"""What is already remembered about a batch's people, shown to the extraction model
so it can say which known fact a statement updates or repeats. Names and recent facts
come too: a statement in another language shares no keyword with its fact."""

from __future__ import annotations

import re
from collections.abc import Sequence

from sqlalchemy import ColumnElement, select, text
from sqlalchemy.orm import Session

from ..audience import SAID_IN_SQL
from ..enums import SHOWN_ROLES, Corpus, ScopeKind, Status, Visibility
from ..indexes.embeddings import Embeddings
from ..indexes.keywords import KeywordIndex
from ..scope import Scope
from ..storing.database import Database
from ..storing.tables import NOT_SUPERSEDED, MemoryEvent, MemoryItem
from ..text import query_tokens
from .candidates import KnownFact

KNOWN_FACTS = 15  # per batch: a few hundred prompt tokens (docs/decisions.md#d42)
NAME_FACTS = 3  # the names people gave: the model names them by these
# Other "name" keys only among the latest: every key cost 11 ms a batch at 10k (docs/decisions.md#d67).
NAME_KEYS = ("name", "full_name", "real_name", "preferred_name", "nickname", "user_name", "名字", "姓名", "称呼")
NAME_WINDOW = 200


class KnownFacts:
    """The scope's current memories nearest a batch: by keywords, by embedding, and about names."""

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
            hits = (await self._embeddings.query([scope], said, KNOWN_FACTS, (Corpus.MEMORIES,))).memories
            ranked += sorted(hits, key=lambda rowid: -hits[rowid])
        wanted = list(dict.fromkeys(ranked))

        def read(session: Session) -> tuple[list[MemoryItem], list[MemoryItem], list[MemoryItem]]:
            # Only what the group may recall: the model could carry anything else into a group's fact (audience.py).
            said = set(session.scalars(text(SAID_IN_SQL), {"kind": scope.kind, "id": scope.id})) \
                if scope.kind == ScopeKind.GROUP else set()
            # By primary key: with scope and status, SQLite walked the scope's index (6 ms a batch at 10k).
            near = [i for i in session.scalars(select(MemoryItem).where(MemoryItem.id.in_(wanted)))
                    if _current(i, scope, said)] if wanted else []
            recent = [i for i in session.scalars(select(MemoryItem).where(*_in_force(scope))
                                                 .order_by(MemoryItem.updated_at.desc()).limit(KNOWN_FACTS))
                      if _current(i, scope, said)]
            if said:
                recent = sorted([*recent, *session.scalars(
                    select(MemoryItem).where(MemoryItem.id.in_(said), _IN_FORCE)
                    .order_by(MemoryItem.updated_at.desc()).limit(KNOWN_FACTS))],
                    key=lambda i: i.updated_at, reverse=True)[:KNOWN_FACTS]
            return near, _name_facts(session, scope, said), recent

        # The statements in one hop to a read thread (docs/decisions.md#d128).
        near, names, recent = await self._db.run_session(read)
        order = {rowid: n for n, rowid in enumerate(wanted)}
        chosen = [*sorted(near, key=lambda i: order.get(i.id or 0, 0)), *names, *recent]
        unique = list({i.memory_id: i for i in chosen}.values())[:KNOWN_FACTS]
        return [KnownFact(i.memory_id, i.fact_key, i.fact, i.valid_from) for i in unique]


# What a fact about a person's name says it is: "小明的名字是小明", "用户叫小明",
# "Alice's name is Alice", "the user is called Bo".
_NAME_IN_FACT = (
    re.compile(r"(?:名字是|名字叫|名叫|叫做|称呼是|叫)\s*([\u4e00-\u9fffA-Za-z][\w\u4e00-\u9fff·-]{0,15})"),
    re.compile(r"\bname is ([A-Z][\w-]*(?: [A-Z][\w-]*)?)"),
    re.compile(r"\b(?:called|named) ([A-Z][\w-]*)"),
)


def given_name(fact: str) -> str | None:
    """The name a fact about someone's name gives, or None."""
    for pattern in _NAME_IN_FACT:
        found = pattern.search(fact)
        if found:
            return found.group(1).rstrip("·-")
    return None


def name_given(session: Session, person: Scope) -> str:
    """The name a person gave for themselves ("" when none), for when the platform shows
    no name (recording/explicit.py)."""
    return next((name for f in _name_facts(session, person, set()) if (name := given_name(f.fact))), "")


def _name_facts(session: Session, scope: Scope, said: set[int]) -> list[MemoryItem]:
    """The scope's current facts about names, and those of ``said``, newest first."""
    # By the scope's key index (uq_ltm_items_scope_key); the status is checked on the few rows it gives.
    usual = select(MemoryItem.id).where(MemoryItem.scope == scope.kind, MemoryItem.scope_id == scope.id,
                                        NOT_SUPERSEDED, MemoryItem.fact_key.in_(NAME_KEYS))
    recent = select(MemoryItem.id, MemoryItem.fact_key).where(*_in_force(scope)) \
        .order_by(MemoryItem.updated_at.desc()).limit(NAME_WINDOW).subquery()
    other = select(recent.c.id).where(recent.c.fact_key.like("%name%"))
    ids = {*session.scalars(usual), *session.scalars(other)}
    if said:
        ids.update(session.scalars(select(MemoryItem.id).where(MemoryItem.id.in_(said), NOT_SUPERSEDED,
                                                               MemoryItem.fact_key.in_(NAME_KEYS))))
    if not ids:
        return []
    rows = [i for i in session.scalars(select(MemoryItem).where(MemoryItem.id.in_(ids))) if _current(i, scope, said)]
    return sorted(rows, key=lambda i: i.updated_at, reverse=True)[:NAME_FACTS]


_IN_FORCE = MemoryItem.status.in_((Status.ACTIVE, Status.SHADOW))


def _in_force(scope: Scope) -> tuple[ColumnElement[bool], ...]:
    """The scope's current memories, as a statement's conditions."""
    return MemoryItem.scope == scope.kind, MemoryItem.scope_id == scope.id, _IN_FORCE


def _current(item: MemoryItem, scope: Scope, said: set[int]) -> bool:
    """The same test on a loaded row, or one of ``said``; what the scope may recall."""
    if item.status not in (Status.ACTIVE, Status.SHADOW):
        return False
    if (item.scope, item.scope_id) == (scope.kind, scope.id):
        return item.scope == ScopeKind.USER or item.visibility == Visibility.SHARED
    return item.id in said
