"""What extraction produces: a candidate fact with the events behind it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..enums import CandidateSource


@dataclass
class Candidate:
    type: str
    fact: str
    fact_key: str
    confidence: float  # the extractor's own confidence, before weighting
    importance: float
    event_ids: list[str]  # evidence: events that state the fact
    source: str = CandidateSource.LLM_EXTRACT  # sets the confidence weight
    session_id: str | None = None  # the conversation it came from (rate limits)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Rejection:
    raw: object
    reason: str


@dataclass
class ExtractionResult:
    candidates: list[Candidate]
    rejected: list[Rejection] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)  # model, prompt hash
