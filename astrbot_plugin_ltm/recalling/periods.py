"""The memories and turns of the period a message names, loaded on a read thread. A
memory is in it when any evidence event is. Hundreds of turns in one day: those the
keywords match come first, ranked by bm25 within the period (docs/decisions.md#d84),
from the loaded namespace, else the stored terms (docs/decisions.md#d158).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo

from sqlalchemy import Connection

from ..audience import may_recall
from ..clock import parse_stored_time
from ..enums import Status
from ..indexes.bm25 import KeywordNamespace
from ..indexes.keywords import TurnRanker, turn_document
from ..scope import Scope
from ..storing.terms import decode
from ..storing.turns import period_turn_terms, shown_turns_among, shown_turns_in_period
from .dates import Period, day_period
from .read import Read
from .rows import EventRow, ItemRow, fetch_rows, load_evidence, usable

# As ranking.LOAD_LIMIT: a long period ("上个月") costs what a day does.
PERIOD_LIMIT = 60
# Turns ranked by the message's words: at most this many read (the newest of a longer period).
PERIOD_SCAN = 20_000
RANKED_LIMIT = 10 * PERIOD_LIMIT  # the best, checked for whether they may be shown


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


def matching_turns(conn: Connection, scope: Scope, start: str, end: str, tokens: Sequence[str],
                   ranker: TurnRanker | None) -> list[tuple[int, float]]:
    """The scope's turns in [start, end) holding any of ``tokens``, (rowid, bm25) best first."""
    terms = list(dict.fromkeys(tokens))
    rows = period_turn_terms(conn, scope.kind, scope.id, start, end, PERIOD_SCAN, with_terms=ranker is None)
    ranked = None if ranker is None else ranker(scope, terms, [rowid for rowid, _ in rows], RANKED_LIMIT)
    if ranked is None:  # the scope's namespace is not loaded: the period's own turns are the corpus
        if ranker is not None:
            rows = period_turn_terms(conn, scope.kind, scope.id, start, end, PERIOD_SCAN, with_terms=True)
        ns = KeywordNamespace.build(turn_document(rowid, decode(blob)) for rowid, blob in rows)
        # searched wider than kept: turns tied at the cut are kept in row order, not as argpartition picks them
        ranked = ns.search(terms, RANKED_LIMIT * 8)[:RANKED_LIMIT]
    return ranked


def load_period(conn: Connection, read: Read, period: Period, unbacked: bool,
                ranker: TurnRanker | None = None) -> PeriodRows:
    """The period's showable turns and usable memories; ``ranker``: loaded keyword namespaces."""
    rows, scopes, policy, tokens = PeriodRows(period), read.scopes, read.policy, read.query.tokens
    start, end = _stored(period.start), _stored(period.end)
    bounds = {"start": start, "end": end, "limit": PERIOD_LIMIT}
    matched: list[tuple[float, int]] = []
    for scope in scopes:
        params = {**bounds, "kind": scope.kind, "id": scope.id}
        in_period = "x.scope = :kind AND x.scope_id = :id AND x.created_at >= :start AND x.created_at < :end"
        if policy.max_events > 0:
            taken: set[int] = set()  # this scope's, at most PERIOD_LIMIT
            if tokens:
                ranked = matching_turns(conn, scope, start, end, tokens, ranker)
                shown = {row[0]: row for row in shown_turns_among(conn, [r for r, _ in ranked], unbacked)}
                for rowid, score in ranked:
                    if rowid in shown and len(taken) < PERIOD_LIMIT:
                        rows.turns.setdefault(rowid, EventRow.of(shown[rowid]))
                        matched.append((-score, rowid))
                        taken.add(rowid)
            for row in shown_turns_in_period(conn, scope.kind, scope.id, start, end, unbacked, PERIOD_LIMIT):
                if len(taken) >= PERIOD_LIMIT:
                    break
                rows.turns.setdefault(row[0], EventRow.of(row))
                taken.add(row[0])
        if policy.max_items > 0:
            # A member's fact said in the group is kept with the member (audience.py).
            # "+status": found through the period's turns, not among every active memory.
            for row in fetch_rows(conn, f"SELECT {ItemRow.COLUMNS} FROM ltm_items WHERE +status = :active "
                                    "AND (memory_id IN (SELECT v.memory_id "
                                    "FROM ltm_events x CROSS JOIN ltm_evidence v ON v.event_id = x.event_id "
                                    f"WHERE {in_period}) OR id IN (SELECT sl.item_id FROM ltm_events x "
                                    f"CROSS JOIN ltm_summary_links sl ON sl.event_rowid = x.id WHERE {in_period})) "
                                    "ORDER BY importance DESC, id DESC LIMIT :limit",
                              {**params, "active": Status.ACTIVE}):
                item = ItemRow.of(row)
                if usable(item, policy, read.now) and may_recall(Scope(item.scope, item.scope_id), item.visibility,
                                                            True, scopes):
                    rows.memories.setdefault(item.id, item)
    rows.evidence = load_evidence(conn, [m.memory_id for m in rows.memories.values()], rows.turns.keys())
    # Best first (the scores negated); two scopes' scores each weigh a term by its own scope's rows.
    rows.ranking = [rowid for _, rowid in sorted(matched)[:PERIOD_LIMIT]]
    return rows
