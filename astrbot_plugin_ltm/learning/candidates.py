"""What extraction produces: a candidate fact with the events behind it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..enums import CandidateSource
from ..scope import Scope


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
    # What the model said of a known fact it was shown: a new value, or the same thing again.
    updates: str | None = None  # a memory_id
    restates: str | None = None  # a memory_id
    # Who may hear it again (audience.py); ``subject``: whose own scope keeps it (its lines' speaker).
    secret: bool = False
    about_group: bool = False
    subject: Scope | None = None


@dataclass(frozen=True)
class KnownFact:
    """A current memory shown to the extraction model, to say what a statement updates or repeats."""

    memory_id: str
    key: str
    fact: str
    since: datetime | None = None


@dataclass
class Rejection:
    raw: object
    reason: str


@dataclass
class ExtractionResult:
    candidates: list[Candidate]
    rejected: list[Rejection] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)  # model, prompt hash
