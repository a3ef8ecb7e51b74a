"""Background compaction: merging near-duplicate memories that slipped past the
writer's dedup (design §7.4): imports, memories written before their vectors, or
under another model. Pairs merge by the writer's own rule; the other is closed as
superseded, so nothing is deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial

import numpy as np
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncSession

from ..background import BackgroundTask
from ..clock import Clock, utcnow
from ..enums import AuditAction, Status
from ..i18n import msg
from ..indexes.embeddings import SEMANTIC_MATCH
from ..logs import log
from ..scope import Scope
from ..storing.audit import audit
from ..storing.database import Database, ReadOnlyError
from ..storing.evidence import add_link, event_ids_of, links_of
from ..storing.memory_rows import contexts_of, memory_changed
from ..storing.tables import MemoryItem
from ..storing.vector_rows import memory_vector
from ..text import contradicts, token_set_similarity
from .writer import SHARED_WORDS

# Bounded work per run (docs/decisions.md#d62).
COMPACT_EVERY_SECONDS = 3600.0
SCOPES_PER_RUN = 20
ITEMS_PER_SCOPE = 1000
MERGES_PER_RUN = 100
ACTOR = "system:compaction"
# Each status compared with its own kind; a held-back memory is an operator's to decide.
COMPARED = (Status.ACTIVE, Status.SHADOW)


@dataclass(frozen=True)
class Row:
    id: int
    memory_id: str
    type: str
    status: str
    fact: str
    evidence_count: int
    confidence: float
    vector: np.ndarray


@dataclass(frozen=True)
class Merge:
    """``merged`` (a row id) folded into ``survivor``."""

    survivor: int
    merged: int
    cosine: float
    shared_words: float


def _survivor_first(a: Row, b: Row) -> tuple[Row, Row]:
    """More evidence wins, then more confidence, then the older memory."""
    return (a, b) if (a.evidence_count, a.confidence, -a.id) >= (b.evidence_count, b.confidence, -b.id) else (b, a)


def find_merges(rows: Sequence[Row], limit: int = MERGES_PER_RUN, same: float = SEMANTIC_MATCH) -> list[Merge]:
    """The pairs to merge, closest first; one merge per memory a run, so no chains."""
    if len(rows) < 2:
        return []
    vectors = np.stack([r.vector for r in rows]).astype(np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    cosines = vectors @ vectors.T
    left, right = np.nonzero(np.triu(cosines > same, k=1))
    pairs = sorted(zip(left.tolist(), right.tolist(), strict=True), key=lambda p: -float(cosines[p[0], p[1]]))
    used: set[int] = set()
    merges: list[Merge] = []
    for i, j in pairs:
        a, b = rows[i], rows[j]
        if a.id in used or b.id in used or a.type != b.type or a.status != b.status:
            continue
        shared = token_set_similarity(a.fact, b.fact)
        if shared < SHARED_WORDS or contradicts(a.fact, b.fact) or contradicts(b.fact, a.fact):
            continue
        survivor, merged = _survivor_first(a, b)
        merges.append(Merge(survivor.id, merged.id, round(float(cosines[i, j]), 4), round(shared, 4)))
        used.update((a.id, b.id))
        if len(merges) >= limit:
            break
    return merges


def next_scopes(conn: Connection, model: str, after: tuple[str, str] | None, count: int) -> list[Scope]:
    """Up to ``count`` scopes with vectors of ``model``, after ``after``, wrapping round."""
    rows = [tuple(r) for r in conn.execute(
        text("SELECT DISTINCT scope, scope_id FROM ltm_item_vectors WHERE model = :model ORDER BY scope, scope_id"),
        {"model": model})]
    if after is not None:
        later = [r for r in rows if r > after]
        rows = later + [r for r in rows if r <= after]
    return [Scope(kind, id_) for kind, id_ in rows[:count]]


def scope_rows(conn: Connection, scope: Scope, model: str, limit: int = ITEMS_PER_SCOPE) -> list[Row]:
    """A scope's compared memories that have a vector of ``model``."""
    statuses = ", ".join(f"'{s}'" for s in COMPARED)
    result = conn.execute(
        text("SELECT i.id, i.memory_id, i.type, i.status, i.fact, i.evidence_count, i.confidence, v.vector, v.dim "
             "FROM ltm_items i JOIN ltm_item_vectors v ON v.item_id = i.id AND v.model = :model "
             f"WHERE i.scope = :kind AND i.scope_id = :id AND i.status IN ({statuses}) AND NOT i.awaiting_approval "
             "ORDER BY i.updated_at DESC LIMIT :limit"),
        {"model": model, "kind": scope.kind, "id": scope.id, "limit": limit})
    return [Row(r[0], r[1], r[2], r[3], r[4], r[5], r[6], memory_vector(r[7], r[8])) for r in result
            if r[8] and len(r[7]) in (r[8], 4 * r[8])]


async def apply_merge(session: AsyncSession, merge: Merge, now: datetime) -> bool:
    """Fold one memory into another; False (nothing written) when either changed since compared."""
    survivor = await session.get(MemoryItem, merge.survivor)
    merged = await session.get(MemoryItem, merge.merged)
    if survivor is None or merged is None or survivor.status != merged.status or survivor.status not in COMPARED \
            or survivor.awaiting_approval or merged.awaiting_approval:
        return False
    # A merge must not carry one chat's words into another that may recall the survivor (audience.py).
    if survivor.visibility != merged.visibility \
            or set(await contexts_of(session, survivor)) != set(await contexts_of(session, merged)):
        return False
    have = set(await event_ids_of(session, [survivor.memory_id]))
    added: list[str] = []
    for link, _ in await links_of(session, [merged]):  # the merged memory keeps its own links, as history
        if link.event_id not in have:
            await add_link(session, survivor, link.event_id, link.extraction_method,
                           {**(link.extraction_meta or {}), "compacted_from": merged.memory_id}, now)
            have.add(link.event_id)
            added.append(link.event_id)
    survivor.evidence_count += merged.evidence_count
    survivor.confidence = max(survivor.confidence, merged.confidence)
    survivor.importance = max(survivor.importance, merged.importance)
    if merged.valid_from is not None and (survivor.valid_from is None or merged.valid_from < survivor.valid_from):
        survivor.valid_from = merged.valid_from
    survivor.updated_at = now
    before = merged.status
    merged.status, merged.superseded_by = Status.SUPERSEDED, survivor.memory_id
    merged.valid_to = merged.updated_at = now
    memory_changed(session, survivor)
    memory_changed(session, merged)
    audit(session, AuditAction.COMPACT, ACTOR, str(msg("learn.near_duplicate_merged")), item=survivor, now=now,
          merged=merged.memory_id, merged_fact=merged.fact, events=added, cosine=merge.cosine,
          shared_words=merge.shared_words, evidence_count=survivor.evidence_count)
    audit(session, AuditAction.COMPACT, ACTOR, str(msg("learn.merged_into")), item=merged, now=now,
          into=survivor.memory_id, into_fact=survivor.fact, old=before, new=Status.SUPERSEDED,
          cosine=merge.cosine, shared_words=merge.shared_words)
    return True


class Compactor:
    def __init__(self, db: Database, model: Callable[[], str | None], clock: Clock = utcnow,
                 same_fact_cosine: Callable[[], Awaitable[float]] | None = None) -> None:
        self._db = db
        self._model = model  # the current embedding model; None: no vectors, nothing to compare
        self._same = same_fact_cosine  # the model's merge threshold (the writer's, indexes.calibration)
        self._clock = clock
        self._after: tuple[str, str] | None = None  # the last scope looked at
        self.task = BackgroundTask("compaction", self._step, every=COMPACT_EVERY_SECONDS)
        self.merged = 0  # merges made since start (for the stats and tests)

    async def run_once(self) -> list[Merge]:
        """One bounded pass; the merges it made."""
        model = self._model()
        if not model or self._db.is_read_only():
            return []
        same = SEMANTIC_MATCH if self._same is None else await self._same()
        scopes = await self._db.run(lambda conn: next_scopes(conn, model, self._after, SCOPES_PER_RUN))
        done: list[Merge] = []
        for scope in scopes:
            self._after = (scope.kind, scope.id)
            rows = await self._db.run(partial(scope_rows, scope=scope, model=model))
            merges = await asyncio.to_thread(find_merges, rows, MERGES_PER_RUN - len(done), same)
            if not merges:
                continue
            async with self._db.write() as session:
                now = self._clock()
                for merge in merges:
                    if await apply_merge(session, merge, now):
                        done.append(merge)
            if len(done) >= MERGES_PER_RUN:
                break
        self.merged += len(done)
        if done:
            log.info("ltm: compaction merged %d near-duplicate memories", len(done))
        return done

    async def _step(self) -> None:
        with contextlib.suppress(ReadOnlyError):  # switched on mid-run: the next run tries again
            await self.run_once()
