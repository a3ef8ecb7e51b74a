"""Why a search hit never became a candidate (the injection preview); read only when
the reader is given a Trace."""

from __future__ import annotations

import json

from sqlalchemy import Connection

from ..audience import SAID_IN_HERE_SQL, may_recall, reading_param
from ..enums import Status
from ..scope import Scope
from ..storing.driver_rows import fetch_rows
from ..storing.turns import turns_among
from .block import format_event_line
from .read import Read
from .rows import EventRow, ItemRow, usable
from .trace import (
    AWAITING_APPROVAL,
    EXPIRED,
    LOW_CONFIDENCE,
    NOT_ACTIVE,
    TURN,
    UNREVIEWED,
    WITHHELD,
    memory_source,
)


def explain_hits(conn: Connection, read: Read, memories: set[int], turns: set[int]) -> None:
    """Note in the trace why each hit the reader did not keep, or may not show, was left."""
    scopes, policy, trace = read.scopes, read.policy, read.trace
    assert trace is not None
    rows = fetch_rows(conn, f"SELECT {ItemRow.COLUMNS}, {SAID_IN_HERE_SQL}, awaiting_approval FROM ltm_items "
                      "WHERE id IN (SELECT value FROM json_each(:ids)) ORDER BY id",
                      {"ids": json.dumps(sorted(memories)), "reading": reading_param(scopes)}) if memories else []
    for row in rows:
        item, said_here, waiting = ItemRow.of(row), bool(row[-2]), bool(row[-1])
        if not may_recall(Scope(item.scope, item.scope_id), item.visibility, said_here, scopes) \
                or usable(item, policy, read.now):
            continue
        line = f"- [{item.type}] {item.fact}"
        if waiting:
            trace.leave_out(line, memory_source(item), item.memory_id, 0.0, AWAITING_APPROVAL)
        elif item.status != Status.ACTIVE:
            trace.leave_out(line, memory_source(item), item.memory_id, 0.0, NOT_ACTIVE, status=str(item.status))
        elif item.confidence < policy.min_confidence:
            trace.leave_out(line, memory_source(item), item.memory_id, 0.0, LOW_CONFIDENCE)
        else:
            trace.leave_out(line, memory_source(item), item.memory_id, 0.0, EXPIRED)
    wanted = {(s.kind, s.id) for s in scopes}
    for row in turns_among(conn, turns) if turns else []:
        turn, withheld = EventRow.of(row[:-1]), bool(row[-1])
        if (turn.scope, turn.scope_id) in wanted:
            trace.leave_out(format_event_line(turn), TURN, turn.event_id, 0.0, WITHHELD if withheld else UNREVIEWED)

