"""Vector search: one FAISS namespace per scope, ``ltm_{scope}_{scope_id}``,
holding the scope's memories and, beside them, its raw turns.

SQLite is the source of truth: every vector lives in ``ltm_item_vectors``
(memories) or ``ltm_event_vectors`` (turns), and a namespace is only a cache
of the vectors of one scope, one kind and one model.
A namespace is loaded lazily from its file under the plugin's data
directory, checked against a fingerprint of its SQLite rows (count, id sum,
newest update) and rebuilt from SQLite when the file is missing, corrupt,
stale or made by another model or dimension. At most ``max_loaded``
namespaces stay in memory, least recently used first out.

A memory has one vector; a turn has one per sentence (db.turn_passages),
stored together in its row and held in FAISS under ``rowid * stride +
sentence``, so that a turn is as near a query as its nearest sentence.

Only faiss's public API is used (IndexFlatIP in an IndexIDMap2, IndexIVFFlat
for large namespaces, read/write index); AstrBot's own vector store is not,
as its internals have changed between releases.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import faiss
import numpy as np
from sqlalchemy import Connection, and_, delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from .logs import log
from .db import SHOWN_ROLES, Database, ReadOnlyError, after_rollback, turn_passages
from .embedding import Embedder, normalise
from .models import EventVector, MemoryEvent, MemoryItem, MemoryVector, utcnow
from .scope import Scope
from .tasks import Loads
from .text import MAX_SENTENCES


def _one_omp_thread() -> None:
    # A single query gains nothing from OpenMP's threads and pays for waking
    # them: two 10k-vector searches took 3.9 ms with faiss's default threads
    # and 1.8 ms with one (2 cores). The setting is per thread, so it stays
    # in the search thread and leaves AstrBot's own use of faiss alone.
    faiss.omp_set_num_threads(1)


SEMANTIC_MATCH = 0.85
EMPTY_RECHECK_SECONDS = 30.0
# A read waits this long for a namespace to load; past it, that read goes
# on without the namespace's kind (as keyword namespaces do): from a file a
# 10k namespace loads in a fraction of a second, but a 100k turns namespace
# without a file is built and trained for 4–5 s on 2 cores, and the first
# message after a restart must not wait for it.
COLD_WAIT = 1.0


@dataclass(frozen=True)
class Kind:
    """What a namespace holds: the scope's memories or its raw turns."""

    name: str
    table: type[MemoryVector] | type[EventVector]
    key: str  # the table's column holding the row id the vectors are stored under
    suffix: str  # tells the kinds' files apart (memories keep their pre-0005 names)
    # A row's vectors are held in FAISS under rowid * stride + n: a memory
    # has one, a turn one per sentence.
    stride: int = 1

    def column(self):
        return getattr(self.table, self.key)

    def faiss_ids(self, rowid: int, count: int) -> range:
        return range(rowid * self.stride, rowid * self.stride + count)

    def all_ids(self, rowids: list[int]) -> np.ndarray:
        """Every FAISS id the rows may hold (for removal)."""
        return np.array([i for rowid in rowids for i in self.faiss_ids(rowid, self.stride)], dtype=np.int64)

    @staticmethod
    def whole(table: type[MemoryVector] | type[EventVector]):
        """SQL: the row holds whole vectors of its dimension. Any other (a
        torn or foreign write) is left out of the namespace, and the fill job
        embeds its row again, as if it had no vector."""
        size = func.length(table.vector)
        return and_(table.dim > 0, size > 0, size % (4 * table.dim) == 0)


MEMORIES = Kind("memories", MemoryVector, "item_id", "")
TURNS = Kind("turns", EventVector, "event_rowid", "#turns", stride=16)
assert MAX_SENTENCES + 1 <= TURNS.stride  # text.sentences
# A turn's sentences share its rank: a search asks FAISS for this many
# vectors per turn wanted, then keeps each turn's nearest sentence.
SENTENCES_SEARCHED = 3


@dataclass
class Namespace:
    scope: Scope
    model: str
    dim: int
    index: faiss.Index
    fingerprint: tuple = ()
    dirty: bool = False
    changes: int = 0  # adds and removals since loaded
    kind: Kind = MEMORIES

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


Key = tuple[Scope, str, Kind]  # scope, model, kind
T = TypeVar("T")


@dataclass
class VectorIndex:
    db: Database
    directory: Path | None
    max_loaded: int = 256
    clock: Callable[[], datetime] = utcnow
    _loaded: OrderedDict[Key, Namespace] = field(default_factory=OrderedDict)
    _loads: Loads[Key, Namespace | None] = field(default_factory=lambda: Loads("vector namespace"))
    # Namespaces found to have no vectors, and when: asked on every read (a
    # private chat also reads the legacy per-conversation scope), so not
    # counted in SQLite each time. store() clears an entry; the time limit
    # covers a store whose transaction had not committed when we counted.
    _empty: dict[Key, float] = field(default_factory=dict)
    _converting: dict[Key, asyncio.Task] = field(default_factory=dict)
    # Changes to a namespace while it loads: its load may have read SQLite
    # before them, so they are replayed on the loaded index. A change returns
    # False when the load must start again (the namespace was unloaded).
    _changed_while_loading: dict[Key, list[Callable[[Namespace], bool]]] = field(default_factory=dict)
    # Every search runs in one thread of its own, off the event loop (see
    # _one_omp_thread); faiss indexes are not safe to change while searched,
    # so changes and searches take turns on this lock.
    _search_thread: ThreadPoolExecutor | None = None
    _index_lock: threading.Lock = field(default_factory=threading.Lock)

    # -- files -------------------------------------------------------------

    def _paths(self, scope: Scope, kind: Kind) -> tuple[Path, Path] | None:
        if self.directory is None:
            return None
        digest = hashlib.sha1((scope.namespace + kind.suffix).encode()).hexdigest()[:20]
        return self.directory / f"{digest}.faiss", self.directory / f"{digest}.json"

    @staticmethod
    def _fingerprint(conn: Connection, scope: Scope, model: str, kind: Kind) -> tuple:
        t = kind.table
        # The count is of vectors (a row holds length / (4 * dim) of them),
        # to be compared with the file's.
        row = conn.execute(
            select(func.coalesce(func.sum(func.length(t.vector) / (4 * t.dim)), 0),
                   func.coalesce(func.sum(kind.column()), 0), func.max(t.updated_at))
            .where(t.scope == scope.kind, t.scope_id == scope.id, t.model == model, Kind.whole(t))
        ).one()
        return (int(row[0]), int(row[1]), str(row[2]))

    def _read_file(self, scope: Scope, model: str, kind: Kind, fingerprint: tuple) -> Namespace | None:
        paths = self._paths(scope, kind)
        if paths is None or not paths[0].exists() or not paths[1].exists():
            return None
        try:
            meta = json.loads(paths[1].read_text())
            if meta.get("model") != model or tuple(meta.get("fingerprint", ())) != fingerprint \
                    or meta.get("stride", 1) != kind.stride:
                log.info("ltm: vector namespace %s (%s) is stale; rebuilding", scope.namespace, kind.name)
                return None
            index = faiss.read_index(str(paths[0]))
            if index.ntotal != fingerprint[0] or index.d != meta.get("dim"):
                return None
            if _is_exact(index) and index.ntotal > EXACT_SEARCH_MAX:
                return None  # grown past exact search: rebuilt as an inverted file
            return Namespace(scope, model, index.d, index, fingerprint, kind=kind)
        except Exception as exc:  # a corrupt file is rebuilt, never trusted
            log.warning("ltm: vector namespace %s (%s) unreadable (%s); rebuilding", scope.namespace, kind.name, exc)
            return None

    def _write_file(self, ns: Namespace) -> None:
        paths = self._paths(ns.scope, ns.kind)
        if paths is None:
            return
        paths[0].parent.mkdir(parents=True, exist_ok=True)
        tmp = paths[0].with_suffix(".faiss.tmp")
        with self._index_lock:
            faiss.write_index(ns.index, str(tmp))
        tmp.replace(paths[0])
        meta = {"namespace": ns.scope.namespace, "kind": ns.kind.name, "model": ns.model, "dim": ns.dim,
                "stride": ns.kind.stride, "fingerprint": list(ns.fingerprint)}
        paths[1].write_text(json.dumps(meta))
        ns.dirty = False

    # -- loading -----------------------------------------------------------

    async def namespace(self, scope: Scope, model: str, kind: Kind = MEMORIES,
                        wait: float | None = None) -> Namespace | None:
        """The loaded namespace of ``scope`` for ``model``; None if it has no
        vectors, or if it is loading and ``wait`` seconds have passed since
        the load began (Loads.get), or if its load failed. ``wait`` None:
        wait until it is loaded, and raise if that fails."""
        key = (scope, model, kind)
        if key in self._loaded:
            self._loaded.move_to_end(key)
            return self._loaded[key]
        if time.monotonic() - self._empty.get(key, -EMPTY_RECHECK_SECONDS) < EMPTY_RECHECK_SECONDS:
            return None
        try:
            return await self._loads.get(key, lambda: self._load_namespace(key), wait)
        except Exception:
            if wait is None:
                raise
            return None  # logged by Loads; a read goes on without it

    async def _load_namespace(self, key: Key) -> Namespace | None:
        if key in self._loaded:
            return self._loaded[key]
        scope, model, kind = key
        while True:
            changes = self._changed_while_loading[key] = []
            try:
                # One hop to a loading thread: the count, then the file or a build.
                ns = await self.db.load(lambda conn: self._load(conn, scope, model, kind))
                if ns is None or await self._caught_up(ns, changes):
                    break
            finally:
                del self._changed_while_loading[key]
        if ns is None:
            if not changes:  # else vectors came while it counted none: count again next time
                self._empty[key] = time.monotonic()
            return None
        self._loaded[key] = ns
        await self._evict()
        return ns

    async def _caught_up(self, ns: Namespace, changes: list[Callable[[Namespace], bool]]) -> bool:
        """Apply the changes made while ``ns`` loaded, and those made while
        they are applied; False: load it again."""
        replayed = 0
        while replayed < len(changes):
            batch, replayed = changes[replayed:], len(changes)
            if not await self._in_search_thread(lambda: self._replay(ns, batch)):
                return False
        return True

    def _replay(self, ns: Namespace, changes: list[Callable[[Namespace], bool]]) -> bool:
        """Each change is idempotent: the load may have seen it already. The
        fingerprint no longer says which rows the index holds, so the
        namespace's file will be rebuilt rather than trusted."""
        with self._index_lock:
            if not all(change(ns) for change in changes):
                return False
        ns.fingerprint = ()
        ns.changed()
        return True

    def _load(self, conn: Connection, scope: Scope, model: str, kind: Kind) -> Namespace | None:
        fingerprint = self._fingerprint(conn, scope, model, kind)
        if fingerprint[0] == 0:
            return None
        ns = self._read_file(scope, model, kind, fingerprint)
        if ns is not None:
            return ns
        t = kind.table
        where = (t.scope == scope.kind, t.scope_id == scope.id, t.model == model)
        rows = conn.execute(select(kind.column(), t.dim, t.vector).where(*where, Kind.whole(t))).all()
        broken = conn.execute(select(func.count()).select_from(t).where(*where, ~Kind.whole(t))).scalar_one()
        if broken:
            log.warning("ltm: %d malformed vector row(s) in %s (%s) left out; they will be embedded again",
                        broken, scope.namespace, kind.name)
        dims = {dim for _, dim, _ in rows}
        dim = max(dims, key=lambda d: sum(1 for r in rows if r[1] == d))
        parts = [(rowid, np.frombuffer(blob, dtype=np.float32).reshape(-1, dim))
                 for rowid, d, blob in rows if d == dim]
        ids = np.array([i for rowid, vecs in parts for i in kind.faiss_ids(rowid, len(vecs))], dtype=np.int64)
        vecs = np.concatenate([vecs for _, vecs in parts])
        ns = Namespace(scope, model, dim, _new_index(dim, vecs, ids), fingerprint, dirty=True, kind=kind)
        self._write_file(ns)
        return ns

    async def _evict(self) -> None:
        while len(self._loaded) > self.max_loaded:
            _, ns = self._loaded.popitem(last=False)
            if ns.dirty:
                await asyncio.to_thread(self._write_file, ns)

    async def loads_settled(self) -> None:
        """Wait for the namespace loads a read left running."""
        await self._loads.settled()

    async def flush(self) -> None:
        """Write every changed namespace to its file (at shutdown) and let
        the search thread go (a later search starts another)."""
        await self.loads_settled()
        await asyncio.gather(*self._converting.values(), return_exceptions=True)
        for ns in list(self._loaded.values()):
            if ns.dirty:
                await asyncio.to_thread(self._write_file, ns)
        thread, self._search_thread = self._search_thread, None
        if thread is not None:
            await asyncio.to_thread(thread.shutdown, wait=True)

    def forget_loaded(self) -> None:
        self._loaded.clear()
        self._empty.clear()

    # -- searching ---------------------------------------------------------

    async def search(self, scopes: list[Scope], model: str, query: np.ndarray, k: int,
                     kind: Kind = MEMORIES) -> dict[int, float]:
        """Row id -> cosine similarity, best ``k`` per scope (waiting for
        every namespace: the writer's dedup must not miss one)."""
        return (await self.search_kinds(scopes, model, query, k, (kind,)))[kind]

    async def search_kinds(self, scopes: list[Scope], model: str, query: np.ndarray, k: int,
                           kinds: tuple[Kind, ...], wait: float | None = None) -> dict[Kind, dict[int, float]]:
        """Per kind, row id -> cosine similarity, best ``k`` per scope: the
        namespaces are loaded first (a namespace still loading ``wait``
        seconds after its load began is left out), then searched in one hop
        to the search thread."""
        query = normalise(query)
        keys = [(scope, model, kind) for kind in kinds for scope in scopes]
        todo: list[tuple[Kind, Namespace]] = []
        loaded = await asyncio.gather(*(self.namespace(*key, wait=wait) for key in keys))
        for key, ns in zip(keys, loaded):
            if ns is None or ns.size == 0 or ns.dim != query.shape[1]:
                continue
            if _is_exact(ns.index) and ns.size > EXACT_SEARCH_MAX and key not in self._converting:
                self._converting[key] = asyncio.create_task(self._to_inverted_file(key, ns))
            todo.append((key[2], ns))

        def run() -> dict[Kind, dict[int, float]]:
            hits: dict[Kind, dict[int, float]] = {kind: {} for kind in kinds}
            for kind, ns in todo:
                nearest = self._nearest_rows(ns, kind, query, k)
                found = hits[kind]
                for rowid, sim in list(nearest.items())[:k]:
                    found[rowid] = max(found.get(rowid, -1.0), sim)
            return hits

        if not todo:
            return {kind: {} for kind in kinds}
        return await self._in_search_thread(run)

    def _nearest_rows(self, ns: Namespace, kind: Kind, query: np.ndarray, k: int) -> dict[int, float]:
        """Row id -> similarity of its nearest vector, nearest first, for at
        least ``k`` rows when the namespace has them. A row with many
        sentences can fill a search on its own, so a search that found
        fewer than ``k`` rows is asked again, twice as wide, until it finds
        them or sees every vector it can reach."""
        wanted = k * (SENTENCES_SEARCHED if kind.stride > 1 else 1)
        while True:
            count = min(wanted, ns.size)
            with self._index_lock:
                sims, ids = ns.index.search(query, count)
            nearest: dict[int, float] = {}  # a row's nearest vector comes first
            reached = 0
            for sim, faiss_id in zip(sims[0], ids[0]):
                if faiss_id >= 0:
                    reached += 1
                    nearest.setdefault(int(faiss_id) // kind.stride, float(sim))
            # fewer ids than asked: an inverted file's probed lists are spent
            if len(nearest) >= k or count >= ns.size or reached < count:
                return nearest
            wanted *= 2

    async def _to_inverted_file(self, key: Key, ns: Namespace) -> None:
        """A namespace that grew past exact search becomes an inverted file,
        trained in a thread while the flat index goes on answering; swapped
        in only if nothing was added or removed meanwhile (else the next
        search tries again)."""
        try:
            with self._index_lock:
                vectors, ids = _contents(ns.index)
            changes = ns.changes
            index = await asyncio.to_thread(_new_index, ns.dim, vectors, ids)
            if self._loaded.get(key) is ns and ns.changes == changes:
                with self._index_lock:
                    ns.index = index
                ns.dirty = True
                log.info("ltm: vector namespace %s (%s) now searched as an inverted file",
                         key[0].namespace, key[2].name)
        except Exception as exc:  # stays exact; tried again on a later search
            log.warning("ltm: could not convert vector namespace %s (%s)", key[0].namespace, exc)
        finally:
            self._converting.pop(key, None)

    # -- keeping in step with SQLite ------------------------------------------

    async def store(self, session: AsyncSession, kind: Kind, rows: list[tuple[int, Scope]], model: str,
                    vectors: list[np.ndarray]) -> None:
        """Save the vectors of rows (id, scope) in the caller's transaction
        and update loaded namespaces (and loading ones, once loaded);
        ``vectors``: per row, an array of its vectors (one for a memory, one
        per sentence for a turn)."""
        vectors = [normalise(v) for v in vectors]
        now = self.clock()
        scopes = {scope for _, scope in rows}
        # Namespaces follow before the commit (the search thread adds, not
        # the event loop); if the transaction rolls back they are loaded
        # again from SQLite rather than keep vectors of rows that never were.
        def undo() -> None:
            for scope in scopes:
                self.unload(scope, kind)

        after_rollback(session, undo)
        for scope in scopes:
            self._empty.pop((scope, model, kind), None)
        # One statement for the batch: a merge per row cost a SELECT each.
        await session.execute(insert(kind.table).prefix_with("OR REPLACE"), [
            {kind.key: rowid, "scope": scope.kind, "scope_id": scope.id, "model": model,
             "dim": int(vecs.shape[1]), "vector": vecs.astype(np.float32).tobytes(), "updated_at": now}
            for (rowid, scope), vecs in zip(rows, vectors)
        ])
        by_namespace: dict[Key, tuple[Namespace, list[int]]] = {}
        loading: dict[Key, list[int]] = {}
        for n, (_, scope) in enumerate(rows):
            key = (scope, model, kind)
            ns = self._loaded.get(key)
            if ns is None:
                if key in self._changed_while_loading:
                    loading.setdefault(key, []).append(n)
                continue
            if ns.dim != vectors[n].shape[1]:
                self._loaded.pop(key, None)  # rebuilt from SQLite on next use
                continue
            by_namespace.setdefault(key, (ns, []))[1].append(n)
        for key, picked in loading.items():
            self._changed_while_loading[key].append(
                lambda ns, picked=picked: self._replace(ns, picked, rows, vectors, kind))
        if by_namespace:
            await self._in_search_thread(lambda: self._add(list(by_namespace.values()), rows, vectors, kind))
        await session.flush()
        for scope in scopes:
            ns = self._loaded.get((scope, model, kind))
            if ns is not None:
                ns.fingerprint = await session.run_sync(
                    lambda sync, scope=scope: self._fingerprint(sync.connection(), scope, model, kind))

    def discard(self, kind: Kind, scope: Scope, rowids: list[int]) -> None:
        """Drop vectors from loaded namespaces (their rows are deleted by SQL)."""
        if not rowids:
            return
        for (ns_scope, _, ns_kind), ns in self._loaded.items():
            if ns_scope == scope and ns_kind == kind:
                with self._index_lock:
                    ns.index.remove_ids(kind.all_ids(rowids))
                ns.changed()
                ns.fingerprint = ()  # recomputed from SQLite when next loaded from file
        for (ns_scope, _, ns_kind), changes in self._changed_while_loading.items():
            if ns_scope == scope and ns_kind == kind:
                changes.append(lambda ns: _removed(ns, kind.all_ids(rowids)))

    @staticmethod
    def _replace(ns: Namespace, picked: list[int], rows: list[tuple[int, Scope]],
                 vectors: list[np.ndarray], kind: Kind) -> bool:
        """Stored while ``ns`` loaded: the rows' vectors in place of any the
        load read (under the index lock); False, to build it again, when
        their dimension is not the namespace's."""
        if any(vectors[n].shape[1] != ns.dim for n in picked):
            return False
        _put(ns, picked, rows, vectors, kind, replace=True)
        return True

    def _add(self, by_namespace: list[tuple[Namespace, list[int]]], rows: list[tuple[int, Scope]],
             vectors: list[np.ndarray], kind: Kind) -> None:
        """Each namespace's new vectors in one call. A memory's vector replaces
        the one of its old fact; a turn's content never changes, and looking
        for an old vector costs a pass over the namespace."""
        with self._index_lock:
            for ns, picked in by_namespace:
                _put(ns, picked, rows, vectors, kind, replace=kind == MEMORIES)
                ns.changed()

    async def _in_search_thread(self, fn: Callable[[], T]) -> T:
        if self._search_thread is None:
            self._search_thread = ThreadPoolExecutor(1, thread_name_prefix="ltm-vectors", initializer=_one_omp_thread)
        return await asyncio.get_running_loop().run_in_executor(self._search_thread, fn)

    def unload(self, scope: Scope, kind: Kind) -> None:
        """Let the scope's namespaces of ``kind`` be loaded afresh from SQLite."""
        for key in [k for k in self._loaded if k[0] == scope and k[2] == kind]:
            del self._loaded[key]
        for key, changes in self._changed_while_loading.items():
            if key[0] == scope and key[2] == kind:
                changes.append(lambda ns: False)

    def withheld(self, scope: Scope, rowids: list[int] | None) -> None:
        """Turns withheld from the reader (Admin): their vectors, or with
        ``None`` all of the scope's, were deleted from SQLite."""
        if rowids is None:
            self.unload(scope, TURNS)
        else:
            self.discard(TURNS, scope, rowids)

    def discard_item(self, item: MemoryItem) -> None:
        if item.id is not None:
            self.discard(MEMORIES, Scope(item.scope, item.scope_id), [item.id])


def _put(ns: Namespace, picked: list[int], rows: list[tuple[int, Scope]], vectors: list[np.ndarray],
         kind: Kind, replace: bool) -> None:
    """Add the vectors of ``rows[n]`` for n in ``picked`` to ``ns`` (under
    the index lock), first removing any the rows had when ``replace``."""
    if replace:
        ns.index.remove_ids(kind.all_ids([rows[n][0] for n in picked]))
    ids = np.array([i for n in picked for i in kind.faiss_ids(rows[n][0], len(vectors[n]))], dtype=np.int64)
    ns.index.add_with_ids(np.concatenate([vectors[n] for n in picked]).astype(np.float32), ids)


def _removed(ns: Namespace, ids: np.ndarray) -> bool:
    ns.index.remove_ids(ids)
    return True


async def delete_vector(session: AsyncSession, item_id: int) -> None:
    await session.execute(delete(MemoryVector).where(MemoryVector.item_id == item_id))


@dataclass
class VectorHits:
    """Row id -> cosine similarity, per kind."""

    memories: dict[int, float] = field(default_factory=dict)
    turns: dict[int, float] = field(default_factory=dict)


class VectorService:
    """Embeds memories and raw turns in the background and answers vector
    queries for the reader and the writer's semantic dedup. With no
    embedder, or a failing one, everything degrades to keyword-only:
    nothing raises."""

    def __init__(self, db: Database, index: VectorIndex, embedder: Embedder | None,
                 query_timeout: float = 2.0, batch_size: int = 64,
                 embed_turns: Callable[[], bool] = lambda: True) -> None:
        self.db = db
        self.index = index
        self.embedder = embedder
        self.query_timeout = query_timeout
        self.batch_size = batch_size
        self.embed_turns = embed_turns
        self._warned = False
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        # Per model, the event id below which every turn has been looked at:
        # events are only ever appended, so filling turns never walks the
        # whole table again once it has caught up.
        self._turns_checked: dict[str, int] = {}

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

    async def query(self, scopes: list[Scope], text: str, k: int) -> VectorHits:
        """Memories and turns near ``text``: one embedding call, bounded by
        ``query_timeout``, and a search of each kind's namespaces."""
        vec = await self.embed([text], timeout=self.query_timeout)
        if vec is None or not self.model:
            return VectorHits()
        hits = await self.index.search_kinds(scopes, self.model, vec, k, (MEMORIES, TURNS), wait=COLD_WAIT)
        return VectorHits(hits[MEMORIES], hits[TURNS])

    async def find(self, session: AsyncSession, scope: Scope, fact: str) -> MemoryItem | None:
        """The writer's semantic match: an item of ``scope`` with cosine > 0.85."""
        vec = self._cache.get(fact)
        if vec is None:
            found = await self.embed([fact], timeout=self.query_timeout)
            if found is None:
                return None
            vec = found[0]
        hits = await self.index.search([scope], self.model, vec[None, :], 1, MEMORIES)
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
        """Embed a batch of memories, then of raw turns, that have no vector
        for the current model. Returns how many were embedded."""
        if self.embedder is None:
            return 0
        if not self.model:  # an AstrBot provider names its model on first use
            await self.embed(["model probe"], timeout=self.query_timeout * 4)
        model = self.model
        if not model:
            return 0
        done = await self._fill_memories(model)
        if self.embed_turns():
            done += await self._fill_turns(model)
        return done

    async def _fill_memories(self, model: str) -> int:
        async with self.db.read() as session:
            items = (
                await session.execute(
                    select(MemoryItem)
                    .outerjoin(MemoryVector, and_(MemoryVector.item_id == MemoryItem.id, MemoryVector.model == model,
                                                  Kind.whole(MemoryVector)))
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
                # Vectors of another model for these items are now stale.
                await session.execute(
                    delete(MemoryVector).where(MemoryVector.item_id.in_([i.id for i in items]), MemoryVector.model != model)
                )
                await self.index.store(session, MEMORIES, [(i.id, Scope(i.scope, i.scope_id)) for i in items],
                                       model, [vectors[n][None, :] for n in keep])
        except ReadOnlyError:
            return 0
        return len(items)

    async def _fill_turns(self, model: str) -> int:
        """Every user's and tool's turn that is not withheld is embedded, in
        every mode (a bot switched to auto then finds them), as the reader
        is said: who, then each sentence (db.turn_passages)."""
        # Filling for this model deletes the turns' vectors of any other, so
        # how far another model got no longer holds (a switch A → B → A).
        checked = self._turns_checked.get(model, 0)
        self._turns_checked = {model: checked}
        async with self.db.read() as session:
            last = int((await session.execute(select(func.coalesce(func.max(MemoryEvent.id), 0)))).scalar_one())
            events = (
                await session.execute(
                    select(MemoryEvent)
                    .outerjoin(EventVector, and_(EventVector.event_rowid == MemoryEvent.id, EventVector.model == model,
                                                 Kind.whole(EventVector)))
                    .where(MemoryEvent.id > checked, MemoryEvent.id <= last, EventVector.event_rowid.is_(None),
                           MemoryEvent.source_role.in_(SHOWN_ROLES), MemoryEvent.withheld.is_(False))
                    .order_by(MemoryEvent.id)
                    .limit(self.batch_size)
                )
            ).scalars().all()
        if not events:
            self._turns_checked[model] = last
            return 0
        passages = [turn_passages(e.source_type, e.content, e.sender_name or e.sender_id) for e in events]
        flat = await self.embed([p for ps in passages for p in ps], timeout=self.query_timeout * 10)
        if flat is None:
            return 0
        ends = np.cumsum([len(ps) for ps in passages])
        vectors = np.split(flat, ends[:-1])
        try:
            async with self.db.write() as session:
                # A turn withheld meanwhile gets no vector.
                withheld = set(
                    (await session.execute(
                        select(MemoryEvent.id).where(MemoryEvent.id.in_([e.id for e in events]), MemoryEvent.withheld)
                    )).scalars()
                )
                keep = [n for n, e in enumerate(events) if e.id not in withheld]
                await session.execute(
                    delete(EventVector).where(EventVector.event_rowid.in_([e.id for e in events]), EventVector.model != model)
                )
                if keep:
                    await self.index.store(session, TURNS, [(events[n].id, Scope(events[n].scope, events[n].scope_id))
                                                            for n in keep], model, [vectors[n] for n in keep])
        except ReadOnlyError:
            return 0
        self._turns_checked[model] = events[-1].id
        return len(keep)
