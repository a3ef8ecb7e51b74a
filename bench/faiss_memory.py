"""What a vector namespace really holds against what the budget charges.

The memory budget (vectors.max_memory_mb) bounds the loaded namespaces by
VectorNamespace.nbytes; this measures the heap malloc hands out (glibc's
mallinfo2) around a namespace's life — read from its file, one vector
added, half removed, built afresh, and the same as an inverted file —
and prints it beside the charge (docs/decisions.md#d148).

    nice -n 10 .venv/bin/python -m bench.faiss_memory [--vectors 10000] [--dim 384]
"""

from __future__ import annotations

import argparse
import gc
import tempfile
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from astrbot_plugin_ltm.enums import Corpus
from astrbot_plugin_ltm.indexes.faiss_files import EXACT_SEARCH_MAX, VectorNamespace, new_index
from astrbot_plugin_ltm.scope import Scope
from bench.memory_account import _MALLINFO


def heap_mb() -> float:
    gc.collect()
    info = _MALLINFO()
    return float(info.uordblks + info.hblkhd) / 2**20


def namespace(index: Any, dim: int, built: bool) -> VectorNamespace:
    return VectorNamespace(Scope("user", "bench"), "bench", Corpus.MEMORIES, dim, index, built=built)


def life(n: int, dim: int, directory: Path) -> list[tuple[str, float, float, float]]:
    """(step, real MB, charged MB, size x (code + id) MB: the charge before
    d148) through one namespace's life."""
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((n + 200, dim)).astype(np.float16)
    ids = np.arange(n + 200, dtype=np.int64)
    rows: list[tuple[str, float, float, float]] = []
    kind = "flat" if n <= EXACT_SEARCH_MAX else "inverted file"

    base = heap_mb()

    def note(step: str, ns: VectorNamespace) -> None:
        rows.append((step, heap_mb() - base, ns.nbytes / 2**20, ns.size * (2 * dim + 8) / 2**20))

    ns = namespace(new_index(dim, vectors[:n], ids[:n]), dim, built=True)
    note(f"{kind}, built from rows", ns)
    path = directory / "ns.faiss"
    faiss.write_index(ns.index, str(path))
    del ns
    base = heap_mb()
    ns = namespace(faiss.read_index(str(path)), dim, built=False)
    note(f"{kind}, read from its file", ns)
    ns.put([n], [vectors[n:n + 1].astype(np.float32)], replace=False)
    note("  + one vector added", ns)
    for i in range(n + 1, n + 101):
        ns.put([i], [vectors[i:i + 1].astype(np.float32)], replace=False)
    note("  + 100 more, one at a time", ns)
    ns.remove(list(range(0, n, 2)))
    note("  - half removed", ns)
    ns.put([n + 150], [vectors[n + 150:n + 151].astype(np.float32)], replace=True)
    note("  + one replaced after", ns)
    del ns
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=int, default=10_000, help="a flat namespace's vectors")
    parser.add_argument("--inverted", type=int, default=40_000, help="an inverted file's vectors (0: none)")
    parser.add_argument("--dim", type=int, default=384)
    args = parser.parse_args()
    if _MALLINFO is None:
        raise SystemExit("needs glibc's mallinfo2")
    faiss.omp_set_num_threads(1)
    print(f"{'step':34} {'real MB':>9} {'charged MB':>11} {'charged/real':>13} {'size-only MB':>13}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (args.vectors, args.inverted):
            if n:
                for step, real, charged, size_only in life(n, args.dim, Path(tmp)):
                    print(f"{step:34} {real:9.2f} {charged:11.2f} {charged / real:13.2f} {size_only:13.2f}")


if __name__ == "__main__":
    main()
