"""The plugin's extension points: every interface a part depends on instead
of a concrete class, declared together. The engine wires the defaults
(AstrBot's providers through adapter.py, the LLM extractor, the keyword and
vector retrievers and indexes); tests and benchmarks pass their own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from .text import query_tokens

if TYPE_CHECKING:
    from .learning.candidates import ExtractionResult, KnownFact
    from .scope import Scope
    from .storing.tables import MemoryEvent

# A chat model as extraction uses it: (system prompt, user prompt) -> text.
Complete = Callable[[str, str], Awaitable[str]]


class ModelGateway(Protocol):
    """How the core reaches AstrBot's chat models (adapter.AstrBotModels)."""

    async def completer(self, provider_id: str, session_id: str | None) -> tuple[Complete, str] | None:
        """A completion function and the model's name, or None when no
        provider is available (the events then wait)."""
        ...


@runtime_checkable
class ProviderCheck(Protocol):
    """A ModelGateway or Embedder that can tell, without calling it, whether
    its provider exists now; one that cannot is taken to have one."""

    def provider_exists(self) -> bool: ...


class Extractor(Protocol):
    """Turns a batch of recorded events into candidate facts."""

    async def extract(self, events: Sequence[MemoryEvent], known: Sequence[KnownFact] = ()) -> ExtractionResult:
        """``known``: current memories of the batch's scope, which a new
        statement may update or repeat (Candidate.updates/restates)."""
        ...


class Summarizer(Protocol):
    """Writes summaries (learning/summaries.py; the LLM by default, the
    dataset's own summaries in the benchmark)."""

    async def session(self, events: Sequence[MemoryEvent]) -> str:
        """One conversation's events, oldest first -> its summary."""
        ...

    async def rollup(self, level: str, start: datetime, end: datetime, summaries: Sequence[str]) -> str:
        """The summaries of a period's parts, oldest first -> the period's."""
        ...


class Embedder(Protocol):
    """Text -> vectors (adapter.AstrBotEmbedder; a local model in benchmarks)."""

    # Names the vector space: vectors of another model (or dimension) are
    # never compared with these; they are embedded again.
    model_id: str

    async def embed(self, texts: list[str]) -> np.ndarray:
        """float32, shape (len(texts), dim)."""
        ...


class Reranker(Protocol):
    """Reads a question with each candidate: a finer judge of meaning than the retrievers."""

    async def rerank(self, query: str, documents: list[str]) -> list[float]:
        """One relevance score per document, in the documents' order (higher is better)."""
        ...


class TokenCounter(Protocol):
    """Counts tokens for the read budget (recalling.tokens)."""

    name: str

    def count(self, text: str) -> int: ...


@dataclass(frozen=True)
class Query:
    """A message to find memories for, tokenised once per read."""

    text: str
    tokens: list[str]

    @classmethod
    def of(cls, text: str) -> Query:
        return cls(text, query_tokens(text))


@dataclass
class Found:
    """A retriever's answer: row ids, best first."""

    memories: list[int] = field(default_factory=list)  # items of any status (the reader keeps the usable)
    turns: list[int] = field(default_factory=list)  # events (the reader checks which may be shown)


class Retriever(Protocol):
    """Ranks, for a query, the memories and turns of the scopes it reads."""

    name: str

    async def search(self, scopes: list[Scope], query: Query, limit: int) -> Found:
        """At most ``limit`` memories and ``limit`` turns, best first."""
        ...


class SemanticMatcher(Protocol):
    """Finds a memory of the scope that says the same as a new fact: its
    row id. Asked on the bot's event loop, before the write."""

    async def find(self, scope: Scope, fact: str) -> int | None: ...


# DerivedIndex (a cache that follows every committed write) is declared in
# storing/changes.py, beside the changes it follows.

# Awaited with ("before", current version) before a policy change and
# ("after", new version) after it.
PolicyListener = Callable[[str, "int | None"], Awaitable[None]]


class PolicyVersionSource(Protocol):
    """Numbered policy versions (operating.policy_versions): what the drift
    monitor ties its snapshots to and rolls back through."""

    def add_listener(self, listener: PolicyListener) -> None: ...

    async def current_version(self) -> int | None: ...

    async def history(self, offset: int = 0, limit: int = 20) -> list[dict[str, Any]]:
        """Newest first; each has ``version`` and ``created_at``."""
        ...

    async def rollback(self, version: int, actor: str, reason: str) -> dict[str, Any]: ...
