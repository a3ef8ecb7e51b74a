"""The write policy applied: a candidate's confidence and the gate, a pure function
so every rule can be tested without a database.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import WritePolicy
from ..enums import CandidateSource, Status, WriteMode
from ..i18n import msg

# How much a source is trusted: the confidence formula's first factor.
# Tool results are weighed by where the evidence came from, not by method.
SOURCE_QUALITY: dict[str, float] = {
    CandidateSource.USER_EXPLICIT: 1.0,
    CandidateSource.LLM_EXTRACT: 0.8,
    CandidateSource.RULE: 0.8,
    CandidateSource.TOOL_RESULT: 0.7,
    CandidateSource.BOT_SIDE: 0.8,  # a model's reading of the bot's reply, as of a person's
}


def confidence(base: float, source: str, evidence_count: int = 1) -> float:
    """base × source quality × repetition bonus, capped at 1: each further
    confirmation adds 10 % (docs/decisions.md#d19). A new value that
    supersedes an old one starts afresh, unpenalised (docs/decisions.md#d42)."""
    bonus = 1.0 + 0.1 * max(0, evidence_count - 1)
    value = base * SOURCE_QUALITY.get(source, 0.8) * bonus
    return round(min(1.0, max(0.0, value)), 4)


@dataclass(frozen=True)
class GateInput:
    type: str
    confidence: float
    evidence_count: int
    is_new: bool  # creates an item (counts against rate limits and caps)
    explicit: bool  # the user asked for it to be remembered
    writes_this_session: int
    writes_this_hour: int
    instruction: str | None = None  # why the fact reads as an instruction (instructions.py); None: a fact


@dataclass(frozen=True)
class GateDecision:
    allowed: bool  # False: the candidate is dropped (its event stays recorded)
    status: Status | None = None
    awaiting_approval: bool = False
    reason: str = ""


def gate(policy: WritePolicy, c: GateInput) -> GateDecision:
    """Decide what happens to one candidate. Every outcome carries a reason."""
    if not policy.enable:
        return GateDecision(False, reason=str(msg("gate.disabled")))
    if c.type not in policy.allowed_types:
        return GateDecision(False, reason=str(msg("gate.type_not_allowed", type=repr(c.type))))
    if c.is_new and c.writes_this_session >= policy.max_writes_per_session:
        return GateDecision(False, reason=str(msg("gate.session_cap", max=policy.max_writes_per_session)))
    if c.is_new and c.writes_this_hour >= policy.max_writes_per_hour:
        return GateDecision(False, reason=str(msg("gate.hour_cap", max=policy.max_writes_per_hour)))
    # Text that would steer the bot waits for a person in every mode: stored, never injected unreviewed.
    if c.instruction:
        return GateDecision(True, Status.SHADOW, True, reason=str(msg("held.for_review", why=c.instruction)))

    if policy.mode == WriteMode.SHADOW:
        return GateDecision(True, Status.SHADOW, reason=str(msg("gate.shadow")))
    if policy.mode == WriteMode.MANUAL:
        return GateDecision(True, Status.SHADOW, True, reason=str(msg("gate.manual")))

    # mode auto
    if c.type in policy.require_approval_types:
        return GateDecision(True, Status.SHADOW, True, reason=str(msg("gate.type_approval", type=repr(c.type))))
    # An explicit "remember this" is the user's decision: thresholds against noisy extraction do not apply.
    if not c.explicit and c.confidence < policy.min_confidence:
        return GateDecision(
            True, Status.SHADOW,
            reason=str(msg("gate.confidence", confidence=f"{c.confidence:.2f}", min=policy.min_confidence)),
        )
    if not c.explicit and c.evidence_count < policy.min_evidence_count:
        return GateDecision(
            True, Status.SHADOW,
            reason=str(msg("gate.evidence", count=c.evidence_count, min=policy.min_evidence_count)),
        )
    return GateDecision(True, Status.ACTIVE, reason=str(msg("gate.auto")))
