"""The gate log: each candidate that reached the write gate, with its inputs and
answer, so a policy replay needs no extraction model (docs/decisions.md#d53)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from ..scope import Scope
from ..storing.database import add_row
from ..storing.tables import GateLogEntry
from .candidates import Candidate
from .policy import GateDecision, GateInput

REFUSED = "refused"  # the status column of a candidate the gate refused
_GATE_LOG = GateLogEntry.metadata.tables[GateLogEntry.__tablename__]


def note_gate(session: AsyncSession, scope: Scope, c: Candidate, action: str, key: str, seen: GateInput,
              verdict: GateDecision, memory_id: str | None, now: datetime) -> None:
    # In a write batch, written with the batch's others at its end (database.add_row).
    add_row(session, _GATE_LOG, dict(
        created_at=now, scope=scope.kind, scope_id=scope.id, session_id=c.session_id, memory_id=memory_id,
        fact_key=key, action=action, type=seen.type, fact=c.fact, confidence=seen.confidence,
        evidence_count=seen.evidence_count, is_new=seen.is_new, explicit=seen.explicit,
        instruction=seen.instruction, event_ids=list(dict.fromkeys(c.event_ids)),
        status=str(verdict.status or "shadow") if verdict.allowed else REFUSED,
        awaiting_approval=verdict.awaiting_approval, reason=verdict.reason,
    ), GateLogEntry)
