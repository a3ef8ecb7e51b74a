"""Operator and user operations on stored memory: list, inspect, approve,
reject, edit, delete, forget. Chat commands and dashboard routes both call
these, so every change is validated and audited the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, func, literal_column, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from . import keywords
from .config import LTMConfig
from .db import SHOWN_ROLES, Database, after_commit, fts_upsert
from .models import (
    EventVector,
    ExtractionStatus,
    MemoryAudit,
    MemoryEvent,
    MemoryEvidence,
    MemoryItem,
    MemoryTombstone,
    utcnow,
)
from .policy import MEMORY_TYPES, Status
from .scope import Scope
from .text import normalize_fact_key
from .vectors import delete_vector
from .writer import WRITE_ACTIONS, audit, remove_item


class AdminError(ValueError):
    """A request that cannot be carried out; the message says why."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


SORTS = {
    "updated": MemoryItem.updated_at.desc(),
    "confidence": MemoryItem.confidence.desc(),
    "importance": MemoryItem.importance.desc(),
    "created": MemoryItem.created_at.desc(),
}


@dataclass
class ItemFilter:
    scope: str | None = None
    scope_id: str | None = None
    type: str | None = None
    status: str | None = None  # also "pending": awaiting approval
    query: str | None = None
    min_confidence: float | None = None
    told_by: str | None = None  # only items evidenced by this sender's messages

    def conditions(self, by_id: bool = False) -> list[Any]:
        """The SQL conditions of these filters; unknown values are refused.

        ``by_id``: the rows are already picked by id (a text search's hits).
        The columns are then written ``+ltm_items.col``, which SQLite cannot
        serve from an index, so it looks the ids up instead of reading a
        whole scope or status through its index and testing each row.
        """
        def col(name: str) -> Any:
            column = MemoryItem.__table__.c[name]
            return literal_column(f"+ltm_items.{name}", type_=column.type) if by_id else column

        conditions: list[Any] = []
        if self.scope:
            conditions.append(col("scope") == self.scope)
        if self.scope_id:
            conditions.append(col("scope_id") == self.scope_id)
        if self.type:
            if self.type not in MEMORY_TYPES:
                raise AdminError(f"type must be one of {', '.join(MEMORY_TYPES)}")
            conditions.append(col("type") == self.type)
        if self.status == "pending":
            conditions.append(col("awaiting_approval").is_(True))
        elif self.status:
            if self.status not in tuple(Status):
                raise AdminError(f"status must be one of {', '.join(Status)} or pending")
            conditions.append(col("status") == self.status)
        if self.min_confidence is not None:
            conditions.append(col("confidence") >= self.min_confidence)
        if self.query:
            conditions.append(col("fact").contains(self.query))
        if self.told_by:
            conditions.append(told_by(self.told_by))
        return conditions


def item_dict(item: MemoryItem) -> dict[str, Any]:
    return {
        "memory_id": item.memory_id,
        "scope": item.scope,
        "scope_id": item.scope_id,
        "type": item.type,
        "fact": item.fact,
        "fact_key": item.fact_key,
        "confidence": item.confidence,
        "importance": item.importance,
        "evidence_count": item.evidence_count,
        "ttl_days": item.ttl_days,
        "status": item.status,
        "awaiting_approval": item.awaiting_approval,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }


class Admin:
    def __init__(
        self,
        db: Database,
        config: Callable[[], LTMConfig],
        clock: Callable[[], datetime] = utcnow,
        on_fact_changed: Callable[[MemoryItem], None] | None = None,
        on_removed: Callable[[MemoryItem], None] | None = None,
        on_withheld: Callable[[Scope, list[int] | None], None] | None = None,
    ) -> None:
        self._db = db
        self._config = config
        self._clock = clock
        self._on_fact_changed = on_fact_changed or (lambda item: None)
        self._on_removed = on_removed or (lambda item: None)
        # (scope, event ids) of turns just withheld; None: all of the scope's
        self._on_withheld = on_withheld or (lambda scope, ids: None)

    # -- reading ----------------------------------------------------------

    async def list_items(
        self, f: ItemFilter, sort: str = "updated", offset: int = 0, limit: int = 50
    ) -> tuple[list[MemoryItem], int]:
        if sort not in SORTS:
            raise AdminError(f"sort must be one of {', '.join(SORTS)}")
        conditions = f.conditions()
        where = and_(*conditions) if conditions else True
        async with self._db.read() as session:
            total = (await session.execute(select(func.count()).select_from(MemoryItem).where(where))).scalar_one()
            rows = await session.execute(
                select(MemoryItem).where(where).order_by(SORTS[sort], MemoryItem.id.desc()).offset(offset).limit(limit)
            )
            return list(rows.scalars()), total

    async def get_item(self, memory_id: str) -> dict[str, Any]:
        async with self._db.read() as session:
            item = await self._item(session, memory_id)
            evidence = (
                await session.execute(
                    select(MemoryEvidence, MemoryEvent)
                    .join(MemoryEvent, MemoryEvent.event_id == MemoryEvidence.event_id, isouter=True)
                    .where(MemoryEvidence.memory_id == memory_id)
                    .order_by(MemoryEvidence.created_at)
                )
            ).all()
            return {
                **item_dict(item),
                "evidence": [
                    {
                        "event_id": ev.event_id,
                        "extraction_method": ev.extraction_method,
                        "extraction_meta": ev.extraction_meta,
                        "created_at": ev.created_at.isoformat(),
                        "event": event_dict(event) if event else None,
                    }
                    for ev, event in evidence
                ],
            }

    @staticmethod
    async def _item(session: AsyncSession, memory_id: str) -> MemoryItem:
        item = (
            await session.execute(select(MemoryItem).where(MemoryItem.memory_id == memory_id))
        ).scalar_one_or_none()
        if item is None:
            raise AdminError(f"no memory with id {memory_id}", 404)
        return item

    async def find_by_prefix(
        self, prefix: str, scopes: list[Scope] | None = None, sender_id: str | None = None
    ) -> MemoryItem:
        """An item by its id or an unambiguous id prefix (chat commands show
        8 characters), limited to ``scopes`` when given."""
        prefix = prefix.strip()
        if len(prefix) < 4:
            raise AdminError("give at least 4 characters of the memory id")
        query = select(MemoryItem).where(MemoryItem.memory_id.startswith(prefix)).limit(2)
        if scopes is not None:
            query = query.where(
                or_(*(and_(MemoryItem.scope == s.kind, MemoryItem.scope_id == s.id) for s in scopes))
            )
        if sender_id is not None:
            query = query.where(told_by(sender_id))
        async with self._db.read() as session:
            rows = (await session.execute(query)).scalars().all()
        if not rows:
            raise AdminError(f"no memory {prefix} here", 404)
        if len(rows) > 1:
            raise AdminError(f"{prefix} matches several memories; give more of the id")
        return rows[0]

    # -- changing ---------------------------------------------------------

    async def review(self, memory_ids: list[str], decision: str, actor: str, reason: str = "") -> list[dict]:
        """Approve (→ active) or reject (→ deleted, tombstoned) queued items."""
        if decision not in ("approve", "reject"):
            raise AdminError("decision must be approve or reject")
        if not memory_ids:
            raise AdminError("no memory ids given")
        now = self._clock()
        results = []
        async with self._db.write() as session:
            items = [await self._item(session, mid) for mid in memory_ids]
            for item in items:
                if decision == "approve":
                    old = item.status
                    item.status, item.awaiting_approval, item.updated_at = Status.ACTIVE, False, now
                    await audit(session, "approve", actor, reason or "approved", item=item, now=now,
                                old=old, new=Status.ACTIVE, fact=item.fact)
                else:
                    await self._tombstone(session, item, actor, reason or "rejected", "reject", now)
                results.append({"memory_id": item.memory_id, "decision": decision})
        return results

    async def update_item(self, memory_id: str, changes: dict[str, Any], actor: str) -> MemoryItem:
        allowed = {"status", "importance", "ttl_days", "fact", "type"}
        unknown = set(changes) - allowed
        if unknown:
            raise AdminError(f"cannot change {sorted(unknown)}; changeable: {sorted(allowed)}")
        now = self._clock()
        async with self._db.write() as session:
            item = await self._item(session, memory_id)
            before = item_dict(item)
            if "status" in changes:
                status = changes["status"]
                if status not in tuple(Status):
                    raise AdminError(f"status must be one of {', '.join(Status)}")
                item.status = status
                item.awaiting_approval = False
            if "importance" in changes:
                item.importance = _unit(changes["importance"], "importance")
            if "ttl_days" in changes:
                ttl = changes["ttl_days"]
                if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 0):
                    raise AdminError("ttl_days must be a whole number ≥ 0, or null for permanent")
                item.ttl_days = ttl
            if "type" in changes:
                if changes["type"] not in MEMORY_TYPES:
                    raise AdminError(f"type must be one of {', '.join(MEMORY_TYPES)}")
                item.type = changes["type"]
            fact_changed = False
            if "fact" in changes:
                fact = changes["fact"]
                if not isinstance(fact, str) or not fact.strip():
                    raise AdminError("fact must be non-empty text")
                fact = " ".join(fact.split())
                if len(fact) > self._config().extraction.max_fact_chars:
                    raise AdminError(f"fact is longer than {self._config().extraction.max_fact_chars} characters")
                key = normalize_fact_key(fact)
                clash = (
                    await session.execute(
                        select(MemoryItem.memory_id).where(
                            MemoryItem.scope == item.scope, MemoryItem.scope_id == item.scope_id,
                            or_(MemoryItem.fact_key == key, MemoryItem.fact == fact), MemoryItem.id != item.id,
                        ).limit(1)
                    )
                ).scalar_one_or_none()
                if clash:
                    raise AdminError(f"another memory ({clash}) already has this fact", 409)
                fact_changed = fact != item.fact
                item.fact, item.fact_key = fact, key
            item.updated_at = now
            await session.flush()
            if fact_changed:
                await fts_upsert(session, item)
                await delete_vector(session, item.id)
            after = item_dict(item)
            changed = {k: [before[k], after[k]] for k in after if before[k] != after[k] and k != "updated_at"}
            await audit(session, "edit", actor, "edited", item=item, now=now, changes=changed)
        if fact_changed:
            self._on_fact_changed(item)
        return item

    async def delete(self, memory_id: str, actor: str, reason: str = "deleted") -> dict:
        async with self._db.write() as session:
            item = await self._item(session, memory_id)
            await self._tombstone(session, item, actor, reason, "delete", self._clock())
            return item_dict(item)

    async def quotable_turns(self, scope: Scope) -> int:
        """The scope's turns that are not withheld: what the reader could
        still quote (in mode auto) after its memories are gone."""
        async with self._db.read() as session:
            return (
                await session.execute(
                    select(func.count()).select_from(MemoryEvent).where(
                        MemoryEvent.scope == scope.kind, MemoryEvent.scope_id == scope.id,
                        MemoryEvent.source_role.in_(SHOWN_ROLES), MemoryEvent.withheld.is_(False),
                    )
                )
            ).scalar_one()

    async def forget_scope(self, scope: Scope, actor: str) -> int:
        """Delete every memory of a scope (tombstoned). Returns how many."""
        now = self._clock()
        async with self._db.write() as session:
            items = (
                await session.execute(
                    select(MemoryItem).where(MemoryItem.scope == scope.kind, MemoryItem.scope_id == scope.id)
                )
            ).scalars().all()
            for item in items:
                await self._tombstone(session, item, actor, "forget-all", "delete", now)
            # Forgetting a person also means never quoting them, nor learning
            # from what they said before: every turn of the scope is withheld
            # from the reader and none is extracted (all stay recorded).
            of_scope = and_(MemoryEvent.scope == scope.kind, MemoryEvent.scope_id == scope.id)
            await session.execute(
                delete(EventVector).where(EventVector.event_rowid.in_(select(MemoryEvent.id).where(of_scope)))
            )
            await session.execute(update(MemoryEvent).where(of_scope, MemoryEvent.withheld.is_(False))
                                  .values(withheld=True))
            keywords.note(session, keywords.Change(keywords.TURNS, scope, None, None))
            await session.execute(
                update(MemoryEvent).where(of_scope, MemoryEvent.extraction_status == ExtractionStatus.PENDING)
                .values(extraction_status=ExtractionStatus.SKIPPED, next_attempt_at=None)
            )
            after_commit(session, lambda: self._on_withheld(scope, None))
        return len(items)

    async def _tombstone(
        self, session: AsyncSession, item: MemoryItem, actor: str, reason: str, action: str, now: datetime
    ) -> None:
        await session.merge(
            MemoryTombstone(
                scope=item.scope, scope_id=item.scope_id, fact_key=item.fact_key,
                fact=item.fact, created_at=now, actor=actor, reason=reason,
            )
        )
        await audit(session, action, actor, reason, item=item, now=now, snapshot=item_dict(item))
        # The turns behind it are withheld too: the reader would otherwise
        # quote what was just taken back.
        withheld = await remove_item(session, item, withhold=True)
        after_commit(session, lambda: self._on_removed(item))
        for scope, ids in withheld.items():
            after_commit(session, lambda scope=scope, ids=ids: self._on_withheld(scope, ids))


    # -- statistics -------------------------------------------------------

    async def stats(self, scopes: list[Scope] | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        """Per scope: counts by status and type, approval queue, recent writes,
        extraction backlog and failures."""
        since = self._clock() - timedelta(hours=1)

        def in_scopes(model):
            if scopes is None:
                return model.scope == kind if kind else True
            return or_(*(and_(model.scope == s.kind, model.scope_id == s.id) for s in scopes))

        out: dict[tuple[str, str], dict[str, Any]] = {}

        def entry(scope: str, scope_id: str) -> dict[str, Any]:
            return out.setdefault(
                (scope, scope_id),
                {
                    "scope": scope, "scope_id": scope_id, "by_status": {}, "by_type": {},
                    "awaiting_approval": 0, "writes_last_hour": 0,
                    "events": {"pending": 0, "failed": 0, "done": 0, "skipped": 0},
                },
            )

        async with self._db.read() as session:
            rows = await session.execute(
                select(MemoryItem.scope, MemoryItem.scope_id, MemoryItem.status, MemoryItem.type,
                       MemoryItem.awaiting_approval, func.count())
                .where(in_scopes(MemoryItem))
                .group_by(MemoryItem.scope, MemoryItem.scope_id, MemoryItem.status, MemoryItem.type,
                          MemoryItem.awaiting_approval)
            )
            for scope, scope_id, status, mtype, waiting, n in rows:
                e = entry(scope, scope_id)
                e["by_status"][status] = e["by_status"].get(status, 0) + n
                e["by_type"][mtype] = e["by_type"].get(mtype, 0) + n
                if waiting:
                    e["awaiting_approval"] += n
            rows = await session.execute(
                select(MemoryEvent.scope, MemoryEvent.scope_id, MemoryEvent.extraction_status, func.count())
                .where(in_scopes(MemoryEvent))
                .group_by(MemoryEvent.scope, MemoryEvent.scope_id, MemoryEvent.extraction_status)
            )
            for scope, scope_id, status, n in rows:
                entry(scope, scope_id)["events"][status] = n
            rows = await session.execute(
                select(MemoryAudit.scope, MemoryAudit.scope_id, func.count())
                .where(in_scopes(MemoryAudit), MemoryAudit.action.in_(WRITE_ACTIONS), MemoryAudit.created_at >= since)
                .group_by(MemoryAudit.scope, MemoryAudit.scope_id)
            )
            for scope, scope_id, n in rows:
                entry(scope, scope_id)["writes_last_hour"] = n
        return sorted(out.values(), key=lambda e: (e["scope"], e["scope_id"]))


def told_by(sender_id: str):
    """Items with evidence from this sender's own messages."""
    return MemoryItem.memory_id.in_(
        select(MemoryEvidence.memory_id)
        .join(MemoryEvent, MemoryEvent.event_id == MemoryEvidence.event_id)
        .where(MemoryEvent.sender_id == sender_id)
    )


def event_dict(event: MemoryEvent) -> dict[str, Any]:
    return {
        "event_id": event.event_id,
        "scope": event.scope,
        "scope_id": event.scope_id,
        "source_type": event.source_type,
        "source_role": event.source_role,
        "content": event.content,
        "platform_id": event.platform_id,
        "session_id": event.session_id,
        "sender_id": event.sender_id,
        "sender_name": event.sender_name,
        "created_at": event.created_at.isoformat(),
        "extraction_status": event.extraction_status,
        "attempts": event.attempts,
        "last_error": event.last_error,
    }


def _unit(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise AdminError(f"{name} must be a number from 0 to 1")
    return float(value)
