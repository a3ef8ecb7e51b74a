"""The reader's vector search: FAISS namespaces per scope, corpus and model,
cached (indexes.namespaces), searched on one thread of their own, and kept
in step with committed writes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import numpy as np

from ..enums import Corpus
from ..logs import log
from ..scope import Scope
from ..storing import turns as turns_module
from ..storing.changes import (
    Change,
    MemoryRemoved,
    MemoryShared,
    MemoryUnshared,
    MemoryWritten,
    ScopeForgotten,
    TurnsDeleted,
    TurnsWithheld,
    VectorsStored,
)
from ..storing.database import Database
from ..storing.vector_rows import Fingerprint, fingerprint, normalise
from .faiss_files import (
    EXACT_SEARCH_MAX,
    STRIDE,
    NamespaceFiles,
    VectorNamespace,
    contents,
    load_namespace,
    new_index,
    one_omp_thread,
)
from .namespaces import DerivedNamespaces, Matches, MemoryBudget, NamespaceCache, Update, exactly

T = TypeVar("T")
Key = tuple[Scope, str, Corpus]  # scope, model, corpus
# A private chat also reads the legacy per-conversation scope, usually empty,
# on every read (docs/decisions.md#d29).
EMPTY_RECHECK_SECONDS = 30.0
# A turn's sentences share its rank: a search asks FAISS for this many
# vectors per turn wanted, then keeps each turn's nearest sentence.
SENTENCES_SEARCHED = 3


class VectorIndex(DerivedNamespaces[Key, VectorNamespace]):
    """The loaded vector namespaces (a DerivedIndex)."""

    def __init__(self, db: Database, directory: Path | None, max_loaded: int = 256,
                 budget: MemoryBudget | None = None) -> None:
        self.db = db
        self.files = NamespaceFiles(directory)
        self._cache: NamespaceCache[Key, VectorNamespace] = NamespaceCache(
            "vector namespace", self._load, self._locked, max_loaded,
            on_evict=self._write_changed, empty_recheck=EMPTY_RECHECK_SECONDS,
            size_of=lambda ns: ns.nbytes, budget=budget)
        # Searches and changes run on this one thread, off the event loop; faiss
        # indexes are not safe to change while searched, so both take this lock.
        self._search_thread: ThreadPoolExecutor | None = None
        self._index_lock = threading.Lock()
        self._converting: dict[Key, asyncio.Task[None]] = {}

    # -- namespaces --------------------------------------------------------------

    async def namespace(self, scope: Scope, model: str, corpus: Corpus = Corpus.MEMORIES,
                        wait: float | None = None) -> VectorNamespace | None:
        """The namespace of ``scope`` for ``model``, as NamespaceCache.get gives it."""
        return await self._cache.get((scope, model, corpus), wait)

    async def _load(self, key: Key) -> VectorNamespace | None:
        scope, model, corpus = key
        return await self.db.load(lambda conn: load_namespace(conn, self.files, scope, model, corpus))

    async def _write_changed(self, ns: VectorNamespace) -> None:
        if ns.dirty:
            await asyncio.to_thread(self.files.write, ns, self._index_lock)

    async def flush(self) -> None:
        """Write every changed namespace to its file (at shutdown) and let
        the search thread go (a later search starts another)."""
        await self.loads_settled()
        await asyncio.gather(*self._converting.values(), return_exceptions=True)
        for _, ns in self._cache.loaded():
            await self._write_changed(ns)
        thread, self._search_thread = self._search_thread, None
        if thread is not None:
            await asyncio.to_thread(thread.shutdown, wait=True)

    # -- searching ---------------------------------------------------------------

    async def search(self, scopes: list[Scope], model: str, query: np.ndarray, k: int,
                     corpus: Corpus = Corpus.MEMORIES) -> dict[int, float]:
        """Row id -> cosine similarity, best ``k`` per scope, waiting for
        every namespace (the writer's dedup must not miss one)."""
        return (await self.search_corpora(scopes, model, query, k, (corpus,)))[corpus]

    async def search_corpora(self, scopes: list[Scope], model: str, query: np.ndarray, k: int,
                             corpora: tuple[Corpus, ...], wait: float | None = None) -> dict[Corpus, dict[int, float]]:
        """Per corpus, row id -> cosine similarity, best ``k`` per scope, searched
        in one hop to the search thread."""
        query = normalise(query)
        keys = [(scope, model, corpus) for corpus in corpora for scope in scopes]
        todo: list[tuple[Corpus, VectorNamespace]] = []
        for key, ns in zip(keys, await self._cache.get_all(keys, wait), strict=True):
            if ns is None or ns.size == 0 or ns.dim != query.shape[1]:
                continue
            if ns.exact and ns.size > EXACT_SEARCH_MAX and key not in self._converting:
                self._converting[key] = asyncio.create_task(self._to_inverted_file(key, ns))
            todo.append((key[2], ns))

        def run() -> dict[Corpus, dict[int, float]]:
            hits: dict[Corpus, dict[int, float]] = {corpus: {} for corpus in corpora}
            for corpus, ns in todo:
                found = hits[corpus]
                for rowid, sim in list(self._nearest_rows(ns, query, k).items())[:k]:
                    found[rowid] = max(found.get(rowid, -1.0), sim)
            return hits

        if not todo:
            return {corpus: {} for corpus in corpora}
        return await self._in_search_thread(run)

    def _nearest_rows(self, ns: VectorNamespace, query: np.ndarray, k: int) -> dict[int, float]:
        """Row id -> similarity of its nearest vector, for at least ``k`` rows.
        A row of many sentences can fill a search alone, so it is asked again,
        twice as wide, until it finds them or sees every vector."""
        stride = STRIDE[ns.corpus]
        wanted = k * (SENTENCES_SEARCHED if stride > 1 else 1)
        while True:
            count = min(wanted, ns.size)
            with self._index_lock:
                sims, ids = ns.index.search(query, count)
            nearest: dict[int, float] = {}  # a row's nearest vector comes first
            reached = 0
            for sim, faiss_id in zip(sims[0], ids[0], strict=True):
                if faiss_id >= 0:
                    reached += 1
                    nearest.setdefault(int(faiss_id) // stride, float(sim))
            # fewer ids than asked: an inverted file's probed lists are spent
            if len(nearest) >= k or count >= ns.size or reached < count:
                return nearest
            wanted *= 2

    async def _to_inverted_file(self, key: Key, ns: VectorNamespace) -> None:
        """Past exact search, an inverted file trained in a thread while the flat
        index answers; swapped in only if nothing changed meanwhile."""
        try:
            with self._index_lock:
                vectors, ids = contents(ns.index)
            changes = ns.changes
            index = await asyncio.to_thread(new_index, ns.dim, vectors, ids)
            if self._cache.peek(key) is ns and ns.changes == changes:
                with self._index_lock:
                    ns.use(index)
                ns.dirty = True
                log.info("ltm: vector namespace %s (%s) now searched as an inverted file",
                         key[0].namespace, key[2])
        except Exception as exc:  # stays exact; tried again on a later search
            log.warning("ltm: could not convert vector namespace %s (%s)", key[0].namespace, exc)
        finally:
            self._converting.pop(key, None)

    async def _fingerprint(self, key: Key) -> Fingerprint:
        """What SQLite holds of a namespace now (the write lock is held while
        indexes follow, so no other write lands meanwhile)."""
        scope, model, corpus = key
        return await self.db.run(lambda conn: fingerprint(conn, scope, model, corpus))

    async def _in_search_thread(self, fn: Callable[[], T]) -> T:
        if self._search_thread is None:
            self._search_thread = ThreadPoolExecutor(1, thread_name_prefix="ltm-vectors", initializer=one_omp_thread)
        return await asyncio.get_running_loop().run_in_executor(self._search_thread, fn)

    async def _locked(self, fn: Callable[[], list[bool]]) -> list[bool]:
        def run() -> list[bool]:
            with self._index_lock:
                return fn()

        return await self._in_search_thread(run)

    # -- following writes -------------------------------------------------------------

    async def follow(self, changes: Sequence[Change]) -> None:
        updates: list[tuple[Matches[Key], Update[VectorNamespace]]] = []

        def remove(scope: Scope, corpus: Corpus, rowids: Sequence[int]) -> None:
            last = updates[-1][1] if updates else None
            if isinstance(last, _Removal) and last.scope == scope and last.corpus == corpus:
                last.rowids += rowids  # one pass over a flat index for a run of removals
            else:
                updates.append((_of(scope, corpus), _Removal(scope, corpus, list(rowids))))

        for change in changes:
            match change:
                case VectorsStored(corpus=corpus, scope=scope, model=model, rowids=rowids, vectors=vectors):
                    key = (scope, model, corpus)
                    # A memory's fingerprint is read from SQLite (its newest update); a turn's follows
                    # from the rows added (turns never change): no statement over a large scope per write.
                    stored = await self._fingerprint(key) if corpus == Corpus.MEMORIES \
                        and self._cache.peek(key) is not None else None
                    updates.append((exactly(key), _storing(corpus, rowids, vectors, stored)))
                case MemoryWritten(scope=scope, item_id=rowid, fact_tokens=tokens, created=False,
                                   shared_in=shared_in) if tokens is not None:
                    for each in (scope, *shared_in):
                        remove(each, Corpus.MEMORIES, [rowid])  # the old fact's vector
                case MemoryRemoved(scope=scope, item_id=rowid, shared_in=shared_in):
                    for each in (scope, *shared_in):
                        remove(each, Corpus.MEMORIES, [rowid])
                case MemoryUnshared(scope=scope, item_id=rowid):
                    remove(scope, Corpus.MEMORIES, [rowid])
                case MemoryShared(scope=scope, created=False):
                    # Rare (a member repeats a fact in another group): the
                    # group's namespaces load again, the vector with them.
                    self._cache.invalidate(_of(scope, Corpus.MEMORIES))
                case TurnsWithheld(scope=scope, rowids=rowids) | TurnsDeleted(scope=scope, rowids=rowids):
                    remove(scope, Corpus.TURNS, rowids)
                case ScopeForgotten(scope=scope):
                    self._cache.invalidate(_of(scope, Corpus.TURNS))
        await self._cache.update(updates)


def _of(scope: Scope, corpus: Corpus) -> Matches[Key]:
    """The scope's namespaces of ``corpus``, whatever their model."""
    return lambda key: key[0] == scope and key[2] == corpus


class _Removal:
    """Vectors deleted by SQL leave the namespaces too."""

    def __init__(self, scope: Scope, corpus: Corpus, rowids: list[int]) -> None:
        self.scope, self.corpus, self.rowids = scope, corpus, rowids

    def __call__(self, ns: VectorNamespace, replayed: bool) -> bool:
        ns.remove(self.rowids)
        ns.fingerprint = ()  # recomputed from SQLite when next loaded from its file
        return True


def _storing(corpus: Corpus, rowids: tuple[int, ...], vectors: tuple[np.ndarray, ...],
             stored: Fingerprint | None) -> Update[VectorNamespace]:
    def apply(ns: VectorNamespace, replayed: bool) -> bool:
        if any(v.shape[1] != ns.dim for v in vectors):
            return False  # another dimension: rebuilt from SQLite on next use
        # A memory's vector replaces its old fact's; a turn's content never
        # changes, unless a load may already have read it.
        before = ns.fingerprint
        ns.put(list(rowids), list(vectors), replace=corpus == Corpus.MEMORIES or replayed)
        if corpus == Corpus.TURNS:  # a scope's newest turns only: the oldest go, a quarter of the window at a time
            ns.added_turns += len(rowids)
            if ns.added_turns >= turns_module.TURNS_HELD // 4:
                ns.added_turns = 0
                if ns.trim_oldest(turns_module.TURNS_HELD):
                    return True  # the fingerprint says nothing now (trim_oldest)
        # Replayed after a load, the fingerprint no longer says which rows
        # the index holds: its file is rebuilt rather than trusted.
        if replayed:
            ns.fingerprint = ()
        elif corpus == Corpus.MEMORIES:
            ns.fingerprint = () if stored is None else stored
        elif before:
            count, total, last = before
            ns.fingerprint = (count + sum(len(v) for v in vectors), total + sum(rowids),
                              str(max([*([int(last)] if last.isdigit() else []), *rowids])))
        return True

    return apply
