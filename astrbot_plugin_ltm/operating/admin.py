"""Operator and user operations on stored memory: review, edit, delete,
forget. Chat commands, the dashboard API and the review page all call
these, so every change is validated and audited the same way."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from .. import validators
from ..enums import AuditAction, MemoryType, Status
from ..errors import AdminError
from ..i18n import msg
from ..scope import Scope, with_persona
from ..storing.audit import audit
from ..storing.memory_rows import fact_written, memory_changed
from ..storing.removal import forget_turns, remove_memory, withhold_lines
from ..storing.tables import MemoryAudit, MemoryEvent, MemoryItem, MemoryTombstone
from ..text import normalize_fact_key
from .queries import AdminQueries
from .serialize import item_dict

CHANGEABLE = ("status", "importance", "ttl_days", "fact", "type")


class Admin(AdminQueries):
    """Reading (AdminQueries) and changing stored memory."""

    async def review(self, memory_ids: list[str], decision: str, actor: str, reason: str = "") -> list[dict[str, str]]:
        """Approve (→ active) or reject (→ deleted, tombstoned) memories."""
        if decision not in ("approve", "reject"):
            raise AdminError(msg("api.decision"))
        if not memory_ids:
            raise AdminError(msg("api.no_ids"))
        now = self._clock()
        results = []
        async with self._db.write() as session:
            items = [await self._item(session, mid) for mid in memory_ids]
            for item in items:
                if item.status == Status.SUPERSEDED:
                    raise AdminError(msg("api.history_review", memory_id=item.memory_id, newer=item.superseded_by),
                                     409)
                if decision == "approve":
                    old = item.status
                    item.status, item.awaiting_approval, item.updated_at = Status.ACTIVE, False, now
                    item.held_reason = None
                    memory_changed(session, item)
                    audit(session, AuditAction.APPROVE, actor, reason or str(msg("audit.approved")), item=item, now=now,
                          old=old, new=Status.ACTIVE, fact=item.fact)
                elif item.supersedes:
                    await self._reject_update(session, item, actor, reason or str(msg("audit.rejected")), now)
                else:
                    await self._remove(session, item, actor, reason or str(msg("audit.rejected")),
                                       AuditAction.REJECT, now)
                results.append({"memory_id": item.memory_id, "decision": decision})
        return results

    async def update_item(self, memory_id: str, changes: dict[str, Any], actor: str) -> MemoryItem:
        """Change an operator-editable field; a new fact is re-keyed, its
        keyword row rewritten and its vector embedded again."""
        unknown = set(changes) - set(CHANGEABLE)
        if unknown:
            named = ", ".join(validators.shown(k) for k in sorted(unknown)[:5])
            raise AdminError(msg("api.not_changeable", names=named, changeable=sorted(CHANGEABLE)))
        now = self._clock()
        async with self._db.write() as session:
            item = await self._item(session, memory_id)
            if item.status == Status.SUPERSEDED:
                raise AdminError(msg("api.history_edit", memory_id=item.memory_id, newer=item.superseded_by), 409)
            before = item_dict(item)
            if "status" in changes:
                status = validators.status(changes["status"])
                if status == Status.SUPERSEDED:
                    raise AdminError(msg("api.superseded_by_hand"))
                item.status = status
                item.awaiting_approval, item.held_reason = False, None
            if "importance" in changes:
                item.importance = validators.unit(changes["importance"], "importance")
            if "ttl_days" in changes:
                item.ttl_days = validators.ttl_days(changes["ttl_days"])
            if "type" in changes:
                item.type = validators.memory_type(changes["type"])
            fact_changed = "fact" in changes and await self._change_fact(session, item, changes["fact"])
            item.updated_at = now
            await session.flush()
            if fact_changed:
                await fact_written(session, item, created=False)
            else:
                memory_changed(session, item)
            after = item_dict(item)
            changed = {k: [before[k], after[k]] for k in after if before[k] != after[k] and k != "updated_at"}
            audit(session, AuditAction.EDIT, actor, str(msg("audit.edited")), item=item, now=now, changes=changed)
        return item

    async def _change_fact(self, session: AsyncSession, item: MemoryItem, fact: Any) -> bool:
        """Set ``item``'s fact (and key) to ``fact``; whether it changed."""
        cfg = self._config()
        summary = item.type == MemoryType.SUMMARY
        fact = validators.fact(fact, cfg.summaries.max_chars if summary else cfg.extraction.max_fact_chars)
        # A summary's key names its level and period (learning/summaries.py): it stays.
        key = item.fact_key if summary else normalize_fact_key(fact)
        clash = (await session.execute(select(MemoryItem.memory_id).where(
            MemoryItem.scope == item.scope, MemoryItem.scope_id == item.scope_id,
            or_(MemoryItem.fact_key == key, MemoryItem.fact == fact), MemoryItem.id != item.id,
            MemoryItem.status != Status.SUPERSEDED,
        ).limit(1))).scalar_one_or_none()
        if clash:
            raise AdminError(msg("api.fact_clash", clash=clash), 409)
        changed = fact != item.fact
        item.fact, item.fact_key = fact, key
        return changed

    async def delete(self, memory_id: str, actor: str, reason: str = str(msg("audit.deleted"))) -> dict[str, Any]:
        async with self._db.write() as session:
            item = await self._item(session, memory_id)
            await self._remove(session, item, actor, reason, AuditAction.DELETE, self._clock())
            return item_dict(item)

    async def forget_scope(self, scope: Scope, actor: str, their_lines: Sequence[tuple[str, str]] = ()) -> int:
        """Delete every memory of a scope and its persona parts, withhold every
        turn (and ``their_lines``' in groups). Returns how many memories."""
        now = self._clock()
        count = 0
        async with self._db.write() as session:
            if their_lines:
                await withhold_lines(session, their_lines)
            for part in [scope, *await _persona_parts(session, scope)]:
                items = (await session.execute(select(MemoryItem).where(
                    MemoryItem.scope == part.kind, MemoryItem.scope_id == part.id))).scalars().all()
                for item in items:
                    await self._remove(session, item, actor, str(msg("audit.forget_all")), AuditAction.DELETE, now)
                await forget_turns(session, part)
                count += len(items)
        return count

    @staticmethod
    async def _reject_update(session: AsyncSession, item: MemoryItem, actor: str, reason: str,
                             now: datetime) -> None:
        """A rejected new value: gone, and the value it superseded is
        current again. Its key is not tombstoned, as the key lives on."""
        audit(session, AuditAction.REJECT, actor, reason, item=item, now=now, snapshot=item_dict(item))
        previous = (await session.execute(select(MemoryItem).where(
            MemoryItem.memory_id == item.supersedes))).scalar_one_or_none()
        await remove_memory(session, item, withhold=True)
        if previous is None or previous.status != Status.SUPERSEDED:
            return
        await session.flush()  # the key is free again
        back = await _status_before_superseded(session, previous)
        previous.status, previous.valid_to, previous.superseded_by, previous.updated_at = back, None, None, now
        memory_changed(session, previous)
        audit(session, AuditAction.RESTORE, actor, str(msg("audit.restored", reason=reason)),
              item=previous, now=now, old=Status.SUPERSEDED, new=back, fact=previous.fact)

    @staticmethod
    async def _remove(session: AsyncSession, item: MemoryItem, actor: str, reason: str, action: AuditAction,
                      now: datetime) -> None:
        """Delete or reject: tombstoned, audited, and the turns behind it
        withheld (the reader would otherwise quote what was just taken back)."""
        await session.merge(MemoryTombstone(scope=item.scope, scope_id=item.scope_id, fact_key=item.fact_key,
                                            fact=item.fact, created_at=now, actor=actor, reason=reason))
        audit(session, action, actor, reason, item=item, now=now, snapshot=item_dict(item))
        await remove_memory(session, item, withhold=True)


async def _status_before_superseded(session: AsyncSession, item: MemoryItem) -> str:
    """The status ``item`` had when a newer value superseded it (from the
    audit row of that change); shadow when it cannot be told."""
    old = (await session.execute(
        select(MemoryAudit.detail)
        .where(MemoryAudit.memory_id == item.memory_id, MemoryAudit.action == AuditAction.STATUS)
        .order_by(MemoryAudit.id.desc()).limit(1))).scalar_one_or_none()
    before = (old or {}).get("old") if isinstance(old, dict) else None
    return before if before in (Status.ACTIVE, Status.SHADOW, Status.DISABLED) else Status.SHADOW


async def _persona_parts(session: AsyncSession, scope: Scope) -> list[Scope]:
    """The scopes the personas keep of ``scope`` (scope.with_persona)."""
    prefix = with_persona(scope, "").id
    ids: set[str] = set()
    for table in (MemoryItem, MemoryEvent):
        ids.update((await session.execute(select(table.scope_id).distinct().where(
            table.scope == scope.kind, table.scope_id.startswith(prefix, autoescape=True)))).scalars())
    return [Scope(scope.kind, i) for i in sorted(ids)]
