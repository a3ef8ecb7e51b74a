"""The operators' search by meaning, through the stored vector rows: a search
across a thousand scopes would load every one of the reader's FAISS namespaces.

Only memories nearer the query than unrelated texts come back, else "猫"
would answer with the whole store; what "unrelated" is depends on the model,
so the cutoff is measured on it (docs/decisions.md#d157)."""

from __future__ import annotations

import numpy as np
from sqlalchemy import Connection, select

from ..enums import Status
from ..errors import AdminError
from ..i18n import msg
from ..indexes.calibration import FLOOR_PROBES
from ..indexes.embeddings import Embeddings
from ..storing.database import Database
from ..storing.tables import MemoryItem, MemoryVector
from ..storing.vector_rows import memory_vector, whole_memory_vector
from .queries import ItemFilter

MEANING_HITS = 200  # memories a meaning search ranks, nearest first
CHUNK = 4096  # vector rows read and scored at a time (bounded memory)
# A model whose unrelated texts come this close tells nothing apart: no cutoff under it
# (calibration.MAX_FLOOR's reason).
MAX_CUTOFF = 0.95
_CUTOFFS: dict[str, float] = {}  # model -> its cutoff, measured once


def unrelated_ceiling(vectors: np.ndarray) -> float:
    """The highest cosine between two distinct rows of unrelated ``vectors``;
    1.0 when the model cannot tell them apart."""
    v = np.asarray(vectors, dtype=np.float32)
    v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    if len(v) < 2:
        return -1.0
    cosines = v @ v.T
    np.fill_diagonal(cosines, -1.0)
    ceiling = float(cosines.max())
    return -1.0 if ceiling > MAX_CUTOFF else ceiling


async def cutoff(embeddings: Embeddings) -> float:
    """The cosine a memory must pass for the current model; -1 (every memory
    ranked) while the probes cannot be embedded."""
    model = embeddings.model
    if model in _CUTOFFS:
        return _CUTOFFS[model]
    vectors = await embeddings.embed(list(FLOOR_PROBES), timeout=embeddings.query_timeout * 4)
    if vectors is None or not model:
        return -1.0
    _CUTOFFS[model] = found = unrelated_ceiling(vectors)
    return found


def nearest(conn: Connection, query: np.ndarray, model: str, f: ItemFilter, k: int) -> list[tuple[int, float]]:
    """(item rowid, cosine) of the ``k`` memories nearest ``query`` (one
    normalised row) among ``f``'s scope's vectors of ``model``, nearest first."""
    dim = query.shape[1]
    where = [MemoryVector.model == model, whole_memory_vector(), MemoryVector.dim == dim]
    if f.scope:
        where.append(MemoryVector.scope == f.scope)
    if f.scope_id:
        where.append(MemoryVector.scope_id == f.scope_id)
    result = conn.execute(select(MemoryVector.item_id, MemoryVector.vector).where(*where))
    best_ids = np.empty(0, np.int64)
    best_sims = np.empty(0, np.float32)
    q = query[0].astype(np.float32)
    while chunk := result.fetchmany(CHUNK):
        ids = np.fromiter((r[0] for r in chunk), np.int64, len(chunk))
        sims = np.stack([memory_vector(r[1], dim) for r in chunk]) @ q
        best_ids, best_sims = np.concatenate([best_ids, ids]), np.concatenate([best_sims, sims])
        if len(best_ids) > k:
            keep = np.argpartition(-best_sims, k)[:k]
            best_ids, best_sims = best_ids[keep], best_sims[keep]
    order = np.argsort(-best_sims, kind="stable")
    return [(int(best_ids[n]), float(best_sims[n])) for n in order]


async def search_by_meaning(db: Database, embeddings: Embeddings, f: ItemFilter, text: str, offset: int,
                            limit: int) -> tuple[list[tuple[MemoryItem, float]], int]:
    """A page of the memories nearest ``text`` past the cutoff, and how many.
    A 400 when no embedding provider is configured, a 503 when it does not answer."""
    if embeddings.embedder is None:
        raise AdminError(msg("search.no_embeddings"))
    vector = await embeddings.embed([text], timeout=embeddings.query_timeout)
    if vector is None and embeddings.provider_missing:
        raise AdminError(msg("search.no_embeddings"))  # AstrBot has no embedding provider
    if vector is None or not embeddings.model:
        raise AdminError(msg("search.embedding_failed"), 503)
    model = embeddings.model
    least = await cutoff(embeddings)
    hits = [(rowid, sim) for rowid, sim in await db.run(lambda conn: nearest(conn, vector, model, f, MEANING_HITS))
            if sim > least]
    statuses = tuple(Status) if f.status in (None, "pending") else (f.status or "",)
    async with db.read() as session:
        ids = [rowid for rowid, _ in hits]
        passing = set((await session.execute(select(MemoryItem.id).where(
            MemoryItem.id.in_(ids), MemoryItem.status.in_(statuses), *f.conditions(by_id=True)))).scalars())
        ranked = [(rowid, sim) for rowid, sim in hits if rowid in passing]
        window = ranked[offset:offset + limit]
        found = {i.id: i for i in (await session.execute(
            select(MemoryItem).where(MemoryItem.id.in_([rowid for rowid, _ in window])))).scalars()}
    return [(found[rowid], sim) for rowid, sim in window if rowid in found], len(ranked)
