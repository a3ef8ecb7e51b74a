"""Background extraction: pending events → candidates → the writer, in one
transaction per batch once a scope is quiet. A failed call changes only the events'
attempt count: retried with backoff, then marked failed (kept, retryable).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from ..background import BackgroundTask
from ..clock import Clock, as_utc, utcnow
from ..config import LTMConfig
from ..enums import SHOWN_ROLES, AuditAction, CandidateSource, ExtractionStatus, Method, Role, ScopeKind
from ..extension_points import Extractor
from ..i18n import msg
from ..indexes.embeddings import Embeddings
from ..indexes.vector_fill import VectorFill
from ..logs import log
from ..scope import Scope
from ..storing.audit import audit
from ..storing.database import Database, ReadOnlyError, is_full
from ..storing.tables import MemoryEvent
from .candidates import Candidate
from .known import KnownFacts
from .retention import TurnRetention, prune_gate_log, sweep_expired
from .write_lookups import Matches
from .writer import MemoryWriter, WriteOutcome

ACTOR = "system:extractor"
# None when no provider is available: the events simply wait.
ExtractorFor = Callable[[str | None], Awaitable[Extractor | None]]


@dataclass
class BatchResult:
    scope: Scope
    events: int
    ok: bool
    outcomes: list[WriteOutcome]
    error: str = ""


class ExtractionWorker:
    def __init__(
        self,
        db: Database,
        writer: MemoryWriter,
        extractor_for: ExtractorFor,
        config: Callable[[], LTMConfig],
        clock: Clock = utcnow,
        embeddings: Embeddings | None = None,
        fill: VectorFill | None = None,
        known: KnownFacts | None = None,
        paused: Callable[[Scope], bool] = lambda scope: False,
        then_drain: Callable[[], Awaitable[object]] | None = None,
        people: Callable[[str | None, str | None], Scope] | None = None,
    ) -> None:
        self._db = db
        # platform id, sender id → that person's scope (scope.ScopeResolver.person)
        self._people = people
        self._paused = paused  # a user's own pause (operating/pauses.py)
        self._writer = writer
        self._embeddings = embeddings  # candidates' facts embedded before their write (semantic dedup)
        self._fill = fill
        self._known = known  # what is already remembered, shown to the model with the batch
        self._extractor_for = extractor_for
        self._config = config
        self._clock = clock
        # A recorded turn wakes it; else it looks every extraction.poll_seconds.
        self.task = BackgroundTask("extraction", self._step, run_at_start=True,
                                   every=lambda: self._config().extraction.poll_seconds)
        self._last_sweep: datetime | None = None
        self.turn_retention = TurnRetention(db)  # retention_days.turns (learning.retention)
        # Scopes whose failure could not even be written (a full disk): when to try again.
        self._held: dict[Scope, datetime] = {}
        self._then_drain = then_drain  # run by drain() after extracting (the engine's summaries)

    async def ready_scopes(self, ignore_idle: bool = False) -> list[Scope]:
        cfg = self._config().extraction
        now = self._clock()
        due = and_(
            MemoryEvent.extraction_status == ExtractionStatus.PENDING,
            or_(MemoryEvent.next_attempt_at.is_(None), MemoryEvent.next_attempt_at <= now),
        )
        waiting = (
            select(
                MemoryEvent.scope,
                MemoryEvent.scope_id,
                func.count(),
                func.max(MemoryEvent.created_at),
            )
            .where(due)
            .group_by(MemoryEvent.scope, MemoryEvent.scope_id)
        )
        rows = await self._db.run_session(lambda session: session.execute(waiting).all())
        quiet_since = now - timedelta(seconds=cfg.idle_seconds)
        policy = self._config().write_policy
        return [
            Scope(kind, sid)
            for kind, sid, count, latest in rows
            if (ignore_idle or count >= cfg.batch_size or as_utc(latest) <= quiet_since)
            and self._held.get(Scope(kind, sid), now) <= now
            # writes off: what was pending before waits until they are back on
            and not policy.writes_off(Scope(kind, sid)) and not self._paused(Scope(kind, sid))
        ]

    async def run_once(self, ignore_idle: bool = False) -> list[BatchResult]:
        """Process every scope that is ready now, one batch each."""
        if self._db.is_read_only():
            return []  # every model call would be paid for and thrown away
        results = []
        for scope in await self.ready_scopes(ignore_idle):
            result = await self.process_scope(scope)
            if result is not None:
                results.append(result)
        return results

    async def drain(self, max_batches: int = 1000) -> list[BatchResult]:
        """Extract everything pending now, then ``then_drain``, then embed the new items."""
        results: list[BatchResult] = []
        while len(results) < max_batches:
            batch = await self.run_once(ignore_idle=True)
            results.extend(batch)
            if not batch or not any(r.ok for r in batch):
                break
        if self._then_drain is not None:
            await self._then_drain()
        await self.fill_vectors()
        return results

    async def fill_vectors(self, max_rounds: int = 1000) -> int:
        """Embed memories and turns that have no vector yet, batch by batch."""
        if self._fill is None:
            return 0
        try:
            return await self._fill.fill_all(max_rounds)
        except Exception as exc:
            if not is_full(exc):
                raise
            # The vectors wait in no queue: the fill finds what lacks one next time.
            log.error("ltm: the disk is full; vectors are filled in once there is space again")
            return 0

    async def _pending(self, scope: Scope) -> list[MemoryEvent]:
        now = self._clock()
        pending = (
            select(MemoryEvent)
            .where(
                MemoryEvent.scope == scope.kind,
                MemoryEvent.scope_id == scope.id,
                MemoryEvent.extraction_status == ExtractionStatus.PENDING,
                or_(MemoryEvent.next_attempt_at.is_(None), MemoryEvent.next_attempt_at <= now),
            )
            .order_by(MemoryEvent.created_at, MemoryEvent.id)
            .limit(self._config().extraction.batch_size)
        )
        # One hop to a read thread (docs/decisions.md#d128).
        return await self._db.run_session(lambda session: list(session.scalars(pending)))

    async def process_scope(self, scope: Scope) -> BatchResult | None:
        events = await self._pending(scope)
        if not events:
            return None
        if not any(e.source_role in SHOWN_ROLES for e in events):
            await self._mark(events, ExtractionStatus.SKIPPED)
            return BatchResult(scope, len(events), True, [])
        cfg = self._config()
        extractor = await self._extractor_for(events[-1].session_id)
        if extractor is None:
            log.warning("ltm: no extraction provider available; %d event(s) wait", len(events))
            return BatchResult(scope, len(events), False, [], "no extraction provider")
        try:
            known = await self._known.about(scope, events) if self._known is not None else []
            result = await asyncio.wait_for(
                extractor.extract(events, known), timeout=cfg.extraction.timeout_seconds
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            await self._failed(events, error)
            return BatchResult(scope, len(events), False, [], error)

        if self._embeddings is not None and result.candidates:
            await self._embeddings.prime([c.fact for c in result.candidates])
        session_of = {e.event_id: e.session_id for e in events}
        for candidate in result.candidates:
            candidate.session_id = session_of.get(candidate.event_ids[0])
            candidate.subject = self._subject(scope, candidate, events)

        matches: Matches = {}

        async def look() -> None:  # on this loop, before the batch goes to the batch thread
            matches.update(await self._writer.semantic_matches(scope, result.candidates))

        async def write(session: AsyncSession) -> list[WriteOutcome]:
            outcomes = await self._writer.apply(
                session, scope, result.candidates, method=Method.LLM_EXTRACT, actor=ACTOR, matches=matches
            )
            for rejection in result.rejected:
                audit(
                    session, AuditAction.POLICY, ACTOR,
                    str(msg("learn.invalid_candidate", reason=rejection.reason)),
                    scope=scope, decision="rejected", raw=repr(rejection.raw)[:500],
                )
            await self._set_status(session, events, ExtractionStatus.DONE)
            return outcomes

        try:
            # One hop to the batch thread for the whole batch (docs/decisions.md#d128).
            outcomes = await self._db.write_batch(write, first=look)
        except ReadOnlyError:
            return BatchResult(scope, len(events), False, [], "emergency_read_only")
        except Exception as exc:
            # Back off like a failed call, so one bad scope neither blocks the others nor calls the model every poll.
            log.exception("ltm: writing extracted memories failed")
            error = f"write failed: {type(exc).__name__}: {exc}"
            await self._failed(events, error)
            return BatchResult(scope, len(events), False, [], error)
        self._held.pop(scope, None)
        self._db.faults.clear("extraction")
        return BatchResult(scope, len(events), True, outcomes)

    def _subject(self, scope: Scope, candidate: Candidate, events: Sequence[MemoryEvent]) -> Scope | None:
        """The one person whose lines a group fact cites, whose scope keeps it (audience.py);
        None: kept in ``scope``."""
        if scope.kind != ScopeKind.GROUP or self._people is None or candidate.about_group \
                or candidate.source == CandidateSource.BOT_SIDE:
            return None
        cited = set(candidate.event_ids)
        speakers = {(e.platform_id, e.sender_id) for e in events if e.event_id in cited and e.source_role == Role.USER}
        if len(speakers) != 1:
            return None
        (platform_id, sender_id), = speakers
        return self._people(platform_id, sender_id)

    @staticmethod
    async def _set_status(session: AsyncSession, events: Sequence[MemoryEvent], status: str) -> None:
        await session.execute(
            update(MemoryEvent)
            .where(MemoryEvent.id.in_([e.id for e in events]))
            .values(extraction_status=status, last_error=None, next_attempt_at=None)
        )

    async def _mark(self, events: Sequence[MemoryEvent], status: str) -> None:
        try:
            async with self._db.write() as session:
                await self._set_status(session, events, status)
        except ReadOnlyError:
            pass

    async def _failed(self, events: Sequence[MemoryEvent], error: str) -> None:
        cfg = self._config().extraction
        now = self._clock()
        attempts = max(e.attempts for e in events) + 1
        give_up = attempts >= cfg.max_attempts
        retry_at = now + timedelta(seconds=cfg.backoff_seconds * 2 ** (attempts - 1))
        log.warning(
            "ltm: extraction of %d event(s) failed (attempt %d/%d): %s; %s",
            len(events), attempts, cfg.max_attempts, error,
            "marked failed" if give_up else f"retry at {retry_at:%H:%M:%S} UTC",
        )
        # The operator sees why in /ltm status and the stats API (faults.py).
        self._db.faults.report("extraction", msg("fault.extraction", error=error.splitlines()[0][:200] if error
                                                 else "?", events=len(events), retry_at=f"{retry_at:%H:%M:%S}"))
        scope = Scope(events[0].scope, events[0].scope_id)
        try:
            async with self._db.write() as session:
                await session.execute(
                    update(MemoryEvent)
                    .where(MemoryEvent.id.in_([e.id for e in events]))
                    .values(
                        attempts=attempts,
                        last_error=error[:1000],
                        next_attempt_at=None if give_up else retry_at,
                        extraction_status=ExtractionStatus.FAILED if give_up else ExtractionStatus.PENDING,
                    )
                )
        except ReadOnlyError:
            pass
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # Not even the failure could be written: back off in memory, so no model is called every poll.
            log.warning("ltm: the failed extraction could not be noted (%s); the scope waits until %s UTC",
                        exc, f"{retry_at:%H:%M:%S}")
            self._held[scope] = retry_at
            return
        self._held.pop(scope, None)

    async def sweep_expired(self) -> int:
        return await sweep_expired(self._db, self._clock)

    # -- loop ------------------------------------------------------------

    async def _step(self) -> None:
        """One look for work: extract, embed, and sweep expired memories once an hour."""
        if self._config().enable:
            await self.run_once()
            await self.fill_vectors(max_rounds=20)
        now = self._clock()
        if self._last_sweep is None or now - self._last_sweep > timedelta(hours=1):
            await self.sweep_expired()
            await prune_gate_log(self._db, self._clock)  # bounded (docs/decisions.md#d99)
            await self.turn_retention.sweep(now, self._config().turns_retention_days)  # off by default
            self._last_sweep = now
