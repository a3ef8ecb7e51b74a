"""The memories and turns of the period a message names (recalling/dates.py),
loaded on a read thread for the reader to lift (ranking.py).

A turn is in the period when it was said in it; a memory when any of its
evidence events was — so a summary, whose evidence links every event it
covers, is in each period it spans. "第一次" / "the first time" is the day
of the scope's earliest recorded event.

A long history puts hundreds of turns in one day ("last Saturday"): the
period's turns the message's keywords match come first, ranked by FTS5's
bm25 within the period (the reader fuses that ranking with the retrievers'),
then the period's other turns, oldest first (docs/decisions.md#d84).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo

from sqlalchemy import Connection

from ..audience import may_recall
from ..clock import parse_stored_time
from ..config import ReadPolicy
from ..enums import Status
from ..scope import Scope
from ..storing.keyword_rows import scope_prefix
from ..storing.turns import matching_shown_turns_in_period, shown_turns_in_period
from ..text import fts_match_expression
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
    # The period's turns the message's keywords match, best first.
    ranking: list[int] = field(default_factory=list)


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
                now: datetime, tokens: Sequence[str] = ()) -> PeriodRows:
    """The period's showable turns and usable memories, of the scopes;
    ``tokens``: the message's search tokens (retrieval.Query)."""
    rows = PeriodRows(period)
    start, end = _stored(period.start), _stored(period.end)
    bounds = {"start": start, "end": end, "limit": PERIOD_LIMIT}
    matched: list[tuple[float, int]] = []
    for scope in scopes:
        params = {**bounds, "kind": scope.kind, "id": scope.id}
        in_period = "x.scope = :kind AND x.scope_id = :id AND x.created_at >= :start AND x.created_at < :end"
        if policy.max_events > 0:
            taken: set[int] = set()  # this scope's, at most PERIOD_LIMIT
            if tokens:
                match = fts_match_expression([scope_prefix(scope.kind, scope.id) + t for t in dict.fromkeys(tokens)])
                for row in matching_shown_turns_in_period(conn, scope.kind, scope.id, start, end, unbacked,
                                                          PERIOD_LIMIT, match):
                    rows.turns.setdefault(row[0], EventRow.of(row[:-1]))
                    matched.append((float(row[-1]), row[0]))
                    taken.add(row[0])
            for row in shown_turns_in_period(conn, scope.kind, scope.id, start, end, unbacked, PERIOD_LIMIT):
                if len(taken) >= PERIOD_LIMIT:
                    break
                rows.turns.setdefault(row[0], EventRow.of(row))
                taken.add(row[0])
        if policy.max_items > 0:
            # The memories said in the period here, wherever they are kept: a
            # member's fact said in the group is kept with the member (audience.py).
            for row in fetch_rows(conn, f"SELECT {ItemRow.COLUMNS} FROM ltm_items WHERE status = :active "
                                    "AND memory_id IN (SELECT v.memory_id "
                                    "FROM ltm_events x CROSS JOIN ltm_evidence v ON v.event_id = x.event_id "
                                    f"WHERE {in_period}) ORDER BY importance DESC LIMIT :limit",
                              {**params, "active": Status.ACTIVE}):
                item = ItemRow.of(row)
                if usable(item, policy, now) and may_recall(Scope(item.scope, item.scope_id), item.visibility,
                                                            True, scopes):
                    rows.memories.setdefault(item.id, item)
    rows.evidence = load_evidence(conn, [m.memory_id for m in rows.memories.values()])
    # bm25() is lower for a better match; scopes' scores are comparable (FTS5's statistics are the table's).
    rows.ranking = [rowid for _, rowid in sorted(matched)[:PERIOD_LIMIT]]
    return rows
