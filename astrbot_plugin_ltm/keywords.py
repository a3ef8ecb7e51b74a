"""The reader's keyword search: BM25 over one scope's tokens, in memory.

SQLite's FTS5 tables hold the search tokens (CJK bigrams included,
text.search_tokens) of every fact and of every user's and tool's turn, and
answer the operators' searches. The reader ranks with BM25 over the same
tokens kept in memory, one namespace per scope and kind (memories, turns),
loaded lazily from those tables, least recently used first out. Two
measured reasons (bench/scale.py, 10k items and their turns in one scope,
2 cores): FTS5's bm25() walks every posting of every query term through an
auxiliary function, 4-6 ms per search, the bulk of a read, where numpy does
the same sums in 0.3 ms; and FTS5 weighs a term by how rare it is in the
whole table, all scopes together, where BM25 over one scope's rows weighs
it by that scope alone (LoCoMo, its conversations in one database: 0.781
evidence recall with FTS5's ranking, 0.800 with this one).

SQLite stays the source of truth. Every write goes through
``Database.write``; the keyword rows it adds or removes are noted on the
session (:func:`note`) and applied to loaded namespaces once the
transaction has committed, so a rolled-back write leaves nothing behind. A
namespace that is being loaded while a write commits gets the write after
loading (applying a change twice is harmless).
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from itertools import chain
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncSession

from .scope import Scope
from .tasks import Loads

# FTS5's bm25() constants, so rankings agree with the operators' search.
K1 = 1.2
B = 0.75
# Up to this many rows a search takes well under a millisecond (10k rows of
# a Zipf vocabulary: 0.3 ms) and runs on the event loop; larger namespaces
# are searched in a worker thread.
INLINE_SEARCH_MAX = 20_000
# A read waits this long for a namespace to load (a few ms for a small
# scope, 0.3 s for 10k rows, 3 s for 100k on the 2-core benchmark machine);
# past it, that read goes on without it.
COLD_WAIT = 1.0
LOADS = 2  # namespaces loading at once (see db.LOAD_THREADS)
_CHUNK = 2000  # rows a load handles between pauses (_yield_gil)
# Postings added since the last merge wait in lists until they are this
# many, or an eighth of the merged ones: merging copies the arrays of the
# terms it touches, so a fixed threshold made growth quadratic.
_PENDING_MIN = 4096
MEMORIES = "memories"
TURNS = "turns"
_CHANGES = "ltm_keyword_changes"  # the session.info key of noted changes


@dataclass(frozen=True)
class Change:
    kind: str
    scope: Scope | None  # None: every namespace of the kind (a rebuild)
    rowid: int | None  # None: the whole scope
    tokens: tuple[str, ...] | None  # None: removed


def note(session: AsyncSession, change: Change) -> None:
    """Record a keyword-index change of this transaction (see the module doc)."""
    session.info.setdefault(_CHANGES, []).append(change)


def noted(session: AsyncSession) -> list[Change]:
    return session.info.pop(_CHANGES, [])


class Namespace:
    """BM25 over one scope's rows of one kind. Rows are slots in growing
    arrays; a removed row's slot is only marked dead, and dead slots are
    dropped when they make up half of the namespace."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # searches run in threads
        self._rowids = np.zeros(64, np.int64)
        self._lengths = np.zeros(64, np.float32)
        self._alive = np.zeros(64, bool)
        self._used = 0
        self._slot: dict[int, int] = {}
        self._length_sum = 0.0
        # term -> (slots, term frequencies); postings since the last merge
        # wait in Python lists, as appending to numpy arrays copies them.
        self._postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._pending: dict[str, tuple[list[int], list[int]]] = {}
        self._pending_count = 0
        self._merged_count = 0

    @property
    def size(self) -> int:
        return len(self._slot)

    @classmethod
    def build(cls, rows: list[tuple[int, list[str]]]) -> Namespace:
        """A namespace of ``rows`` (rowid, tokens), its postings sorted out
        by numpy in one go: adding 100k rows one by one took seconds."""
        ns = cls()
        last = dict(rows)  # a rowid once, with its last tokens
        n = len(last)
        token_lists = list(last.values())
        size = max(64, n)
        ns._rowids = np.zeros(size, np.int64)
        ns._rowids[:n] = np.fromiter(last, np.int64, count=n)
        lengths = np.fromiter(map(len, token_lists), np.int64, count=n)
        ns._lengths = np.zeros(size, np.float32)
        ns._lengths[:n] = lengths
        ns._alive = np.zeros(size, bool)
        ns._alive[:n] = True
        ns._used = n
        ns._slot = {rowid: slot for slot, rowid in enumerate(last)}
        ns._length_sum = float(lengths.sum())
        # Term ids without a Python loop per token: each chunk's new terms
        # join the vocabulary, then a C-level lookup maps every token.
        term_id: dict[str, int] = {}
        parts = []
        for lo in range(0, n, _CHUNK):
            tokens = list(chain.from_iterable(token_lists[lo:lo + _CHUNK]))
            for term in dict.fromkeys(tokens):
                if term not in term_id:
                    term_id[term] = len(term_id)
            parts.append(np.fromiter(map(term_id.__getitem__, tokens), np.int64, count=len(tokens)))
            _yield_gil()
        if not term_id:
            return ns
        vocabulary = list(term_id)
        terms = np.concatenate(parts)
        slots = np.repeat(np.arange(n, dtype=np.int64), lengths)
        # Each distinct (term, slot) pair is a posting; how often it occurs
        # is the term's frequency in that row.
        keys, tfs = np.unique(terms * n + slots, return_counts=True)
        term_of, slot_of = keys // n, (keys % n).astype(np.int32)
        starts = np.flatnonzero(np.diff(term_of, prepend=-1))
        for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), len(keys)]):
            ns._postings[vocabulary[term_of[lo]]] = (slot_of[lo:hi], tfs[lo:hi].astype(np.float32))
        ns._merged_count = len(keys)
        return ns

    def add(self, rowid: int, tokens: Iterable[str]) -> None:
        self.remove(rowid)
        counts: dict[str, int] = {}
        length = 0
        for token in tokens:
            counts[token] = counts.get(token, 0) + 1
            length += 1
        if self._used == len(self._rowids):
            grown = 2 * len(self._rowids)
            self._rowids = np.resize(self._rowids, grown)
            self._lengths = np.resize(self._lengths, grown)
            self._alive = np.concatenate([self._alive, np.zeros(grown - len(self._alive), bool)])
        slot = self._used
        self._used += 1
        self._rowids[slot], self._lengths[slot], self._alive[slot] = rowid, length, True
        self._slot[rowid] = slot
        self._length_sum += length
        for term, tf in counts.items():
            slots, tfs = self._pending.setdefault(term, ([], []))
            slots.append(slot)
            tfs.append(tf)
        self._pending_count += len(counts)
        if self._pending_count > max(_PENDING_MIN, self._merged_count // 8):
            self._merge()

    def remove(self, rowid: int) -> None:
        slot = self._slot.pop(rowid, None)
        if slot is None:
            return
        self._alive[slot] = False
        self._length_sum -= float(self._lengths[slot])
        if self._used - len(self._slot) > max(1024, self._used // 2):
            self._compact()

    def _merge(self) -> None:
        for term, (slots, tfs) in self._pending.items():
            new = (np.asarray(slots, np.int32), np.asarray(tfs, np.float32))
            old = self._postings.get(term)
            self._postings[term] = new if old is None else (
                np.concatenate([old[0], new[0]]), np.concatenate([old[1], new[1]]))
        self._merged_count += self._pending_count
        self._pending.clear()
        self._pending_count = 0

    def _compact(self) -> None:
        """Drop dead slots and renumber the live ones."""
        self._merge()
        live = np.flatnonzero(self._alive[: self._used])
        renumber = np.full(self._used, -1, np.int32)
        renumber[live] = np.arange(len(live), dtype=np.int32)
        for term, (slots, tfs) in list(self._postings.items()):
            keep = self._alive[slots]
            if keep.any():
                self._postings[term] = (renumber[slots[keep]], tfs[keep])
            else:
                del self._postings[term]
        size = max(64, 2 * len(live))
        self._rowids = np.resize(self._rowids[live], size)
        self._lengths = np.resize(self._lengths[live], size)
        self._alive = np.zeros(size, bool)
        self._alive[: len(live)] = True
        self._used = len(live)
        self._slot = {int(r): n for n, r in enumerate(self._rowids[: self._used])}
        self._merged_count = sum(len(slots) for slots, _ in self._postings.values())

    def _term(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        base = self._postings.get(term)
        pending = self._pending.get(term)
        if pending is None:
            return base
        new = (np.asarray(pending[0], np.int32), np.asarray(pending[1], np.float32))
        return new if base is None else (np.concatenate([base[0], new[0]]), np.concatenate([base[1], new[1]]))

    def search(self, terms: list[str], k: int) -> list[tuple[int, float]]:
        """(rowid, bm25) of the ``k`` best rows holding any of ``terms``."""
        n = len(self._slot)
        if not n or not terms or k <= 0:
            return []
        avg = self._length_sum / n or 1.0
        scores = np.zeros(self._used, np.float32)
        norm = K1 * (1.0 - B + B * self._lengths[: self._used] / avg)
        for term in dict.fromkeys(terms):
            found = self._term(term)
            if found is None:
                continue
            slots, tfs = found
            df = int(self._alive[slots].sum())
            if not df:
                continue
            # FTS5's idf, floored the same way: a term in most rows counts
            # for (almost) nothing.
            idf = max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6)
            scores[slots] += idf * tfs * (K1 + 1.0) / (tfs + norm[slots])
        scores[~self._alive[: self._used]] = 0.0
        hit = np.flatnonzero(scores > 0)
        if len(hit) > k:
            hit = hit[np.argpartition(-scores[hit], k - 1)[:k]]
        hit = hit[np.argsort(-scores[hit], kind="stable")]
        return [(int(self._rowids[s]), float(scores[s])) for s in hit]


# A kind's rows of one scope, as (rowid, tokens): read from the FTS5 tables.
_LOAD = {
    MEMORIES: "SELECT f.rowid, f.tokens FROM ltm_items i JOIN ltm_items_fts f ON f.rowid = i.id "
              "WHERE i.scope = :kind AND i.scope_id = :id",
    # The events' index holds scoped tokens only (db.scoped_text): SQLite
    # takes the scope's prefix off.
    TURNS: "SELECT f.rowid, replace(f.scoped, :prefix, '') FROM ltm_events e "
           "JOIN ltm_events_fts f ON f.rowid = e.id WHERE e.scope = :kind AND e.scope_id = :id AND NOT e.withheld",
}


def load_namespace(conn: Connection, scope: Scope, kind: str, prefix: str) -> Namespace:
    """``prefix``: what the scope's scoped tokens start with (db.scope_prefix)."""
    result = conn.execute(text(_LOAD[kind]), {"kind": scope.kind, "id": scope.id, "prefix": prefix})
    rows: list[tuple[int, list[str]]] = []
    while batch := result.fetchmany(_CHUNK):
        rows += [(rowid, (tokens or "").split()) for rowid, tokens in batch]
        _yield_gil()
    return Namespace.build(rows)


def _yield_gil() -> None:
    # A load runs in a thread but mostly in C calls that hold the GIL: at
    # 100k rows the event loop and the reads' threads got it back only
    # between calls that each took a second. Chunks, and a pause after each.
    time.sleep(0)


Key = tuple[Scope, str]
Run = Callable[[Callable[[Connection], Namespace]], Awaitable[Namespace]]


class KeywordIndex:
    """The loaded namespaces, at most ``max_loaded`` (least recently used
    first out), and the changes committed while one was loading."""

    def __init__(self, prefix: Callable[[str, str], str], max_loaded: int = 256) -> None:
        self._prefix = prefix  # db.scope_prefix: what a scope's scoped tokens start with
        self.max_loaded = max_loaded
        self._loaded: OrderedDict[Key, Namespace] = OrderedDict()
        # Changes committed while a namespace loads; None: the load is stale
        # (its whole scope changed meanwhile) and is used once, not kept.
        self._loading: dict[Key, list[Change] | None] = {}
        # Guards the maps: apply() runs in a thread after each commit,
        # searches and the end of a load on the event loop.
        self._lock = threading.Lock()
        self._loads: Loads[Key, Namespace] = Loads("keyword namespace")
        self._load_slots: asyncio.Semaphore | None = None  # made on the loop that uses it

    async def loads_settled(self) -> None:
        """Wait for the namespace loads a read left running."""
        await self._loads.settled()

    async def search(self, run: Run, scopes: list[Scope], kind: str, terms: list[str],
                     k: int) -> list[tuple[int, float]]:
        """(rowid, bm25) of the best ``k`` rows of ``kind`` in ``scopes``;
        ``run`` runs a function on a database connection in a thread
        (Database.load). A namespace that takes longer than COLD_WAIT to
        load adds nothing to this search (it goes on loading for the next)."""
        if not terms or k <= 0:
            return []
        hits: list[tuple[int, float]] = []
        for ns in await asyncio.gather(*(self._namespace(run, scope, kind) for scope in scopes)):
            if ns is None:
                continue
            if ns.size <= INLINE_SEARCH_MAX:
                hits += _locked_search(ns, terms, k)
            else:
                hits += await asyncio.to_thread(_locked_search, ns, terms, k)
        hits.sort(key=lambda hit: -hit[1])
        return hits[:k]

    async def _namespace(self, run: Run, scope: Scope, kind: str) -> Namespace | None:
        key = (scope, kind)
        with self._lock:
            ns = self._loaded.get(key)
            if ns is not None:
                self._loaded.move_to_end(key)
                return ns
        try:
            return await self._loads.get(key, lambda: self._load(run, scope, kind), COLD_WAIT)
        except Exception:  # logged by Loads; the read goes on without it
            return None

    async def _load(self, run: Run, scope: Scope, kind: str) -> Namespace:
        key = (scope, kind)
        with self._lock:
            self._loading[key] = []
        prefix = self._prefix(scope.kind, scope.id)
        if self._load_slots is None:
            self._load_slots = asyncio.Semaphore(LOADS)
        try:
            async with self._load_slots:
                ns = await run(lambda conn: load_namespace(conn, scope, kind, prefix))
        except BaseException:
            with self._lock:
                self._loading.pop(key, None)
            raise
        with self._lock:
            changes = self._loading.pop(key, None)
            if changes is None:
                return ns  # its scope changed as a whole meanwhile: used once, not kept
            for change in changes:
                _apply(ns, change)
            self._loaded[key] = ns
            while len(self._loaded) > self.max_loaded:
                self._loaded.popitem(last=False)
        return ns

    def apply(self, changes: list[Change]) -> None:
        """Committed changes (Database.write, after the commit)."""
        if not changes:
            return
        with self._lock:
            for change in changes:
                for key in [k for k in {*self._loaded, *self._loading}
                            if k[1] == change.kind and (change.scope is None or k[0] == change.scope)]:
                    if change.rowid is None:  # the whole scope (or kind): loaded afresh
                        self._loaded.pop(key, None)
                        if key in self._loading:
                            self._loading[key] = None
                    elif key in self._loading:
                        pending = self._loading[key]
                        if pending is not None:
                            pending.append(change)
                    else:
                        ns = self._loaded[key]
                        with ns.lock:
                            _apply(ns, change)


def _locked_search(ns: Namespace, terms: list[str], k: int) -> list[tuple[int, float]]:
    with ns.lock:
        return ns.search(terms, k)


def _apply(ns: Namespace, change: Change) -> None:
    if change.tokens is None:
        ns.remove(change.rowid)
    else:
        ns.add(change.rowid, change.tokens)
