"""A turn's vectors are stored in TURN_BITS bits a component; rows written
in int8 before migration 0018 stay in spaces of 8 bits, and a scope reads
both (docs/decisions.md#d165)."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from sqlalchemy import create_engine

from astrbot_plugin_ltm.enums import Corpus
from astrbot_plugin_ltm.scope import Scope
from astrbot_plugin_ltm.storing.migrate import migrate
from astrbot_plugin_ltm.storing.vector_rows import (
    TURN_BITS,
    decode,
    encode,
    fingerprint,
    normalise,
    row_bytes,
    scope_rows,
    scope_vectors,
)

SCOPE = Scope("user", "qq:alice")
MODEL = "words"


def random_rows(n: int, dim: int, seed: int = 0) -> np.ndarray:
    return normalise(np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32))


@pytest.mark.parametrize("bits", [2, 4, 5, 6, 7, 8])
@pytest.mark.parametrize("dim", [7, 32, 384])
def test_packed_rows_are_whole_bytes_and_keep_their_direction(bits, dim):
    rows = random_rows(5, dim)
    blob = encode(rows, bits)
    assert len(blob) == 5 * row_bytes(dim, bits)
    back = decode(blob, dim, bits)
    assert back.shape == (5, dim)
    cosines = np.sum(rows * back, axis=1)
    # each bit halves the rounding: from 8 bits' ~0.9999 down to 2 bits' rough direction
    assert cosines.min() > {2: 0.4, 4: 0.93, 5: 0.98, 6: 0.995, 7: 0.998, 8: 0.9995}[bits], cosines


def test_turn_bits_hold_a_cosine_within_a_few_thousandths_in_384_dimensions():
    rows = random_rows(200, 384, seed=1)
    query = random_rows(1, 384, seed=2)[0]
    exact = rows @ query
    stored = decode(encode(rows, TURN_BITS), 384, TURN_BITS) @ query
    assert np.abs(stored - exact).mean() < 0.005


def test_a_scope_reads_its_int8_rows_from_before_and_its_packed_rows_alike(tmp_path):
    path = tmp_path / "bits.db"
    migrate(str(path), target=17)  # the int8 layout of 0017
    dim = 32
    old, new = random_rows(2, dim, seed=3), random_rows(3, dim, seed=4)
    conn = sqlite3.connect(path)
    for rowid in (1, 2):
        conn.execute("INSERT INTO ltm_events (id, event_id, scope, scope_id, source_type, source_role, content, "
                     "created_at) VALUES (?, ?, 'user', 'qq:alice', 'message', 'user', '{}', "
                     "'2026-12-01 10:00:00.000000')", (rowid, f"e{rowid}"))
    conn.execute("INSERT INTO ltm_vector_spaces (id, model, dim) VALUES (1, ?, ?)", (MODEL, dim))
    conn.execute("INSERT INTO ltm_turn_vectors (event_rowid, space, vector) VALUES (1, 1, ?)", (encode(old, 8),))
    conn.commit()
    conn.close()

    migrate(str(path))
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT model, dim, bits FROM ltm_vector_spaces").fetchall() == [(MODEL, dim, 8)]
    conn.execute("INSERT INTO ltm_vector_spaces (id, model, dim, bits) VALUES (2, ?, ?, ?)", (MODEL, dim, TURN_BITS))
    conn.execute("INSERT INTO ltm_turn_vectors (event_rowid, space, vector) VALUES (2, 2, ?)",
                 (encode(new, TURN_BITS),))
    conn.commit()
    conn.close()

    engine = create_engine(f"sqlite:///{path}")
    with engine.connect() as sql:
        counted = scope_vectors(sql, SCOPE, MODEL, Corpus.TURNS)
        read = dict(scope_rows(sql, SCOPE, MODEL, Corpus.TURNS, dim))
        count, _, _ = fingerprint(sql, SCOPE, MODEL, Corpus.TURNS)
    engine.dispose()
    assert counted is not None and (counted.dim, counted.count, counted.broken) == (dim, 5, 0)
    assert count == 5
    assert np.allclose(read[1], decode(encode(old, 8), dim, 8))
    assert np.allclose(read[2], decode(encode(new, TURN_BITS), dim, TURN_BITS))
    assert np.sum(read[2] * new, axis=1).min() > 0.97


@pytest.mark.parametrize("n", [3_000, 30_000], ids=["flat", "inverted file"])
def test_a_namespace_holds_a_byte_a_component_and_finds_the_nearest_float32_finds(n):
    """Loaded namespaces keep 8-bit codes over a fixed range (faiss_files.code_range):
    a quarter of float32's memory, the same neighbours, cosines within a few thousandths."""
    import faiss

    from astrbot_plugin_ltm.indexes.faiss_files import new_index

    dim = 384
    rows = random_rows(n, dim, seed=1)
    index = new_index(dim, rows, np.arange(n, dtype=np.int64))
    codes = faiss.downcast_index(index.index if isinstance(index, faiss.IndexIDMap2) else index)
    assert codes.code_size == dim
    queries = normalise(rows[:40] + 0.5 * random_rows(40, dim, seed=2) / np.sqrt(dim) * 8)
    if isinstance(index, faiss.IndexIVF):
        index.nprobe = index.nlist  # compare the codes, not the clustering's probes
    scores, found = index.search(queries, 10)
    exact = queries @ rows.T
    best = np.argsort(-exact, axis=1)[:, :10]
    kept = np.mean([len(set(found[q]) & set(best[q])) / 10 for q in range(len(queries))])
    assert kept >= 0.95
    assert np.abs(scores - np.take_along_axis(exact, found, axis=1)).max() < 0.01
