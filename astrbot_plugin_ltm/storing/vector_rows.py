"""The vector rows: every embedding lives in SQLite; FAISS namespaces
(indexes.vectors) are caches of these rows.

A memory's vector is int8, a quarter of float32's bytes (cosines differ by
about 0.001, docs/decisions.md#d159); a turn's in TURN_BITS (D165). A store
from before migration 0017 may still hold float32 rows until storing.relayout
has moved them; every read here takes both kinds.

Over 400 lines: every statement on the vector tables is here, each taking
both layouts and every space's bits, so that a format is changed in one place.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, Connection, Integer, and_, column, delete, exists, func, insert, or_, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from ..audience import SAID_IN_SQL
from ..enums import Corpus, Visibility
from ..scope import Scope
from .changes import VectorsStored, note
from .driver_rows import touched
from .tables import MemoryEvent, MemoryVector, TurnVector, VectorSpace

Fingerprint = tuple[int, int, str]
# With those of memories said in the scope, kept with the member who said them (audience.py).
_MEMORIES_OF_SCOPE = f"(scope = :kind AND scope_id = :id OR item_id IN ({SAID_IN_SQL}))"
# Before migration 0017; gone once storing.relayout has moved its rows.
LEGACY_TURN_VECTORS = "ltm_event_vectors"


# -- the bytes ------------------------------------------------------------------------


def normalise(vectors: np.ndarray) -> np.ndarray:
    """float32 rows of unit length (a zero row stays zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


# The bits of a turn vector's component: 5 (±15) kept LoCoMo's and
# MemoryBank-CN's evidence recall within 0.002 of int8's, at 62 % of its
# bytes (docs/decisions.md#d165). Rows written before keep their space's bits.
TURN_BITS = 5
FLOAT32 = 32  # the bits of a row from before migration 0017


def row_bytes(dim: int, bits: int) -> int:
    return (dim * bits + 7) // 8


def encode(vectors: np.ndarray, bits: int = 8) -> bytes:
    """Rows as signed ``bits``-bit integers (fewer than 8: packed, each row
    whole bytes), scaled by the row's largest component: a cosine needs only
    the direction."""
    rows = normalise(vectors)
    peak = np.abs(rows).max(axis=1, keepdims=True)
    peak[peak == 0] = 1.0
    top = (1 << (bits - 1)) - 1
    values = np.rint(rows * (top / peak)).clip(-top, top)
    if bits == 8:
        return values.astype(np.int8).tobytes()
    shifted = (values + top).astype(np.uint8)  # 0 .. 2·top
    n, dim = shifted.shape
    if dim % 8 == 0:  # eight components in ``bits`` whole bytes: shifts, not a byte a bit
        octets = shifted.reshape(n, dim // 8, 8).astype(np.uint64)
        word = np.zeros((n, dim // 8), np.uint64)
        for k in range(8):
            word |= octets[:, :, k] << np.uint64(bits * k)
        return word.astype("<u8").view(np.uint8).reshape(n, dim // 8, 8)[:, :, :bits].tobytes()
    bitwise = np.unpackbits(shifted[:, :, None], axis=2, bitorder="little")[:, :, :bits]
    return np.packbits(bitwise.reshape(n, -1), axis=1, bitorder="little").tobytes()


def decode(blob: bytes, dim: int, bits: int = 8) -> np.ndarray:
    """A blob's rows, float32 of unit length."""
    if bits == FLOAT32:
        return normalise(np.frombuffer(blob, np.float32).reshape(-1, dim))
    if bits == 8:
        return normalise(np.frombuffer(blob, np.int8).reshape(-1, dim).astype(np.float32))
    packed = np.frombuffer(blob, np.uint8).reshape(-1, row_bytes(dim, bits))
    if dim % 8 == 0:
        groups = packed.reshape(len(packed), dim // 8, bits)
        word = np.zeros(groups.shape[:2], np.uint64)
        for i in range(bits):
            word |= groups[:, :, i].astype(np.uint64) << np.uint64(8 * i)
        values = np.empty((*word.shape, 8), np.float32)
        for k in range(8):
            values[:, :, k] = (word >> np.uint64(bits * k)) & np.uint64((1 << bits) - 1)
        values = values.reshape(-1, dim)
    else:
        bitwise = np.unpackbits(packed, axis=1, bitorder="little")[:, :dim * bits].reshape(-1, dim, bits)
        values = np.packbits(bitwise, axis=2, bitorder="little")[:, :, 0].astype(np.float32)
    return normalise(values - ((1 << (bits - 1)) - 1))


def memory_vector(blob: bytes, dim: int) -> np.ndarray:
    """A memory's one vector (int8, or float32 from before 0017)."""
    return decode(blob, dim, FLOAT32 if len(blob) == 4 * dim else 8)[0]


def whole_memory_vector() -> ColumnElement[bool]:
    """SQL: a memory's row holds one whole vector. Any other (a torn or
    foreign write) is left out, and the fill embeds its row again."""
    size, dim = func.length(MemoryVector.vector), MemoryVector.dim
    return and_(dim > 0, or_(size == dim, size == 4 * dim))


# ``row_bytes`` in SQL joining ltm_vector_spaces as ``s``, and as an expression.
_ROW_BYTES = "((s.dim * s.bits + 7) / 8)"
_SPACE_ROW_BYTES = (VectorSpace.dim * VectorSpace.bits + 7) // 8


def whole_turn_vectors() -> ColumnElement[bool]:
    """SQL: a turn's row holds whole vectors of its space."""
    size = func.length(TurnVector.vector)
    return and_(VectorSpace.dim > 0, size > 0, size % _SPACE_ROW_BYTES == 0)


# -- vector spaces: a model and its dimension -------------------------------------------


async def space_id(session: AsyncSession, model: str, dim: int, bits: int) -> int:
    """The number of (model, dim, bits), added on first use."""
    this = (VectorSpace.model == model, VectorSpace.dim == dim, VectorSpace.bits == bits)
    found = (await session.execute(select(VectorSpace.id).where(*this))).scalar()
    if found is not None:
        return int(found)
    await session.execute(insert(VectorSpace).values(model=model, dim=dim, bits=bits))
    added = (await session.execute(select(VectorSpace.id).where(*this))).scalar_one()
    assert added is not None
    return int(added)


def spaces_of(model: str, dim: int | None = None) -> Any:
    """SQL: the numbers of ``model``'s spaces (of ``dim`` when given)."""
    where = [VectorSpace.model == model]
    if dim is not None:
        where.append(VectorSpace.dim == dim)
    return select(VectorSpace.id).where(*where)


HAS_TABLE = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = :t"


def has_table(conn: Connection, table: str) -> bool:
    return conn.execute(text(HAS_TABLE), {"t": table}).first() is not None


# -- reading a scope's rows --------------------------------------------------------------


_LEGACY_OF_SCOPE = (f"FROM {LEGACY_TURN_VECTORS} v JOIN ltm_events e ON e.id = v.event_rowid "
                    "WHERE v.scope = :kind AND v.scope_id = :id AND e.created_at > :since "
                    "AND v.model = :model AND NOT EXISTS (SELECT 1 FROM ltm_turn_vectors t "
                    "WHERE t.event_rowid = v.event_rowid)")


@dataclass(frozen=True)
class ScopeVectors:
    """The dimension most of a scope's rows have, its vector count, and the
    rows left out (not whole vectors of it: the fill embeds them again)."""

    dim: int
    count: int
    broken: int


def scope_vectors(conn: Connection, scope: Scope, model: str, corpus: Corpus,
                  since: str | None = None) -> ScopeVectors | None:
    """The scope's vectors of ``model`` counted by their lengths only (no
    blob is read); None when it has none."""
    counts: dict[int, list[int]] = {}  # dim -> [rows, vectors]
    broken = 0

    def count(dim: int, rows: int, vectors: int) -> None:
        got = counts.setdefault(dim, [0, 0])
        got[0] += rows
        got[1] += vectors

    params = {"kind": scope.kind, "id": scope.id, "model": model, "since": since or ""}
    if corpus == Corpus.MEMORIES:
        for dim, rows, whole in conn.execute(text(
                "SELECT dim, count(*), sum(dim > 0 AND length(vector) IN (dim, 4 * dim)) FROM ltm_item_vectors "
                f"WHERE {_MEMORIES_OF_SCOPE} AND model = :model GROUP BY dim"), params):
            count(int(dim), int(whole), int(whole))
            broken += int(rows) - int(whole)
    else:
        for dim, rows, whole, vectors in conn.execute(text(
                f"SELECT s.dim, count(*), sum(s.dim > 0 AND length(t.vector) > 0 "
                f"AND length(t.vector) % {_ROW_BYTES} = 0), sum(CASE WHEN s.dim > 0 "
                f"AND length(t.vector) % {_ROW_BYTES} = 0 THEN length(t.vector) / {_ROW_BYTES} END) "
                "FROM ltm_events e JOIN ltm_turn_vectors t ON t.event_rowid = e.id "
                "JOIN ltm_vector_spaces s ON s.id = t.space "
                "WHERE e.scope = :kind AND e.scope_id = :id AND e.created_at > :since AND s.model = :model "
                "GROUP BY s.dim"), params):
            count(int(dim), int(whole or 0), int(vectors or 0))
            broken += int(rows) - int(whole or 0)
        if has_table(conn, LEGACY_TURN_VECTORS):
            for dim, rows, whole, vectors in conn.execute(text(
                    "SELECT v.dim, count(*), sum(v.dim > 0 AND length(v.vector) > 0 "
                    "AND length(v.vector) % (4 * v.dim) = 0), sum(CASE WHEN v.dim > 0 "
                    "AND length(v.vector) % (4 * v.dim) = 0 THEN length(v.vector) / (4 * v.dim) END) "
                    f"{_LEGACY_OF_SCOPE} GROUP BY v.dim"), params):
                count(int(dim), int(whole or 0), int(vectors or 0))
                broken += int(rows) - int(whole or 0)
    counts = {d: c for d, c in counts.items() if c[0]}
    if not counts:
        return None if not broken else ScopeVectors(0, 0, broken)
    dim = max(counts, key=lambda d: (counts[d][0], -d))
    broken += sum(c[0] for d, c in counts.items() if d != dim)
    return ScopeVectors(dim, counts[dim][1], broken)


def scope_rows(conn: Connection, scope: Scope, model: str, corpus: Corpus, dim: int, since: str | None = None,
               chunk: int = 1000) -> Iterator[tuple[int, np.ndarray]]:
    """The scope's whole rows of ``dim`` for ``model`` as (row id, vectors), a chunk at a time."""
    params = {"kind": scope.kind, "id": scope.id, "model": model, "dim": dim, "since": since or ""}
    # Each statement gives (row id, blob, the bits of its components).
    sources: list[Any]
    if corpus == Corpus.MEMORIES:
        sources = [text(f"SELECT item_id, vector, CASE WHEN length(vector) = 4 * dim THEN {FLOAT32} ELSE 8 END "
                        f"FROM ltm_item_vectors WHERE {_MEMORIES_OF_SCOPE} "
                        "AND model = :model AND dim = :dim AND length(vector) IN (dim, 4 * dim)")]
    else:
        sources = [text("SELECT t.event_rowid, t.vector, s.bits FROM ltm_events e "
                        "JOIN ltm_turn_vectors t ON t.event_rowid = e.id JOIN ltm_vector_spaces s ON s.id = t.space "
                        "WHERE e.scope = :kind AND e.scope_id = :id AND e.created_at > :since "
                        "AND s.model = :model AND s.dim = :dim "
                        f"AND length(t.vector) > 0 AND length(t.vector) % {_ROW_BYTES} = 0")]
        if has_table(conn, LEGACY_TURN_VECTORS):
            sources.append(text(f"SELECT v.event_rowid, v.vector, {FLOAT32} {_LEGACY_OF_SCOPE} AND v.dim = :dim "
                                "AND length(v.vector) > 0 AND length(v.vector) % (4 * v.dim) = 0"))
    for statement in sources:
        result = conn.execute(statement, params)
        while batch := result.fetchmany(chunk):
            yield from _decoded(batch, dim)


def _decoded(batch: Sequence[Any], dim: int) -> Iterator[tuple[int, np.ndarray]]:
    """The blobs of one kind decoded in one call, not one a row: a scope of
    50,000 turns loads ten times faster."""
    kinds: dict[int, list[int]] = {}
    for n, (_, _, bits) in enumerate(batch):
        kinds.setdefault(int(bits), []).append(n)
    out: list[np.ndarray] = [np.empty(0)] * len(batch)
    for bits, rows in kinds.items():
        size = 4 * dim if bits == FLOAT32 else row_bytes(dim, bits)
        vectors = decode(b"".join(batch[n][1] for n in rows), dim, bits)
        at = 0
        for n in rows:
            count = len(batch[n][1]) // size
            out[n] = vectors[at:at + count]
            at += count
    for n, (rowid, _, _) in enumerate(batch):
        yield int(rowid), out[n]


def fingerprint(conn: Connection, scope: Scope, model: str, corpus: Corpus, since: str | None = None) -> Fingerprint:
    """(vectors, sum of row ids, newest update or last turn row id): a
    namespace file is trusted only when its fingerprint is this."""
    if corpus == Corpus.MEMORIES:
        row = conn.execute(
            select(func.count(), func.coalesce(func.sum(MemoryVector.item_id), 0), func.max(MemoryVector.updated_at))
            .where(or_(and_(MemoryVector.scope == scope.kind, MemoryVector.scope_id == scope.id),
                       MemoryVector.item_id.in_(text(SAID_IN_SQL).bindparams(kind=scope.kind, id=scope.id)
                                                .columns(column("id", Integer)))),
                   MemoryVector.model == model, whole_memory_vector())).one()
        return (int(row[0]), int(row[1]), str(row[2]))
    turns = conn.execute(
        select(func.coalesce(func.sum(func.length(TurnVector.vector) // _SPACE_ROW_BYTES), 0),
               func.coalesce(func.sum(TurnVector.event_rowid), 0), func.max(TurnVector.event_rowid))
        .select_from(MemoryEvent)
        .join(TurnVector, TurnVector.event_rowid == MemoryEvent.id)
        .join(VectorSpace, VectorSpace.id == TurnVector.space)
        .where(MemoryEvent.scope == scope.kind, MemoryEvent.scope_id == scope.id, VectorSpace.model == model,
               text("ltm_events.created_at > :since").bindparams(since=since or ""),  # stored text, as held_since
               whole_turn_vectors())).one()
    count, total = int(turns[0]), int(turns[1])
    last: int | None = None if turns[2] is None else int(turns[2])
    if has_table(conn, LEGACY_TURN_VECTORS):
        old = conn.execute(text(
            "SELECT coalesce(sum(length(v.vector) / (4 * v.dim)), 0), coalesce(sum(v.event_rowid), 0), "
            f"max(v.event_rowid) {_LEGACY_OF_SCOPE} AND v.dim > 0 AND length(v.vector) % (4 * v.dim) = 0"),
            {"kind": scope.kind, "id": scope.id, "model": model, "since": since or ""}).one()
        count, total = count + int(old[0]), total + int(old[1])
        last = max((int(x) for x in (last, old[2]) if x is not None), default=None)
    return (count, total, str(last))


# -- writing ------------------------------------------------------------------------------


async def store_vectors(session: AsyncSession, corpus: Corpus, rows: Sequence[tuple[int, Scope]], model: str,
                        vectors: Sequence[np.ndarray], now: datetime) -> None:
    """Save the vectors of ``rows`` (row id, scope), replacing any they had.
    The change noted carries them as the namespaces will hold them."""
    if not rows:
        return
    vectors = [normalise(v) for v in vectors]
    bits = 8 if corpus == Corpus.MEMORIES else TURN_BITS
    blobs = [encode(v, bits) for v in vectors]
    if corpus == Corpus.MEMORIES:
        values: list[dict[str, Any]] = [
            {"item_id": rowid, "scope": scope.kind, "scope_id": scope.id, "model": model,
             "dim": int(vecs.shape[1]), "vector": blob, "updated_at": now}
            for (rowid, scope), vecs, blob in zip(rows, vectors, blobs, strict=True)]
        await session.execute(insert(MemoryVector).prefix_with("OR REPLACE"), values)
    else:
        spaces = {dim: await space_id(session, model, dim, bits) for dim in {int(v.shape[1]) for v in vectors}}
        await session.execute(insert(TurnVector).prefix_with("OR REPLACE"), [
            {"event_rowid": rowid, "space": spaces[int(vecs.shape[1])], "vector": blob}
            for (rowid, _), vecs, blob in zip(rows, vectors, blobs, strict=True)])
        await _delete_legacy(session, "event_rowid IN (SELECT value FROM json_each(:ids))",
                             {"ids": _json([rowid for rowid, _ in rows])})
    held = [decode(blob, int(v.shape[1]), bits) for v, blob in zip(vectors, blobs, strict=True)]
    by_scope: dict[Scope, list[int]] = {}
    for n, (_, scope) in enumerate(rows):
        by_scope.setdefault(scope, []).append(n)
    if corpus == Corpus.MEMORIES:  # the groups a memory was said in hold its vector too (audience.py)
        at = {rowid: n for n, (rowid, _) in enumerate(rows)}
        said = await session.execute(text(
            "SELECT c.scope, c.scope_id, c.item_id FROM ltm_item_contexts c JOIN ltm_items i ON i.id = c.item_id "
            f"WHERE i.visibility = '{Visibility.SHARED}' AND c.item_id IN (SELECT value FROM json_each(:ids))"),
            {"ids": _json(list(at))})
        for kind, scope_id, rowid in said:
            by_scope.setdefault(Scope(kind, scope_id), []).append(at[rowid])
    note(session, *(VectorsStored(corpus, scope, model, tuple(rows[n][0] for n in picked),
                                  tuple(held[n] for n in picked)) for scope, picked in by_scope.items()))


def _json(ids: Sequence[int]) -> str:
    return "[" + ",".join(str(int(i)) for i in ids) + "]"


async def _delete_legacy(session: AsyncSession, where: str, params: dict[str, Any]) -> int:
    if (await session.execute(text(HAS_TABLE), {"t": LEGACY_TURN_VECTORS})).first() is None:
        return 0
    result = await session.execute(text(f"DELETE FROM {LEGACY_TURN_VECTORS} WHERE {where}"), params)
    return touched(result)


async def delete_memory_vector(session: AsyncSession, item_id: int) -> None:
    await session.execute(delete(MemoryVector).where(MemoryVector.item_id == item_id))


async def delete_turn_vectors(session: AsyncSession, rowids: Sequence[int]) -> None:
    await session.execute(delete(TurnVector).where(TurnVector.event_rowid.in_(list(rowids))))
    await _delete_legacy(session, "event_rowid IN (SELECT value FROM json_each(:ids))", {"ids": _json(rowids)})


async def delete_scope_turn_vectors(session: AsyncSession, scope: Scope) -> None:
    of_scope = select(MemoryEvent.id).where(MemoryEvent.scope == scope.kind, MemoryEvent.scope_id == scope.id)
    await session.execute(delete(TurnVector).where(TurnVector.event_rowid.in_(of_scope)))
    await _delete_legacy(session, "scope = :kind AND scope_id = :id", {"kind": scope.kind, "id": scope.id})


async def delete_other_models(session: AsyncSession, corpus: Corpus, rowids: Sequence[int], model: str) -> None:
    """Once rows have a vector of ``model``, other models' are stale."""
    if corpus == Corpus.MEMORIES:
        await session.execute(delete(MemoryVector).where(MemoryVector.item_id.in_(list(rowids)),
                                                         MemoryVector.model != model))
        return
    await session.execute(delete(TurnVector).where(
        TurnVector.event_rowid.in_(list(rowids)), TurnVector.space.not_in(spaces_of(model))))
    await _delete_legacy(session, "event_rowid IN (SELECT value FROM json_each(:ids)) AND model != :model",
                         {"ids": _json(rowids), "model": model})


async def delete_long_turn_vectors(session: AsyncSession, most: int) -> int:
    """Delete the vectors of turns holding more than ``most`` (from before
    passages, docs/decisions.md#d77): the fill embeds them again."""
    long = select(TurnVector.event_rowid).join(VectorSpace, VectorSpace.id == TurnVector.space).where(
        VectorSpace.dim > 0, func.length(TurnVector.vector) // _SPACE_ROW_BYTES > most)
    result = await session.execute(delete(TurnVector).where(TurnVector.event_rowid.in_(long)))
    gone = touched(result)
    return gone + await _delete_legacy(session, "dim > 0 AND length(vector) / (4 * dim) > :most", {"most": most})


def turn_has_vector(model: str, dim: int | None) -> ColumnElement[bool]:
    """SQL over ``ltm_events``: the event has whole vectors of ``model``
    (rows from before 0017: ``legacy_turn_lacks_vector``)."""
    space = [VectorSpace.id == TurnVector.space, VectorSpace.model == model]
    if dim is not None:
        space.append(VectorSpace.dim == dim)
    return exists(select(TurnVector.event_rowid).join(VectorSpace, and_(*space)).where(
        TurnVector.event_rowid == MemoryEvent.id, whole_turn_vectors()))


def legacy_turn_lacks_vector(model: str, dim: int | None) -> ColumnElement[bool]:
    """Not ``turn_has_vector`` in the table from before 0017 (float32 rows)."""
    extra = " AND v.dim = :legacy_dim" if dim is not None else ""
    return text(f"NOT EXISTS (SELECT 1 FROM {LEGACY_TURN_VECTORS} v WHERE v.event_rowid = ltm_events.id "
                f"AND v.model = :legacy_model AND v.dim > 0 AND length(v.vector) % (4 * v.dim) = 0{extra})"
                ).bindparams(legacy_model=model, **({"legacy_dim": dim} if dim is not None else {}))  # type: ignore[return-value]
