"""Write and read policies (design §3.5, §4.2) and the write gate.

The gate is a pure function of the policy, the candidate and a few counts the
writer looks up, so every rule can be tested without a database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

MEMORY_TYPES = ("profile", "preference", "task_state", "constraint", "episode")
MODES = ("shadow", "auto", "manual")
INJECTION_POSITIONS = ("context_message", "system_prompt")


class Status(StrEnum):
    ACTIVE = "active"
    SHADOW = "shadow"
    DISABLED = "disabled"
    EXPIRED = "expired"


class Method(StrEnum):
    LLM_EXTRACT = "llm_extract"
    RULE = "rule"
    USER_EXPLICIT = "user_explicit"


# Source-quality weights of the confidence formula (design §3.4). Tool
# results are weighted by where the evidence came from, not by method.
SOURCE_QUALITY = {"user_explicit": 1.0, "llm_extract": 0.8, "rule": 0.8, "tool_result": 0.7}
CONTRADICTION_PENALTY = 0.5


@dataclass
class WritePolicy:
    enable: bool = True
    mode: str = "shadow"
    min_confidence: float = 0.6
    min_evidence_count: int = 1
    allowed_types: list[str] = field(default_factory=lambda: list(MEMORY_TYPES))
    max_writes_per_session: int = 10
    max_writes_per_hour: int = 50
    max_items_per_scope: int = 200
    require_approval_types: list[str] = field(default_factory=list)


@dataclass
class ReadPolicy:
    enable: bool = True
    max_items: int = 15
    max_tokens: int = 800
    max_per_type: int = 5
    min_confidence: float = 0.5
    # The design's 0.3/0.4/0.3 let importance and recency outrank what the
    # message is about: on LoCoMo that gave 0.28 evidence recall against
    # 0.57 for 0.8/0.1/0.1 (memories only, 2 dev conversations). Similarity
    # leads; importance and recency still break ties and surface the
    # essentials when the message says little ("hi").
    recency_weight: float = 0.1
    importance_weight: float = 0.2
    similarity_weight: float = 0.7
    # Raw turns compete with memories for the budget, ranked the same way
    # (reader.py); at most this many, none already behind an injected
    # memory (0 = memories only). Which turns may be shown: db.shown_turns.
    # On LoCoMo: 10 gave 0.789 evidence recall, 20 0.802, 30 the same as 20
    # (the budget is full first); memories alone 0.575, turns alone 0.739.
    max_events: int = 20
    # A raw turn's importance in the score (a memory has its own, 0..1).
    # LoCoMo: 0.3 gave 0.800, 0.5 0.802, 0.7 0.799.
    event_importance: float = 0.5
    # A memory or turn gains this × the best similarity among the read's
    # candidates of its day (UTC; reader._rank): conversations are read in
    # context, and the day of the best match holds what surrounds it. On
    # LoCoMo: 0 gave 0.824 evidence recall, 0.2 0.846, 0.3 0.848, 0.5 0.850,
    # 0.7 0.852 (multi-hop, whose evidence spans days, 0.627 -> 0.618 at
    # 0.5; temporal 0.843 -> 0.884, single-hop 0.926 -> 0.959). The best
    # similarity of the day measured better than its sum, the sum of its
    # squares or of its best three, and than a bonus for turns only.
    day_weight: float = 0.5
    injection_position: str = "context_message"


def confidence(
    base: float, source: str, evidence_count: int = 1, contradicted: bool = False
) -> float:
    """Design §3.4: base × source quality × repetition bonus × (1 − penalty).

    The design writes the bonus as ``min(1.0, 1 + 0.1·(n−1))``, which is 1 for
    every n ≥ 1 and so would never reward repetition; we read it as intended —
    each further confirmation adds 10 % — and cap the product at 1.0 instead.
    """
    bonus = 1.0 + 0.1 * max(0, evidence_count - 1)
    penalty = CONTRADICTION_PENALTY if contradicted else 0.0
    value = base * SOURCE_QUALITY.get(source, 0.8) * bonus * (1.0 - penalty)
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
        return GateDecision(
            False, reason=f"max_writes_per_session ({policy.max_writes_per_session}) reached"
        )
    if c.is_new and c.writes_this_hour >= policy.max_writes_per_hour:
        return GateDecision(
            False, reason=f"max_writes_per_hour ({policy.max_writes_per_hour}) reached"
        )

    if policy.mode == "shadow":
        return GateDecision(True, Status.SHADOW, reason="mode shadow: stored, not injected")
    if policy.mode == "manual":
        return GateDecision(True, Status.SHADOW, True, reason="mode manual: awaiting approval")

    # mode auto
    if c.type in policy.require_approval_types:
        return GateDecision(
            True, Status.SHADOW, True, reason=f"type {c.type!r} requires approval"
        )
    # An explicit "remember this" is the user's own decision; thresholds that
    # guard against noisy extraction do not apply to it.
    if not c.explicit and c.confidence < policy.min_confidence:
        return GateDecision(
            True,
            Status.SHADOW,
            reason=f"confidence {c.confidence:.2f} < min_confidence {policy.min_confidence}",
        )
    if not c.explicit and c.evidence_count < policy.min_evidence_count:
        return GateDecision(
            True,
            Status.SHADOW,
            reason=f"evidence {c.evidence_count} < min_evidence_count {policy.min_evidence_count}",
        )
    return GateDecision(True, Status.ACTIVE, reason="mode auto: thresholds met")
