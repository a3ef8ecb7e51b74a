""""Last time we talked…": the first turn of a new conversation pins the person's
latest session summary under the block's opening, inside its budget
(docs/decisions.md#d107).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
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
from .history import History
from .read import Pinned, Selected, language_of
from .summary_lines import focus
from .trace import LAST_TIME

LABELS = {"en": "Last time we talked ({day}):", "zh": "上次聊天（{day}）："}
# The sentence the message is about, else the opening; memory_expand shows the rest (docs/decisions.md#d63).
LAST_TIME_SENTENCES = 1


@dataclass(frozen=True)
class LastSummary:
    memory_id: str
    scope: str
    fact: str
    confidence: float
    ended: datetime


def lines(last: LastSummary, language: str, query: Iterable[str] = ()) -> tuple[str, str]:
    """The label and the summary as they read: the sentences sharing ``query``'s words first."""
    label = LABELS.get(language, LABELS["en"]).format(day=f"{as_utc(last.ended):%Y-%m-%d}")
    return label, f"- {focus(neutralise(last.fact), query, LAST_TIME_SENTENCES, fill=True)}"


class LastTime:
    def __init__(self, db: Database, clock: Clock = utcnow,
                 speaking: Callable[[str, str], bool] = lambda kind, scope_id: False) -> None:
        self._db = db
        self._clock = clock
        self._speaking = speaking  # a turn of the scope is queued, not yet written (the recorder)

    async def find(self, scopes: list[Scope], idle: timedelta, history: History | None = None) -> LastSummary | None:
        """The newest session summary when the conversation has been quiet for ``idle``;
        None when ``history`` holds its last turn, as the model has the conversation itself."""
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

    async def pinned(self, scopes: list[Scope], query: str, config: LTMConfig,
                     history: History | None = None) -> Pinned | None:
        """The last session's summary, pinned, when this message starts a new conversation."""
        if not config.summaries.enable:
            return None
        last = await self.find(scopes, timedelta(minutes=config.summaries.idle_minutes), history)
        if last is None:
            return None
        selected = Selected(last.memory_id, MemoryType.SUMMARY, last.fact, last.confidence, 1.0, last.scope)
        return Pinned(lines(last, language_of(query), query_tokens(query)), selected, LAST_TIME)
