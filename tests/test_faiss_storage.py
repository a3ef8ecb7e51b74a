"""A vector namespace is charged for what faiss really holds: the room its
storage grows to on an add and keeps after a removal (docs/decisions.md#d148)."""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np
import pytest

from astrbot_plugin_ltm.enums import Corpus
from astrbot_plugin_ltm.indexes.faiss_files import VectorNamespace, new_index
from astrbot_plugin_ltm.indexes.faiss_storage import REV_MAP_NODE_BYTES
from astrbot_plugin_ltm.indexes.namespaces import MemoryBudget, NamespaceCache
from astrbot_plugin_ltm.scope import Scope
from bench import faiss_memory
from bench.memory_account import _MALLINFO

# Namespaces of these tests are small: kept in files all the same (conftest.namespace_files).
pytestmark = pytest.mark.usefixtures("namespace_files")

DIM = 32


def vectors(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)


def read_back(tmp_path: Path, name: str, n: int) -> VectorNamespace:
    """A namespace of ``n`` vectors as read from its file after a restart."""
    path = tmp_path / f"{name}.faiss"
    faiss.write_index(new_index(DIM, vectors(n), np.arange(n, dtype=np.int64)), str(path))
    return VectorNamespace(Scope("user", name), "m", Corpus.MEMORIES, DIM, faiss.read_index(str(path)))


def size_only(ns: VectorNamespace) -> int:
    """The charge before d148: vectors and ids held, no room."""
    return ns.size * (2 * DIM + 8)


async def test_one_vector_added_charges_the_room_faiss_grew_so_the_budget_evicts_sooner(tmp_path):
    loaded = {key: read_back(tmp_path, key, 2000) for key in ("a", "b")}

    async def load(key: str) -> VectorNamespace:
        return loaded[key]

    async def run(fn):
        return fn()

    evicted: list[str] = []

    async def on_evict(ns: VectorNamespace) -> None:
        evicted.append(ns.scope.id)

    at_load = loaded["a"].nbytes
    budget = MemoryBudget(limit=int(2.5 * at_load))  # both fit as read from their files
    cache: NamespaceCache[str, VectorNamespace] = NamespaceCache(
        "vector namespace", load, run, 8, on_evict, size_of=lambda ns: ns.nbytes, budget=budget)
    await cache.get("a")
    await cache.get("b")
    assert evicted == [] and budget.held() == 2 * at_load

    def add_one(ns: VectorNamespace, replayed: bool) -> bool:
        ns.put([5000], [vectors(1, seed=1)], replace=False)
        return True

    await cache.update([(lambda key: key == "b", add_one)])
    # b's codes and ids now have room for twice as many (its hash map, a
    # third of it at 32 dimensions, grows by one node): a, the least
    # recently used, goes.
    assert loaded["b"].nbytes > 1.6 * at_load
    assert evicted == ["a"] and [key for key, _ in cache.loaded()] == ["b"]
    assert size_only(loaded["a"]) + size_only(loaded["b"]) < budget.limit  # the old charge would have kept both


async def test_removals_leave_the_charge_as_it_was(tmp_path):
    ns = read_back(tmp_path, "a", 2000)
    ns.put([5000], [vectors(1, seed=1)], replace=False)
    grown = ns.nbytes
    ns.remove(list(range(0, 2000, 2)))
    assert ns.size == 1001
    # faiss keeps the room: only the hash map's nodes of the removed ids go.
    assert grown - 1000 * REV_MAP_NODE_BYTES <= ns.nbytes < grown


def test_a_namespace_built_from_rows_is_charged_the_room_its_chunked_adds_left():
    n = 10_000  # chunks of 4096: the codes grow 4096 -> 8192 -> 16384
    ns = VectorNamespace(Scope("user", "a"), "m", Corpus.MEMORIES, DIM,
                         new_index(DIM, vectors(n), np.arange(n, dtype=np.int64)), built=True)
    assert ns.storage.codes == 16384 and ns.storage.ids == 16384  # ids: doubling


@pytest.mark.skipif(_MALLINFO is None, reason="the heap is measured with glibc's mallinfo2")
@pytest.mark.parametrize(("n", "dim"), [(10_000, 384), (24_000, 128)], ids=["flat", "inverted file"])
def test_the_charge_matches_the_heap_faiss_really_holds(tmp_path, n, dim):
    for step, real, charged, _ in faiss_memory.life(n, dim, tmp_path):
        assert charged == pytest.approx(real, rel=0.1), step
