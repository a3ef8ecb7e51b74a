"""What a faiss namespace's storage really holds, for the memory budget.

faiss keeps codes and ids in std::vectors that grow geometrically on add
(libstdc++: a resize past the capacity makes room for size + max(size,
added)) and never shrink on removal; IndexIDMap2 also keeps a hash map id
-> position. Charging only size x (code + id) left the budget's real bytes
2-4x its bound after one add or a removal (docs/decisions.md#d148). This
models each vector's capacity as faiss grows it:

- read from its file: exactly the size (every vector is resized once);
- a flat index: its codes grow once per add call, its ids one push_back
  at a time (doubling); its hash map holds a node per id and a bucket
  array that never shrinks (counted as the ids' capacity);
- an inverted file: each list's codes and ids grow one vector at a time
  (doubling), per list; the centroids are counted as float32.

Removal leaves every capacity as it was.
"""

from __future__ import annotations

from typing import Any

import faiss
import numpy as np

ID_BYTES = 8  # int64
REV_MAP_NODE_BYTES = 32  # an unordered_map<int64, int64> node (24 B) as malloc hands it out
BUCKET_BYTES = 8  # a pointer per hash bucket


def list_sizes(index: Any) -> np.ndarray:
    """Vectors held per list: one list for a flat index."""
    if not isinstance(index, faiss.IndexIVF):
        return np.array([index.ntotal], np.int64)
    lists: Any = index.invlists
    return np.array([lists.list_size(i) for i in range(index.nlist)], np.int64)


def _resized(room: np.ndarray, before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Capacity after one resize from ``before`` to ``after`` vectors."""
    return np.where(after > room, np.maximum(2 * before, after), room)


def _pushed(room: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Capacity after growing to ``after`` one vector at a time (doubling)."""
    grown = np.where(after > room, np.maximum(room, 1), room)
    while (short := grown < after).any():
        grown[short] *= 2
    return grown


class Storage:
    """The capacity, in vectors, of one faiss index's codes and ids."""

    def __init__(self, index: Any, dim: int, built: bool, chunk: int) -> None:
        """``built``: by ``new_index`` (adds of ``chunk`` vectors from empty),
        else read from a file (exact)."""
        self.inverted = isinstance(index, faiss.IndexIVF)
        self.code_bytes = 2 * dim  # float16
        self.centroid_bytes = index.nlist * dim * 4 if self.inverted else 0
        sizes = list_sizes(index)
        self.size = int(sizes.sum())
        if not built:
            self.codes, self.ids = sizes, sizes.copy()
        elif self.inverted:
            self.codes = self.ids = _pushed(np.zeros_like(sizes), sizes)
        else:
            codes, held = np.zeros(1, np.int64), 0
            for lo in range(0, self.size, chunk):
                after = min(lo + chunk, self.size)
                codes, held = _resized(codes, np.array([held]), np.array([after])), after
            self.codes, self.ids = codes, _pushed(np.zeros(1, np.int64), sizes)

    def added(self, index: Any) -> None:
        """After an add to ``index`` (one add call for a flat index)."""
        sizes = list_sizes(index)
        if self.inverted:
            self.codes = self.ids = _pushed(self.ids, sizes)
        else:
            self.codes = _resized(self.codes, np.array([self.size]), sizes)
            self.ids = _pushed(self.ids, sizes)
        self.size = int(sizes.sum())

    def removed(self, index: Any) -> None:
        self.size = int(index.ntotal)

    @property
    def nbytes(self) -> int:
        stored = int(self.codes.sum()) * self.code_bytes + int(self.ids.sum()) * ID_BYTES
        if self.inverted:
            return stored + self.centroid_bytes
        return stored + int(self.ids.sum()) * BUCKET_BYTES + self.size * REV_MAP_NODE_BYTES
