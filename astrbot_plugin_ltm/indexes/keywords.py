"""The reader's keyword search: BM25 per scope and corpus, in memory.

A namespace (indexes.bm25) holds one scope's memories or turns, loaded from
their keyword rows (storing.keyword_rows) on first use and kept in step
with committed writes. FTS5 stays the source of truth and answers the
operators' search; BM25 in numpy answers the reader, faster and weighing a
term by the scope's own rows (docs/decisions.md#d09).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence

from sqlalchemy import Connection, text

from ..audience import MEMBERS_SQL
from ..enums import Corpus
from ..scope import Scope
from ..storing.changes import (
    Change,
    MemoriesReindexed,
    MemoryRemoved,
    MemoryShared,
    MemoryUnshared,
    MemoryWritten,
    ScopeForgotten,
    TurnsRecorded,
    TurnsWithheld,
)
from ..storing.database import Database
from ..storing.keyword_rows import scope_prefix
from ..storing.turns import MAX_PASSAGES, PASSAGE_BREAK
from .bm25 import CHUNK, KeywordNamespace
from .namespaces import COLD_WAIT, Matches, MemoryBudget, NamespaceCache, Update

# Up to this many rows a search takes well under a millisecond and runs on
# the event loop; larger namespaces are searched in a thread (docs/decisions.md#d21).
INLINE_SEARCH_MAX = 20_000
LOADS = 2  # namespaces loading at once: vector loads never queue behind them
MAX_LOADED = 256

Key = tuple[Scope, Corpus]
# A turn's keyword row holds its passages (storing.turns.passages). With
# PASSAGE_DOCUMENTS each is a document of its own in the namespace, under
# rowid * PASSAGE_STRIDE + n, and a search ranks turns by their best
# passage; without, the turn is one document, as before passages. One
# document measured better on LongMemEval (0.861 against 0.667: a
# question's words are spread over a long turn), so it is the default
# (docs/decisions.md#d77).
PASSAGE_DOCUMENTS = False
PASSAGE_STRIDE = 8
assert PASSAGE_STRIDE >= MAX_PASSAGES

# A corpus's rows of one scope, as (rowid, tokens), from the keyword rows:
# the memories the scope may recall (audience.py), the turns said in it.
# The turns' rows hold scoped tokens only: SQLite takes the prefix off.
_ROWS = {
    Corpus.MEMORIES: f"SELECT f.rowid, f.tokens FROM ltm_items_fts f WHERE f.rowid IN ({MEMBERS_SQL})",
    Corpus.TURNS: "SELECT f.rowid, replace(f.scoped, :prefix, '') FROM ltm_events e "
                  "JOIN ltm_events_fts f ON f.rowid = e.id "
                  "WHERE e.scope = :kind AND e.scope_id = :id AND NOT e.withheld",
}


def passage_rows(rowid: int, tokens: Sequence[str]) -> Iterator[tuple[int, list[str]]]:
    """A turn's keyword tokens as its documents: the whole turn, or with
    PASSAGE_DOCUMENTS its passages (split at PASSAGE_BREAK; past
    PASSAGE_STRIDE, the rest joins the last)."""
    tokens = list(tokens)
    if not PASSAGE_DOCUMENTS:
        yield rowid * PASSAGE_STRIDE, [t for t in tokens if t != PASSAGE_BREAK]
        return
    start = 0
    for n in range(PASSAGE_STRIDE - 1):
        try:
            end = tokens.index(PASSAGE_BREAK, start)
        except ValueError:
            break
        yield rowid * PASSAGE_STRIDE + n, tokens[start:end]
        start = end + 1
    else:
        n = PASSAGE_STRIDE - 1
    yield rowid * PASSAGE_STRIDE + n, [t for t in tokens[start:] if t != PASSAGE_BREAK]


def best_turns(hits: list[tuple[int, float]], k: int) -> list[tuple[int, float]]:
    """(turn rowid, its best passage's score) of passage hits, best first."""
    best: dict[int, float] = {}
    for passage, score in hits:  # best first: a turn's first hit is its best
        best.setdefault(passage // PASSAGE_STRIDE, score)
    return list(best.items())[:k]


def load_namespace(conn: Connection, scope: Scope, corpus: Corpus) -> KeywordNamespace:
    """A scope's namespace of ``corpus``, built from its keyword rows as
    they are read (a large scope's rows are never all held at once)."""
    result = conn.execute(text(_ROWS[corpus]),
                          {"kind": scope.kind, "id": scope.id, "prefix": scope_prefix(scope.kind, scope.id)})

    def rows() -> Iterator[tuple[int, list[str]]]:
        while batch := result.fetchmany(CHUNK):
            for rowid, tokens in batch:
                if corpus == Corpus.TURNS:
                    yield from passage_rows(rowid, (tokens or "").split())
                else:
                    yield rowid, (tokens or "").split()

    return KeywordNamespace.build(rows())


class KeywordIndex:
    """The loaded keyword namespaces (a DerivedIndex)."""

    def __init__(self, db: Database, max_loaded: int = MAX_LOADED, budget: MemoryBudget | None = None) -> None:
        self._db = db
        self._cache: NamespaceCache[Key, KeywordNamespace] = NamespaceCache(
            "keyword namespace", self._load, _in_thread, max_loaded,
            size_of=lambda ns: ns.nbytes, budget=budget)
        self._load_slots: asyncio.Semaphore | None = None  # made on the loop that uses it

    async def search(self, scopes: list[Scope], corpus: Corpus, terms: list[str],
                     k: int) -> list[tuple[int, float]]:
        """(rowid, bm25) of the best ``k`` rows of ``corpus`` in ``scopes``.
        A namespace still loading after COLD_WAIT adds nothing to this
        search (it goes on loading for the next)."""
        if not terms or k <= 0:
            return []
        hits: list[tuple[int, float]] = []
        found = await self._cache.get_all([(scope, corpus) for scope in scopes], COLD_WAIT)
        for ns in found:
            if ns is None:
                continue
            # Enough passages for k turns however many passages each has.
            wanted = k * MAX_PASSAGES if corpus == Corpus.TURNS and PASSAGE_DOCUMENTS else k
            if ns.size <= INLINE_SEARCH_MAX:
                found_hits = _locked_search(ns, terms, wanted)
            else:
                found_hits = await asyncio.to_thread(_locked_search, ns, terms, wanted)
            hits += best_turns(found_hits, k) if corpus == Corpus.TURNS else found_hits
        hits.sort(key=lambda hit: -hit[1])
        return hits[:k]

    async def _load(self, key: Key) -> KeywordNamespace:
        scope, corpus = key
        if self._load_slots is None:
            self._load_slots = asyncio.Semaphore(LOADS)
        async with self._load_slots:
            return await self._db.load(lambda conn: load_namespace(conn, scope, corpus))

    async def loads_settled(self) -> None:
        await self._cache.settled()

    @property
    def loaded_count(self) -> int:
        return sum(1 for _ in self._cache.loaded())

    def held(self) -> int:
        """Bytes the loaded namespaces hold (roughly)."""
        return self._cache.held()

    def clear(self) -> None:
        """Forget every loaded namespace (as if evicted, or restarted)."""
        self._cache.clear()

    # -- following writes ---------------------------------------------------------

    async def follow(self, changes: Sequence[Change]) -> None:
        updates: list[tuple[Matches[Key], Update[KeywordNamespace]]] = []
        for change in changes:
            match change:
                case MemoryWritten(scope=scope, item_id=rowid, fact_tokens=tokens, shared_in=shared_in) \
                        if tokens is not None:
                    for each in (scope, *shared_in):
                        updates.append((_key(each, Corpus.MEMORIES), _adding([(rowid, tokens)])))
                case MemoryShared(scope=scope, item_id=rowid, fact_tokens=tokens):
                    updates.append((_key(scope, Corpus.MEMORIES), _adding([(rowid, tokens)])))
                case MemoryRemoved(scope=scope, item_id=rowid, shared_in=shared_in):
                    for each in (scope, *shared_in):
                        updates.append((_key(each, Corpus.MEMORIES), _removing([rowid])))
                case MemoryUnshared(scope=scope, item_id=rowid):
                    updates.append((_key(scope, Corpus.MEMORIES), _removing([rowid])))
                case TurnsRecorded(scope=scope, turns=turns):
                    passages = [row for rowid, tokens in turns for row in passage_rows(rowid, tokens)]
                    updates.append((_key(scope, Corpus.TURNS), _adding(passages)))
                case TurnsWithheld(scope=scope, rowids=rowids):
                    every = [rowid * PASSAGE_STRIDE + n for rowid in rowids for n in range(PASSAGE_STRIDE)]
                    updates.append((_key(scope, Corpus.TURNS), _removing(every)))
                case ScopeForgotten(scope=scope):
                    self._cache.invalidate(_key(scope, Corpus.TURNS))
                case MemoriesReindexed():
                    self._cache.invalidate(lambda key: key[1] == Corpus.MEMORIES)
        await self._cache.update(updates)


def _key(scope: Scope, corpus: Corpus) -> Matches[Key]:
    return lambda key: key == (scope, corpus)


def _adding(rows: Sequence[tuple[int, Sequence[str]]]) -> Update[KeywordNamespace]:
    def apply(ns: KeywordNamespace, _replayed: bool) -> bool:
        with ns.lock:
            for rowid, tokens in rows:
                ns.add(rowid, tokens)
        return True

    return apply


def _removing(rowids: Sequence[int]) -> Update[KeywordNamespace]:
    def apply(ns: KeywordNamespace, _replayed: bool) -> bool:
        with ns.lock:
            for rowid in rowids:
                ns.remove(rowid)
        return True

    return apply


async def _in_thread(fn: Callable[[], list[bool]]) -> list[bool]:
    # A merge of a large namespace takes a while: off the event loop.
    return await asyncio.to_thread(fn)


def _locked_search(ns: KeywordNamespace, terms: list[str], k: int) -> list[tuple[int, float]]:
    with ns.lock:
        return ns.search(terms, k)
