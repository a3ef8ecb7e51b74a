"""What operators and users can read of stored memory: lists with filters,
text search, one memory with its evidence, events, the audit log and
statistics. A list reads a page through an index, but those of the whole store
by a score (sorted) and the audit by action or actor (walked): tests/test_list_plans.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import ColumnElement, UnaryExpression, and_, func, literal_column, or_, select, text, true
from sqlalchemy.ext.asyncio import AsyncSession

from .. import validators
from ..clock import Clock, utcnow
from ..config import LTMConfig
from ..enums import MEMORY_TYPES, RECALLED_ROLES, WRITE_ACTIONS, ExtractionStatus, ScopeKind, Status, Visibility
from ..errors import AdminError
from ..i18n import Lang, msg
from ..scope import Scope
from ..storing.database import Database
from ..storing.evidence import cited_by_sender, links_of
from ..storing.tables import UNFINISHED, MemoryAudit, MemoryContext, MemoryEvent, MemoryItem
from ..text import query_tokens
from .fact_search import search_facts
from .serialize import audience_dict, evidence_dict, item_api_dict

# Each sort ends on the row id in its own direction, so one index walk
# (tables.py) serves it.
SORTS: dict[str, tuple[UnaryExpression[Any], ...]] = {
    "updated": (MemoryItem.updated_at.desc(), MemoryItem.id.desc()),
    "confidence": (MemoryItem.confidence.desc(), MemoryItem.id.desc()),
    "importance": (MemoryItem.importance.desc(), MemoryItem.id.desc()),
    "created": (MemoryItem.created_at.desc(), MemoryItem.id.desc()),
    # never used first, then the longest unused: candidates for clean-up
    "least_used": (MemoryItem.use_count.asc(), MemoryItem.last_used_at.asc(), MemoryItem.id.asc()),
    "most_used": (MemoryItem.use_count.desc(), MemoryItem.last_used_at.desc(), MemoryItem.id.desc()),
}
AMBIGUOUS_SHOWN = 5  # ids an ambiguous prefix lists
TEXT_SEARCH_HITS = 1000  # text-search hits considered, best first (docs/decisions.md#d29)


def told_by(sender_id: str) -> ColumnElement[bool]:
    """Memories with evidence from this sender's own messages."""
    return MemoryItem.memory_id.in_(cited_by_sender(sender_id))


@dataclass
class ItemFilter:
    scope: str | None = None
    scope_id: str | None = None
    type: str | None = None
    status: str | None = None  # also "pending": awaiting approval
    query: str | None = None  # a substring of the fact
    min_confidence: float | None = None
    told_by: str | None = None  # only memories evidenced by this sender's messages
    said_in: str | None = None  # only memories this group ("group:<id>") may recall, said in it (audience.py)

    def conditions(self, by_id: bool = False) -> list[ColumnElement[bool]]:
        """The SQL conditions of these filters; unknown values are refused.
        ``by_id``: rows already picked by id; ``+ltm_items.col`` keeps SQLite
        looking the ids up rather than reading a whole scope through its index."""
        def col(name: str) -> Any:
            column = MemoryItem.__table__.c[name]
            return literal_column(f"+ltm_items.{name}", type_=column.type) if by_id else column

        conditions: list[ColumnElement[bool]] = []
        if self.scope:
            conditions.append(col("scope") == self.scope)
        if self.scope_id:
            conditions.append(col("scope_id") == self.scope_id)
        if self.type:
            if self.type not in MEMORY_TYPES:
                raise AdminError(msg("api.choice", name="type", options=", ".join(MEMORY_TYPES)))
            conditions.append(col("type") == self.type)
        if self.status == "pending":
            conditions.append(col("awaiting_approval").is_(True))
        elif self.status:
            if self.status not in tuple(Status):
                raise AdminError(msg("api.status_or_pending", options=", ".join(Status)))
            conditions.append(col("status") == self.status)
        if self.min_confidence is not None:
            conditions.append(col("confidence") >= self.min_confidence)
        if self.query:
            conditions.append(col("fact").contains(self.query))
        if self.told_by:
            conditions.append(told_by(self.told_by))
        if self.said_in:
            kind, _, scope_id = self.said_in.partition(":")
            conditions.append(col("visibility") == Visibility.SHARED)
            conditions.append(MemoryItem.id.in_(select(MemoryContext.item_id).where(
                MemoryContext.scope == kind, MemoryContext.scope_id == scope_id)))
        return conditions


@dataclass
class EventFilter:
    scope: str | None = None
    scope_id: str | None = None
    status: str | None = None  # extraction status
    source_type: str | None = None
    session_id: str | None = None

    def conditions(self) -> list[ColumnElement[bool]]:
        return _equal(MemoryEvent, scope=self.scope, scope_id=self.scope_id, extraction_status=self.status,
                      source_type=self.source_type, session_id=self.session_id)


@dataclass
class AuditFilter:
    action: str | None = None
    memory_id: str | None = None
    scope: str | None = None
    scope_id: str | None = None
    session_id: str | None = None
    actor: str | None = None
    flagged: bool = False  # only updates flagged for review (detail.unsure: docs/decisions.md#d74)

    def conditions(self) -> list[ColumnElement[bool]]:
        columns = {name: value for name, value in asdict(self).items() if name != "flagged"}
        flagged = [MemoryAudit.detail["unsure"].as_boolean().is_(True)] if self.flagged else []
        return [*_equal(MemoryAudit, **columns), *flagged]


def _equal(table: type[MemoryEvent] | type[MemoryAudit], **values: str | None) -> list[ColumnElement[bool]]:
    """Each column named equals its value; a filter left empty is no condition."""
    return [table.__table__.c[name] == value for name, value in values.items() if value]


def _where(conditions: list[ColumnElement[bool]]) -> ColumnElement[bool]:
    return and_(true(), *conditions)


HISTORY_DEPTH = 50  # values of one fact shown at most, each way


async def _history(session: AsyncSession, item: MemoryItem) -> list[MemoryItem]:
    """Every value of ``item``'s fact, oldest first, ``item`` included:
    the chain of what it superseded and what superseded it."""
    chain = [item]
    for link, forward in (("supersedes", False), ("superseded_by", True)):
        at = item
        for _ in range(HISTORY_DEPTH):
            memory_id = getattr(at, link)
            if not memory_id:
                break
            found = (await session.execute(
                select(MemoryItem).where(MemoryItem.memory_id == memory_id))).scalar_one_or_none()
            if found is None or found in chain:
                break
            chain = [*chain, found] if forward else [found, *chain]
            at = found
    # Memories compaction merged into it point to it too (learning/compaction.py).
    merged = (await session.execute(select(MemoryItem).where(MemoryItem.superseded_by == item.memory_id)
                                    .order_by(MemoryItem.id).limit(HISTORY_DEPTH))).scalars()
    for found in merged:
        if found not in chain:
            chain.insert(chain.index(item), found)
    return chain if len(chain) > 1 else []


class AdminQueries:
    """The reading half of :class:`operating.admin.Admin`."""

    def __init__(self, db: Database, config: Callable[[], LTMConfig], clock: Clock = utcnow) -> None:
        self._db = db
        self._config = config
        self._clock = clock

    # -- memories ---------------------------------------------------------------

    async def list_items(self, f: ItemFilter, sort: str = "updated", offset: int = 0,
                         limit: int = 50) -> tuple[list[MemoryItem], int]:
        if sort not in SORTS:
            raise AdminError(msg("api.choice", name="sort", options=", ".join(SORTS)))
        return await self._page(MemoryItem, f.conditions(), SORTS[sort], offset, limit)

    async def search_items(self, f: ItemFilter, text: str, offset: int = 0,
                           limit: int = 50) -> tuple[list[MemoryItem], int]:
        """Memories whose fact matches ``text``, best first, through the keyword
        rows; a text with no keyword (one character, a stop word) by a literal
        match, newest first (docs/decisions.md#d75)."""
        if not any(ch.isalnum() for ch in text):
            raise AdminError(msg("search.no_words"))
        tokens = query_tokens(text)
        if all(len(token) < 2 for token in tokens):
            return await self._containing(f, tokens or [" ".join(text.split())], offset, limit)
        scopes = [(f.scope, f.scope_id)] if f.scope and f.scope_id else None
        statuses = tuple(Status) if f.status in (None, "pending") else (f.status or "",)
        conditions = f.conditions(by_id=True)
        hits = await self._db.run(lambda conn: search_facts(conn, tokens, scopes, statuses, TEXT_SEARCH_HITS))
        async with self._db.read() as session:
            ids = [rowid for rowid, _ in hits]
            passing = set((await session.execute(
                select(MemoryItem.id).where(MemoryItem.id.in_(ids), *conditions))).scalars())
            ranked = [i for i in ids if i in passing]
            window = ranked[offset:offset + limit]  # only a page is loaded as objects
            found = {i.id: i for i in (await session.execute(
                select(MemoryItem).where(MemoryItem.id.in_(window)))).scalars()}
        return [found[i] for i in window if i in found], len(ranked)

    async def _containing(self, f: ItemFilter, needles: list[str], offset: int,
                          limit: int) -> tuple[list[MemoryItem], int]:
        """Memories whose fact holds any of ``needles``, newest first. One read
        of the table, the few matches sorted after: a tenth of walking the
        newest-first index (docs/decisions.md#d75)."""
        folded = ["".join(ch.lower() if ch.isascii() else ch for ch in n) for n in needles]
        holds = or_(*(func.instr(func.lower(MemoryItem.fact), n) > 0 for n in folded))
        async with self._db.read() as session:
            ids = list((await session.execute(
                select(MemoryItem.id).where(holds, *f.conditions(by_id=True))
                .order_by(literal_column("+ltm_items.updated_at").desc(), MemoryItem.id.desc())
                .limit(TEXT_SEARCH_HITS))).scalars())
            window = ids[offset:offset + limit]
            found = {i.id: i for i in (await session.execute(
                select(MemoryItem).where(MemoryItem.id.in_(window)))).scalars()}
        return [found[i] for i in window if i in found], len(ids)

    async def said_in(self, items: Sequence[MemoryItem]) -> dict[int, list[Scope]]:
        """Each memory's row id → the groups it was said in, kept elsewhere (audience.py)."""
        ids = [i.id for i in items if i.id is not None and i.scope == ScopeKind.USER]
        if not ids:
            return {}
        async with self._db.read() as session:
            rows = (await session.execute(select(MemoryContext.item_id, MemoryContext.scope, MemoryContext.scope_id)
                                          .where(MemoryContext.item_id.in_(ids)))).all()
        out: dict[int, list[Scope]] = {}
        for item_id, kind, scope_id in rows:
            out.setdefault(item_id, []).append(Scope(kind, scope_id))
        return out

    async def get_item(self, memory_id: str, lang: Lang = "en") -> dict[str, Any]:
        """One memory with its evidence and the events it points to, where it
        was said and who may see it (in ``lang``)."""
        async with self._db.read() as session:
            item = await self._item(session, memory_id)
            evidence = await links_of(session, [item])
            return {**item_api_dict(item), "evidence": [evidence_dict(link, event) for link, event in evidence],
                    "history": [item_api_dict(i) for i in await _history(session, item)],
                    **audience_dict(item, (await self.said_in([item])).get(item.id or 0, []), lang)}

    @staticmethod
    async def _item(session: AsyncSession, memory_id: str) -> MemoryItem:
        item = (await session.execute(
            select(MemoryItem).where(MemoryItem.memory_id == memory_id))).scalar_one_or_none()
        if item is None:
            raise AdminError(msg("api.no_memory_id", memory_id=memory_id), 404)
        return item

    async def find_by_prefix(self, prefix: str, scopes: list[Scope] | None = None,
                             sender_id: str | None = None) -> MemoryItem:
        """A memory by its id or an unambiguous, literal id prefix, limited to ``scopes``."""
        prefix = validators.memory_id(prefix)
        query = (select(MemoryItem).where(MemoryItem.memory_id.startswith(prefix, autoescape=True))
                 .order_by(MemoryItem.memory_id).limit(AMBIGUOUS_SHOWN + 1))
        if scopes is not None:
            query = query.where(or_(*(and_(MemoryItem.scope == s.kind, MemoryItem.scope_id == s.id)
                                      for s in scopes)))
        if sender_id is not None:
            query = query.where(told_by(sender_id))
        async with self._db.read() as session:
            rows = (await session.execute(query)).scalars().all()
        if not rows:
            raise AdminError(msg("api.no_memory", prefix=prefix), 404)
        exact = [r for r in rows if r.memory_id == prefix]
        if exact:
            return exact[0]
        if len(rows) > 1:
            shown = ", ".join(r.memory_id[:12] for r in rows[:AMBIGUOUS_SHOWN])
            more = " and more" if len(rows) > AMBIGUOUS_SHOWN else ""
            raise AdminError(msg("api.ambiguous", prefix=prefix, matches=shown, more=more))
        return rows[0]

    # -- events and audit -------------------------------------------------------------

    async def list_events(self, f: EventFilter, offset: int = 0,
                          limit: int = 50) -> tuple[list[MemoryEvent], int]:
        """Recorded events, newest first."""
        return await self._page(MemoryEvent, f.conditions(),
                                (MemoryEvent.created_at.desc(), MemoryEvent.id.desc()), offset, limit)

    async def audit_log(self, f: AuditFilter, offset: int = 0, limit: int = 50) -> tuple[list[MemoryAudit], int]:
        """Audit rows, newest first."""
        return await self._page(MemoryAudit, f.conditions(),
                                (MemoryAudit.created_at.desc(), MemoryAudit.id.desc()), offset, limit)

    async def _page[R: (MemoryItem, MemoryEvent, MemoryAudit)](
        self, table: type[R], conditions: list[ColumnElement[bool]], order: tuple[UnaryExpression[Any], ...],
        offset: int, limit: int,
    ) -> tuple[list[R], int]:
        """One page of ``table``'s rows that meet ``conditions``, and how many there are."""
        where = _where(conditions)
        async with self._db.read() as session:
            total = (await session.execute(select(func.count()).select_from(table).where(where))).scalar_one()
            rows = await session.execute(select(table).where(where).order_by(*order).offset(offset).limit(limit))
            return list(rows.scalars()), total

    async def quotable_turns(self, scope: Scope, accounts: Sequence[tuple[str, str]] = ()) -> int:
        """What the reader could still quote (in mode auto) after the scope's memories are gone."""
        theirs = [and_(MemoryEvent.scope == ScopeKind.GROUP, MemoryEvent.platform_id == platform_id,
                       MemoryEvent.sender_id == sender_id) for platform_id, sender_id in accounts]
        in_scope = and_(MemoryEvent.scope == scope.kind, MemoryEvent.scope_id == scope.id)
        async with self._db.read() as session:
            return (await session.execute(select(func.count()).select_from(MemoryEvent).where(
                or_(in_scope, *theirs),
                MemoryEvent.source_role.in_(RECALLED_ROLES), MemoryEvent.withheld.is_(False),
            ))).scalar_one()

    # -- statistics ----------------------------------------------------------------------

    async def stats(self, scopes: list[Scope] | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        """Per scope: counts by status and type, approval queue, writes in
        the last hour, extraction backlog and failures."""
        now = self._clock()
        since = now - timedelta(hours=1)

        def in_scopes(table: type[MemoryItem] | type[MemoryEvent] | type[MemoryAudit]) -> ColumnElement[bool]:
            if scopes is None:
                return table.scope == kind if kind else true()
            return or_(*(and_(table.scope == s.kind, table.scope_id == s.id) for s in scopes))

        out: dict[tuple[str, str], dict[str, Any]] = {}

        def entry(scope: str, scope_id: str) -> dict[str, Any]:
            return out.setdefault((scope, scope_id), {
                "scope": scope, "scope_id": scope_id, "by_status": {}, "by_type": {},
                "awaiting_approval": 0, "writes_last_hour": 0,
                "events": {"pending": 0, "failed": 0, "done": 0, "skipped": 0},
            })

        async with self._db.read() as session:
            for scope, scope_id, status, mtype, waiting, n in await session.execute(
                select(MemoryItem.scope, MemoryItem.scope_id, MemoryItem.status, MemoryItem.type,
                       MemoryItem.awaiting_approval, func.count())
                .where(in_scopes(MemoryItem))
                .group_by(MemoryItem.scope, MemoryItem.scope_id, MemoryItem.status, MemoryItem.type,
                          MemoryItem.awaiting_approval)
            ):
                e = entry(scope, scope_id)
                e["by_status"][status] = e["by_status"].get(status, 0) + n
                e["by_type"][mtype] = e["by_type"].get(mtype, 0) + n
                if waiting:
                    e["awaiting_approval"] += n
            # Only the unfinished turns are indexed by status: the done ones
            # are the rest of each scope's count (migration 0018).
            for scope, scope_id, n in await session.execute(
                select(MemoryEvent.scope, MemoryEvent.scope_id, func.count())
                .where(in_scopes(MemoryEvent)).group_by(MemoryEvent.scope, MemoryEvent.scope_id)
            ):
                entry(scope, scope_id)["events"][ExtractionStatus.DONE] = n
            for scope, scope_id, status, n in await session.execute(
                select(MemoryEvent.scope, MemoryEvent.scope_id, MemoryEvent.extraction_status, func.count())
                .where(in_scopes(MemoryEvent), text(UNFINISHED))
                .group_by(MemoryEvent.scope, MemoryEvent.scope_id, MemoryEvent.extraction_status)
            ):
                counts = entry(scope, scope_id)["events"]
                counts[status] = n
                counts[ExtractionStatus.DONE] -= n
            for audited, audited_id, n in await session.execute(
                select(MemoryAudit.scope, MemoryAudit.scope_id, func.count())
                # Both ends of the hour: SQLite then reads it by time, not every row (decisions.md#d172).
                .where(in_scopes(MemoryAudit), MemoryAudit.action.in_(WRITE_ACTIONS),
                       MemoryAudit.created_at.between(since, now))
                .group_by(MemoryAudit.scope, MemoryAudit.scope_id)
            ):
                entry(audited or "", audited_id or "")["writes_last_hour"] = n
        return sorted(out.values(), key=lambda e: (e["scope"], e["scope_id"]))
