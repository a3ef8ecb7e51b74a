"""Memories of old put where they belong (audience.py), once, at start.

Before contexts, a fact a member said in a group was kept in the group's
scope, and a turn said while its person had paused was recorded (only not
learnt). At the first start with contexts:

- a group's memory whose lines were all said by one member moves to that
  member's own scope, with the group as its context;
- a group's memory that cites no line it can be placed by counts as private;
- the turns recorded while their person had paused are deleted, with the
  bot's replies to them: a pause means forgotten.

Each step is a batch of its own transaction, so a large store never holds
the write lock long; a start cut short does the rest at the next one.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import delete, select, text, update
from sqlalchemy.dialects.sqlite import insert
from sqlalchemy.ext.asyncio import AsyncSession

from ..audience import context_of
from ..clock import Clock, as_utc
from ..enums import AuditAction, ExtractionStatus, Role, ScopeKind, Visibility
from ..i18n import say
from ..logs import log
from ..persona import as_persona_of, shared_scope, target_scope
from ..scope import Scope
from ..storing.audit import audit
from ..storing.changes import MemoriesReindexed, note
from ..storing.database import Database
from ..storing.keyword_rows import write_fact_row
from ..storing.memory_rows import share
from ..storing.removal import delete_turns
from ..storing.tables import (
    NOT_SUPERSEDED,
    IndexBuild,
    MemoryAudit,
    MemoryEvent,
    MemoryEvidence,
    MemoryItem,
    MemoryVector,
    UserPause,
)

BUILD = "contexts"
VERSION = "1"
ITEMS_PER_BATCH = 200  # memories looked at per transaction
TURNS_PER_BATCH = 500  # turns deleted per transaction
ACTOR = "system:startup"
# The bot's reply follows its person's line within this long (the recorder writes both at once).
REPLY_WITHIN_SECONDS = 120


async def adopt_contexts(db: Database, person: Callable[[str | None, str | None], Scope],
                         accounts: Callable[[Scope], list[tuple[str, str]]], clock: Clock) -> None:
    """Run the steps above unless done."""
    async with db.read() as session:
        if await session.get(IndexBuild, BUILD) is not None:
            return
    moved = merged = private = 0
    after = 0
    while True:
        async with db.write() as session:
            ids = [int(i) for i in (await session.scalars(
                select(MemoryItem.id).where(MemoryItem.scope == ScopeKind.GROUP, MemoryItem.id > after)
                .order_by(MemoryItem.id).limit(ITEMS_PER_BATCH))).all() if i is not None]
            if not ids:
                break
            after = ids[-1]
            for item_id in ids:
                outcome = await _place(session, item_id, person, clock())
                moved += outcome in ("moved", "merged")
                merged += outcome == "merged"
                private += outcome == "private"
            note(session, MemoriesReindexed())  # namespaces load afresh
    forgotten = await _forget_paused_turns(db, accounts)
    async with db.write() as session:
        await session.execute(insert(IndexBuild).values(name=BUILD, built_with=VERSION, built_at=clock())
                              .on_conflict_do_nothing())
    if moved or private or forgotten:
        log.info("ltm: memories placed by where they were said: %d moved to their person (%d merged), %d private; "
                 "%d turn(s) said while paused deleted", moved, merged, private, forgotten)


async def _place(session: AsyncSession, item_id: int, person: Callable[[str | None, str | None], Scope],
                 now: datetime) -> str:
    item = await session.get(MemoryItem, item_id)
    if item is None:
        return "gone"
    lines = (await session.execute(
        select(MemoryEvent.platform_id, MemoryEvent.sender_id, MemoryEvent.source_role)
        .join(MemoryEvidence, MemoryEvidence.event_id == MemoryEvent.event_id)
        .where(MemoryEvidence.memory_id == item.memory_id))).all()
    if not lines:
        if item.visibility == Visibility.SHARED:
            item.visibility = Visibility.PRIVATE
            audit(session, AuditAction.EDIT, ACTOR, say("contexts.reason.unplaced", "en"), item=item, now=now,
                  visibility=Visibility.PRIVATE)
            return "private"
        return "kept"
    speakers = {(platform_id, sender_id) for platform_id, sender_id, role in lines if role == Role.USER}
    if len(speakers) != 1 or any(role == Role.ASSISTANT for *_, role in lines):
        return "kept"  # several people, or the bot's own act: the group's
    (platform_id, sender_id), = speakers
    group = Scope(item.scope, item.scope_id)
    home = target_scope(as_persona_of(person(platform_id, sender_id), group), item.type)
    same_key = None
    if item.status != "superseded":
        same_key = (await session.scalars(select(MemoryItem).where(
            MemoryItem.scope == home.kind, MemoryItem.scope_id == home.id, MemoryItem.fact_key == item.fact_key,
            NOT_SUPERSEDED))).first()
    said_in = context_of(group, home) or shared_scope(group)
    if same_key is not None:  # the person said it elsewhere too: one memory, said in both
        await session.execute(text(
            "UPDATE OR IGNORE ltm_evidence SET memory_id = :to WHERE memory_id = :from"),
            {"to": same_key.memory_id, "from": item.memory_id})
        await session.execute(delete(MemoryEvidence).where(MemoryEvidence.memory_id == item.memory_id))
        await share(session, same_key, said_in, created=False)
        audit(session, AuditAction.MOVE, ACTOR, say("contexts.reason.merged", "en"), item=same_key, now=now,
              merged=item.memory_id, fact=item.fact, said_in=str(said_in))
        await session.execute(text("DELETE FROM ltm_items_fts WHERE rowid = :r"), {"r": item.id})
        await session.execute(delete(MemoryVector).where(MemoryVector.item_id == item.id))
        await session.delete(item)
        return "merged"
    item.scope, item.scope_id = home.kind, home.id
    await session.flush()
    await write_fact_row(session, item)  # its keyword row is scoped by where it is kept
    await session.execute(update(MemoryVector).where(MemoryVector.item_id == item.id)
                          .values(scope=home.kind, scope_id=home.id))
    await share(session, item, said_in, created=True)
    audit(session, AuditAction.MOVE, ACTOR, say("contexts.reason.moved", "en"), item=item, now=now,
          said_in=str(said_in))
    return "moved"


async def _forget_paused_turns(db: Database, accounts: Callable[[Scope], list[tuple[str, str]]]) -> int:
    """Delete the turns recorded while their person had paused (they were
    kept, marked skipped, before a pause meant forgotten)."""
    async with db.read() as session:
        marks = (await session.execute(
            select(MemoryAudit.scope, MemoryAudit.scope_id, MemoryAudit.action, MemoryAudit.created_at)
            .where(MemoryAudit.action.in_((AuditAction.PAUSE, AuditAction.RESUME, AuditAction.LIFT)),
                   MemoryAudit.scope == ScopeKind.USER).order_by(MemoryAudit.created_at, MemoryAudit.id))).all()
        still = (await session.execute(select(UserPause.scope, UserPause.scope_id, UserPause.since))).all()
    spans: dict[Scope, list[tuple[datetime, datetime | None]]] = {}
    for kind, scope_id, action, at in marks:
        scope = Scope(str(kind), str(scope_id))
        if action == AuditAction.PAUSE:
            spans.setdefault(scope, []).append((as_utc(at), None))
        elif spans.get(scope) and spans[scope][-1][1] is None:
            spans[scope][-1] = (spans[scope][-1][0], as_utc(at))
    for kind, scope_id, since in still:
        scope, since = Scope(kind, scope_id), as_utc(since)
        if not any(start <= since and end is None for start, end in spans.get(scope, [])):
            spans.setdefault(scope, []).append((since, None))
    deleted = 0
    for scope, periods in spans.items():
        for start, end in periods:
            deleted += await _forget_span(db, scope, accounts(scope), start, end)
    return deleted


async def _forget_span(db: Database, person: Scope, their_accounts: list[tuple[str, str]], start: datetime,
                       end: datetime | None) -> int:
    """The person's skipped turns in [start, end): in their own scope (and
    its personas'), and their lines in groups, each with the bot's reply."""
    within = [MemoryEvent.created_at >= start, MemoryEvent.extraction_status == ExtractionStatus.SKIPPED]
    if end is not None:
        within.append(MemoryEvent.created_at < end)
    own = (MemoryEvent.scope == person.kind) & (
        (MemoryEvent.scope_id == person.id) | MemoryEvent.scope_id.like(f"{person.id}#persona:%"))
    deleted = 0
    async with db.read() as session:
        rowids: set[int] = {r for r in (await session.scalars(select(MemoryEvent.id).where(own, *within)))
                            if r is not None}
        for platform_id, sender_id in their_accounts:
            lines = (await session.execute(select(MemoryEvent.id, MemoryEvent.session_id, MemoryEvent.created_at)
                                           .where(MemoryEvent.scope == ScopeKind.GROUP,
                                                  MemoryEvent.platform_id == platform_id,
                                                  MemoryEvent.sender_id == sender_id, *within))).all()
            for rowid, session_id, at in lines:
                if rowid is None:
                    continue
                rowids.add(rowid)
                reply = (await session.scalars(select(MemoryEvent.id).where(
                    MemoryEvent.session_id == session_id, MemoryEvent.id > rowid,
                    MemoryEvent.source_role == Role.ASSISTANT,
                    MemoryEvent.extraction_status == ExtractionStatus.SKIPPED,
                    MemoryEvent.created_at <= as_utc(at) + timedelta(seconds=REPLY_WITHIN_SECONDS))
                    .order_by(MemoryEvent.id).limit(1))).first()
                if reply is not None:
                    rowids.add(int(reply))
    ordered = sorted(rowids)
    for n in range(0, len(ordered), TURNS_PER_BATCH):
        async with db.write() as session:
            deleted += await delete_turns(session, ordered[n:n + TURNS_PER_BATCH])
    return deleted
