"""Where summaries fall in time (pure functions), apart from summaries.py, which asks
the model and writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..clock import as_utc
from ..enums import SHOWN_ROLES, ExtractionStatus, SummaryLevel
from ..storing.tables import MemoryEvent, MemoryItem

LEVELS: tuple[str, ...] = tuple(SummaryLevel)
_KEY_FORMAT = {SummaryLevel.SESSION: "%Y%m%dt%H%M%S", SummaryLevel.DAY: "%Y%m%d",
               SummaryLevel.WEEK: "%Y%m%d", SummaryLevel.MONTH: "%Y%m"}


def summary_key(level: str, start: datetime) -> str:
    """The (already normalised) fact key of the summary of ``level`` starting at ``start``."""
    return f"summary_{level}_{as_utc(start).strftime(_KEY_FORMAT[SummaryLevel(level)])}"


def level_of(fact_key: str) -> str | None:
    """The level a summary's fact key names; None for any other key."""
    parts = fact_key.split("_")
    return parts[1] if len(parts) == 3 and parts[0] == "summary" and parts[1] in LEVELS else None


def period_of(level: str, at: datetime) -> tuple[datetime, datetime]:
    """The UTC day, ISO week or month ``at`` falls in: [start, end)."""
    at = as_utc(at).astimezone(UTC)
    day = datetime(at.year, at.month, at.day, tzinfo=UTC)
    if level == SummaryLevel.DAY:
        return day, day + timedelta(days=1)
    if level == SummaryLevel.WEEK:
        start = day - timedelta(days=day.weekday())
        return start, start + timedelta(days=7)
    if level == SummaryLevel.MONTH:
        start = day.replace(day=1)
        return start, (start + timedelta(days=32)).replace(day=1)
    raise ValueError(f"no period for level {level!r}")


def learnable(events: Sequence[MemoryEvent]) -> list[MemoryEvent]:
    """Without what was said while learning was off, nor the bot's replies to it: a
    summary would learn it all the same."""
    out: list[MemoryEvent] = []
    unlearned: set[str | None] = set()  # conversations whose last message is not to be learnt
    for event in events:
        if event.source_role in SHOWN_ROLES:
            if event.extraction_status == ExtractionStatus.SKIPPED:
                unlearned.add(event.session_id)
                continue
            unlearned.discard(event.session_id)
        elif event.session_id in unlearned:
            continue
        out.append(event)
    return out


def join_sessions(sessions: Sequence[list[MemoryEvent]], min_events: int) -> list[list[MemoryEvent]]:
    """Sessions joined into spans of at least ``min_events`` (the last may hold fewer)."""
    spans: list[list[MemoryEvent]] = []
    for events in sessions:
        if spans and len(spans[-1]) < min_events:
            spans[-1] = spans[-1] + events
        else:
            spans.append(list(events))
    return spans


def split_sessions(events: Sequence[MemoryEvent], idle: timedelta, max_events: int) -> list[list[MemoryEvent]]:
    """Events cut into sessions by ``idle`` and ``max_events``, never between events of
    the same instant, which a later read past the session's end would miss."""
    sessions: list[list[MemoryEvent]] = []
    for event in events:
        current = sessions[-1] if sessions else None
        if current is not None and as_utc(event.created_at) - as_utc(current[-1].created_at) < idle and (
                len(current) < max_events or event.created_at == current[-1].created_at):
            current.append(event)
        else:
            sessions.append([event])
    return sessions


@dataclass
class StoredSummary:
    """A stored summary, as roll-ups read it."""

    memory_id: str
    key: str
    level: str
    text: str
    start: datetime
    end: datetime


def retiring(rows: list[MemoryItem], horizon: datetime) -> list[tuple[MemoryItem, MemoryItem]]:
    """The active summaries ended before ``horizon`` that a coarser one covers, with that cover."""
    spans = [(row, LEVELS.index(level), as_utc(row.valid_from), as_utc(row.valid_to)) for row in rows
             if (level := level_of(row.fact_key)) is not None
             and row.valid_from is not None and row.valid_to is not None]
    due = []
    for part, rank, start, end in spans:
        if end <= horizon and (cover := _coarser_cover(rank, start, end, spans)) is not None:
            due.append((part, cover))
    return due


def _coarser_cover(rank: int, start: datetime, end: datetime,
                   spans: list[tuple[MemoryItem, int, datetime, datetime]]) -> MemoryItem | None:
    """The finest summary of a coarser level than ``rank`` whose period holds ``start``–``end``."""
    covers = [(r, row) for row, r, s, e in spans if r > rank and s <= start and end <= e]
    return min(covers, key=lambda c: c[0])[1] if covers else None


def rollup_parts(members: list[StoredSummary]) -> list[StoredSummary]:
    """A period's summaries no coarser one among them covers, oldest first."""
    rank = {s.memory_id: LEVELS.index(s.level) for s in members}
    return sorted((m for m in members if not any(
        rank[o.memory_id] > rank[m.memory_id] and o.start <= m.start and m.end <= o.end for o in members)),
        key=lambda s: (s.start, s.end))
