"""Session summaries and their roll-ups: memories of a conversation as a whole.

Sessions (cut by ``idle_minutes`` and ``max_events``) are joined into a span of
``min_events`` events and summarised in one call: one call per ``min_events`` turns,
not per session (docs/decisions.md#d113). A day, week or month over with two or
more uncovered summaries is rolled into one. Where a scope stands is read from the
memories themselves; a fact key naming level and period leaves a tombstone when an
operator deletes one, so the same events are never summarised again. The
prompt and its check live in summary_prompt.py; where sessions and periods
fall in time, in summary_periods.py.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from ..background import BackgroundTask
from ..clock import Clock, as_utc, utcnow
from ..config import LTMConfig
from ..enums import (
    SHOWN_ROLES,
    AuditAction,
    CandidateSource,
    MemoryType,
    Status,
    SummaryLevel,
)
from ..extension_points import Summarizer
from ..i18n import msg
from ..instructions import instruction_reason
from ..logs import log
from ..scope import Scope
from ..storing.audit import audit
from ..storing.database import Database, ReadOnlyError
from ..storing.evidence import event_ids_of, link_summary
from ..storing.memory_rows import fact_written, memory_changed
from ..storing.tables import MemoryEvent, MemoryItem, MemoryTombstone
from .policy import GateDecision, GateInput, confidence, gate
from .summary_periods import (
    LEVELS,
    StoredSummary,
    join_sessions,
    learnable,
    level_of,
    period_of,
    retiring,
    rollup_parts,
    split_sessions,
    summary_key,
)
from .writer import MemoryWriter

ACTOR = "system:summarizer"
# Finer summaries rank first on a tie (the block prefers the finest that fits); all below explicit 0.8.
IMPORTANCE = {SummaryLevel.SESSION: 0.6, SummaryLevel.DAY: 0.55, SummaryLevel.WEEK: 0.5, SummaryLevel.MONTH: 0.45}
BASE_CONFIDENCE = 0.9  # × the model's source weight (policy.confidence): 0.72, above the default min_confidence
LOOKBACK = timedelta(days=7)  # scopes with a turn this recent are looked at
MAX_CALLS_PER_SCOPE = 4  # per pass: a backlog is worked off over several passes
# Failed summaries remembered for back-off, bounded: given-up ones stayed until a
# restart (docs/decisions.md#d149). One pushed out is only tried afresh.
MAX_FAILURES_KEPT = 10_000
SummarizerFor = Callable[[str | None], Awaitable[Summarizer | None]]


@dataclass
class SummaryResult:
    scope: Scope
    level: str
    key: str
    ok: bool
    memory_id: str | None = None
    status: str | None = None
    events: int = 0
    error: str = ""


@dataclass
class _Failure:
    attempts: int
    retry_at: datetime | None  # None: given up (until a restart, or pushed out past MAX_FAILURES_KEPT)


@dataclass
class SummaryStats:
    calls: dict[str, int] = field(default_factory=lambda: {"session": 0, "rollup": 0})
    failed: int = 0


class SummaryWorker:
    def __init__(self, db: Database, writer: MemoryWriter, summarizer_for: SummarizerFor,
                 config: Callable[[], LTMConfig], clock: Clock = utcnow) -> None:
        self._db = db
        self._writer = writer  # its eviction makes room for a summary like for any new memory
        self._summarizer_for = summarizer_for
        self._config = config
        self._clock = clock
        self._failures: OrderedDict[tuple[Scope, str], _Failure] = OrderedDict()  # least lately failed first
        self.stats = SummaryStats()
        self.task = BackgroundTask("summaries", self.run_once, run_at_start=True, every=self._every)

    # -- one pass ----------------------------------------------------------

    async def run_once(self, ignore_idle: bool = False) -> list[SummaryResult]:
        """Summarise every ended session and roll up every finished period of the scopes
        that spoke lately; ``ignore_idle``: the last session counts as ended."""
        cfg = self._config()
        if not (cfg.enable and cfg.summaries.enable) or self._db.is_read_only():
            return []
        policy = cfg.write_policy
        if not policy.enable or MemoryType.SUMMARY not in policy.allowed_types:
            return []  # every call would be paid for and its summary dropped
        results: list[SummaryResult] = []
        for scope in await self._recent_scopes():
            results.extend(await self.process_scope(scope, ignore_idle))
        return results

    async def drain(self, max_passes: int = 100) -> list[SummaryResult]:
        results: list[SummaryResult] = []
        for _ in range(max_passes):
            batch = await self.run_once(ignore_idle=True)
            results.extend(batch)
            if not batch or not any(r.ok for r in batch):
                break
        return results

    async def _recent_scopes(self) -> list[Scope]:
        since = self._clock() - LOOKBACK
        async with self._db.read() as session:
            rows = await session.execute(select(MemoryEvent.scope, MemoryEvent.scope_id)
                                         .where(MemoryEvent.created_at >= since).distinct())
            return sorted(Scope(kind, sid) for kind, sid in rows)

    async def process_scope(self, scope: Scope, ignore_idle: bool = False) -> list[SummaryResult]:
        cfg = self._config().summaries
        results: list[SummaryResult] = []
        summarizer: Summarizer | None = None
        watermark = await self._watermark(scope)
        idle = timedelta(minutes=cfg.idle_minutes)
        now = self._clock()
        sessions = split_sessions(await self._events_after(
            scope, watermark, (cfg.min_events + cfg.max_events) * MAX_CALLS_PER_SCOPE), idle, cfg.max_events)
        last = sessions[-1] if sessions else []
        last_ended = ignore_idle or len(last) >= cfg.max_events or (
            bool(last) and now - as_utc(last[-1].created_at) >= idle)
        for events in join_sessions(sessions, cfg.min_events):
            if len(results) >= MAX_CALLS_PER_SCOPE:
                return results
            # A span is complete once it holds min_events and its last session has ended.
            ended = len(events) >= cfg.min_events and (events[-1] is not last[-1] or last_ended)
            if not ended:
                break
            if not any(e.source_role in SHOWN_ROLES for e in events):
                continue  # only the bot spoke: nothing of the people to remember
            key = summary_key(SummaryLevel.SESSION, events[0].created_at)
            if await self._taken(scope, key) or self._given_up(scope, key):
                continue
            if not self._due(scope, key, now):
                break  # in order: a later summary would move the scope past this one
            summarizer = summarizer or await self._summarizer_for(events[-1].session_id)
            if summarizer is None:
                log.warning("ltm: no summary provider available; %s waits", scope)
                return results
            results.append(await self._summarise_session(summarizer, scope, key, events))
            if not results[-1].ok:
                return results  # in order: later sessions wait for this one's retry
        # A later session is what shows a period is over.
        if ignore_idle or any(r.ok and r.level == SummaryLevel.SESSION for r in results):
            results.extend(await self._rollups(scope, summarizer, MAX_CALLS_PER_SCOPE))
        return results

    # -- sessions --------------------------------------------------------------

    async def _watermark(self, scope: Scope) -> datetime | None:
        """The end of the scope's newest session summary: summarised up to there."""
        async with self._db.read() as session:
            value = (await session.execute(select(func.max(MemoryItem.valid_to)).where(
                MemoryItem.scope == scope.kind, MemoryItem.scope_id == scope.id,
                MemoryItem.type == MemoryType.SUMMARY,
                MemoryItem.fact_key.like(f"summary_{SummaryLevel.SESSION}_%")))).scalar_one_or_none()
        return None if value is None else as_utc(value)

    async def _events_after(self, scope: Scope, after: datetime | None, limit: int) -> list[MemoryEvent]:
        query = select(MemoryEvent).where(MemoryEvent.scope == scope.kind, MemoryEvent.scope_id == scope.id,
                                          MemoryEvent.withheld.is_(False))
        if after is not None:
            query = query.where(MemoryEvent.created_at > after)
        async with self._db.read() as session:
            rows = await session.execute(query.order_by(MemoryEvent.created_at, MemoryEvent.id).limit(limit))
            return learnable(list(rows.scalars()))

    async def _taken(self, scope: Scope, key: str) -> bool:
        """A summary with this key exists, or an operator deleted one."""
        async with self._db.read() as session:
            if await session.get(MemoryTombstone, (scope.kind, scope.id, key)) is not None:
                return True
            return (await session.execute(select(MemoryItem.id).where(
                MemoryItem.scope == scope.kind, MemoryItem.scope_id == scope.id,
                MemoryItem.fact_key == key).limit(1))).first() is not None

    def _given_up(self, scope: Scope, key: str) -> bool:
        failure = self._failures.get((scope, key))
        return failure is not None and failure.retry_at is None

    def _due(self, scope: Scope, key: str, now: datetime) -> bool:
        failure = self._failures.get((scope, key))
        return failure is None or (failure.retry_at is not None and failure.retry_at <= now)

    async def _summarise_session(self, summarizer: Summarizer, scope: Scope, key: str,
                                 events: list[MemoryEvent]) -> SummaryResult:
        level = SummaryLevel.SESSION
        self.stats.calls["session"] += 1
        try:
            text = await asyncio.wait_for(summarizer.session(events),
                                          timeout=self._config().extraction.timeout_seconds)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return self._failed(scope, level, key, exc, len(events))
        return await self._store(scope, level, key, text, events[0].created_at, events[-1].created_at,
                                 [e.event_id for e in events], events[-1].session_id)

    def _failed(self, scope: Scope, level: str, key: str, exc: BaseException, events: int) -> SummaryResult:
        cfg = self._config().extraction
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        before = self._failures.get((scope, key))
        attempts = (before.attempts if before else 0) + 1
        give_up = attempts >= cfg.max_attempts
        retry_at = None if give_up else self._clock() + timedelta(seconds=cfg.backoff_seconds * 2 ** (attempts - 1))
        self._record_failure(scope, key, _Failure(attempts, retry_at))
        self.stats.failed += 1
        log.warning("ltm: summary %s of %s failed (attempt %d/%d): %s; %s", key, scope, attempts,
                    cfg.max_attempts, error, "skipped until a restart" if give_up else f"retry at {retry_at}")
        return SummaryResult(scope, level, key, False, events=events, error=error)

    def _record_failure(self, scope: Scope, key: str, failure: _Failure) -> None:
        self._failures[(scope, key)] = failure
        self._failures.move_to_end((scope, key))
        while len(self._failures) > MAX_FAILURES_KEPT:
            self._failures.popitem(last=False)

    # -- roll-ups --------------------------------------------------------------

    async def _rollups(self, scope: Scope, summarizer: Summarizer | None, budget: int) -> list[SummaryResult]:
        """Each finished day, week and month with two or more parts becomes one summary, finest first."""
        stored = await self._stored(scope)
        sessions = [s for s in stored if s.level == SummaryLevel.SESSION]
        if not sessions:
            return []
        summarised_to = max(s.end for s in sessions)
        results: list[SummaryResult] = []
        now = self._clock()
        for level in LEVELS[1:]:
            rank = LEVELS.index(level)
            periods: dict[datetime, list[StoredSummary]] = {}
            for s in stored:
                if LEVELS.index(s.level) < rank:
                    periods.setdefault(period_of(level, s.start)[0], []).append(s)
            for start, members in sorted(periods.items()):
                end = period_of(level, start)[1]
                key = summary_key(level, start)
                if end > summarised_to or len(results) >= budget or not self._due(scope, key, now):
                    continue  # a later session shows the period is over and summarised
                parts = rollup_parts(members)
                if len(parts) < 2 or await self._taken(scope, key):
                    continue
                summarizer = summarizer or await self._summarizer_for(None)
                if summarizer is None:
                    return results
                self.stats.calls["rollup"] += 1
                try:
                    text = await asyncio.wait_for(
                        summarizer.rollup(level, start, end, [p.text for p in parts]),
                        timeout=self._config().extraction.timeout_seconds)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    results.append(self._failed(scope, level, key, exc, 0))
                    continue
                result = await self._store(scope, level, key, text, parts[0].start, parts[-1].end,
                                           await self._evidence_of([p.memory_id for p in parts]), None)
                results.append(result)
                if result.ok and result.memory_id is not None:
                    stored.append(StoredSummary(result.memory_id, key, level, text, parts[0].start, parts[-1].end))
        await self._retire(scope, now)
        return results

    async def _retire(self, scope: Scope, now: datetime) -> int:
        """Close as superseded each summary a roll-up covers once its period ended
        ``keep_parts_days`` ago, so the summaries in force stay bounded. Their period
        is left as it is: the newest session summary's end is where summarising resumes."""
        keep = self._config().summaries.keep_parts_days
        horizon = now - timedelta(days=keep)
        active = (MemoryItem.scope == scope.kind, MemoryItem.scope_id == scope.id,
                  MemoryItem.type == MemoryType.SUMMARY, MemoryItem.status == Status.ACTIVE)
        async with self._db.read() as session:
            due = retiring(list((await session.execute(select(MemoryItem).where(*active))).scalars()), horizon)
        if not due:  # the usual pass: no write transaction
            return 0
        retired = 0
        try:
            async with self._db.write() as session:
                # Again inside the transaction: an operator may have changed one meanwhile.
                for part, cover in retiring(list((await session.execute(select(MemoryItem).where(*active)))
                                             .scalars()), horizon):
                    part.status, part.superseded_by, part.updated_at = Status.SUPERSEDED, cover.memory_id, now
                    memory_changed(session, part)
                    rolled = msg("learn.rolled_into_summary", level=level_of(cover.fact_key), days=keep)
                    audit(session, AuditAction.SUPERSEDE, ACTOR, str(rolled), item=part, now=now, into=cover.memory_id,
                          old=Status.ACTIVE, new=Status.SUPERSEDED)
                    retired += 1
        except ReadOnlyError:
            return 0
        return retired

    async def _stored(self, scope: Scope) -> list[StoredSummary]:
        async with self._db.read() as session:
            rows = await session.execute(select(
                MemoryItem.memory_id, MemoryItem.fact_key, MemoryItem.fact, MemoryItem.valid_from,
                MemoryItem.valid_to).where(
                MemoryItem.scope == scope.kind, MemoryItem.scope_id == scope.id,
                MemoryItem.type == MemoryType.SUMMARY, MemoryItem.status.in_((Status.ACTIVE, Status.SHADOW))))
            out = []
            for memory_id, key, text, start, end in rows:
                level = level_of(key)
                if level is not None and start is not None and end is not None:
                    out.append(StoredSummary(memory_id, key, level, text, as_utc(start), as_utc(end)))
            return out

    async def _evidence_of(self, memory_ids: list[str]) -> list[str]:
        async with self._db.read() as session:
            return await event_ids_of(session, memory_ids)

    # -- persist ---------------------------------------------------------------

    async def _store(self, scope: Scope, level: str, key: str, text: str, start: datetime, end: datetime,
                     event_ids: list[str], session_id: str | None) -> SummaryResult:
        cfg = self._config()
        now = self._clock()
        weighted = confidence(BASE_CONFIDENCE, CandidateSource.LLM_EXTRACT)
        # Bounded by construction, so the write rate limits, made for facts, do not apply.
        verdict = gate(cfg.write_policy, GateInput(
            type=MemoryType.SUMMARY, confidence=weighted, evidence_count=len(event_ids), is_new=True,
            explicit=False, writes_this_session=0, writes_this_hour=0, instruction=instruction_reason(text)))
        try:
            async with self._db.write() as session:
                if not verdict.allowed:
                    audit(session, AuditAction.POLICY, ACTOR, verdict.reason, scope=scope, session_id=session_id,
                          now=now, decision="dropped", fact=text, fact_key=key, type=MemoryType.SUMMARY)
                    # Not asked for again until a restart (the gate would say the same).
                    self._record_failure(scope, key, _Failure(cfg.extraction.max_attempts, None))
                    return SummaryResult(scope, level, key, False, events=len(event_ids), error=verdict.reason)
                item = await self._insert(session, scope, level, key, text, start, end, event_ids, verdict, now, cfg)
                audit(session, AuditAction.CREATE, ACTOR, verdict.reason, item=item, session_id=session_id, now=now,
                      fact=text, level=level, period=[start.isoformat(), end.isoformat()], events=len(event_ids),
                      status=item.status)
        except ReadOnlyError:
            return SummaryResult(scope, level, key, False, error="emergency_read_only")
        except Exception as exc:
            log.exception("ltm: writing a summary failed")
            return self._failed(scope, level, key, exc, len(event_ids))
        self._failures.pop((scope, key), None)
        return SummaryResult(scope, level, key, True, item.memory_id, item.status, len(event_ids))

    async def _insert(self, session: AsyncSession, scope: Scope, level: str, key: str, text: str, start: datetime,
                      end: datetime, event_ids: list[str], verdict: GateDecision, now: datetime,
                      cfg: LTMConfig) -> MemoryItem:
        await self._writer._make_room(session, scope, cfg.write_policy.max_items_per_scope, ACTOR, now)
        item = MemoryItem(
            scope=scope.kind, scope_id=scope.id, type=MemoryType.SUMMARY, fact=text, fact_key=key,
            confidence=confidence(BASE_CONFIDENCE, CandidateSource.LLM_EXTRACT),
            importance=IMPORTANCE[SummaryLevel(level)], evidence_count=len(event_ids),
            ttl_days=cfg.ttl_days(MemoryType.SUMMARY), status=verdict.status or Status.SHADOW,
            awaiting_approval=verdict.awaiting_approval, created_at=now, updated_at=now,
            held_reason=verdict.reason if verdict.awaiting_approval else None, valid_from=start, valid_to=end,
        )
        session.add(item)
        await session.flush()
        await fact_written(session, item, created=True)
        await link_summary(session, item, event_ids)  # its level and time are the summary's (storing.evidence)
        return item

    # -- loop ----------------------------------------------------------------------

    def _every(self) -> float:
        cfg = self._config()
        # Often enough to notice a conversation's end within a tenth of the idle time.
        return min(60.0, max(cfg.extraction.poll_seconds, cfg.summaries.idle_minutes * 6.0))
