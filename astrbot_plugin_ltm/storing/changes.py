"""The change channel: what a write did, in terms every derived index
understands.

:meth:`Database.write <.database.Database.write>` hands the changes noted on
its session to every subscribed index only once committed, so an index never
holds what SQLite does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from ..enums import Corpus
from ..scope import Scope

Tokens = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MemoryWritten:
    """A memory was created, or changed (its fact, status, type, scores)."""

    scope: Scope
    item_id: int
    # None when the fact stayed the same. A replaced fact's vector has been
    # deleted (the background fill embeds the new one).
    fact_tokens: Tokens | None = None
    created: bool = False
    # The groups it was said in besides (audience.py): their namespaces hold it too.
    shared_in: tuple[Scope, ...] = ()


@dataclass(frozen=True, slots=True)
class MemoryRemoved:
    """A memory was deleted with its keyword row, vector and evidence links."""

    scope: Scope
    item_id: int
    shared_in: tuple[Scope, ...] = ()


@dataclass(frozen=True, slots=True)
class MemoryShared:
    """A memory kept elsewhere was said in the group ``scope``: the group's
    memory namespaces hold it from now on (audience.py)."""

    scope: Scope
    item_id: int
    fact_tokens: Tokens
    created: bool = False  # a new memory: it has no vector yet


@dataclass(frozen=True, slots=True)
class MemoryUnshared:
    """The group ``scope`` may no longer recall a memory (it became a secret)."""

    scope: Scope
    item_id: int


@dataclass(frozen=True, slots=True)
class MemoriesReindexed:
    """Every memory's keyword row was rebuilt from ``ltm_items``."""


@dataclass(frozen=True, slots=True)
class TurnsRecorded:
    """Turns the reader may show were recorded: (rowid, keyword terms, their
    context joined: storing.terms' keys, or tokens)."""

    scope: Scope
    turns: tuple[tuple[int, Tokens | np.ndarray], ...]


@dataclass(frozen=True, slots=True)
class TurnsWithheld:
    """Turns are never to be shown again; their vectors were deleted."""

    scope: Scope
    rowids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TurnsDeleted:
    """Old turns no memory cited were deleted, with their terms and vectors
    (storing.archive: retention_days.turns, the compact action)."""

    scope: Scope
    rowids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ScopeForgotten:
    """Every turn of the scope was withheld and its vectors deleted."""

    scope: Scope


@dataclass(frozen=True, slots=True)
class VectorsStored:
    """Rows of one scope got vectors of one model (replacing any they had)."""

    corpus: Corpus
    scope: Scope
    model: str
    rowids: tuple[int, ...]
    vectors: tuple[np.ndarray, ...]  # per row: one vector for a memory, one per sentence for a turn


Change = (
    MemoryWritten | MemoryRemoved | MemoryShared | MemoryUnshared | MemoriesReindexed | TurnsRecorded
    | TurnsWithheld | TurnsDeleted | ScopeForgotten | VectorsStored
)

_NOTED = "ltm_changes"  # the session.info key


class DerivedIndex(Protocol):
    """A cache derived from SQLite that follows every committed write; what it
    cannot apply it drops. Declared here so that storing/ needs nothing above it."""

    async def follow(self, changes: Sequence[Change]) -> None: ...


def note(session: AsyncSession, *changes: Change) -> None:
    """Record what this write changed; handed on only if it commits."""
    session.info.setdefault(_NOTED, []).extend(changes)


def taken(session: AsyncSession) -> list[Change]:
    """The changes noted on ``session``, removed from it."""
    noted: list[Change] = session.info.pop(_NOTED, [])
    return noted
