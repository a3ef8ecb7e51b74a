"""Why a search hit never became a candidate (the injection preview): a
memory that is not active, awaits approval, is below the policy's
confidence or past its retention; a turn withheld, or one no reviewed
memory backs. Read only when the reader is given a Trace."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from ..audience import SAID_IN_HERE_SQL, may_recall, reading_param
from ..config import ReadPolicy
from ..enums import Status
from ..scope import Scope
from ..storing.driver_rows import fetch_rows
from ..storing.turns import turns_among
from .block import format_event_line
from .rows import EventRow, ItemRow, usable
from .trace import (
    AWAITING_APPROVAL,
    EXPIRED,
    LOW_CONFIDENCE,
    NOT_ACTIVE,
    TURN,
    UNREVIEWED,
    WITHHELD,
    Trace,
    memory_source,
)


def explain_memories(conn: Connection, scopes: list[Scope], rowids: set[int], policy: ReadPolicy,
                     now: datetime, trace: Trace) -> None:
    """Note each of the memories ``rowids`` (hits the reader did not keep) with why."""
    select = f"SELECT {ItemRow.COLUMNS}, {SAID_IN_HERE_SQL}, awaiting_approval FROM ltm_items"
    for row in _rows(conn, select, "id", rowids, {"reading": reading_param(scopes)}):
        item, said_here, waiting = ItemRow.of(row), bool(row[-2]), bool(row[-1])
        if not may_recall(Scope(item.scope, item.scope_id), item.visibility, said_here, scopes) \
                or usable(item, policy, now):
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


def explain_turns(conn: Connection, scopes: list[Scope], rowids: set[int], trace: Trace) -> None:
    """Note each of the turns ``rowids`` (hits the block may not show) with why."""
    wanted = {(s.kind, s.id) for s in scopes}
    for row in turns_among(conn, rowids) if rowids else []:
        turn, withheld = EventRow.of(row[:-1]), bool(row[-1])
        if (turn.scope, turn.scope_id) in wanted:
            trace.leave_out(format_event_line(turn), TURN, turn.event_id, 0.0, WITHHELD if withheld else UNREVIEWED)


def explain_hits(conn: Connection, scopes: list[Scope], memories: set[int], turns: set[int], policy: ReadPolicy,
                 now: datetime, trace: Trace) -> None:
    """Both of the above, in one trip to a read thread."""
    explain_memories(conn, scopes, memories, policy, now, trace)
    explain_turns(conn, scopes, turns, trace)


def _rows(conn: Connection, select: str, id_column: str, rowids: set[int],
          params: dict[str, Any] | None = None) -> list[Any]:
    """``select`` over the rows ``rowids``, by id (none: no trip to the database)."""
    if not rowids:
        return []
    return fetch_rows(conn, f"{select} WHERE {id_column} IN (SELECT value FROM json_each(:ids)) ORDER BY {id_column}",
                      {"ids": json.dumps(sorted(rowids)), **(params or {})})
