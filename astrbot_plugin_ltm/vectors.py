"""Vector search: one FAISS namespace per scope, ``ltm_{scope}_{scope_id}``.

SQLite is the source of truth: every vector lives in ``ltm_item_vectors``,
and a namespace is only a cache of the vectors of one scope for one model.
A namespace is loaded lazily from its file under the plugin's data
directory, checked against a fingerprint of its SQLite rows (count, id sum,
newest update) and rebuilt from SQLite when the file is missing, corrupt,
stale or made by another model or dimension. At most ``max_loaded``
namespaces stay in memory, least recently used first out.

Only faiss's public API is used (IndexFlatIP in an IndexIDMap2, IndexIVFFlat
for large namespaces, read/write index); AstrBot's own vector store is not,
as its internals have changed between releases.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import faiss
import numpy as np
from sqlalchemy import and_, delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from .logs import log
from .db import Database, ReadOnlyError
from .embedding import Embedder, normalise
from .models import MemoryItem, MemoryVector, utcnow
from .scope import Scope


# Below this many vectors a search takes well under a millisecond and is
# run inline; larger namespaces are searched in a worker thread.
INLINE_SEARCH_MAX = 4096
SEMANTIC_MATCH = 0.85
EMPTY_RECHECK_SECONDS = 30.0


@dataclass
class Namespace:
    scope: Scope
    model: str
    dim: int
    index: faiss.Index
    fingerprint: tuple = ()
    dirty: bool = False
    changes: int = 0  # adds and removals since loaded

    def changed(self) -> None:
        self.dirty = True
        self.changes += 1

    @property
    def size(self) -> int:
        return self.index.ntotal


# Up to this many vectors a namespace is searched exactly (flat). Beyond it
# an exact search reads every vector on every query (100k × 384 floats is
# 150 MB, ~10 ms), so the namespace is an inverted file: sqrt(n) clusters,
# NPROBE of them searched per query (about 5% of the vectors at 100k).
EXACT_SEARCH_MAX = 20_000
NPROBE = 16
TRAINING_PER_CLUSTER = 40  # faiss warns below 39


def _is_exact(index: faiss.Index) -> bool:
    return not isinstance(index, faiss.IndexIVF)


def _contents(index: faiss.Index) -> tuple[np.ndarray, np.ndarray]:
    """A copy of a flat namespace's vectors and ids."""
    flat = faiss.downcast_index(index.index)
    vectors = faiss.rev_swig_ptr(flat.get_xb(), flat.ntotal * flat.d).reshape(flat.ntotal, flat.d).copy()
    return vectors, faiss.vector_to_array(index.id_map).copy()


def _new_index(dim: int, vectors: np.ndarray, ids: np.ndarray) -> faiss.Index:
    """An index holding ``vectors`` under ``ids``: flat while small, an
    inverted file trained on a sample of them when large."""
    n = len(ids)
    if n <= EXACT_SEARCH_MAX:
        index: faiss.Index = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
    else:
        clusters = int(np.sqrt(n))
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, clusters, faiss.METRIC_INNER_PRODUCT)
        sample = np.random.default_rng(0).choice(n, min(n, clusters * TRAINING_PER_CLUSTER), replace=False)
        index.train(vectors[sample])
        index.nprobe = NPROBE
    index.add_with_ids(vectors, ids)
    return index


@dataclass
class VectorIndex:
    db: Database
    directory: Path | None
    max_loaded: int = 256
    clock: Callable[[], datetime] = utcnow
    _loaded: OrderedDict[tuple[Scope, str], Namespace] = field(default_factory=OrderedDict)
    _locks: dict[tuple[Scope, str], asyncio.Lock] = field(default_factory=dict)
    # Namespaces found to have no vectors, and when: asked on every read (a
    # private chat also reads the legacy per-conversation scope), so not
    # counted in SQLite each time. store() clears an entry; the time limit
    # covers a store whose transaction had not committed when we counted.
    _empty: dict[tuple[Scope, str], float] = field(default_factory=dict)
    _converting: dict[tuple[Scope, str], asyncio.Task] = field(default_factory=dict)

    # -- files -------------------------------------------------------------

    def _paths(self, scope: Scope) -> tuple[Path, Path] | None:
        if self.directory is None:
            return None
        digest = hashlib.sha1(scope.namespace.encode()).hexdigest()[:20]
        return self.directory / f"{digest}.faiss", self.directory / f"{digest}.json"

    @staticmethod
    async def _fingerprint(session: AsyncSession, scope: Scope, model: str) -> tuple:
        row = (
            await session.execute(
                select(func.count(), func.coalesce(func.sum(MemoryVector.item_id), 0), func.max(MemoryVector.updated_at))
                .where(MemoryVector.scope == scope.kind, MemoryVector.scope_id == scope.id, MemoryVector.model == model)
            )
        ).one()
        return (int(row[0]), int(row[1]), str(row[2]))

    def _read_file(self, scope: Scope, model: str, fingerprint: tuple) -> Namespace | None:
        paths = self._paths(scope)
        if paths is None or not paths[0].exists() or not paths[1].exists():
            return None
        try:
            meta = json.loads(paths[1].read_text())
            if meta.get("model") != model or tuple(meta.get("fingerprint", ())) != fingerprint:
                log.info("ltm: vector namespace %s is stale; rebuilding", scope.namespace)
                return None
            index = faiss.read_index(str(paths[0]))
            if index.ntotal != fingerprint[0] or index.d != meta.get("dim"):
                return None
            if _is_exact(index) and index.ntotal > EXACT_SEARCH_MAX:
                return None  # grown past exact search: rebuilt as an inverted file
            return Namespace(scope, model, index.d, index, fingerprint)
        except Exception as exc:  # a corrupt file is rebuilt, never trusted
            log.warning("ltm: vector namespace %s unreadable (%s); rebuilding", scope.namespace, exc)
            return None

    def _write_file(self, ns: Namespace) -> None:
        paths = self._paths(ns.scope)
        if paths is None:
            return
        paths[0].parent.mkdir(parents=True, exist_ok=True)
        tmp = paths[0].with_suffix(".faiss.tmp")
        faiss.write_index(ns.index, str(tmp))
        tmp.replace(paths[0])
        meta = {"namespace": ns.scope.namespace, "model": ns.model, "dim": ns.dim,
                "fingerprint": list(ns.fingerprint)}
        paths[1].write_text(json.dumps(meta))
        ns.dirty = False

    # -- loading -----------------------------------------------------------

    async def namespace(self, scope: Scope, model: str) -> Namespace | None:
        """The loaded namespace of ``scope`` for ``model``; None if it has no vectors."""
        key = (scope, model)
        if key in self._loaded:
            self._loaded.move_to_end(key)
            return self._loaded[key]
        if time.monotonic() - self._empty.get(key, -EMPTY_RECHECK_SECONDS) < EMPTY_RECHECK_SECONDS:
            return None
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key in self._loaded:
                return self._loaded[key]
            async with self.db.read() as session:
                fingerprint = await self._fingerprint(session, scope, model)
                if fingerprint[0] == 0:
                    self._empty[key] = time.monotonic()
                    return None
                ns = await asyncio.to_thread(self._read_file, scope, model, fingerprint)
                if ns is None:
                    ns = await self._build(session, scope, model, fingerprint)
            self._loaded[key] = ns
            await self._evict()
            return ns

    async def _build(self, session: AsyncSession, scope: Scope, model: str, fingerprint: tuple) -> Namespace:
        rows = (
            await session.execute(
                select(MemoryVector.item_id, MemoryVector.dim, MemoryVector.vector).where(
                    MemoryVector.scope == scope.kind, MemoryVector.scope_id == scope.id, MemoryVector.model == model
                )
            )
        ).all()
        dims = {dim for _, dim, _ in rows}
        dim = max(dims, key=lambda d: sum(1 for r in rows if r[1] == d))
        ids = np.array([r[0] for r in rows if r[1] == dim], dtype=np.int64)
        vecs = np.stack([np.frombuffer(r[2], dtype=np.float32) for r in rows if r[1] == dim])

        index = await asyncio.to_thread(_new_index, dim, vecs, ids)
        ns = Namespace(scope, model, dim, index, fingerprint, dirty=True)
        await asyncio.to_thread(self._write_file, ns)
        return ns

    async def _evict(self) -> None:
        while len(self._loaded) > self.max_loaded:
            _, ns = self._loaded.popitem(last=False)
            if ns.dirty:
                await asyncio.to_thread(self._write_file, ns)

    async def flush(self) -> None:
        """Write every changed namespace to its file (at shutdown)."""
        await asyncio.gather(*self._converting.values(), return_exceptions=True)
        for ns in list(self._loaded.values()):
            if ns.dirty:
                await asyncio.to_thread(self._write_file, ns)

    def forget_loaded(self) -> None:
        self._loaded.clear()
        self._empty.clear()

    # -- searching ---------------------------------------------------------

    async def search(self, scopes: list[Scope], model: str, query: np.ndarray, k: int) -> dict[int, float]:
        """Item rowid -> cosine similarity, best ``k`` per scope."""
        query = normalise(query)
        hits: dict[int, float] = {}
        for scope in scopes:
            ns = await self.namespace(scope, model)
            if ns is None or ns.size == 0 or ns.dim != query.shape[1]:
                continue
            if _is_exact(ns.index) and ns.size > EXACT_SEARCH_MAX and (scope, model) not in self._converting:
                self._converting[(scope, model)] = asyncio.create_task(self._to_inverted_file((scope, model), ns))
            kk = min(k, ns.size)
            if ns.size <= INLINE_SEARCH_MAX:
                sims, ids = ns.index.search(query, kk)
            else:
                sims, ids = await asyncio.to_thread(ns.index.search, query, kk)
            for sim, rowid in zip(sims[0], ids[0]):
                if rowid >= 0:
                    hits[int(rowid)] = max(hits.get(int(rowid), -1.0), float(sim))
        return hits

    async def _to_inverted_file(self, key: tuple[Scope, str], ns: Namespace) -> None:
        """A namespace that grew past exact search becomes an inverted file,
        trained in a thread while the flat index goes on answering; swapped
        in only if nothing was added or removed meanwhile (else the next
        search tries again)."""
        try:
            vectors, ids = _contents(ns.index)
            changes = ns.changes
            index = await asyncio.to_thread(_new_index, ns.dim, vectors, ids)
            if self._loaded.get(key) is ns and ns.changes == changes:
                ns.index = index
                ns.dirty = True
                log.info("ltm: vector namespace %s now searched as an inverted file", key[0].namespace)
        except Exception as exc:  # stays exact; tried again on a later search
            log.warning("ltm: could not convert vector namespace %s (%s)", key[0].namespace, exc)
        finally:
            self._converting.pop(key, None)

    # -- keeping in step with SQLite ------------------------------------------

    async def store(self, session: AsyncSession, items: list[MemoryItem], model: str, vectors: np.ndarray) -> None:
        """Save vectors for items (in the caller's transaction) and update loaded namespaces."""
        vectors = normalise(vectors)
        now = self.clock()
        for item in items:
            self._empty.pop((Scope(item.scope, item.scope_id), model), None)
        for item, vec in zip(items, vectors):
            await session.merge(
                MemoryVector(item_id=item.id, scope=item.scope, scope_id=item.scope_id, model=model,
                             dim=int(vec.shape[0]), vector=vec.astype(np.float32).tobytes(), updated_at=now)
            )
        for item, vec in zip(items, vectors):
            scope = Scope(item.scope, item.scope_id)
            ns = self._loaded.get((scope, model))
            if ns is None:
                continue
            if ns.dim != vec.shape[0]:
                self._loaded.pop((scope, model), None)  # rebuilt from SQLite on next use
                continue
            ns.index.remove_ids(np.array([item.id], dtype=np.int64))
            ns.index.add_with_ids(vec[None, :].astype(np.float32), np.array([item.id], dtype=np.int64))
            ns.changed()
        await session.flush()
        for scope in {Scope(i.scope, i.scope_id) for i in items}:
            ns = self._loaded.get((scope, model))
            if ns is not None:
                ns.fingerprint = await self._fingerprint(session, scope, model)

    def discard(self, item: MemoryItem) -> None:
        """Drop an item's vector from loaded namespaces (its row is deleted by SQL)."""
        scope = Scope(item.scope, item.scope_id)
        for (ns_scope, _), ns in self._loaded.items():
            if ns_scope == scope and item.id is not None:
                ns.index.remove_ids(np.array([item.id], dtype=np.int64))
                ns.changed()
                ns.fingerprint = ()  # recomputed from SQLite when next loaded from file


async def delete_vector(session: AsyncSession, item_id: int) -> None:
    await session.execute(delete(MemoryVector).where(MemoryVector.item_id == item_id))


class VectorService:
    """Embeds items in the background and answers vector queries for the
    reader and the writer's semantic dedup. With no embedder, or a failing
    one, everything degrades to keyword-only: nothing raises."""

    def __init__(self, db: Database, index: VectorIndex, embedder: Embedder | None,
                 query_timeout: float = 2.0, batch_size: int = 64) -> None:
        self.db = db
        self.index = index
        self.embedder = embedder
        self.query_timeout = query_timeout
        self.batch_size = batch_size
        self._warned = False
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    @property
    def model(self) -> str:
        return (getattr(self.embedder, "model_id", "") or "") if self.embedder else ""

    def _unavailable(self, why: str) -> None:
        if not self._warned:
            log.warning("ltm: vector search unavailable (%s); keyword-only", why)
            self._warned = True

    async def embed(self, texts: list[str], timeout: float | None = None) -> np.ndarray | None:
        if self.embedder is None or not texts:
            return None
        try:
            vecs = await asyncio.wait_for(self.embedder.embed(texts), timeout)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._unavailable(f"{type(exc).__name__}: {exc}")
            return None
        self._warned = False
        return normalise(vecs)

    async def query(self, scopes: list[Scope], text: str, k: int) -> dict[int, float]:
        """At most one embedding call per turn, bounded by ``query_timeout``."""
        vec = await self.embed([text], timeout=self.query_timeout)
        if vec is None or not self.model:
            return {}
        return await self.index.search(scopes, self.model, vec, k)

    async def find(self, session: AsyncSession, scope: Scope, fact: str) -> MemoryItem | None:
        """The writer's semantic match: an item of ``scope`` with cosine > 0.85."""
        vec = self._cache.get(fact)
        if vec is None:
            found = await self.embed([fact], timeout=self.query_timeout)
            if found is None:
                return None
            vec = found[0]
        hits = await self.index.search([scope], self.model, vec[None, :], 1)
        best = max(hits.items(), key=lambda kv: kv[1], default=None)
        if best is None or best[1] <= SEMANTIC_MATCH:
            return None
        return await session.get(MemoryItem, best[0])

    async def prime(self, facts: list[str]) -> None:
        """Embed candidate facts before the write transaction opens, so a slow
        provider never holds the database's write lock."""
        todo = [f for f in dict.fromkeys(facts) if f not in self._cache]
        vecs = await self.embed(todo, timeout=self.query_timeout * 4)
        if vecs is None:
            return
        for fact, vec in zip(todo, vecs):
            self._cache[fact] = vec
        while len(self._cache) > 1024:
            self._cache.popitem(last=False)

    async def fill(self) -> int:
        """Embed items that have no vector for the current model. Returns how many."""
        if self.embedder is None:
            return 0
        if not self.model:  # an AstrBot provider names its model on first use
            await self.embed(["model probe"], timeout=self.query_timeout * 4)
        model = self.model
        if not model:
            return 0
        async with self.db.read() as session:
            items = (
                await session.execute(
                    select(MemoryItem)
                    .outerjoin(MemoryVector, and_(MemoryVector.item_id == MemoryItem.id, MemoryVector.model == model))
                    .where(MemoryVector.item_id.is_(None))
                    .order_by(MemoryItem.id)
                    .limit(self.batch_size)
                )
            ).scalars().all()
        if not items:
            return 0
        missing = [i.fact for i in items if i.fact not in self._cache]
        vecs = await self.embed(missing, timeout=self.query_timeout * 10) if missing else np.zeros((0, 1))
        if vecs is None:
            return 0
        fresh = dict(zip(missing, vecs))
        vectors = np.stack([self._cache.get(i.fact, fresh.get(i.fact)) for i in items])
        embedded = {i.id: i.fact for i in items}
        try:
            async with self.db.write() as session:
                # An item whose fact changed meanwhile waits for the next round.
                current = (
                    await session.execute(select(MemoryItem).where(MemoryItem.id.in_(list(embedded))))
                ).scalars().all()
                keep = [n for n, i in enumerate(items) if any(c.id == i.id and c.fact == embedded[i.id] for c in current)]
                if not keep:
                    return 0
                items = [items[n] for n in keep]
                vectors = vectors[keep]
                # Vectors of another model for these items are now stale.
                await session.execute(
                    delete(MemoryVector).where(MemoryVector.item_id.in_([i.id for i in items]), MemoryVector.model != model)
                )
                await self.index.store(session, list(items), model, vectors)
        except ReadOnlyError:
            return 0
        return len(items)
