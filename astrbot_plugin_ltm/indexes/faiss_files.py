"""FAISS namespaces as objects and files: how one is built from the vector
rows, written beside the database and trusted again after a restart.

A namespace holds one scope's vectors of one corpus and one model. A
memory's vector is held under its row id; a turn's sentences under
``rowid * stride + n``, so a turn is as near a query as its nearest
sentence. A file is used only when its fingerprint (storing.vector_rows)
equals SQLite's; a file that is missing, corrupt, stale or of another
model, dimension or stride is rebuilt. Only faiss's public API is used:
AstrBot's own vector store has changed between releases.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np
from sqlalchemy import Connection, func, select

from ..enums import Corpus
from ..logs import log
from ..scope import Scope
from ..storing.vector_rows import VECTOR_ROWS, Fingerprint, fingerprint
from ..text import MAX_SENTENCES

# A row's vectors are held in FAISS under rowid * stride + n: a memory has
# one, a turn one per sentence (text.sentences: at most MAX_SENTENCES and
# the whole turn) (docs/decisions.md#d28).
STRIDE = {Corpus.MEMORIES: 1, Corpus.TURNS: 16}
assert STRIDE[Corpus.TURNS] >= MAX_SENTENCES + 1
# Up to this many vectors a namespace is searched exactly (flat); beyond,
# it is an inverted file of sqrt(n) clusters, NPROBE searched (docs/decisions.md#d14).
EXACT_SEARCH_MAX = 20_000
NPROBE = 16
TRAINING_PER_CLUSTER = 40  # faiss warns below 39


def faiss_ids(corpus: Corpus, rowid: int, count: int) -> range:
    stride = STRIDE[corpus]
    return range(rowid * stride, rowid * stride + count)


def all_faiss_ids(corpus: Corpus, rowids: list[int]) -> np.ndarray:
    """Every FAISS id the rows may hold (for removal)."""
    stride = STRIDE[corpus]
    return np.array([i for rowid in rowids for i in faiss_ids(corpus, rowid, stride)], dtype=np.int64)


@dataclass
class VectorNamespace:
    scope: Scope
    model: str
    corpus: Corpus
    dim: int
    index: Any  # a faiss index (IndexIDMap2 over IndexFlatIP, or IndexIVFFlat)
    fingerprint: Fingerprint | tuple[()] = ()  # () once it no longer says what the index holds
    dirty: bool = False  # changed since written to its file
    changes: int = 0  # adds and removals since loaded

    def changed(self) -> None:
        self.dirty = True
        self.changes += 1

    @property
    def size(self) -> int:
        return int(self.index.ntotal)

    @property
    def exact(self) -> bool:
        return not isinstance(self.index, faiss.IndexIVF)

    def put(self, rowids: list[int], vectors: list[np.ndarray], replace: bool) -> None:
        """Add the rows' vectors, first removing any they had when
        ``replace`` (a turn's content never changes, and looking for old
        vectors costs a pass over a flat index)."""
        if replace:
            self.index.remove_ids(all_faiss_ids(self.corpus, rowids))
        ids = np.array([i for rowid, vecs in zip(rowids, vectors, strict=True)
                        for i in faiss_ids(self.corpus, rowid, len(vecs))], dtype=np.int64)
        self.index.add_with_ids(np.concatenate(vectors).astype(np.float32), ids)
        self.changed()

    def remove(self, rowids: list[int]) -> None:
        self.index.remove_ids(all_faiss_ids(self.corpus, rowids))
        self.changed()


def contents(index: Any) -> tuple[np.ndarray, np.ndarray]:
    """A copy of a flat namespace's vectors and ids."""
    flat: Any = faiss.downcast_index(index.index)
    vectors = faiss.rev_swig_ptr(flat.get_xb(), flat.ntotal * flat.d).reshape(flat.ntotal, flat.d).copy()
    return vectors, faiss.vector_to_array(index.id_map).copy()


def new_index(dim: int, vectors: np.ndarray, ids: np.ndarray) -> Any:
    """An index holding ``vectors`` under ``ids``: flat while small, an
    inverted file trained on a sample of them when large."""
    n = len(ids)
    index: Any
    if n <= EXACT_SEARCH_MAX:
        index = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
    else:
        clusters = int(np.sqrt(n))
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, clusters, faiss.METRIC_INNER_PRODUCT)
        sample = np.random.default_rng(0).choice(n, min(n, clusters * TRAINING_PER_CLUSTER), replace=False)
        index.train(vectors[sample])
        index.nprobe = NPROBE
    index.add_with_ids(vectors, ids)
    return index


class NamespaceFiles:
    """Namespace files under ``directory`` (None: no files, always built)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory

    def _paths(self, scope: Scope, corpus: Corpus) -> tuple[Path, Path] | None:
        if self.directory is None:
            return None
        # Memories keep the file names they had before turns had vectors.
        suffix = "" if corpus == Corpus.MEMORIES else "#turns"
        digest = hashlib.sha1((scope.namespace + suffix).encode()).hexdigest()[:20]
        return self.directory / f"{digest}.faiss", self.directory / f"{digest}.json"

    def read(self, scope: Scope, model: str, corpus: Corpus, expected: Fingerprint) -> VectorNamespace | None:
        paths = self._paths(scope, corpus)
        if paths is None or not paths[0].exists() or not paths[1].exists():
            return None
        try:
            meta = json.loads(paths[1].read_text())
            if meta.get("model") != model or tuple(meta.get("fingerprint", ())) != expected \
                    or meta.get("stride", 1) != STRIDE[corpus]:
                log.info("ltm: vector namespace %s (%s) is stale; rebuilding", scope.namespace, corpus)
                return None
            index = faiss.read_index(str(paths[0]))
            if index.ntotal != expected[0] or index.d != meta.get("dim"):
                return None
            ns = VectorNamespace(scope, model, corpus, index.d, index, expected)
            if ns.exact and ns.size > EXACT_SEARCH_MAX:
                return None  # grown past exact search: rebuilt as an inverted file
            return ns
        except Exception as exc:  # a corrupt file is rebuilt, never trusted
            log.warning("ltm: vector namespace %s (%s) unreadable (%s); rebuilding", scope.namespace, corpus, exc)
            return None

    def write(self, ns: VectorNamespace, lock: AbstractContextManager[Any] | None = None) -> None:
        """Write ``ns`` (under ``lock``, the index's, when it is in use)."""
        paths = self._paths(ns.scope, ns.corpus)
        if paths is None:
            return
        paths[0].parent.mkdir(parents=True, exist_ok=True)
        tmp = paths[0].with_suffix(".faiss.tmp")
        with lock or nullcontext():
            faiss.write_index(ns.index, str(tmp))
        tmp.replace(paths[0])
        meta = {"namespace": ns.scope.namespace, "kind": str(ns.corpus), "model": ns.model, "dim": ns.dim,
                "stride": STRIDE[ns.corpus], "fingerprint": list(ns.fingerprint)}
        paths[1].write_text(json.dumps(meta))
        ns.dirty = False


def load_namespace(conn: Connection, files: NamespaceFiles, scope: Scope, model: str,
                   corpus: Corpus) -> VectorNamespace | None:
    """The namespace from its file, or built from the vector rows (and its
    file written); None when the scope has no vectors of ``model``."""
    expected = fingerprint(conn, scope, model, corpus)
    if expected[0] == 0:
        return None
    ns = files.read(scope, model, corpus, expected)
    if ns is not None:
        return ns
    rows = VECTOR_ROWS[corpus]
    found = conn.execute(select(rows.key_column, rows.column("dim"), rows.column("vector"))
                         .where(*rows.of_scope(scope, model), rows.whole())).all()
    broken = conn.execute(select(func.count()).select_from(rows.table)
                          .where(*rows.of_scope(scope, model), ~rows.whole())).scalar_one()
    if broken:
        log.warning("ltm: %d malformed vector row(s) in %s (%s) left out; they will be embedded again",
                    broken, scope.namespace, corpus)
    dims = [dim for _, dim, _ in found]
    dim = max(set(dims), key=dims.count)
    parts = [(rowid, np.frombuffer(blob, dtype=np.float32).reshape(-1, dim)) for rowid, d, blob in found if d == dim]
    ids = np.array([i for rowid, vecs in parts for i in faiss_ids(corpus, rowid, len(vecs))], dtype=np.int64)
    vectors = np.concatenate([vecs for _, vecs in parts])
    ns = VectorNamespace(scope, model, corpus, dim, new_index(dim, vectors, ids), expected, dirty=True)
    files.write(ns)
    return ns


def one_omp_thread() -> None:
    """For the search thread: a single query gains nothing from OpenMP's
    threads and pays for waking them (docs/decisions.md#d13). The setting is per thread, so
    AstrBot's own use of faiss is left alone."""
    faiss.omp_set_num_threads(1)

