"""The write pipeline after extraction, one candidate at a time: **decide** (dedup and
merge with what is known), the policy's **gate**, then **persist** with evidence and
audit, inside the caller's transaction so a batch commits whole or not at all.

Over 400 lines: decide, gate and persist share one transaction and the candidate's
state between them; split, each step would need the others' internals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from ..audience import context_of, stricter
from ..clock import Clock, utcnow
from ..config import LTMConfig
from ..enums import WRITE_ACTIONS, AuditAction, CandidateSource, Method, Outcome, Status, Visibility
from ..extension_points import SemanticMatcher
from ..i18n import msg, say
from ..instructions import instruction_reason
from ..persona import as_persona_of, target_scope
from ..scope import Scope
from ..storing.audit import audit
from ..storing.database import add_row, write_rows
from ..storing.memory_rows import fact_written, keep_private, memory_changed, share
from ..storing.removal import remove_memory
from ..storing.tables import NOT_SUPERSEDED, MemoryEvidence, MemoryItem, MemoryTombstone
from ..text import contradicts, normalize_fact_key, same_value, token_set_similarity
from .candidates import Candidate
from .gate_log import note_gate
from .policy import GateDecision, GateInput, confidence, gate
from .rate_limits import WriteCounts
from .write_lookups import Looked, Matches, current_memory, named_memory, related_memory

SHARED_WORDS = 0.2  # token-set similarity a semantic match needs besides its cosine (docs/decisions.md#d46)

_DONE = {AuditAction.CREATE: Outcome.CREATED, AuditAction.CONFIRM: Outcome.CONFIRMED,
         AuditAction.MERGE: Outcome.MERGED, AuditAction.SUPERSEDE: Outcome.SUPERSEDED}


@dataclass(frozen=True)
class WriteOutcome:
    action: Outcome
    memory_id: str | None
    status: str | None
    reason: str
    fact: str = ""


@dataclass
class Plan:
    """What a candidate would do to memory, decided before the gate."""

    action: AuditAction  # create, confirm, merge or supersede
    key: str
    item: MemoryItem | None  # the memory it adds to; None: a new one
    confidence: float  # the memory's confidence if it is written
    evidence_count: int
    evidence_meta: dict[str, object]
    new_events: list[str] = field(default_factory=list)  # evidence links to add
    moved: list[MemoryEvidence] = field(default_factory=list)  # links a supersede moves to the new memory
    replaces: MemoryItem | None = None  # supersede: the memory the new one closes
    revive: MemoryTombstone | None = None  # an explicit restatement of a deleted fact
    unsure: bool = False  # supersede: the words could not tell the values apart; flagged for review


# Who goes first when a scope is full: usage counts did no better in a fair replay (docs/decisions.md#d47).
EVICTION_ORDER = (MemoryItem.importance.asc(), MemoryItem.updated_at.asc())
EVICTION_RULE = "lowest importance, oldest"  # i18n/reasons.py: learn.eviction_rule


class MemoryWriter:
    def __init__(self, config: Callable[[], LTMConfig], clock: Clock = utcnow,
                 matcher: SemanticMatcher | None = None,
                 paused: Callable[[Scope], bool] = lambda scope: False) -> None:
        self._config = config
        self._paused = paused  # a user's own pause (operating/pauses.py)
        self._clock = clock
        self.matcher = matcher

    async def apply(self, session: AsyncSession, scope: Scope, candidates: Sequence[Candidate], *,
                    method: Method, actor: str, matches: Matches | None = None) -> list[WriteOutcome]:
        """A fact about one person is kept in their scope wherever said (audience.py).
        ``matches``: :meth:`semantic_matches`' answer for a batch; asked here otherwise."""
        counts: dict[Scope, WriteCounts] = {}
        outcomes: list[WriteOutcome] = []
        targets = _targets(scope, candidates)
        if matches is None:
            matches = await self.semantic_matches(scope, candidates)
        looked_up = await Looked.up(session, list(zip(targets, candidates, strict=True)), matches)
        for target, c in zip(targets, candidates, strict=True):
            if target not in counts:
                counts[target] = WriteCounts(session, target, self._clock())
            outcomes.append(await self._apply_one(session, target, c, method, actor, counts[target], looked_up,
                                                  context_of(scope, target)))
        return outcomes

    async def semantic_matches(self, scope: Scope, candidates: Sequence[Candidate]) -> Matches:
        """Each candidate's semantically close memory, asked on the event loop (where the
        provider lives) under the write lock, so as in the write (docs/decisions.md#d171)."""
        matches: Matches = {}
        if self.matcher is not None:
            for target, c in zip(_targets(scope, candidates), candidates, strict=True):
                if (target, c.fact) not in matches:
                    matches[target, c.fact] = await self.matcher.find(target, c.fact)
        return matches

    async def _apply_one(self, session: AsyncSession, scope: Scope, c: Candidate, method: Method, actor: str,
                         counts: WriteCounts, looked_up: Looked, said_in: Scope | None) -> WriteOutcome:
        cfg, now = self._config(), self._clock()
        explicit = method == Method.USER_EXPLICIT
        if cfg.write_policy.writes_off(scope):  # switched off by an operator
            return self._drop(session, scope, c, str(msg("learn.writes_off", scope=scope)), actor, now)
        if self._paused(scope):  # the user paused learning about themselves
            return self._drop(session, scope, c, say("pause.reason.dropped", "en", scope=scope), actor, now)
        decided = await self._decide(session, scope, c, explicit, cfg, looked_up)
        if not isinstance(decided, Plan):
            return self._drop(session, scope, c, decided, actor, now) if isinstance(decided, str) else decided
        plan = decided
        seen = GateInput(
            type=c.type if plan.item is None else plan.item.type,
            confidence=plan.confidence,
            evidence_count=plan.evidence_count,
            is_new=plan.action in WRITE_ACTIONS,
            explicit=explicit,
            writes_this_session=await counts.session(c.session_id),
            writes_this_hour=await counts.hour(),
            instruction=instruction_reason(c.fact),
        )
        verdict = gate(cfg.write_policy, seen)
        if not verdict.allowed:
            note_gate(session, scope, c, plan.action, plan.key, seen, verdict, None, now)
            return self._drop(session, scope, c, verdict.reason, actor, now, plan.key)
        outcome = await self._persist(session, scope, c, plan, verdict, method, actor, now, cfg, counts, looked_up,
                                      said_in)
        note_gate(session, scope, c, plan.action, plan.key, seen, verdict, outcome.memory_id, now)
        if plan.action in WRITE_ACTIONS:
            counts.add(c.session_id)
        return outcome

    # -- decide ---------------------------------------------------------------------

    async def _decide(self, session: AsyncSession, scope: Scope, c: Candidate, explicit: bool,
                      cfg: LTMConfig, looked_up: Looked) -> Plan | WriteOutcome | str:
        """The plan for ``c``; a reason to drop it; or, when it only repeats evidence, the outcome."""
        key = normalize_fact_key(c.fact_key or c.fact)
        if not key:
            return str(msg("learn.empty_key"))
        # One limit for every source: extraction, explicit requests, imports.
        if len(c.fact) > cfg.extraction.max_fact_chars:
            return str(msg("learn.fact_too_long", max=cfg.extraction.max_fact_chars))
        tomb = looked_up.tombstones.get((scope, key))
        if tomb is not None and not explicit:
            return str(msg("learn.tombstoned", actor=tomb.actor, reason=tomb.reason))

        item = await current_memory(session, scope, key)
        action, replaces, unsure = await self._relate(session, scope, c, key, item, looked_up)
        weighted = confidence(c.confidence, c.source)
        if action == AuditAction.SUPERSEDE:
            assert replaces is not None
            plan = await _supersede_plan(session, c, replaces, weighted, tomb)
            plan.unsure = unsure
            return plan
        if action == AuditAction.MERGE:
            item = replaces
        if item is None:
            return Plan(AuditAction.CREATE, key, None, weighted, 1, _meta(c, weighted),
                        list(dict.fromkeys(c.event_ids)), revive=tomb)

        plan = Plan(action, key, item, weighted, 1, _meta(c, weighted), list(dict.fromkeys(c.event_ids)),
                    revive=tomb)
        await write_rows(session)  # the batch's links so far
        links = (await session.execute(_LINKS, {"memory_id": item.memory_id})).scalars().all()
        linked = {link.event_id for link in links}
        plan.new_events = [e for e in plan.new_events if e not in linked]
        if not plan.new_events:
            return WriteOutcome(Outcome.CONFIRMED, item.memory_id, item.status, "evidence already linked", item.fact)
        plan.evidence_count = item.evidence_count + 1
        plan.confidence = _merged_confidence(links, item, weighted, plan.evidence_count)
        return plan

    async def _relate(self, session: AsyncSession, scope: Scope, c: Candidate, key: str,
                      same_key: MemoryItem | None, looked_up: Looked) -> tuple[AuditAction, MemoryItem | None, bool]:
        """Supersede, confirm, merge or create, and whether a supersede is a guess: the
        model's named fact first, then the same key (flagged when words cannot tell,
        docs/decisions.md#d74), a related key (always flagged, docs/decisions.md#d90),
        then a semantically close memory (docs/decisions.md#d42)."""
        named = await named_memory(session, scope, c.updates or c.restates)
        if named is not None:
            if c.updates and normalize_fact_key(named.fact) != normalize_fact_key(c.fact):
                return AuditAction.SUPERSEDE, named, False
            if named is same_key:
                return AuditAction.CONFIRM, None, False
            return AuditAction.MERGE, named, False
        if same_key is not None:
            return await self._against(session, scope, c, same_key, AuditAction.CONFIRM, looked_up)
        related = await related_memory(session, scope, key)
        if related is not None:
            action, known, unsure = await self._against(session, scope, c, related, AuditAction.MERGE, looked_up)
            return action, known, unsure or action == AuditAction.SUPERSEDE
        close = await looked_up.matched(session, scope, c.fact)
        # A cosine alone over-merges under some models: the two must also share words (decisions.md#d46).
        if close is None or close.status == Status.SUPERSEDED \
                or token_set_similarity(close.fact, c.fact) < SHARED_WORDS:
            return AuditAction.CREATE, None, False
        if contradicts(close.fact, c.fact):
            return AuditAction.SUPERSEDE, close, False
        return AuditAction.MERGE, close, False

    async def _against(self, session: AsyncSession, scope: Scope, c: Candidate, known: MemoryItem,
                       same: AuditAction, looked_up: Looked) -> tuple[AuditAction, MemoryItem | None, bool]:
        """``same`` if it states the same value, else a supersede, flagged when words could not tell."""
        judged = same_value(known.fact, c.fact)
        if judged is None and self.matcher is not None:
            judged = True if await looked_up.matched(session, scope, c.fact) is known else None
        if judged:
            return same, None if same == AuditAction.CONFIRM else known, False
        return AuditAction.SUPERSEDE, known, judged is None

    # -- persist --------------------------------------------------------------------

    async def _persist(self, session: AsyncSession, scope: Scope, c: Candidate, plan: Plan, verdict: GateDecision,
                       method: Method, actor: str, now: datetime, cfg: LTMConfig, counts: WriteCounts,
                       looked_up: Looked, said_in: Scope | None) -> WriteOutcome:
        """``said_in``: the group it was said in, when it is kept elsewhere."""
        if plan.revive is not None:
            await session.delete(plan.revive)
            looked_up.tombstones.pop((scope, plan.key), None)
            audit(session, AuditAction.REVIVE, actor, str(msg("learn.restated")),
                  scope=scope, session_id=c.session_id, now=now, fact_key=plan.key, fact=c.fact)
        previous_fact = None
        if plan.item is None:
            if plan.replaces is not None:  # closes one as it adds one: the count stays
                previous_fact = self._close(session, plan.replaces, actor, now, c)
                await session.flush()  # the key is free for the new value
            else:
                await self._make_room(session, scope, cfg.write_policy.max_items_per_scope, actor, now, counts)
                counts.grew(1)
            item = MemoryItem(
                scope=scope.kind, scope_id=scope.id, type=c.type, fact=c.fact, fact_key=plan.key,
                confidence=plan.confidence, importance=c.importance, evidence_count=1,
                ttl_days=cfg.ttl_days(c.type), status=verdict.status or Status.SHADOW,
                awaiting_approval=verdict.awaiting_approval, created_at=now, updated_at=now,
                held_reason=verdict.reason if verdict.awaiting_approval else None,
                valid_from=looked_up.stated_at(c.event_ids) or now,
                supersedes=plan.replaces.memory_id if plan.replaces is not None else None,
                # A secret stays one, whatever value it takes next.
                visibility=stricter(Visibility.SECRET if c.secret else Visibility.SHARED,
                                    plan.replaces.visibility if plan.replaces is not None else Visibility.SHARED),
            )
            session.add(item)
            await session.flush()
            await fact_written(session, item, created=True)
            if said_in is not None:
                await share(session, item, said_in, created=True)
            if plan.replaces is not None:
                plan.replaces.superseded_by = item.memory_id
        else:
            item = plan.item
            if c.secret:
                await keep_private(session, item, Visibility.SECRET)
            # Newly said in a group: it may recall it now, in the words said there (audience.py).
            newly_said = said_in is not None and await share(session, item, said_in, created=False)
            previous_fact = await self._update(session, item, c, plan, verdict, actor, now, cfg, newly_said)
        for link in plan.moved:
            # A line that states both ("I moved from Paris to London") backs the new value.
            link.memory_id = item.memory_id
            link.extraction_meta = plan.evidence_meta
            link.extraction_method = method
        for event_id in plan.new_events:  # in a batch, written with its others (database.add_row)
            add_row(session, _EVIDENCE, {"memory_id": item.memory_id, "event_id": event_id,
                                         "extraction_method": method, "extraction_meta": plan.evidence_meta,
                                         "created_at": now}, MemoryEvidence)
        detail: dict[str, Any] = {"fact": item.fact, "confidence": plan.confidence,
                                     "evidence_count": item.evidence_count, "status": item.status,
                                     "events": c.event_ids}
        if previous_fact not in (None, item.fact):
            detail["previous_fact"] = previous_fact
        if plan.replaces is not None:
            detail["supersedes"] = plan.replaces.memory_id
        reason = verdict.reason
        if plan.unsure:
            detail["unsure"] = True
            reason = say("updates.unsure", "en", reason=reason)
        if (item.status, item.awaiting_approval) != (verdict.status or Status.SHADOW, verdict.awaiting_approval):
            # The gate's word was about a new memory; this one keeps its status.
            reason = str(msg("learn.new_evidence", status=_status_words(item)))
        audit(session, plan.action, actor, reason, item=item, session_id=c.session_id, now=now, **detail)
        return WriteOutcome(_DONE[plan.action], item.memory_id, item.status, reason, item.fact)

    @staticmethod
    def _close(session: AsyncSession, old: MemoryItem, actor: str, now: datetime, c: Candidate) -> str:
        """A newer value replaces ``old``, which stays closed as history; returns its fact."""
        before = old.status
        old.status, old.awaiting_approval, old.held_reason = Status.SUPERSEDED, False, None
        old.valid_to, old.updated_at = now, now
        memory_changed(session, old)
        audit(session, AuditAction.STATUS, actor, str(msg("learn.superseded")), item=old,
              session_id=c.session_id, now=now, old=before, new=Status.SUPERSEDED, fact=old.fact)
        return old.fact

    async def _update(self, session: AsyncSession, item: MemoryItem, c: Candidate, plan: Plan,
                      verdict: GateDecision, actor: str, now: datetime, cfg: LTMConfig, newly_said: bool) -> str:
        """New evidence for an existing memory; returns its fact before."""
        old_fact, old_status = item.fact, item.status
        better = plan.action == AuditAction.MERGE and confidence(c.confidence, c.source) > item.confidence
        if (better or newly_said) and not instruction_reason(c.fact):  # a hostile wording never replaces a memory's
            item.fact = c.fact  # the better-supported wording wins
        item.evidence_count = plan.evidence_count
        item.confidence = plan.confidence
        item.updated_at = now
        item.ttl_days = cfg.ttl_days(item.type)
        item.status, item.awaiting_approval = _next_status(item, verdict, plan.action)
        if not item.awaiting_approval:
            item.held_reason = None
        elif verdict.awaiting_approval and (item.held_reason is None or instruction_reason(c.fact)):
            item.held_reason = verdict.reason
        if item.fact != old_fact:
            await fact_written(session, item, created=False)
        else:
            memory_changed(session, item)
        if item.status != old_status:
            audit(session, AuditAction.STATUS, actor, verdict.reason, item=item, session_id=c.session_id,
                  now=now, old=old_status, new=item.status)
        return old_fact

    async def _make_room(self, session: AsyncSession, scope: Scope, cap: int, actor: str, now: datetime,
                         counts: WriteCounts | None = None) -> None:
        """Make room for one more under ``max_items_per_scope``; a superseded memory is
        history of one in force: it neither counts nor goes."""
        # Built only when asked for: usually the running count is below the cap (docs/decisions.md#d145).
        def counted() -> tuple[Any, ...]:
            return MemoryItem.scope == scope.kind, MemoryItem.scope_id == scope.id, NOT_SUPERSEDED

        count = await counts.in_force() if counts is not None else (
            await session.execute(select(func.count()).select_from(MemoryItem).where(*counted()))).scalar_one()
        excess = count - cap + 1
        if excess <= 0:
            return
        victims = (await session.execute(
            select(MemoryItem).where(*counted()).order_by(*EVICTION_ORDER).limit(excess)
        )).scalars().all()
        for victim in victims:
            await remove_memory(session, victim, withhold=False)
            audit(session, AuditAction.EVICT, actor, str(msg("learn.evicted", cap=cap, rule=EVICTION_RULE)),
                  item=victim, now=now, fact=victim.fact, importance=victim.importance)
        if counts is not None:
            counts.grew(-len(victims))

    @staticmethod
    def _drop(session: AsyncSession, scope: Scope, c: Candidate, reason: str, actor: str, now: datetime,
              key: str | None = None) -> WriteOutcome:
        key = normalize_fact_key(c.fact_key or c.fact) if key is None else key
        audit(session, AuditAction.POLICY, actor, reason, scope=scope, session_id=c.session_id, now=now,
              decision="dropped", fact=c.fact, fact_key=key, type=c.type)
        return WriteOutcome(Outcome.DROPPED, None, None, reason, c.fact)


def _targets(scope: Scope, candidates: Sequence[Candidate]) -> list[Scope]:
    """Where each candidate is kept: under a persona, facts about the person are shared (persona.py)."""
    return [target_scope(scope if c.subject is None else as_persona_of(c.subject, scope), c.type) for c in candidates]


def _next_status(item: MemoryItem, decision: GateDecision, action: AuditAction) -> tuple[str, bool]:
    """The status of an existing memory after new evidence."""
    # An operator's "disabled" outranks extraction, and a memory awaiting approval stays there.
    if item.status == Status.DISABLED:
        return item.status, item.awaiting_approval
    if item.awaiting_approval:
        return Status.SHADOW, True
    # More evidence never demotes an active memory.
    if item.status == Status.ACTIVE:
        return Status.ACTIVE, False
    return decision.status or Status.SHADOW, decision.awaiting_approval


def _merged_confidence(links: Sequence[MemoryEvidence], item: MemoryItem, weighted: float,
                       evidence_count: int) -> float:
    """Mean weighted confidence of the current and new evidence, times the repetition bonus."""
    values = [
        m["confidence"]["weighted"] for m in (link.extraction_meta for link in links)
        if isinstance(m, dict) and not m.get("superseded") and "confidence" in m
    ] or [item.confidence]
    mean = (sum(values) + weighted) / (len(values) + 1)
    return confidence(mean, CandidateSource.USER_EXPLICIT, evidence_count)  # the weight is already applied


def _status_words(item: MemoryItem) -> str:
    return "awaiting approval" if item.awaiting_approval else str(item.status)


def _meta(c: Candidate, weighted: float) -> dict[str, object]:
    return {**c.meta, "confidence": {"base": c.confidence, "source": c.source, "weighted": weighted}}


# Built once, as write_lookups' statements (docs/decisions.md#d145).
_LINKS = select(MemoryEvidence).where(MemoryEvidence.memory_id == bindparam("memory_id"))
_EVIDENCE = MemoryEvidence.metadata.tables[MemoryEvidence.__tablename__]


async def _supersede_plan(session: AsyncSession, c: Candidate, old: MemoryItem, weighted: float,
                          tomb: MemoryTombstone | None) -> Plan:
    """A new memory under ``old``'s key that closes ``old``; the lines stating the new value move."""
    await write_rows(session)  # the batch's links so far
    links = (await session.execute(select(MemoryEvidence).where(
        MemoryEvidence.memory_id == old.memory_id, MemoryEvidence.event_id.in_(c.event_ids)))).scalars().all()
    moved = {link.event_id for link in links}
    return Plan(AuditAction.SUPERSEDE, old.fact_key, None, weighted, 1, _meta(c, weighted),
                [e for e in dict.fromkeys(c.event_ids) if e not in moved], replaces=old, moved=list(links),
                revive=tomb)
