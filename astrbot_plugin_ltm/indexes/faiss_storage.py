"""What a faiss namespace's storage really holds, for the memory budget.

faiss keeps codes and ids in std::vectors that grow geometrically on add and
never shrink on removal: charging only size x (code + id) left the budget's
real bytes 2-4x its bound (docs/decisions.md#d148). This models each
vector's capacity as faiss grows it.
"""

from __future__ import annotations

from typing import Any

import faiss
import numpy as np

ID_BYTES = 8  # int64
REV_MAP_NODE_BYTES = 32  # an unordered_map<int64, int64> node (24 B) as malloc hands it out
BUCKET_BYTES = 8  # a pointer per hash bucket


def list_sizes(index: Any) -> np.ndarray:
    """Vectors held in each of an inverted file's lists."""
    lists: Any = index.invlists
    return np.array([lists.list_size(i) for i in range(index.nlist)], np.int64)


def _resized(room: int, before: int, after: int) -> int:
    """Capacity after one resize from ``before`` to ``after`` vectors."""
    return room if after <= room else max(2 * before, after)


def _pushed(room: int, after: int) -> int:
    """Capacity after growing to ``after`` one vector at a time (doubling)."""
    if after <= room:
        return room
    grown = max(room, 1)
    while grown < after:
        grown *= 2
    return grown


def _pushed_lists(room: np.ndarray, after: np.ndarray) -> np.ndarray:
    """``_pushed`` of each list."""
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
        self.code_bytes = dim  # 8 bits a component (faiss_files.LAYOUT)
        self.size = int(index.ntotal)
        self.codes = self.ids = self.size  # capacities, over every list
        self.lists = np.zeros(0, np.int64)  # an inverted file's, per list (codes and ids alike)
        self.centroid_bytes = 0
        if self.inverted:
            self.centroid_bytes = index.nlist * dim * 4
            sizes = list_sizes(index)
            self._set_lists(_pushed_lists(np.zeros_like(sizes), sizes) if built else sizes)
        elif built:
            self.codes = 0
            for lo in range(0, self.size, chunk):
                self.codes = _resized(self.codes, lo, min(lo + chunk, self.size))
            self.ids = _pushed(0, self.size)

    def _set_lists(self, lists: np.ndarray) -> None:
        self.lists = lists
        self.codes = self.ids = int(lists.sum())

    def added(self, index: Any) -> None:
        """After an add to ``index`` (one add call for a flat index)."""
        after = int(index.ntotal)
        if self.inverted:
            self._set_lists(_pushed_lists(self.lists, list_sizes(index)))
        else:
            self.codes = _resized(self.codes, self.size, after)
            self.ids = _pushed(self.ids, after)
        self.size = after

    def removed(self, index: Any) -> None:
        self.size = int(index.ntotal)

    @property
    def nbytes(self) -> int:
        stored = self.codes * self.code_bytes + self.ids * ID_BYTES
        if self.inverted:
            return stored + self.centroid_bytes
        return stored + self.ids * BUCKET_BYTES + self.size * REV_MAP_NODE_BYTES
