"""The write gate replayed: the logged candidates (learning/gate_log.py) through
another write policy, without writing (a pure function). What depends on earlier
answers follows this replay's: a stricter policy that refuses a memory's first
candidate makes its second the new memory (docs/decisions.md#d53).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ..config import WritePolicy
from ..enums import Status
from ..i18n import msg
from .policy import GateDecision, GateInput, gate

ACTIVE, SHADOW, AWAITING, REFUSED = "active", "shadow", "awaiting_approval", "refused"
OUTCOMES = (ACTIVE, SHADOW, AWAITING, REFUSED)
SESSION_WINDOW = timedelta(hours=24)  # as learning/rate_limits.py counts a conversation's writes
HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class LoggedCandidate:
    """A gate log row, as the replay reads it."""

    id: int
    created_at: datetime
    scope: str
    scope_id: str
    session_id: str | None
    memory_id: str | None
    fact_key: str
    type: str
    fact: str
    confidence: float
    explicit: bool
    instruction: str | None
    event_ids: tuple[str, ...]
    cross_scope: bool = False  # an event it cites belongs to another scope

    @property
    def chain(self) -> str:
        return self.memory_id or f"{self.scope}:{self.scope_id}:{self.fact_key}"


@dataclass(frozen=True)
class Switches:
    """The policy a replay applies to writes."""

    write_policy: WritePolicy
    enable: bool = True
    read_only: bool = False


@dataclass
class _Memory:
    evidence: int = 0
    status: str = REFUSED  # REFUSED: not stored (yet)


@dataclass
class GateReplay:
    """Per candidate its outcome under the policy; per chain (memory) its final status."""

    outcomes: dict[int, str] = field(default_factory=dict)
    reasons: dict[int, str] = field(default_factory=dict)
    final: dict[str, str] = field(default_factory=dict)


def outcome_of(decision: GateDecision) -> str:
    if not decision.allowed:
        return REFUSED
    if decision.awaiting_approval:
        return AWAITING
    return ACTIVE if decision.status == Status.ACTIVE else SHADOW


def replay_gate(candidates: Iterable[LoggedCandidate], switches: Switches) -> GateReplay:
    out = GateReplay()
    memories: dict[str, _Memory] = defaultdict(_Memory)
    by_session: dict[str | None, deque[datetime]] = defaultdict(deque)
    by_scope: dict[tuple[str, str], deque[datetime]] = defaultdict(deque)
    for c in sorted(candidates, key=lambda c: (c.created_at, c.id)):
        memory = memories[c.chain]
        if not switches.enable or switches.read_only:
            off = "gate.memory_off" if not switches.enable else "gate.read_only"
            decision = GateDecision(False, reason=str(msg(off)))
        else:
            session, hour = by_session[c.session_id], by_scope[(c.scope, c.scope_id)]
            _drop_before(session, c.created_at - SESSION_WINDOW)
            _drop_before(hour, c.created_at - HOUR)
            is_new = memory.status == REFUSED
            decision = gate(switches.write_policy, GateInput(
                type=c.type, confidence=c.confidence, evidence_count=memory.evidence + 1, is_new=is_new,
                explicit=c.explicit, writes_this_session=len(session), writes_this_hour=len(hour),
                instruction=c.instruction))
            if decision.allowed and is_new:
                session.append(c.created_at)
                hour.append(c.created_at)
        outcome = outcome_of(decision)
        out.outcomes[c.id], out.reasons[c.id] = outcome, decision.reason
        if outcome != REFUSED:
            memory.evidence += 1
            memory.status = _next(memory.status, outcome)
        out.final[c.chain] = memory.status
    return out


def _next(before: str, decided: str) -> str:
    """As the writer's _next_status: more evidence never demotes, and approval keeps waiting."""
    if before in (ACTIVE, AWAITING):
        return before
    return decided


def _drop_before(times: deque[datetime], limit: datetime) -> None:
    while times and times[0] <= limit:
        times.popleft()


def count_outcomes(candidates: Sequence[LoggedCandidate], replay: GateReplay) -> dict[str, dict[str, int]]:
    """Outcome → memory type → candidates."""
    table: dict[str, dict[str, int]] = {o: {} for o in OUTCOMES}
    for c in candidates:
        by_type = table[replay.outcomes[c.id]]
        by_type[c.type] = by_type.get(c.type, 0) + 1
    return table
