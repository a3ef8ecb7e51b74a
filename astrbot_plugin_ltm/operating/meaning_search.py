"""The operators' search by meaning (``GET items?q=…&search=meaning``):
the memories whose embedding is nearest the query's, in any scope and any
status, through the stored vector rows (storing/vector_rows.py) — the
FAISS namespaces are the reader's, per scope, and an operator's search
across a thousand scopes would load every one of them."""

from __future__ import annotations

import numpy as np
from sqlalchemy import Connection, select

from ..enums import Status
from ..errors import AdminError
from ..i18n import msg
from ..indexes.embeddings import Embeddings
from ..storing.database import Database
from ..storing.tables import MemoryItem, MemoryVector
from ..storing.vector_rows import memory_vector, whole_memory_vector
from .queries import ItemFilter

MEANING_HITS = 200  # memories a meaning search ranks, nearest first
CHUNK = 4096  # vector rows read and scored at a time (bounded memory)


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
    """A page of the memories nearest ``text`` that pass ``f``, with their
    cosine, and how many there are (at most MEANING_HITS). A 400 when no
    embedding provider is configured, a 503 when it does not answer."""
    if embeddings.embedder is None:
        raise AdminError(msg("search.no_embeddings"))
    vector = await embeddings.embed([text], timeout=embeddings.query_timeout)
    if vector is None and embeddings.provider_missing:
        raise AdminError(msg("search.no_embeddings"))  # AstrBot has no embedding provider
    if vector is None or not embeddings.model:
        raise AdminError(msg("search.embedding_failed"), 503)
    model = embeddings.model
    hits = await db.run(lambda conn: nearest(conn, vector, model, f, MEANING_HITS))
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
