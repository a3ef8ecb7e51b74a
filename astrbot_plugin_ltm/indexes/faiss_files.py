"""FAISS namespaces as objects and files: how one is built from the vector
rows, written beside the database and trusted again after a restart.

Vectors are held in 8 bits a component: a quarter of float32's memory, its
rounding far below the rows' own (docs/decisions.md#d166). A file is used
only when its fingerprint equals SQLite's; else it is rebuilt. Only faiss's
public API is used: AstrBot's own vector store has changed between releases.
"""

from __future__ import annotations

import hashlib
import json
import time
from contextlib import AbstractContextManager, nullcontext, suppress
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import Any

import faiss
import numpy as np
from sqlalchemy import Connection

from ..enums import Corpus
from ..faults import Faults
from ..i18n import msg
from ..logs import log
from ..scope import Scope
from ..storing.turns import held_since
from ..storing.vector_rows import Fingerprint, fingerprint, scope_rows, scope_vectors
from ..text import MAX_SENTENCES
from .faiss_storage import Storage

# A row's vectors are held under rowid * stride + n, so a turn is as near a
# query as its nearest sentence or passage (docs/decisions.md#d28, #d77).
STRIDE = {Corpus.MEMORIES: 1, Corpus.TURNS: 16}
assert STRIDE[Corpus.TURNS] >= MAX_SENTENCES + 1
# Up to this many vectors a namespace is searched exactly (flat); beyond,
# it is an inverted file of sqrt(n) clusters, NPROBE searched (docs/decisions.md#d14).
EXACT_SEARCH_MAX = 20_000
# Only inverted files are kept in a file: their clustering takes seconds to
# train, a flat one is rebuilt faster than a file is checked (docs/decisions.md#d160).
FILES_ABOVE = EXACT_SEARCH_MAX
NPROBE = 16
TRAINING_PER_CLUSTER = 40  # faiss warns below 39
# A file of another layout is rebuilt.
LAYOUT = "int8 v3"
_CODES = faiss.ScalarQuantizer.QT_8bit_uniform
# Codes span a fixed [-r, r], r = CODE_SIGMAS / sqrt(dim): no training data
# needed, nothing clipped (the largest of 20,000 MiniLM components: 5.5 / sqrt(dim)).
CODE_SIGMAS = 8.0


def code_range(dim: int) -> float:
    return min(1.0, CODE_SIGMAS / float(np.sqrt(dim)))


def _hold_fixed_range(index: Any, dim: int) -> None:
    """Give ``index``'s scalar quantizer the fixed range (its min and width)."""
    reach = code_range(dim)
    faiss.copy_array_to_vector(np.array([-reach, 2 * reach], np.float32), index.sq.trained)

BUILD_CHUNK = 4096  # vectors converted to float32 at a time while building


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
    index: Any  # a faiss index (IndexIDMap2 over an 8-bit IndexScalarQuantizer, or IndexIVFScalarQuantizer)
    fingerprint: Fingerprint | tuple[()] = ()  # () once it no longer says what the index holds
    dirty: bool = False  # changed since written to its file
    changes: int = 0  # adds and removals since loaded
    added_turns: int = 0  # turns added since the oldest were last trimmed (trim_oldest)
    built: InitVar[bool] = False  # by new_index (else read from a file)
    storage: Storage = field(init=False)  # the room faiss's storage has (faiss_storage)

    def __post_init__(self, built: bool) -> None:
        self.storage = Storage(self.index, self.dim, built=built, chunk=BUILD_CHUNK)

    def use(self, index: Any) -> None:
        self.index, self.storage = index, Storage(index, self.dim, built=True, chunk=BUILD_CHUNK)

    def changed(self) -> None:
        self.dirty = True
        self.changes += 1

    @property
    def size(self) -> int:
        return int(self.index.ntotal)

    @property
    def nbytes(self) -> int:
        """With the room faiss keeps for more (docs/decisions.md#d148)."""
        return self.storage.nbytes

    @property
    def exact(self) -> bool:
        return not isinstance(self.index, faiss.IndexIVF)

    def put(self, rowids: list[int], vectors: list[np.ndarray], replace: bool) -> None:
        """Add the rows' vectors, first removing any they had when
        ``replace`` (a turn's content never changes, and looking for old
        vectors costs a pass over a flat index)."""
        if replace:
            self.index.remove_ids(all_faiss_ids(self.corpus, rowids))
            self.storage.removed(self.index)
        ids = np.array([i for rowid, vecs in zip(rowids, vectors, strict=True)
                        for i in faiss_ids(self.corpus, rowid, len(vecs))], dtype=np.int64)
        self.index.add_with_ids(np.concatenate(vectors).astype(np.float32), ids)
        self.storage.added(self.index)
        self.changed()

    def remove(self, rowids: list[int]) -> None:
        self.index.remove_ids(all_faiss_ids(self.corpus, rowids))
        self.storage.removed(self.index)
        self.changed()

    def trim_oldest(self, keep_turns: int) -> int:
        """Drop the oldest turns' vectors until ``keep_turns`` are left; the
        fingerprint no longer matches, so the file is rebuilt when next read."""
        rowids = np.unique(faiss.vector_to_array(self.index.id_map) // STRIDE[self.corpus]) \
            if not isinstance(self.index, faiss.IndexIVF) else np.unique(_ivf_ids(self.index) // STRIDE[self.corpus])
        if len(rowids) <= keep_turns:
            return 0
        gone = rowids[: len(rowids) - keep_turns].tolist()
        self.remove(gone)
        self.fingerprint = ()
        return len(gone)


def _ivf_ids(index: Any) -> np.ndarray:
    lists = index.invlists
    parts = [faiss.rev_swig_ptr(lists.get_ids(n), lists.list_size(n)).copy()
             for n in range(index.nlist) if lists.list_size(n)]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def contents(index: Any) -> tuple[np.ndarray, np.ndarray]:
    """A copy of a flat namespace's vectors (float16) and ids."""
    flat: Any = faiss.downcast_index(index.index)
    vectors = np.empty((flat.ntotal, flat.d), np.float16)
    for lo in range(0, flat.ntotal, BUILD_CHUNK):
        hi = min(lo + BUILD_CHUNK, flat.ntotal)
        vectors[lo:hi] = flat.reconstruct_n(lo, hi - lo)
    return vectors, faiss.vector_to_array(index.id_map).copy()


def new_index(dim: int, vectors: np.ndarray, ids: np.ndarray) -> Any:
    """Flat while small, else an inverted file trained on a sample. Float16
    ``vectors`` are converted a chunk at a time: never a float32 copy of all."""
    n = len(ids)
    index: Any
    if n <= EXACT_SEARCH_MAX:
        codes = faiss.IndexScalarQuantizer(dim, _CODES, faiss.METRIC_INNER_PRODUCT)
        _hold_fixed_range(codes, dim)
        codes.is_trained = True
        index = faiss.IndexIDMap2(codes)
    else:
        clusters = int(np.sqrt(n))
        index = faiss.IndexIVFScalarQuantizer(faiss.IndexFlatIP(dim), dim, clusters, _CODES,
                                              faiss.METRIC_INNER_PRODUCT)
        index.by_residual = False  # the codes hold the vectors themselves, in the fixed range
        sample = np.random.default_rng(0).choice(n, min(n, clusters * TRAINING_PER_CLUSTER), replace=False)
        index.train(np.ascontiguousarray(vectors[np.sort(sample)], dtype=np.float32))
        _hold_fixed_range(index, dim)  # the clusters are trained; the codes' range is not
        index.nprobe = NPROBE
    for lo in range(0, n, BUILD_CHUNK):
        index.add_with_ids(np.ascontiguousarray(vectors[lo:lo + BUILD_CHUNK], dtype=np.float32),
                           ids[lo:lo + BUILD_CHUNK])
    return index


class NamespaceFiles:
    """Namespace files under ``directory`` (None: no files, always built)."""

    def __init__(self, directory: Path | None, faults: Faults | None = None) -> None:
        self.directory = directory
        self.faults = faults or Faults()  # the engine hands its own: a failed write is shown (faults.py)

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
                    or meta.get("stride", 1) != STRIDE[corpus] or meta.get("layout") != LAYOUT:
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

    def remove(self, scope: Scope, corpus: Corpus) -> None:
        paths = self._paths(scope, corpus)
        for path in paths or ():
            with suppress(OSError):
                path.unlink(missing_ok=True)

    def stale(self) -> list[Path]:
        """Files no namespace will read: of another layout (or unreadable
        meta), or of a flat namespace (written before flat ones had none),
        or a meta without its index."""
        if self.directory is None or not self.directory.is_dir():
            return []
        out: list[Path] = []
        for meta_path in self.directory.glob("*.json"):
            index_path = meta_path.with_suffix(".faiss")
            try:
                meta = json.loads(meta_path.read_text())
                keep = (meta.get("layout") == LAYOUT and index_path.exists()
                        and int((meta.get("fingerprint") or [0])[0]) > FILES_ABOVE)
            except (OSError, ValueError, TypeError):
                keep = False
            if not keep:
                out += [p for p in (meta_path, index_path) if p.exists()]
        known = {p.with_suffix(".faiss") for p in self.directory.glob("*.json")}
        out += [p for p in self.directory.glob("*.faiss") if p not in known]
        # A namespace being written has its index renamed into place before its meta: never one of those.
        recent = time.time() - 60
        return [p for p in out if _mtime(p) < recent]

    def remove_stale(self) -> int:
        gone = 0
        for path in self.stale():
            with suppress(OSError):
                path.unlink(missing_ok=True)
                gone += 1
        return gone

    def write(self, ns: VectorNamespace, lock: AbstractContextManager[Any] | None = None) -> bool:
        """Write ``ns`` (under the index's ``lock`` when in use). A file that
        cannot be written is only a cache lost: False, the namespace stays
        dirty; a half-written file is never left where it would be read."""
        paths = self._paths(ns.scope, ns.corpus)
        if paths is None:
            return True
        if ns.size <= FILES_ABOVE:  # rebuilt from its rows faster than a file is checked: none kept
            self.remove(ns.scope, ns.corpus)
            ns.dirty = False
            return True
        tmp = paths[0].with_suffix(".faiss.tmp")
        try:
            paths[0].parent.mkdir(parents=True, exist_ok=True)
            with lock or nullcontext():
                faiss.write_index(ns.index, str(tmp))
            # The old meta goes first: a crash between the two renames leaves
            # an index file no meta vouches for, which is rebuilt.
            paths[1].unlink(missing_ok=True)
            tmp.replace(paths[0])
            meta = {"namespace": ns.scope.namespace, "kind": str(ns.corpus), "model": ns.model, "dim": ns.dim,
                    "stride": STRIDE[ns.corpus], "layout": LAYOUT, "fingerprint": list(ns.fingerprint)}
            meta_tmp = paths[1].with_suffix(".json.tmp")
            meta_tmp.write_text(json.dumps(meta))
            meta_tmp.replace(paths[1])
        except (OSError, RuntimeError) as exc:  # faiss reports a failed fwrite as a RuntimeError
            for leftover in (tmp, paths[1].with_suffix(".json.tmp")):
                with suppress(OSError):
                    leftover.unlink(missing_ok=True)
            error = str(exc).strip().splitlines()[-1][:200] if str(exc).strip() else type(exc).__name__
            if "vector_files" not in self.faults:
                log.error("ltm: vector namespace file %s cannot be written (%s); kept in memory, rebuilt "
                          "from the database at the next start", paths[0].name, error)
            self.faults.report("vector_files", msg("fault.vector_files", path=str(paths[0].parent), error=error))
            return False
        self.faults.clear("vector_files")
        ns.dirty = False
        return True


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def load_namespace(conn: Connection, files: NamespaceFiles, scope: Scope, model: str,
                   corpus: Corpus) -> VectorNamespace | None:
    """The namespace from its file, or built from the vector rows; None when
    the scope has no vectors of ``model``."""
    # A scope's newest turns only (storing.turns.TURNS_HELD): its fingerprint is theirs.
    since = held_since(conn, scope.kind, scope.id) if corpus == Corpus.TURNS else None
    found = scope_vectors(conn, scope, model, corpus, since)
    if found is None or not found.count:
        return None
    # A turn namespace of no file is fingerprinted by the rows it reads (one
    # pass over them, not two); a memory's fingerprint needs their updates.
    expected = fingerprint(conn, scope, model, corpus, since) \
        if corpus == Corpus.MEMORIES or found.count > FILES_ABOVE else None
    if expected is not None and expected[0] > FILES_ABOVE:
        ns = files.read(scope, model, corpus, expected)
        if ns is not None:
            return ns
    if found.broken:
        log.warning("ltm: %d malformed vector row(s) in %s (%s) left out; they will be embedded again",
                    found.broken, scope.namespace, corpus)
    dim = found.dim
    # Streamed into float16: a build never holds all the rows' blobs nor a float32 copy.
    vectors = np.empty((found.count, dim), np.float16)
    ids = np.empty(found.count, np.int64)
    filled = total = 0
    last = None
    for rowid, vecs in scope_rows(conn, scope, model, corpus, dim, since):
        total, last = total + rowid, rowid if last is None else max(last, rowid)
        if filled + len(vecs) > len(ids):
            # Rows written since they were counted (no shared snapshot) are held too.
            room = max(filled + len(vecs), 2 * len(ids))
            vectors, ids = np.resize(vectors, (room, dim)), np.resize(ids, room)
        vectors[filled:filled + len(vecs)] = vecs
        ids[filled:filled + len(vecs)] = faiss_ids(corpus, rowid, len(vecs))
        filled += len(vecs)
    vectors, ids = vectors[:filled], ids[:filled]
    # Valid only when no row came or went between its statement and these.
    if expected is None:
        expected = (filled, total, str(last))
    same = filled == expected[0] == found.count
    ns = VectorNamespace(scope, model, corpus, dim, new_index(dim, vectors, ids), expected if same else (),
                         dirty=True, built=True)
    files.write(ns)
    return ns


def one_omp_thread() -> None:
    """For the search thread: a single query pays for waking OpenMP's threads
    (docs/decisions.md#d13); per thread, so AstrBot's own faiss is left alone."""
    faiss.omp_set_num_threads(1)

