"""The memories and turns of the period a message names (recalling/dates.py),
loaded on a read thread for the reader to lift (ranking.py).

A turn is in the period when it was said in it; a memory when any of its
evidence events was — so a summary, whose evidence links every event it
covers, is in each period it spans. "第一次" / "the first time" is the day
of the scope's earliest recorded event.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo

from sqlalchemy import Connection

from ..clock import parse_stored_time
from ..config import ReadPolicy
from ..enums import Status
from ..scope import Scope
from ..storing.turns import shown_turns
from .dates import First, Period, day_period
from .rows import EventRow, ItemRow, fetch_rows, load_evidence, usable

# At most this many turns and memories of the period, each (the same bound
# as the hits a read ranks, ranking.LOAD_LIMIT): a long period ("上个月")
# costs what a day does; its turns are taken oldest first.
PERIOD_LIMIT = 60


def _stored(at: datetime) -> str:
    """A UTC datetime as SQLite holds the column (text, naive, microseconds)."""
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


@dataclass
class PeriodRows:
    """What a read found in the named period."""

    period: Period
    memories: dict[int, ItemRow] = field(default_factory=dict)
    evidence: dict[str, frozenset[str]] = field(default_factory=dict)
    turns: dict[int, EventRow] = field(default_factory=dict)


def first_day(conn: Connection, scopes: list[Scope], tz: tzinfo) -> Period | None:
    """The local day of the scopes' earliest recorded event; None if none."""
    earliest: datetime | None = None
    for scope in scopes:
        [(value,)] = fetch_rows(conn, "SELECT min(created_at) FROM ltm_events WHERE scope = :kind AND scope_id = :id",
                                {"kind": scope.kind, "id": scope.id})
        if value is not None:
            at = parse_stored_time(value)
            earliest = at if earliest is None else min(earliest, at)
    return None if earliest is None else day_period(earliest.astimezone(tz).date(), tz)


def resolve(conn: Connection, scopes: list[Scope], named: Period | First, tz: tzinfo) -> Period | None:
    """The period a message names (dates.named_period), "the first time"
    looked up in the scopes."""
    return first_day(conn, scopes, tz) if isinstance(named, First) else named


def load_period(conn: Connection, scopes: list[Scope], period: Period, unbacked: bool, policy: ReadPolicy,
                now: datetime) -> PeriodRows:
    """The period's showable turns and usable memories, of the scopes."""
    rows = PeriodRows(period)
    bounds = {"start": _stored(period.start), "end": _stored(period.end), "limit": PERIOD_LIMIT}
    for scope in scopes:
        params = {**bounds, "kind": scope.kind, "id": scope.id}
        in_period = "x.scope = :kind AND x.scope_id = :id AND x.created_at >= :start AND x.created_at < :end"
        if policy.max_events > 0:
            for row in fetch_rows(conn, f"SELECT {EventRow.COLUMNS} FROM ltm_events x WHERE {in_period} "
                                    f"AND {shown_turns(unbacked)} ORDER BY x.created_at LIMIT :limit", params):
                rows.turns.setdefault(row[0], EventRow.of(row))
        if policy.max_items > 0:
            for row in fetch_rows(conn, f"SELECT {ItemRow.COLUMNS} FROM ltm_items WHERE scope = :kind "
                                    "AND scope_id = :id AND status = :active AND memory_id IN (SELECT v.memory_id "
                                    "FROM ltm_events x CROSS JOIN ltm_evidence v ON v.event_id = x.event_id "
                                    f"WHERE {in_period}) ORDER BY importance DESC LIMIT :limit",
                              {**params, "active": Status.ACTIVE}):
                item = ItemRow.of(row)
                if usable(item, policy, now):
                    rows.memories.setdefault(item.id, item)
    rows.evidence = load_evidence(conn, [m.memory_id for m in rows.memories.values()])
    return rows
