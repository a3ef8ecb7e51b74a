"""BM25 over one scope's rows of one corpus, in memory: the structure
behind the keyword index (indexes.keywords).

Scores are FTS5's bm25() exactly (same formula and constants), so on a
single-scope table the two rank alike (tests/test_keywords.py); here a
term is weighed by how rare it is in the scope's own rows, not in every
scope's (docs/decisions.md#d09).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable
from itertools import chain

import numpy as np

# FTS5's bm25() constants, so rankings agree with the operators' search.
K1 = 1.2
B = 0.75
CHUNK = 2000  # rows a build handles between pauses (yield_gil)
# Postings added since the last merge wait in lists until they are this
# many, or an eighth of the merged ones: merging copies the arrays of the
# terms it touches, so a fixed threshold made growth quadratic.
_PENDING_MIN = 4096


def yield_gil() -> None:
    """A pause for the event loop and the other threads: a load runs in a
    thread but mostly in C calls that hold the GIL (docs/decisions.md#d15)."""
    time.sleep(0)


class KeywordNamespace:
    """BM25 over one scope's rows of one corpus. Rows are slots in growing
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
    def build(cls, rows: list[tuple[int, list[str]]]) -> KeywordNamespace:
        """A namespace of ``rows`` (rowid, tokens), its postings sorted out
        by numpy in one go: adding rows one by one takes seconds for a
        large scope (docs/decisions.md#d22)."""
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
        for lo in range(0, n, CHUNK):
            tokens = list(chain.from_iterable(token_lists[lo:lo + CHUNK]))
            for term in dict.fromkeys(tokens):
                if term not in term_id:
                    term_id[term] = len(term_id)
            parts.append(np.fromiter(map(term_id.__getitem__, tokens), np.int64, count=len(tokens)))
            yield_gil()
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
        for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), len(keys)], strict=False):
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
