"""The vector rows: every embedding lives in SQLite, in ``ltm_item_vectors``
(a memory's one vector) or ``ltm_event_vectors`` (a turn's vectors, one per
sentence or passage, in one blob). FAISS namespaces (indexes.vectors) are caches of
these rows, one per scope, corpus and model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, Connection, Integer, and_, column, delete, func, insert, or_, select, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import KeyedColumnElement

from ..audience import SAID_IN_SQL
from ..enums import Corpus, Visibility
from ..scope import Scope
from .changes import VectorsStored, note
from .tables import EventVector, MemoryEvent, MemoryVector

VectorTable = type[MemoryVector] | type[EventVector]
Fingerprint = tuple[int, int, str]


@dataclass(frozen=True)
class VectorRows:
    """Where a corpus keeps its vectors."""

    table: VectorTable
    key: str  # the column holding the row id of the memory or turn

    def column(self, name: str) -> KeyedColumnElement[Any]:
        return self.table.__table__.c[name]

    @property
    def key_column(self) -> KeyedColumnElement[Any]:
        return self.column(self.key)

    def whole(self) -> ColumnElement[bool]:
        """SQL: the row holds whole vectors of its dimension. Any other (a
        torn or foreign write) is left out of the namespaces, and the fill
        embeds its row again, as if it had no vector."""
        dim, size = self.column("dim"), func.length(self.column("vector"))
        return and_(dim > 0, size > 0, size % (4 * dim) == 0)

    def of_scope(self, scope: Scope, model: str) -> tuple[ColumnElement[bool], ...]:
        """The rows of the scope's namespace: for memories, those the scope
        may recall (audience.py), wherever they are kept."""
        own = and_(self.column("scope") == scope.kind, self.column("scope_id") == scope.id)
        if self.table is MemoryVector:
            said_here = text(SAID_IN_SQL).bindparams(kind=scope.kind, id=scope.id).columns(column("id", Integer))
            return or_(own, self.key_column.in_(said_here)), self.column("model") == model
        return own, self.column("model") == model


VECTOR_ROWS: dict[Corpus, VectorRows] = {
    Corpus.MEMORIES: VectorRows(MemoryVector, "item_id"),
    Corpus.TURNS: VectorRows(EventVector, "event_rowid"),
}


def normalise(vectors: np.ndarray) -> np.ndarray:
    """float32 rows of unit length (a zero row stays zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


def fingerprint(conn: Connection, scope: Scope, model: str, corpus: Corpus) -> Fingerprint:
    """How many vectors the scope's whole rows hold, the sum of their row
    ids and the newest update: a namespace file is trusted only when its
    fingerprint is this."""
    rows = VECTOR_ROWS[corpus]
    vector, dim = rows.column("vector"), rows.column("dim")
    row = conn.execute(
        select(func.coalesce(func.sum(func.length(vector) / (4 * dim)), 0),
               func.coalesce(func.sum(rows.key_column), 0), func.max(rows.column("updated_at")))
        .where(*rows.of_scope(scope, model), rows.whole())
    ).one()
    return (int(row[0]), int(row[1]), str(row[2]))


async def store_vectors(session: AsyncSession, corpus: Corpus, rows: Sequence[tuple[int, Scope]], model: str,
                        vectors: Sequence[np.ndarray], now: datetime) -> None:
    """Save the vectors of ``rows`` (row id, scope) in the caller's
    transaction, replacing any they had; per row an array of its vectors
    (one for a memory, one per sentence for a turn), stored normalised."""
    if not rows:
        return
    vectors = [normalise(v) for v in vectors]
    where = VECTOR_ROWS[corpus]
    # One statement for the batch: a merge per row cost a SELECT each.
    values: list[dict[str, Any]] = [
        {where.key: rowid, "scope": scope.kind, "scope_id": scope.id, "model": model,
         "dim": int(vecs.shape[1]), "vector": vecs.tobytes(), "updated_at": now}
        for (rowid, scope), vecs in zip(rows, vectors, strict=True)
    ]
    await session.execute(insert(where.table).prefix_with("OR REPLACE"), values)
    by_scope: dict[Scope, list[int]] = {}
    for n, (_, scope) in enumerate(rows):
        by_scope.setdefault(scope, []).append(n)
    if corpus == Corpus.MEMORIES:  # the groups a memory was said in hold its vector too (audience.py)
        at = {rowid: n for n, (rowid, _) in enumerate(rows)}
        said = await session.execute(text(
            "SELECT c.scope, c.scope_id, c.item_id FROM ltm_item_contexts c JOIN ltm_items i ON i.id = c.item_id "
            f"WHERE i.visibility = '{Visibility.SHARED}' AND c.item_id IN (SELECT value FROM json_each(:ids))"),
            {"ids": json.dumps(list(at))})
        for kind, scope_id, rowid in said:
            by_scope.setdefault(Scope(kind, scope_id), []).append(at[rowid])
    note(session, *(VectorsStored(corpus, scope, model, tuple(rows[n][0] for n in picked),
                                  tuple(vectors[n] for n in picked)) for scope, picked in by_scope.items()))


async def delete_memory_vector(session: AsyncSession, item_id: int) -> None:
    await session.execute(delete(MemoryVector).where(MemoryVector.item_id == item_id))


async def delete_turn_vectors(session: AsyncSession, rowids: Sequence[int]) -> None:
    await session.execute(delete(EventVector).where(EventVector.event_rowid.in_(list(rowids))))


async def delete_scope_turn_vectors(session: AsyncSession, scope: Scope) -> None:
    of_scope = select(MemoryEvent.id).where(MemoryEvent.scope == scope.kind, MemoryEvent.scope_id == scope.id)
    await session.execute(delete(EventVector).where(EventVector.event_rowid.in_(of_scope)))


async def delete_other_models(session: AsyncSession, corpus: Corpus, rowids: Sequence[int], model: str) -> None:
    """Vectors of other models for these rows are stale once they have one
    of ``model`` (an operator switched the embedding provider)."""
    rows = VECTOR_ROWS[corpus]
    await session.execute(
        delete(rows.table).where(rows.key_column.in_(list(rowids)), rows.column("model") != model))


async def delete_long_turn_vectors(session: AsyncSession, most: int) -> int:
    """Delete the vectors of turns holding more than ``most`` (embedded
    sentence by sentence before passages, docs/decisions.md#d77): the fill
    embeds those turns again. Returns how many turns lost theirs."""
    count = func.length(EventVector.vector) / (4 * EventVector.dim)
    result = await session.execute(delete(EventVector).where(EventVector.dim > 0, count > most))
    return int(getattr(result, "rowcount", 0) or 0)
