"""The write policy applied: a candidate's confidence and the gate.

The gate is a pure function of the policy, the candidate and a few counts
the writer looks up, so every rule can be tested without a database.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import WritePolicy
from ..enums import CandidateSource, Status, WriteMode

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
        return GateDecision(False, reason="write policy disabled")
    if c.type not in policy.allowed_types:
        return GateDecision(False, reason=f"type {c.type!r} not in allowed_types")
    if c.is_new and c.writes_this_session >= policy.max_writes_per_session:
        return GateDecision(False, reason=f"max_writes_per_session ({policy.max_writes_per_session}) reached")
    if c.is_new and c.writes_this_hour >= policy.max_writes_per_hour:
        return GateDecision(False, reason=f"max_writes_per_hour ({policy.max_writes_per_hour}) reached")
    # Text that would steer the bot waits for a person in every mode, an
    # explicit request included: stored, never injected unreviewed.
    if c.instruction:
        return GateDecision(True, Status.SHADOW, True, reason=f"held for review: {c.instruction}")

    if policy.mode == WriteMode.SHADOW:
        return GateDecision(True, Status.SHADOW, reason="mode shadow: stored, not injected")
    if policy.mode == WriteMode.MANUAL:
        return GateDecision(True, Status.SHADOW, True, reason="mode manual: awaiting approval")

    # mode auto
    if c.type in policy.require_approval_types:
        return GateDecision(True, Status.SHADOW, True, reason=f"type {c.type!r} requires approval")
    # An explicit "remember this" is the user's own decision; thresholds that
    # guard against noisy extraction do not apply to it.
    if not c.explicit and c.confidence < policy.min_confidence:
        return GateDecision(
            True, Status.SHADOW,
            reason=f"confidence {c.confidence:.2f} < min_confidence {policy.min_confidence}",
        )
    if not c.explicit and c.evidence_count < policy.min_evidence_count:
        return GateDecision(
            True, Status.SHADOW,
            reason=f"evidence {c.evidence_count} < min_evidence_count {policy.min_evidence_count}",
        )
    return GateDecision(True, Status.ACTIVE, reason="mode auto: thresholds met")
