""""Last time we talked…": the first turn of a new conversation brings the
person's most recent session summary into the block, inside its budget.

A conversation is new when its scope has had no turn for
``summaries.idle_minutes`` (the turn being answered is recorded after the
reply, so it is not counted). The summary's lines are measured first and
the rest of the block is read with what is left of ``max_tokens``; the
summary goes right under the block's opening, with a label in the
language of the message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from ..clock import Clock, as_utc, utcnow
from ..config import LTMConfig
from ..enums import MemoryType, Status, SummaryLevel
from ..instructions import neutralise
from ..scope import Scope
from ..storing.database import Database
from ..storing.tables import MemoryEvent, MemoryItem
from ..text import query_tokens
from .block import MemoryBlock, Selected, frame, language_of
from .history import History
from .reader import MemoryReader
from .summary_lines import focus
from .trace import BUDGET, LAST_TIME, Line, Trace

LABELS = {"en": "Last time we talked ({day}):", "zh": "上次聊天（{day}）："}
# The last session's summary reads as this many of its sentences: the one
# the message is about, else its opening; the memory_expand tool shows the
# rest (docs/decisions.md#d63).
LAST_TIME_SENTENCES = 1


@dataclass(frozen=True)
class LastSummary:
    memory_id: str
    scope: str
    fact: str
    confidence: float
    ended: datetime


def lines(last: LastSummary, language: str, query: Iterable[str] = ()) -> str:
    """The label and the summary, as they read in the block: the sentences
    sharing ``query``'s words first, then the opening ones."""
    label = LABELS.get(language, LABELS["en"]).format(day=f"{as_utc(last.ended):%Y-%m-%d}")
    return f"{label}\n- {focus(neutralise(last.fact), query, LAST_TIME_SENTENCES, fill=True)}"


class LastTime:
    def __init__(self, db: Database, clock: Clock = utcnow,
                 speaking: Callable[[str, str], bool] = lambda kind, scope_id: False) -> None:
        self._db = db
        self._clock = clock
        self._speaking = speaking  # a turn of the scope is queued, not yet written (the recorder)

    async def find(self, scopes: list[Scope], idle: timedelta, history: History | None = None) -> LastSummary | None:
        """The newest active session summary of ``scopes`` when the first
        (the conversation's own) has been quiet for ``idle``; else None.
        Also None when the request's ``history`` holds the scope's last
        turn: the model has the last conversation itself, not only its summary."""
        if not scopes:
            return None
        own = scopes[0]
        if self._speaking(own.kind, own.id):
            return None
        async with self._db.read() as session:
            latest = (await session.execute(select(func.max(MemoryEvent.created_at)).where(
                MemoryEvent.scope == own.kind, MemoryEvent.scope_id == own.id))).scalar_one_or_none()
            if latest is not None and self._clock() - as_utc(latest) < idle:
                return None  # the conversation goes on
            if latest is not None and history is not None and history.holds_turn(await self._last_said(session, own)):
                return None
            found = []
            for scope in scopes:
                row = (await session.execute(select(
                    MemoryItem.memory_id, MemoryItem.fact, MemoryItem.confidence, MemoryItem.valid_to).where(
                    MemoryItem.scope == scope.kind, MemoryItem.scope_id == scope.id,
                    MemoryItem.type == MemoryType.SUMMARY, MemoryItem.status == Status.ACTIVE,
                    MemoryItem.fact_key.like(f"summary_{SummaryLevel.SESSION}_%"),
                ).order_by(MemoryItem.valid_to.desc()).limit(1))).first()
                if row is not None and row[3] is not None:
                    found.append(LastSummary(row[0], str(scope), row[1], row[2], as_utc(row[3])))
        return max(found, key=lambda s: s.ended, default=None)

    @staticmethod
    async def _last_said(session: AsyncSession, scope: Scope) -> dict[str, Any]:
        """The content of the scope's newest event."""
        content = (await session.execute(select(MemoryEvent.content).where(
            MemoryEvent.scope == scope.kind, MemoryEvent.scope_id == scope.id,
        ).order_by(MemoryEvent.created_at.desc(), MemoryEvent.id.desc()).limit(1))).scalar_one_or_none()
        return content if isinstance(content, dict) else {}

    async def read(self, reader: MemoryReader, scopes: list[Scope], query: str, config: LTMConfig,
                   ids: bool = False, history: History | None = None, trace: Trace | None = None) -> MemoryBlock:
        """The reader's block, with the last session's summary when this
        message starts a new conversation; ``history``: the request's
        earlier messages (history.py), not recalled again; ``trace``: as the reader's."""
        policy = config.read_policy
        wanted = config.summaries.enable and config.summaries.last_session_in_block
        last = await self.find(scopes, timedelta(minutes=config.summaries.idle_minutes), history) if wanted else None
        if last is None:
            return await reader.read(scopes, query, policy, ids=ids, history=history, trace=trace)
        language = language_of(query)
        extra = lines(last, language, query_tokens(query))
        cost = reader.counter.count("\n" + extra)
        opening, closing = frame(language)
        if reader.counter.count(f"{opening}\n{extra}\n{closing}") > policy.max_tokens:
            if trace is not None:  # it does not fit at all
                trace.leave_out(extra, LAST_TIME, last.memory_id, 1.0, BUDGET)
            return await reader.read(scopes, query, policy, ids=ids, history=history, trace=trace)
        block = await reader.read(scopes, query, replace(policy, max_tokens=max(0, policy.max_tokens - cost)),
                                  ids=ids, history=history, trace=trace)
        body = block.text.split("\n")[2:-1] if block.text else []  # between the opening and the closing
        items = list(block.items)
        # Ranked in already: its line (memories come first, in order) moves under the label.
        at = next((n for n, s in enumerate(items) if s.memory_id == last.memory_id), None)
        if at is not None:
            del body[at], items[at]
        text = "\n".join([opening, extra, *body, closing])
        tokens = reader.counter.count(text)
        if tokens > policy.max_tokens:
            if trace is not None:
                trace.leave_out(extra, LAST_TIME, last.memory_id, 1.0, BUDGET)
            return block  # BPE merges across the joined lines: the block as read
        if trace is not None:  # its line, if ranked in, moved under the label
            trace.drop(last.memory_id)
            trace.lines.insert(0, Line(extra, LAST_TIME, last.memory_id, 1.0, cost))
        selected = Selected(last.memory_id, MemoryType.SUMMARY, last.fact, last.confidence, 1.0, last.scope)
        return MemoryBlock(text=text, items=[selected, *items], tokens=tokens, events=block.events)
