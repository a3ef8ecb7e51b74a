"""Moving a store from before migration 0017 into the compact layout, in
place, after start (docs/decisions.md#d157).

Migration 0017 only adds the new table and column (instant on any store);
the rows move here, in the background, in batches of one transaction each
through the single write point, each holding the write lock for
``TARGET_SECONDS`` or so (the batch's size follows the time the last one
took; never above ``MAX_SECONDS``), with a pause between batches for
AstrBot's own writes:

1. a turn's vectors from ``ltm_event_vectors`` (float32) to
   ``ltm_turn_vectors`` (int8), deleted from the old table in the same
   transaction;
2. a turn's keyword tokens from its ``ltm_events_fts`` row to its event's
   ``terms`` (their hashes), the FTS5 row deleted in the same transaction;
3. a memory's float32 vector rewritten as int8 in place;
4. an event's content and an audit row's detail written again as UTF-8
   JSON where they held ``\\u`` escapes (behind a cursor kept in
   ``ltm_index_builds``);
5. the two emptied tables dropped.

A batch either commits whole or not at all, and what is left is found
again from the data (rows still in the old tables, float32 rows, the
cursors), so a process killed at any point goes on where it stopped at the
next start. Until a row has moved, the reads take it from where it is
(storing.vector_rows, indexes.keywords): every read is correct meanwhile,
and a namespace loaded during the move holds the same rows either way.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from ..clock import utcnow
from ..logs import log
from .database import Database, ReadOnlyError
from .keyword_rows import LEGACY_TURN_ROWS
from .terms import encode
from .turns import PASSAGE_BREAK
from .vector_rows import LEGACY_TURN_VECTORS, decode, space_id
from .vector_rows import encode as encode_vectors

TARGET_SECONDS = 0.04  # what a batch aims to hold the write lock for
MAX_SECONDS = 0.1  # what no batch may hold it longer than (issue 39)
PAUSE_SECONDS = 0.05  # between batches: AstrBot's own writes get the lock
FIRST_ROWS, MIN_ROWS, MAX_ROWS = 100, 10, 5000
PREFIX_CHARS = 16  # a scoped token's prefix (keyword_rows.scope_prefix: 8 bytes as hex)
BUILD = "storage_layout"  # its row in ltm_index_builds: "compact 1" once moved
DONE = "compact 1"
CONTENT_CURSOR = "relayout_content"  # the last event id whose content was looked at
DETAIL_CURSOR = "relayout_audit"  # the last audit id likewise


@dataclass
class Progress:
    """What the move has done since start, for the log and the stats."""

    batches: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    longest_seconds: float = 0.0
    done: bool = False

    def add(self, step: str, rows: int, seconds: float) -> None:
        self.batches += 1
        self.rows[step] = self.rows.get(step, 0) + rows
        self.longest_seconds = max(self.longest_seconds, seconds)


Step = Callable[[AsyncSession, int], Awaitable[int]]


class Relayout:
    """The move, one batch per ``step`` call (a BackgroundTask's step)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.progress = Progress()
        self._size = FIRST_ROWS
        self._steps: list[tuple[str, Step]] = [
            ("turn vectors", _move_turn_vectors), ("turn keywords", _move_turn_rows),
            ("memory vectors", _shrink_memory_vectors), ("event contents", _rewrite_contents),
            ("audit details", _rewrite_details),
        ]

    async def needed(self) -> bool:
        """Whether this store has anything left to move (asked once at start)."""
        async with self.db.read() as session:
            built = (await session.execute(text("SELECT built_with FROM ltm_index_builds WHERE name = :n"),
                                           {"n": BUILD})).scalar()
        self.progress.done = built == DONE
        return not self.progress.done

    async def step(self) -> bool:
        """Move one batch; False once everything has moved."""
        if self.progress.done:
            return False
        while self._steps:
            name, move = self._steps[0]
            started = time.monotonic()
            try:
                async with self.db.write() as session:
                    moved = await move(session, self._size)
            except ReadOnlyError:
                return True  # tried again after the pause
            seconds = time.monotonic() - started
            if moved == 0:
                self._steps.pop(0)
                continue
            self.progress.add(name, moved, seconds)
            self._resize(seconds)
            return True
        await self._finish()
        return False

    async def run(self, sleep: Callable[[float], Awaitable[Any]] | None = None) -> Progress:
        """Every batch, one after the other (tests, the benchmark)."""
        while await self.step():
            if sleep is not None:
                await sleep(PAUSE_SECONDS)
        return self.progress

    def _resize(self, seconds: float) -> None:
        if seconds > MAX_SECONDS * 0.6:
            self._size = max(MIN_ROWS, self._size // 2)
        elif seconds < TARGET_SECONDS / 2:
            self._size = min(MAX_ROWS, self._size * 2)

    async def _finish(self) -> None:
        for table in (LEGACY_TURN_ROWS, LEGACY_TURN_VECTORS):  # empty by now: dropped at no cost
            async with self.db.write() as session:
                await session.execute(text(f"DROP TABLE IF EXISTS {table}"))
        async with self.db.write() as session:
            await _record(session, BUILD, DONE)
        self.progress.done = True
        log.info("ltm: the store is in its compact layout (%s in %d batches, the longest %.0f ms)",
                 ", ".join(f"{n} {step}" for step, n in self.progress.rows.items()) or "nothing to move",
                 self.progress.batches, self.progress.longest_seconds * 1000)


async def _exists(session: AsyncSession, table: str) -> bool:
    return (await session.execute(text("SELECT 1 FROM sqlite_master WHERE name = :t"), {"t": table})).first() \
        is not None


async def _move_turn_vectors(session: AsyncSession, size: int) -> int:
    if not await _exists(session, LEGACY_TURN_VECTORS):
        return 0
    rows = (await session.execute(text(f"SELECT event_rowid, model, dim, vector FROM {LEGACY_TURN_VECTORS} "
                                       "ORDER BY event_rowid LIMIT :n"), {"n": size})).all()
    if not rows:
        return 0
    spaces: dict[tuple[str, int], int] = {}
    moved: list[dict[str, Any]] = []
    for rowid, model, dim, blob in rows:
        if not dim or dim <= 0 or not blob or len(blob) % (4 * dim):
            continue  # torn or foreign: the fill embeds the turn again
        if (model, dim) not in spaces:
            spaces[(model, dim)] = await space_id(session, model, dim)
        moved.append({"r": rowid, "s": spaces[(model, dim)], "v": encode_vectors(decode(blob, dim, float32=True))})
    if moved:  # a vector the fill wrote since (of the model now) is newer: kept
        await session.execute(text("INSERT OR IGNORE INTO ltm_turn_vectors (event_rowid, space, vector) "
                                   "VALUES (:r, :s, :v)"), moved)
    await session.execute(text(f"DELETE FROM {LEGACY_TURN_VECTORS} WHERE event_rowid <= :last"),
                          {"last": rows[-1][0]})
    return len(rows)


def _unscoped(scoped: str) -> list[str]:
    return [t if t == PASSAGE_BREAK else t[PREFIX_CHARS:] for t in scoped.split()]


async def _move_turn_rows(session: AsyncSession, size: int) -> int:
    if not await _exists(session, LEGACY_TURN_ROWS):
        return 0
    rows = (await session.execute(text(f"SELECT rowid, scoped FROM {LEGACY_TURN_ROWS} ORDER BY rowid LIMIT :n"),
                                  {"n": size})).all()
    if not rows:
        return 0
    await session.execute(text("UPDATE ltm_events SET terms = :t WHERE id = :r AND terms IS NULL"),
                          [{"r": rowid, "t": encode(_unscoped(scoped or ""), PASSAGE_BREAK)} for rowid, scoped in rows])
    await session.execute(text(f"DELETE FROM {LEGACY_TURN_ROWS} WHERE rowid <= :last"), {"last": rows[-1][0]})
    return len(rows)


async def _shrink_memory_vectors(session: AsyncSession, size: int) -> int:
    rows = (await session.execute(text("SELECT item_id, dim, vector FROM ltm_item_vectors "
                                       "WHERE dim > 0 AND length(vector) = 4 * dim LIMIT :n"), {"n": size})).all()
    if rows:
        await session.execute(text("UPDATE ltm_item_vectors SET vector = :v WHERE item_id = :r"),
                              [{"r": r, "v": encode_vectors(decode(blob, dim, float32=True))} for r, dim, blob in rows])
    return len(rows)


async def _rewrite(session: AsyncSession, size: int, table: str, column: str, cursor: str) -> int:
    """Rewrite ``column`` (JSON) of the next ``size`` rows as UTF-8 where it
    holds ``\\u`` escapes; returns how many rows were looked at."""
    last = int((await session.execute(text("SELECT built_with FROM ltm_index_builds WHERE name = :n"),
                                      {"n": cursor})).scalar() or 0)
    rows = (await session.execute(text(f"SELECT id, {column} FROM {table} WHERE id > :last ORDER BY id LIMIT :n"),
                                  {"last": last, "n": size})).all()
    if not rows:
        return 0
    changed = [{"r": rowid, "v": json.dumps(json.loads(value), ensure_ascii=False)}
               for rowid, value in rows if isinstance(value, str) and "\\u" in value]
    if changed:
        await session.execute(text(f"UPDATE {table} SET {column} = :v WHERE id = :r"), changed)
    await _record(session, cursor, str(rows[-1][0]))
    return len(rows)


async def _rewrite_contents(session: AsyncSession, size: int) -> int:
    return await _rewrite(session, size, "ltm_events", "content", CONTENT_CURSOR)


async def _rewrite_details(session: AsyncSession, size: int) -> int:
    return await _rewrite(session, size, "ltm_audit", "detail", DETAIL_CURSOR)


async def _record(session: AsyncSession, name: str, value: str) -> None:
    await session.execute(
        text("INSERT INTO ltm_index_builds (name, built_with, built_at) VALUES (:n, :w, :at) "
             "ON CONFLICT (name) DO UPDATE SET built_with = excluded.built_with, built_at = excluded.built_at"),
        {"n": name, "w": value, "at": utcnow().replace(tzinfo=None).isoformat(" ")})
