"""The event recorder: the only memory work on AstrBot's hot path.

A turn is journaled and queued, and written to SQLite in batches a moment
later: a slow database never delays a reply, and the hooks cannot raise into AstrBot.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from ..background import BackgroundTask, Failure
from ..clock import Clock, utcnow
from ..config import LTMConfig
from ..enums import ExtractionStatus, Role, SourceType
from ..i18n import msg
from ..logs import log
from ..scope import Origin, Scope, ScopeResolver
from ..storing.database import Database, DatabaseBusyError, ReadOnlyError, is_full
from ..storing.keyword_rows import index_turns
from ..storing.tables import MemoryEvent, new_event
from ..withholding import withhold
from .journal import Journal

# Event ids looked up per statement when a journal is replayed (SQLite's
# bound-parameter limit is 999 in old builds).
REPLAY_LOOKUP_CHUNK = 500

OnInserted = Callable[[AsyncSession, list[MemoryEvent]], Awaitable[None]]


def _short(exc: BaseException) -> str:
    """An error as one short line for a status notice."""
    text = str(getattr(exc, "orig", None) or exc) or type(exc).__name__
    return text.splitlines()[0][:200]


def truncate(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[:limit] + f"… [truncated {len(text) - limit} of {len(text)} characters]", True


class EventRecorder:
    def __init__(
        self,
        db: Database,
        config: Callable[[], LTMConfig],
        resolver: Callable[[], ScopeResolver],
        clock: Clock = utcnow,
        on_inserted: OnInserted | None = None,
        journal_dir: Path | None = None,
        paused: Callable[[Scope], bool] = lambda scope: False,
    ) -> None:
        self._db = db
        self._paused = paused  # a user's own pause (operating/pauses.py): an in-memory lookup
        self._config = config
        self._resolver = resolver
        self._clock = clock
        self._on_inserted = on_inserted
        self._queue: list[MemoryEvent] = []
        # The flusher: a turn wakes it; a failed flush is retried with a growing pause.
        self.task = BackgroundTask("recorder", self.flush, explain=self._explain, finish=self._last_flush)
        # Without a directory (tests, benchmarks) turns are only queued.
        self._journal = Journal(journal_dir) if journal_dir is not None else None
        self._flushing = asyncio.Lock()  # a batch's segments are deleted only after *its* commit
        self.dropped_read_only = 0  # events refused while emergency_read_only was on
        self.journal_failures = 0  # hook calls whose events could not be journaled (queued all the same)
        self.replayed = 0  # events a dead process had journaled and not written, written at start

    # -- hot path ---------------------------------------------------------

    def _paused_speaker(self, origin: Origin) -> bool:
        """Whether the person in this turn paused: then neither they nor the bot's
        answer is recorded (docs/privacy.md). A scheduled private turn is its person's."""
        if origin.scheduled and origin.is_group:
            return False  # no one of the group speaks: the bot's own words
        return self._paused(self._resolver().user_scope(origin))

    def _event(self, scope: Scope, origin: Origin, source_type: str, role: str, content: dict[str, Any],
                created_at: datetime | None) -> MemoryEvent:
        is_human = role == Role.USER
        # Said while an operator has the scope's writes off: recorded, never
        # extracted (docs/decisions.md#d52).
        writes_off = self._config().write_policy.writes_off(scope)
        return new_event(
            scope=scope.kind,
            scope_id=scope.id,
            source_type=source_type,
            source_role=role,
            content=content,
            platform_id=origin.platform_id,
            session_id=origin.unified_msg_origin,
            # The bot's own lines carry no sender: they are never a user's.
            sender_id=origin.sender_id if is_human else None,
            sender_name=(origin.display_name or None) if is_human else None,
            created_at=created_at or self._clock(),
            extraction_status=ExtractionStatus.SKIPPED if writes_off else ExtractionStatus.PENDING,
        )

    def record_turn(
        self,
        origin: Origin,
        user_text: str,
        assistant_text: str | None,
        created_at: datetime | None = None,
    ) -> list[MemoryEvent]:
        """A person's message and the bot's reply (``None``: not answered). A
        scheduled turn's message is the scheduler's: only the reply is recorded."""
        if self._paused_speaker(origin):
            return []
        limit = self._config().recording.max_message_chars
        scope = self._resolver().write_scope(origin)
        events = []
        said = ((Role.USER, "" if origin.scheduled else user_text), (Role.ASSISTANT, assistant_text or ""))
        for role, raw in said:
            if raw and raw.strip():
                body, cut = truncate(raw.strip(), limit)
                content = {"text": body, **({"truncated": True} if cut else {})}
                events.append(self._event(scope, origin, SourceType.MESSAGE, role, content, created_at))
        self._enqueue(events)
        return events

    def record_tool(
        self, origin: Origin, tool: str, args: Any, result: Any, created_at: datetime | None = None
    ) -> MemoryEvent | None:
        cfg = self._config().recording
        if self._paused_speaker(origin):
            return None
        text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
        body, cut = truncate(text, cfg.tool_result_max_chars)
        try:
            json.dumps(args)
        except (TypeError, ValueError):
            args = {"repr": repr(args)}
        content = {"tool": tool, "args": args or {}, "result": body}
        if cut:
            content.update(truncated=True, original_chars=len(text))
        event = self._event(self._resolver().write_scope(origin), origin, SourceType.TOOL_RESULT, Role.TOOL,
                            content, created_at)
        self._enqueue([event])
        return event

    def _enqueue(self, events: list[MemoryEvent]) -> None:
        if not events:
            return
        if self._config().emergency_read_only:
            self.dropped_read_only += len(events)
            log.warning(
                "ltm: emergency_read_only is on; %d event(s) not recorded (%d so far)",
                len(events), self.dropped_read_only,
            )
            return
        if self._journal is not None and self._journal.is_open:
            try:
                self._journal.append(events)
                self._db.faults.clear("journal")
            except (OSError, TypeError, ValueError) as exc:  # the disk, or a value JSON cannot hold
                # Still recorded, only not crash-safe until the next flush.
                self.journal_failures += 1
                self._db.faults.report("journal", msg("fault.journal", error=_short(exc),
                                                      count=self.journal_failures))
                log.warning("ltm: %d event(s) not journaled (%s); a crash before they are written loses them",
                            len(events), exc)
        self._queue.extend(events)
        self.task.wake()

    # -- background -------------------------------------------------------

    @property
    def queued(self) -> int:
        return len(self._queue)

    def speaking(self, kind: str, scope_id: str) -> bool:
        """Whether a turn of this scope waits in the queue (it was just said)."""
        return any(e.scope == kind and e.scope_id == scope_id for e in self._queue)

    async def _insert(self, session: AsyncSession, batch: list[MemoryEvent]) -> None:
        await asyncio.to_thread(withhold, batch)
        session.add_all(batch)
        await session.flush()
        await index_turns(session, batch)
        if self._on_inserted is not None:
            await self._on_inserted(session, batch)

    async def flush(self) -> int:
        """Write what is queued now. Returns how many events were written."""
        async with self._flushing:
            if not self._queue:
                return 0
            batch, self._queue = self._queue, []
            if self._journal is not None:
                self._journal.seal()  # with the queue taken, before any await: the same events
            try:
                async with self._db.write() as session:
                    await self._insert(session, batch)
            except ReadOnlyError:
                self.dropped_read_only += len(batch)
                log.warning("ltm: emergency_read_only switched on; %d queued event(s) not recorded", len(batch))
                if self._journal is not None:
                    self._journal.committed()
                return 0
            except BaseException as exc:
                # Keep them for the next attempt (and for stop()'s final
                # flush); their sealed segments stay until one commits.
                self._queue[:0] = batch
                if isinstance(exc, Exception):
                    self._db.faults.report("recording", msg("fault.disk_full", queued=len(self._queue))
                                           if is_full(exc) else
                                           msg("fault.write_failed", error=_short(exc), queued=len(self._queue)))
                raise
            if self._journal is not None:
                self._journal.committed()
            self._db.faults.clear("recording")
            return len(batch)

    # -- the journal at start ---------------------------------------------

    async def open_journal(self) -> int:
        """Start journaling, then write what dead processes journaled; one that
        cannot be replayed now is kept for the next start, never stopping this one."""
        if self._journal is None:
            return 0
        try:
            await asyncio.to_thread(self._journal.open)
        except OSError as exc:
            log.error("ltm: the journal %s cannot be opened (%s); turns are recorded, but a crash "
                      "may lose the last second of them", self._journal.directory, exc)
            self._db.faults.report("journal_closed", msg("fault.journal_closed", path=str(self._journal.directory),
                                                         error=_short(exc)))
            return 0
        try:
            orphans = await asyncio.to_thread(self._journal.orphans)
        except OSError as exc:  # an unreadable directory: its journals wait for the next start
            log.error("ltm: the journals in %s cannot be read (%s); they are kept for the next start",
                      self._journal.directory, exc)
            return 0
        kept = sum(len(orphan.kept) for orphan in orphans)
        if kept:
            self._db.faults.report("journal_kept", msg("fault.journal_kept", files=kept,
                                                       path=str(self._journal.directory)))
        written = 0
        for orphan in orphans:
            delete = False
            try:
                written += await self._replay(orphan.events)
                delete = True
            except ReadOnlyError:
                log.warning("ltm: emergency_read_only is on; %d journaled event(s) kept for the next start",
                            len(orphan.events))
            except Exception:
                log.exception("ltm: replaying a journal failed; it is kept for the next start")
            finally:
                await asyncio.to_thread(orphan.release, delete)
        if written:
            log.info("ltm: %d recorded event(s) recovered from the journal of a process that stopped "
                     "before writing them", written)
        self.replayed += written
        return written

    async def _replay(self, events: list[MemoryEvent]) -> int:
        if not events:
            return 0
        async with self._db.write() as session:
            ids = [e.event_id for e in events]
            stored: set[str] = set()
            for start in range(0, len(ids), REPLAY_LOOKUP_CHUNK):
                chunk = ids[start:start + REPLAY_LOOKUP_CHUNK]
                stored.update(await session.scalars(select(MemoryEvent.event_id).where(
                    MemoryEvent.event_id.in_(chunk))))
            missing = [e for e in events if e.event_id not in stored]
            if missing:
                await self._insert(session, missing)
        return len(missing)

    def _explain(self, exc: Exception) -> Failure | None:
        """The flusher's known failures, as one line each (no traceback)."""
        waiting = f"{self.queued} recorded event(s) wait in the journal"
        if is_full(exc):
            return Failure("disk_full", f"the disk is full; {waiting}", logging.ERROR)
        if isinstance(exc, DatabaseBusyError):
            return Failure("busy", f"the database is locked by another connection; {waiting}")
        return None

    async def _last_flush(self) -> None:
        """At stop: write what is queued; what cannot be stays in the journal."""
        try:
            await self.flush()
        except Exception:
            log.exception("ltm: %d event(s) could not be written at shutdown; they stay in the journal",
                          len(self._queue))
        finally:
            if self._journal is not None:
                # Everything journaled is in SQLite unless the queue kept some.
                self._journal.close(delete=not self._queue)
