"""BM25 over one scope's rows of one corpus, in memory: the structure
behind the keyword index (indexes.keywords).

Scores are FTS5's bm25() exactly (same formula and constants), so on a
single-scope table the two rank alike (tests/test_keywords.py); here a
term is weighed by how rare it is in the scope's own rows, not in every
scope's (docs/decisions.md#d09).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice

import numpy as np

from ..storing.terms import term_key, term_keys

# FTS5's bm25() constants, so rankings agree with the operators' search.
K1 = 1.2
B = 0.75
CHUNK = 2000  # rows a build handles between pauses (yield_gil)
# Postings added since the last merge wait in lists until they are this
# many, or an eighth of the merged ones: a merge copies the postings
# arrays, so a fixed threshold made growth quadratic.
_PENDING_MIN = 4096
# Dead slots are dropped once they are this many and half of the slots.
_COMPACT_MIN = 1024
TF_MAX = np.iinfo(np.uint16).max
# A term's key is below 2**32 (storing.terms) and a namespace holds fewer
# than 2**31 postings: half the bytes of int64 (a quarter of a group's namespace).
_KEY = np.uint32
_START = np.int32


def yield_gil() -> None:
    """A pause for the event loop and the other threads: a load runs in a
    thread but mostly in C calls that hold the GIL (docs/decisions.md#d15)."""
    time.sleep(0)


# A row's tokens, or their keys as the database keeps them: a hash in a sorted
# array, not a string and two arrays per term (docs/decisions.md#d40).
Terms = Sequence[str] | np.ndarray


def keys_of(terms: Terms) -> np.ndarray:
    return terms.astype(np.int64, copy=False) if isinstance(terms, np.ndarray) else term_keys(terms)


# Rows given together: their row ids, how many keys each has, and those
# keys one row after another (int64).
type Chunk = tuple[np.ndarray, np.ndarray, np.ndarray]


def _chunks(rows: Iterable[tuple[int, Terms]]) -> Iterator[Chunk]:
    rows = iter(rows)
    while chunk := list(islice(rows, CHUNK)):
        chunk_keys = [keys_of(terms) for _, terms in chunk]
        yield (np.fromiter((rowid for rowid, _ in chunk), np.int64, count=len(chunk)),
               np.fromiter((len(k) for k in chunk_keys), np.int64, count=len(chunk)),
               np.concatenate(chunk_keys) if chunk_keys else np.zeros(0, np.int64))


class KeywordNamespace:
    """BM25 over one scope's rows of one corpus. Rows are slots in growing
    arrays; a removed row's slot is only marked dead, and dead slots are
    dropped when they make up half of the namespace.

    Postings are compact: one array of slots and one of term frequencies,
    grouped by term (``_starts[i]:_starts[i + 1]`` are those of the term
    whose key is ``_keys[i]``, the keys sorted)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # searches run in threads
        self._rowids = np.zeros(64, np.int64)
        self._lengths = np.zeros(64, np.float32)
        self._alive = np.zeros(64, bool)
        self._used = 0
        self._slot: dict[int, int] = {}
        self._length_sum = 0.0
        self._keys = np.zeros(0, _KEY)
        self._starts = np.zeros(1, _START)
        self._slots = np.zeros(0, np.int32)
        self._tfs = np.zeros(0, np.uint16)
        # Postings since the last merge wait in Python lists, by term key,
        # as inserting into numpy arrays copies them.
        self._pending: dict[int, tuple[list[int], list[int]]] = {}
        self._pending_count = 0

    @property
    def size(self) -> int:
        return len(self._slot)

    @property
    def nbytes(self) -> int:
        """Memory held, roughly: the arrays, the row map (two ints and an
        entry each) and the pending postings."""
        arrays = (self._rowids, self._lengths, self._alive, self._keys, self._starts, self._slots, self._tfs)
        return (sum(a.nbytes for a in arrays) + 100 * len(self._slot)
                + 200 * len(self._pending) + 64 * self._pending_count)

    @classmethod
    def build(cls, rows: Iterable[tuple[int, Terms]]) -> KeywordNamespace:
        """A namespace of ``rows`` (rowid, terms), its postings sorted out by
        numpy in one go: row by row took seconds (docs/decisions.md#d22). A
        chunk's terms become keys at once: never every token as a string (d40)."""
        return cls.from_chunks(_chunks(rows))

    @classmethod
    def from_chunks(cls, chunks: Iterable[Chunk]) -> KeywordNamespace:
        """A namespace of rows given a chunk at a time (``Chunk``), as a
        scope's turns are read (indexes.keywords.turn_chunks)."""
        ns = cls()
        rowid_parts, length_parts, key_parts = [], [], []
        for rowid_part, length_part, key_part in chunks:
            rowid_parts.append(rowid_part)
            length_parts.append(length_part)
            key_parts.append(key_part)
            yield_gil()
        rowids = np.concatenate(rowid_parts) if rowid_parts else np.zeros(0, np.int64)
        lengths = np.concatenate(length_parts) if length_parts else np.zeros(0, np.int64)
        n = len(rowids)
        size = max(64, n)
        ns._rowids = np.zeros(size, np.int64)
        ns._rowids[:n] = rowids
        ns._lengths = np.zeros(size, np.float32)
        ns._lengths[:n] = lengths
        ns._alive = np.zeros(size, bool)
        ns._used = n
        ns._slot = {rowid: slot for slot, rowid in enumerate(rowids.tolist())}  # the last slot of each
        live = np.fromiter(ns._slot.values(), np.int64, count=len(ns._slot))
        ns._alive[live] = True
        ns._length_sum = float(lengths[live].sum())
        if not key_parts or not sum(map(len, key_parts)):
            return ns
        # Each distinct (term, slot) pair is a posting; how often it occurs
        # is the term's frequency in that row. One sort finds them all: a
        # key is below 2**32 (storing.terms), so key * n + slot fits 63 bits.
        pairs = np.concatenate(key_parts)
        del key_parts
        pairs *= n
        pairs += np.repeat(np.arange(n, dtype=np.int64), lengths)
        pairs, tfs = np.unique(pairs, return_counts=True)
        keys_of_pairs = pairs // n
        firsts = np.flatnonzero(np.concatenate(([True], keys_of_pairs[1:] != keys_of_pairs[:-1])))
        ns._keys = keys_of_pairs[firsts].astype(_KEY)
        ns._starts = np.append(firsts, len(pairs)).astype(_START)
        ns._slots = (pairs - keys_of_pairs * n).astype(np.int32)
        ns._tfs = np.minimum(tfs, TF_MAX).astype(np.uint16)
        return ns

    def add(self, rowid: int, terms: Terms) -> None:
        self.remove(rowid)
        counts: dict[int, int] = {}
        length = 0
        for key in keys_of(terms).tolist():
            counts[key] = counts.get(key, 0) + 1
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
        for key, tf in counts.items():
            slots, tfs = self._pending.setdefault(key, ([], []))
            slots.append(slot)
            tfs.append(min(tf, TF_MAX))
        self._pending_count += len(counts)
        if self._pending_count > max(_PENDING_MIN, len(self._slots) // 8):
            self._merge()

    def remove(self, rowid: int) -> None:
        slot = self._slot.pop(rowid, None)
        if slot is None:
            return
        self._alive[slot] = False
        self._length_sum -= float(self._lengths[slot])
        if self._used - len(self._slot) > max(_COMPACT_MIN, self._used // 2):
            self._compact()

    def holds(self, rowid: int) -> bool:
        return rowid in self._slot

    def trim_oldest(self, keep: int) -> int:
        """Drop the rows added first until ``keep`` are left; how many went."""
        live = np.flatnonzero(self._alive[: self._used])
        if len(live) <= keep:
            return 0
        gone = live[: len(live) - keep]
        self._alive[gone] = False
        self._length_sum -= float(self._lengths[gone].sum())
        for rowid in self._rowids[gone].tolist():
            self._slot.pop(int(rowid), None)
        self._compact()
        return len(gone)

    def _merge(self) -> None:
        """The pending postings into the arrays: each term's go after its
        merged ones (a new term's into its place among the keys), in one
        pass over the arrays."""
        if not self._pending:
            return
        new_keys = np.array(sorted(self._pending), _KEY)
        runs = [self._pending[key] for key in new_keys.tolist()]
        counts = np.fromiter((len(slots) for slots, _ in runs), np.int64, count=len(runs))
        new_slots = np.fromiter(chain.from_iterable(slots for slots, _ in runs), np.int32, count=int(counts.sum()))
        new_tfs = np.fromiter(chain.from_iterable(tfs for _, tfs in runs), np.uint16, count=int(counts.sum()))
        at = np.searchsorted(self._keys, new_keys)
        known = at < len(self._keys)
        known[known] = self._keys[at[known]] == new_keys[known]
        # A known term's postings go at the end of its run, a new term's
        # where its run will begin.
        where = np.repeat(self._starts[at + known], counts)
        self._slots = np.insert(self._slots, where, new_slots)
        self._tfs = np.insert(self._tfs, where, new_tfs)
        per_term = np.diff(self._starts)
        per_term[at[known]] += counts[known]
        per_term = np.insert(per_term, at[~known], counts[~known])
        self._keys = np.insert(self._keys, at[~known], new_keys[~known])
        self._starts = np.concatenate([[0], np.cumsum(per_term)]).astype(_START)
        self._pending.clear()
        self._pending_count = 0

    def _compact(self) -> None:
        """Drop dead slots and renumber the live ones."""
        self._merge()
        live = np.flatnonzero(self._alive[: self._used])
        renumber = np.full(self._used, -1, np.int32)
        renumber[live] = np.arange(len(live), dtype=np.int32)
        keep = self._alive[self._slots]
        term_of = np.repeat(np.arange(len(self._keys)), np.diff(self._starts))
        per_term = np.bincount(term_of[keep], minlength=len(self._keys))
        used = per_term > 0
        self._keys = self._keys[used]
        self._starts = np.concatenate([[0], np.cumsum(per_term[used])]).astype(_START)
        self._slots = renumber[self._slots[keep]]
        self._tfs = self._tfs[keep]
        size = max(64, 2 * len(live))
        self._rowids = np.resize(self._rowids[live], size)
        self._lengths = np.resize(self._lengths[live], size)
        self._alive = np.zeros(size, bool)
        self._alive[: len(live)] = True
        self._used = len(live)
        self._slot = {int(r): n for n, r in enumerate(self._rowids[: self._used])}

    def _term(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        key = term_key(term)
        at = int(np.searchsorted(self._keys, _KEY(key)))  # of the keys' type: numpy 1 would copy them to int64
        base = None
        if at < len(self._keys) and self._keys[at] == key:
            lo, hi = int(self._starts[at]), int(self._starts[at + 1])
            base = (self._slots[lo:hi], self._tfs[lo:hi])
        pending = self._pending.get(key)
        if pending is None:
            return base
        new = (np.asarray(pending[0], np.int32), np.asarray(pending[1], np.uint16))
        return new if base is None else (np.concatenate([base[0], new[0]]), np.concatenate([base[1], new[1]]))

    def search(self, terms: list[str], k: int) -> list[tuple[int, float]]:
        """(rowid, bm25) of the ``k`` best rows holding any of ``terms``."""
        if k <= 0 or (scores := self._scores(terms)) is None:
            return []
        return self._best(scores, np.flatnonzero(scores), k)

    def search_among(self, terms: list[str], rowids: Iterable[int], k: int) -> list[tuple[int, float]]:
        """``search`` within ``rowids`` only (a named period's turns), each
        scored as among the whole namespace."""
        if k <= 0 or (scores := self._scores(terms)) is None:
            return []
        slots = np.fromiter((slot for r in rowids if (slot := self._slot.get(r)) is not None), np.int64)
        return self._best(scores, slots[scores[slots] > 0], k)

    def _scores(self, terms: list[str]) -> np.ndarray | None:
        """Every slot's bm25 for ``terms`` (0 where none occurs), or None."""
        n = len(self._slot)
        if not n or not terms:
            return None
        found = [postings for term in dict.fromkeys(terms) if (postings := self._term(term)) is not None]
        if not found:
            return None
        # Every term's postings in one pass: a few numpy calls per search,
        # not a few per term (docs/decisions.md#d72).
        sizes = np.fromiter((len(slots) for slots, _ in found), np.int64, count=len(found))
        slots = np.concatenate([slots for slots, _ in found])
        tfs = np.concatenate([tfs for _, tfs in found]).astype(np.float64)
        dead = self._used > n  # else every posting is a live row's
        alive = self._alive[slots] if dead else None
        df = sizes if alive is None else np.add.reduceat(alive, np.cumsum(sizes) - sizes, dtype=np.int64)
        # FTS5's idf, floored the same way: a term in most rows counts
        # for (almost) nothing.
        idf = np.maximum(np.log((n - df + 0.5) / (df + 0.5)), 1e-6)
        norm = K1 * (1.0 - B + B * self._lengths[slots] / (self._length_sum / n or 1.0))
        weights = np.repeat(idf, sizes) * tfs * (K1 + 1.0) / (tfs + norm)
        if alive is not None:
            weights *= alive
        return np.bincount(slots, weights=weights, minlength=self._used)

    def _best(self, scores: np.ndarray, hit: np.ndarray, k: int) -> list[tuple[int, float]]:
        if len(hit) > k:  # (argpartition over the whole array is slow on its many zeros)
            hit = hit[np.argpartition(scores[hit], len(hit) - k)[len(hit) - k:]]
        hit = hit[np.lexsort((hit, -scores[hit]))]  # best first; a tie in slot order
        return [(int(self._rowids[s]), float(scores[s])) for s in hit]
