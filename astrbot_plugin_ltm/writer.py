"""The write pipeline after extraction: dedup & merge, confidence, policy
gate, persistence with evidence, and the audit trail (design §3.3–§3.5).

:meth:`MemoryWriter.apply` works inside the caller's transaction, so a batch
of candidates and the marking of its events as extracted commit together or
not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from .candidates import Candidate
from .config import LTMConfig
from . import keywords
from .db import after_commit, fts_delete, fts_upsert
from .models import EventVector, MemoryAudit, MemoryEvent, MemoryEvidence, MemoryItem, MemoryTombstone, utcnow
from .policy import GateInput, Method, Status, confidence, gate
from .scope import Scope
from .text import contradicts, normalize_fact_key
from .vectors import delete_vector


# Audit actions that count as a write for the rate limits: a new item, or
# an item whose fact was replaced by a contradicting one.
WRITE_ACTIONS = ("create", "supersede")
SESSION_WINDOW = timedelta(hours=24)


class SemanticMatcher(Protocol):
    """Finds an existing item of the scope that says the same (cosine > 0.85)."""

    async def find(self, session: AsyncSession, scope: Scope, fact: str) -> MemoryItem | None: ...


@dataclass(frozen=True)
class WriteOutcome:
    action: str  # created | confirmed | merged | superseded | dropped
    memory_id: str | None
    status: str | None
    reason: str
    fact: str = ""


async def audit(
    session: AsyncSession,
    action: str,
    actor: str,
    reason: str = "",
    *,
    item: MemoryItem | None = None,
    scope: Scope | None = None,
    session_id: str | None = None,
    now: datetime | None = None,
    **detail: object,
) -> None:
    if item is not None and scope is None:
        scope = Scope(item.scope, item.scope_id)
    session.add(
        MemoryAudit(
            created_at=now or utcnow(),
            action=action,
            memory_id=item.memory_id if item else None,
            scope=scope.kind if scope else None,
            scope_id=scope.id if scope else None,
            session_id=session_id,
            actor=actor,
            reason=reason,
            detail=detail,
        )
    )


class MemoryWriter:
    def __init__(
        self,
        config: Callable[[], LTMConfig],
        clock: Callable[[], datetime] = utcnow,
        matcher: SemanticMatcher | None = None,
        on_fact_changed: Callable[[MemoryItem], None] | None = None,
        on_removed: Callable[[MemoryItem], None] | None = None,
        on_withheld: Callable[[Scope, list[int] | None], None] | None = None,
    ) -> None:
        self._config = config
        self._clock = clock
        self.matcher = matcher
        # Derived indexes (vectors) follow the source of truth through these.
        self._on_fact_changed = on_fact_changed or (lambda item: None)
        self._on_removed = on_removed or (lambda item: None)
        # (scope, event ids) of turns withheld; None: all of the scope's
        self._on_withheld = on_withheld or (lambda scope, ids: None)

    def _removed(self, session: AsyncSession, item: MemoryItem, withheld: dict[Scope, list[int]]) -> None:
        """The caches follow a removal once it has committed."""
        after_commit(session, lambda: self._on_removed(item))
        for scope, ids in withheld.items():
            after_commit(session, lambda scope=scope, ids=ids: self._on_withheld(scope, ids))

    async def apply(
        self,
        session: AsyncSession,
        scope: Scope,
        candidates: Sequence[Candidate],
        *,
        method: str,
        actor: str,
    ) -> list[WriteOutcome]:
        counts = _WriteCounts(session, scope, self._clock())
        outcomes = []
        for candidate in candidates:
            outcome = await self._apply_one(session, scope, candidate, method, actor, counts)
            outcomes.append(outcome)
        return outcomes

    async def _apply_one(
        self,
        session: AsyncSession,
        scope: Scope,
        c: Candidate,
        method: str,
        actor: str,
        counts: _WriteCounts,
    ) -> WriteOutcome:
        cfg = self._config()
        now = self._clock()
        explicit = method == Method.USER_EXPLICIT
        key = normalize_fact_key(c.fact_key or c.fact)

        async def drop(reason: str) -> WriteOutcome:
            await audit(
                session, "policy", actor, reason, scope=scope, session_id=c.session_id, now=now,
                decision="dropped", fact=c.fact, fact_key=key, type=c.type,
            )
            return WriteOutcome("dropped", None, None, reason, c.fact)

        if not key:
            return await drop("empty fact key")
        # One limit for every source: extraction, explicit requests, imports.
        if len(c.fact) > cfg.extraction.max_fact_chars:
            return await drop(f"fact longer than {cfg.extraction.max_fact_chars} characters")

        tomb = await session.get(MemoryTombstone, (scope.kind, scope.id, key))
        if tomb is not None:
            if not explicit:
                return await drop(f"tombstoned by {tomb.actor}: {tomb.reason}")
            await session.delete(tomb)
            await audit(
                session, "revive", actor, "the user explicitly restated a deleted fact",
                scope=scope, session_id=c.session_id, now=now, fact_key=key, fact=c.fact,
            )

        item = (
            await session.execute(
                select(MemoryItem).where(
                    MemoryItem.scope == scope.kind,
                    MemoryItem.scope_id == scope.id,
                    MemoryItem.fact_key == key,
                )
            )
        ).scalar_one_or_none()
        action = "confirm"
        if item is not None and contradicts(item.fact, c.fact):
            action = "supersede"
        elif item is None and self.matcher is not None:
            item = await self.matcher.find(session, scope, c.fact)
            if item is not None:
                action = "merge"
        if item is None:
            action = "create"

        weighted = confidence(c.confidence, c.source)
        evidence_meta = {
            **c.meta,
            "confidence": {"base": c.confidence, "source": c.source, "weighted": weighted},
        }
        new_events = list(dict.fromkeys(c.event_ids))
        relinked: list[MemoryEvidence] = []
        if item is not None:
            links = (
                await session.execute(select(MemoryEvidence).where(MemoryEvidence.memory_id == item.memory_id))
            ).scalars().all()
            linked = {link.event_id: link for link in links}
            new_events = [e for e in new_events if e not in linked]
            # A contradiction stated in an already linked line ("I used to
            # live in Paris, now London") re-points that link to the new fact.
            relinked = [linked[e] for e in c.event_ids if e in linked] if action == "supersede" else []
            if not new_events and not relinked:
                return WriteOutcome("confirmed", item.memory_id, item.status, "evidence already linked", item.fact)

        if action == "create":
            evidence_count, conf = 1, weighted
        elif action == "supersede":
            evidence_count = 1
            conf = confidence(c.confidence, c.source, 1, contradicted=True)
        else:
            evidence_count = item.evidence_count + 1
            conf = await self._merged_confidence(session, item, weighted, evidence_count)

        decision = gate(
            cfg.write_policy,
            GateInput(
                type=c.type if item is None else item.type,
                confidence=conf,
                evidence_count=evidence_count,
                is_new=action in WRITE_ACTIONS,
                explicit=explicit,
                writes_this_session=await counts.session(c.session_id),
                writes_this_hour=await counts.hour(),
            ),
        )
        if not decision.allowed:
            return await drop(decision.reason)

        if action == "create":
            await self._make_room(session, scope, cfg.write_policy.max_items_per_scope, actor, now)
            item = MemoryItem(
                scope=scope.kind,
                scope_id=scope.id,
                type=c.type,
                fact=c.fact,
                fact_key=key,
                confidence=conf,
                importance=c.importance,
                evidence_count=1,
                ttl_days=cfg.ttl_days(c.type),
                status=decision.status,
                awaiting_approval=decision.awaiting_approval,
                created_at=now,
                updated_at=now,
            )
            session.add(item)
            await session.flush()
            await fts_upsert(session, item)
        else:
            old = {"fact": item.fact, "status": item.status, "confidence": item.confidence}
            if action == "supersede":
                await self._supersede_evidence(session, item)
                item.fact = c.fact
                item.importance = max(item.importance, c.importance)
            elif action == "merge" and weighted > item.confidence:
                item.fact = c.fact  # the better-supported wording wins
            item.evidence_count = evidence_count
            item.confidence = conf
            item.updated_at = now
            item.ttl_days = cfg.ttl_days(item.type)
            item.status, item.awaiting_approval = self._next_status(item, decision, action)
            if item.fact != old["fact"]:
                await fts_upsert(session, item)
                await delete_vector(session, item.id)
                after_commit(session, lambda item=item: self._on_fact_changed(item))
            if item.status != old["status"]:
                await audit(
                    session, "status", actor, decision.reason, item=item, session_id=c.session_id,
                    now=now, old=old["status"], new=item.status,
                )
        for link in relinked:
            link.extraction_meta = evidence_meta
            link.extraction_method = method
        for event_id in new_events:
            session.add(
                MemoryEvidence(
                    memory_id=item.memory_id,
                    event_id=event_id,
                    extraction_method=method,
                    extraction_meta=evidence_meta,
                    created_at=now,
                )
            )
        await audit(
            session, action, actor, decision.reason, item=item, session_id=c.session_id, now=now,
            fact=item.fact, confidence=conf, evidence_count=item.evidence_count,
            status=item.status, events=c.event_ids,
            **({"previous_fact": old["fact"]} if action != "create" and old["fact"] != item.fact else {}),
        )
        if action in WRITE_ACTIONS:
            counts.add(c.session_id)
        past = {"create": "created", "confirm": "confirmed", "merge": "merged", "supersede": "superseded"}
        return WriteOutcome(past[action], item.memory_id, item.status, decision.reason, item.fact)

    @staticmethod
    def _next_status(item: MemoryItem, decision, action: str) -> tuple[str, bool]:
        """The status of an existing item after new evidence."""
        # An operator's "disabled" outranks anything extraction learns, and
        # an item in the approval queue stays there until someone decides.
        if item.status == Status.DISABLED:
            return item.status, item.awaiting_approval
        if item.awaiting_approval:
            return Status.SHADOW, True
        # More evidence never demotes an active item; a contradiction changed
        # the fact itself, so its lower confidence is gated afresh.
        if item.status == Status.ACTIVE and action != "supersede":
            return Status.ACTIVE, False
        return decision.status, decision.awaiting_approval

    async def _merged_confidence(
        self, session: AsyncSession, item: MemoryItem, weighted: float, evidence_count: int
    ) -> float:
        """Mean of the weighted confidences of the item's current evidence and
        the new one, times the repetition bonus for ``evidence_count``."""
        metas = (
            await session.execute(
                select(MemoryEvidence.extraction_meta).where(MemoryEvidence.memory_id == item.memory_id)
            )
        ).scalars()
        values = [
            m["confidence"]["weighted"]
            for m in metas
            if isinstance(m, dict) and not m.get("superseded") and "confidence" in m
        ]
        values = values or [item.confidence]
        mean = (sum(values) + weighted) / (len(values) + 1)
        return confidence(mean, "user_explicit", evidence_count)  # weight already applied

    @staticmethod
    async def _supersede_evidence(session: AsyncSession, item: MemoryItem) -> None:
        rows = (
            await session.execute(select(MemoryEvidence).where(MemoryEvidence.memory_id == item.memory_id))
        ).scalars()
        for row in rows:
            row.extraction_meta = {**(row.extraction_meta or {}), "superseded": True}

    async def _make_room(
        self, session: AsyncSession, scope: Scope, cap: int, actor: str, now: datetime
    ) -> None:
        """Evict the least important, least recently confirmed items so that
        one more fits under ``max_items_per_scope``."""
        count = (
            await session.execute(
                select(func.count()).select_from(MemoryItem).where(
                    MemoryItem.scope == scope.kind, MemoryItem.scope_id == scope.id
                )
            )
        ).scalar_one()
        excess = count - cap + 1
        if excess <= 0:
            return
        victims = (
            await session.execute(
                select(MemoryItem)
                .where(MemoryItem.scope == scope.kind, MemoryItem.scope_id == scope.id)
                .order_by(MemoryItem.importance.asc(), MemoryItem.updated_at.asc())
                .limit(excess)
            )
        ).scalars().all()
        for victim in victims:
            withheld = await remove_item(session, victim, withhold=False)
            self._removed(session, victim, withheld)
            await audit(
                session, "evict", actor, f"max_items_per_scope ({cap}) reached; lowest importance, oldest",
                item=victim, now=now, fact=victim.fact, importance=victim.importance,
            )


async def remove_item(session: AsyncSession, item: MemoryItem, *, withhold: bool) -> dict[Scope, list[int]]:
    """Delete an item with its evidence links and keyword-index row.

    The turns behind it are withheld from the reader (kept, never shown
    again) when ``withhold`` says so (an operator or user deleted or
    rejected it) or when the item was held back (not active): without its
    evidence links a turn would count as one no memory covers, and in mode
    auto be shown. Returns the withheld turns' ids by scope.
    """
    withheld = await withhold_evidence(session, item) if withhold or item.status != Status.ACTIVE else {}
    await session.execute(delete(MemoryEvidence).where(MemoryEvidence.memory_id == item.memory_id))
    await fts_delete(session, item)
    await delete_vector(session, item.id)
    await session.delete(item)
    return withheld


async def withhold_evidence(session: AsyncSession, item: MemoryItem) -> dict[Scope, list[int]]:
    """Withhold the turns behind ``item``: marked, their vectors deleted and
    their keyword rows taken out of the reader's index. By scope, their ids."""
    rows = (
        await session.execute(
            select(MemoryEvent.id, MemoryEvent.scope, MemoryEvent.scope_id).where(
                MemoryEvent.event_id.in_(select(MemoryEvidence.event_id).where(MemoryEvidence.memory_id == item.memory_id)),
                MemoryEvent.withheld.is_(False),
            )
        )
    ).all()
    if not rows:
        return {}
    ids = [rowid for rowid, _, _ in rows]
    await session.execute(update(MemoryEvent).where(MemoryEvent.id.in_(ids)).values(withheld=True))
    await session.execute(delete(EventVector).where(EventVector.event_rowid.in_(ids)))
    by_scope: dict[Scope, list[int]] = {}
    for rowid, kind, scope_id in rows:
        by_scope.setdefault(Scope(kind, scope_id), []).append(rowid)
        keywords.note(session, keywords.Change(keywords.TURNS, Scope(kind, scope_id), rowid, None))
    return by_scope


class _WriteCounts:
    """Writes already made this session / hour, looked up once per batch."""

    def __init__(self, session: AsyncSession, scope: Scope, now: datetime) -> None:
        self._session = session
        self._scope = scope
        self._since = now - timedelta(hours=1)
        # A private chat on QQ or Telegram keeps one unified_msg_origin for
        # ever; counting its writes over a day keeps the per-session limit a
        # limit on bursts, not a lifetime cap on learning about a person.
        self._session_since = now - SESSION_WINDOW
        self._by_session: dict[str | None, int] = {}
        self._hour: int | None = None

    async def session(self, session_id: str | None) -> int:
        if session_id is None:
            return 0
        if session_id not in self._by_session:
            self._by_session[session_id] = (
                await self._session.execute(
                    select(func.count()).select_from(MemoryAudit).where(
                        MemoryAudit.session_id == session_id,
                        MemoryAudit.action.in_(WRITE_ACTIONS),
                        MemoryAudit.created_at >= self._session_since,
                    )
                )
            ).scalar_one()
        return self._by_session[session_id]

    async def hour(self) -> int:
        if self._hour is None:
            self._hour = (
                await self._session.execute(
                    select(func.count()).select_from(MemoryAudit).where(
                        MemoryAudit.scope == self._scope.kind,
                        MemoryAudit.scope_id == self._scope.id,
                        MemoryAudit.action.in_(WRITE_ACTIONS),
                        MemoryAudit.created_at >= self._since,
                    )
                )
            ).scalar_one()
        return self._hour

    def add(self, session_id: str | None) -> None:
        if session_id is not None:
            self._by_session[session_id] = self._by_session.get(session_id, 0) + 1
        if self._hour is not None:
            self._hour += 1
