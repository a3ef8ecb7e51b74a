"""The reader's keyword search: BM25 per scope and corpus, in memory. FTS5
stays the source of truth and answers the operators' search; BM25 in numpy
answers the reader, faster and weighing a term by the scope's own rows
(docs/decisions.md#d09).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime

import numpy as np
from sqlalchemy import Connection, text

from ..audience import MEMBERS_SQL
from ..clock import parse_stored_time
from ..enums import Corpus
from ..scope import Scope
from ..storing import turns as turns_module
from ..storing.changes import (
    Change,
    MemoriesReindexed,
    MemoryRemoved,
    MemoryShared,
    MemoryUnshared,
    MemoryWritten,
    ScopeForgotten,
    TurnsDeleted,
    TurnsRecorded,
    TurnsWithheld,
)
from ..storing.database import Database
from ..storing.keyword_rows import LEGACY_TURN_ROWS, scope_prefix
from ..storing.terms import BREAK_KEY, KEY_BYTES, decode, encode, term_keys
from ..storing.turns import CONTEXT_TOKENS, CONTEXT_WINDOW, PASSAGE_BREAK, held_since
from ..storing.vector_rows import has_table
from .bm25 import CHUNK, Chunk, KeywordNamespace, Terms
from .namespaces import COLD_WAIT, DerivedNamespaces, Matches, MemoryBudget, NamespaceCache, Update, exactly

# Up to this many rows a search takes well under a millisecond and runs on
# the event loop; larger namespaces are searched in a thread (docs/decisions.md#d21).
INLINE_SEARCH_MAX = 20_000
LOADS = 2  # namespaces loading at once: vector loads never queue behind them
MAX_LOADED = 256

Key = tuple[Scope, Corpus]
# A turn is one document, its passages' terms joined: one document measured
# better than a document a passage on LongMemEval (0.861 against 0.667: a
# question's words are spread over a long turn; docs/decisions.md#d77).

# Turns are read in order with the withheld, which lend context but are not
# searched. A turn storing.relayout has not reached yet may instead have its
# old FTS5 row's scoped tokens, its context in them.
_MEMORY_ROWS = f"SELECT f.rowid, f.tokens FROM ltm_items_fts f WHERE f.rowid IN ({MEMBERS_SQL})"
_TURN_ROWS = ("SELECT e.id, e.session_id, e.created_at, e.withheld, t.terms{old} FROM ltm_events e "
              "LEFT JOIN ltm_turn_terms t ON t.event_rowid = e.id{join} "
              "WHERE e.scope = :kind AND e.scope_id = :id AND e.created_at > :since ORDER BY e.created_at, e.id")


def turn_chunks(conn: Connection, scope: Scope) -> Iterator[Chunk]:
    """The scope's newest turns as the keyword index reads them, a chunk at a
    time. A chunk's blobs are decoded in whole arrays, not a turn at a time:
    a few thousand turns loaded in 80 ms, most of it per-turn numpy calls."""
    moving = has_table(conn, LEGACY_TURN_ROWS)
    statement = _TURN_ROWS.format(old=", f.scoped" if moving else "",
                                  join=" LEFT JOIN ltm_events_fts f ON f.rowid = e.id" if moving else "")
    since = held_since(conn, scope.kind, scope.id) or ""
    result = conn.execute(text(statement), {"kind": scope.kind, "id": scope.id, "since": since})
    prefix = scope_prefix(scope.kind, scope.id)
    before: dict[str | None, tuple[datetime, np.ndarray]] = {}
    while batch := result.fetchmany(CHUNK):
        # A turn's keys; a turn not moved yet has the scoped tokens of its old
        # FTS5 row, its context already in them; None: it has no terms.
        blobs = [row[4] if row[4] is not None else encode(row[5].replace(prefix, "").split(), PASSAGE_BREAK)
                 if len(row) > 5 and row[5] else None for row in batch]
        sizes = np.fromiter((len(b) if b else 0 for b in blobs), np.int64, count=len(batch)) // KEY_BYTES
        flat = decode(b"".join(b for b in blobs if b))
        words = flat != BREAK_KEY
        counts = np.bincount(np.repeat(np.arange(len(batch)), sizes)[words], minlength=len(batch))
        own = flat[words]
        starts = (np.cumsum(counts) - counts).tolist()
        rowids: list[int] = []
        documents: list[np.ndarray] = []
        for n, (rowid, session, created_at, withheld, stored, *_) in enumerate(batch):
            at = parse_stored_time(created_at)
            if blobs[n] is None:
                before[session] = (at, _NONE)  # lends no context
                continue
            mine = own[starts[n]:starts[n] + int(counts[n])]
            if not withheld:  # the withheld lend context but are not searched
                rowids.append(int(rowid))
                documents.append(mine)
                previous = before.get(session)
                if stored is not None and previous is not None and at - previous[0] <= CONTEXT_WINDOW:
                    documents[-1] = np.concatenate([mine, previous[1]])
            before[session] = (at, mine[:CONTEXT_TOKENS].copy())  # not a view pinning the chunk
        if rowids:
            yield (np.array(rowids, np.int64), np.fromiter(map(len, documents), np.int64, count=len(documents)),
                   np.concatenate(documents))


_NONE = np.zeros(0, np.int64)


# (scope, the message's tokens, turn row ids, k) -> the best k of those
# turns by the scope's keyword namespace, best first, as (rowid, bm25); None
# when the namespace is not loaded.
TurnRanker = Callable[[Scope, list[str], Iterable[int], int], list[tuple[int, float]] | None]


def turn_document(rowid: int, terms: Sequence[str] | np.ndarray) -> tuple[int, np.ndarray]:
    """A turn's keyword terms (tokens or keys) as its one document: the
    passages' terms without the breaks between them, under its row id."""
    keys = terms if isinstance(terms, np.ndarray) else term_keys(terms, PASSAGE_BREAK)
    breaks = keys == BREAK_KEY
    return rowid, keys[~breaks] if breaks.any() else keys


def load_namespace(conn: Connection, scope: Scope, corpus: Corpus) -> KeywordNamespace:
    """A scope's namespace of ``corpus``, built from its keyword rows as
    they are read (a large scope's rows are never all held at once)."""
    params = {"kind": scope.kind, "id": scope.id}
    if corpus == Corpus.MEMORIES:
        memories = conn.execute(text(_MEMORY_ROWS), params)

        def facts() -> Iterator[tuple[int, list[str]]]:
            while batch := memories.fetchmany(CHUNK):
                for rowid, tokens in batch:
                    yield rowid, (tokens or "").split()

        return KeywordNamespace.build(facts())
    return KeywordNamespace.from_chunks(turn_chunks(conn, scope))


class KeywordIndex(DerivedNamespaces[Key, KeywordNamespace]):
    """The loaded keyword namespaces (a DerivedIndex)."""

    def __init__(self, db: Database, max_loaded: int = MAX_LOADED, budget: MemoryBudget | None = None) -> None:
        self._db = db
        self._cache: NamespaceCache[Key, KeywordNamespace] = NamespaceCache(
            "keyword namespace", self._load, _in_thread, max_loaded,
            size_of=lambda ns: ns.nbytes, budget=budget)
        self._load_slots: asyncio.Semaphore | None = None  # made on the loop that uses it

    async def search(self, scopes: list[Scope], corpus: Corpus, terms: list[str],
                     k: int) -> list[tuple[int, float]]:
        """(rowid, bm25) of the best ``k`` rows of ``corpus`` in ``scopes``;
        a namespace still loading after COLD_WAIT adds nothing."""
        if not terms or k <= 0:
            return []
        hits: list[tuple[int, float]] = []
        found = await self._cache.get_all([(scope, corpus) for scope in scopes], COLD_WAIT)
        for ns in found:
            if ns is None:
                continue
            if ns.size <= INLINE_SEARCH_MAX:
                hits += _locked_search(ns, terms, k)
            else:
                hits += await asyncio.to_thread(_locked_search, ns, terms, k)
        hits.sort(key=lambda hit: -hit[1])
        return hits[:k]

    def turn_ranker(self, scopes: Iterable[Scope]) -> TurnRanker:
        """For a read thread: the scopes' loaded turn namespaces, to rank a
        named period's turns (``TurnRanker``); taken here, on the event
        loop, where the cache's maps live."""
        loaded = {scope: ns for scope in scopes if (ns := self._cache.peek((scope, Corpus.TURNS))) is not None}

        def rank(scope: Scope, terms: list[str], rowids: Iterable[int], k: int) -> list[tuple[int, float]] | None:
            ns = loaded.get(scope)
            rowids = list(rowids)
            # None when the namespace is not loaded, or holds none of these turns (older than it holds)
            if ns is None or not any(ns.holds(r) for r in rowids):
                return None
            with ns.lock:
                return ns.search_among(terms, rowids, k)

        return rank

    async def _load(self, key: Key) -> KeywordNamespace:
        scope, corpus = key
        if self._load_slots is None:
            self._load_slots = asyncio.Semaphore(LOADS)
        async with self._load_slots:
            return await self._db.load(lambda conn: load_namespace(conn, scope, corpus))

    # -- following writes ---------------------------------------------------------

    async def follow(self, changes: Sequence[Change]) -> None:
        updates: list[tuple[Matches[Key], Update[KeywordNamespace]]] = []
        for change in changes:
            match change:
                case MemoryWritten(scope=scope, item_id=rowid, fact_tokens=tokens, shared_in=shared_in) \
                        if tokens is not None:
                    for each in (scope, *shared_in):
                        updates.append((exactly((each, Corpus.MEMORIES)), _adding([(rowid, tokens)])))
                case MemoryShared(scope=scope, item_id=rowid, fact_tokens=tokens):
                    updates.append((exactly((scope, Corpus.MEMORIES)), _adding([(rowid, tokens)])))
                case MemoryRemoved(scope=scope, item_id=rowid, shared_in=shared_in):
                    for each in (scope, *shared_in):
                        updates.append((exactly((each, Corpus.MEMORIES)), _removing([rowid])))
                case MemoryUnshared(scope=scope, item_id=rowid):
                    updates.append((exactly((scope, Corpus.MEMORIES)), _removing([rowid])))
                case TurnsRecorded(scope=scope, turns=turns):
                    documents = [turn_document(rowid, tokens) for rowid, tokens in turns]
                    updates.append((exactly((scope, Corpus.TURNS)), _adding(documents, held=turns_module.TURNS_HELD)))
                case TurnsWithheld(scope=scope, rowids=rowids) | TurnsDeleted(scope=scope, rowids=rowids):
                    updates.append((exactly((scope, Corpus.TURNS)), _removing(list(rowids))))
                case ScopeForgotten(scope=scope):
                    self._cache.invalidate(exactly((scope, Corpus.TURNS)))
                case MemoriesReindexed():
                    self._cache.invalidate(lambda key: key[1] == Corpus.MEMORIES)
        await self._cache.update(updates)


def _adding(rows: Sequence[tuple[int, Terms]], held: int | None = None) -> Update[KeywordNamespace]:
    """Add the rows; a turn namespace past a quarter more than ``held`` drops its oldest."""
    def apply(ns: KeywordNamespace, _replayed: bool) -> bool:
        with ns.lock:
            for rowid, tokens in rows:
                ns.add(rowid, tokens)
            if held is not None and ns.size > held + held // 4:
                ns.trim_oldest(held)
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
