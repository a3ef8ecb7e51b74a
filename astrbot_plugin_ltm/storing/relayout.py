"""Moving a store from before migration 0017 into the compact layout, in
place, after start (docs/decisions.md#d161).

Migration 0017 only adds the new tables (instant on any store); the rows
move here in batches, each holding the write lock for ``TARGET_SECONDS`` or
so, with a pause between batches for AstrBot's own writes.

A batch commits whole or not at all, and what is left is found again from
the data, so a process killed at any point goes on where it stopped. Until
a row has moved, the reads take it from where it is: every read is correct
meanwhile.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncSession

from ..enums import RECALLED_ROLES
from ..logs import log
from .database import Database, ReadOnlyError
from .keyword_rows import LEGACY_TURN_ROWS, record_build, recorded_build
from .terms import encode
from .turns import PASSAGE_BREAK, turn_tokens
from .vector_rows import FLOAT32, LEGACY_TURN_VECTORS, TURN_BITS, decode, has_table, space_id
from .vector_rows import encode as encode_vectors

TARGET_SECONDS = 0.04  # what a batch aims to hold the write lock for
MAX_SECONDS = 0.1  # what no batch may hold it longer than (issue 39)
PAUSE_SECONDS = 0.05  # between batches: AstrBot's own writes get the lock
FIRST_ROWS, MIN_ROWS, MAX_ROWS = 100, 10, 5000
TOKENISED_ROWS = 100  # turns tokenised a batch (~40 ms of a core, off the write lock)
MAX_KEPT = 100_000  # batch times kept for the stats and the benchmark
BUILD = "storage_layout"  # its row in ltm_index_builds: "compact 1" once moved
DONE = "compact 1"
CONTENT_CURSOR = "relayout_content"  # the last event id whose content was looked at
DETAIL_CURSOR = "relayout_audit"  # the last audit id likewise
LINKS_CURSOR = "relayout_links"  # the last evidence id whose summary link was moved
WITHHELD_CURSOR = "relayout_withheld"  # the last event id whose withheld turn got its terms
ID_WINDOW = 20_000  # event ids looked at a batch for withheld turns


@dataclass
class Progress:
    """What the move has done since start, for the log and the stats."""

    batches: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    longest_seconds: float = 0.0  # the longest a batch held the write lock
    done: bool = False
    held: list[float] = field(default_factory=list)  # each batch's, the last MAX_KEPT

    def add(self, step: str, rows: int, seconds: float) -> None:
        self.batches += 1
        self.rows[step] = self.rows.get(step, 0) + rows
        self.longest_seconds = max(self.longest_seconds, seconds)
        self.held = [*self.held[-(MAX_KEPT - 1):], seconds]


# The CPU work is prepared on a read thread; the write checks each row is as
# read (a write since wins). 0 rows from ``prepare``: this step is done.
Prepare = Callable[..., tuple[int, Any]]  # (conn, size=...)
Apply = Callable[[AsyncSession, Any], Awaitable[None]]


class Relayout:
    """The move, one batch per ``step`` call (a BackgroundTask's step)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.progress = Progress()
        self._size = FIRST_ROWS
        self._steps: list[tuple[str, Prepare, Apply]] = [
            ("turn vectors", _read_turn_vectors, _write_turn_vectors),
            # the withheld first: a moved turn's context is the terms of the turn before it
            ("withheld turns' keywords", _read_withheld_turns, _write_withheld_turns),
            ("turn keywords", _read_turn_rows, _write_turn_rows),
            ("summary links", _read_summary_links, _write_summary_links),
            ("memory vectors", _read_memory_vectors, _write_memory_vectors),
            ("event contents", _reader("ltm_events", "content", CONTENT_CURSOR), _writer("ltm_events", "content")),
            ("audit details", _reader("ltm_audit", "detail", DETAIL_CURSOR), _writer("ltm_audit", "detail")),
        ]
        self.last_work = 0.0  # the last batch's time, read and written (the task's pause follows it)

    async def needed(self) -> bool:
        """Whether this store has anything left to move (asked once at start)."""
        async with self.db.read() as session:
            built = await recorded_build(session, BUILD)
        self.progress.done = built == DONE
        return not self.progress.done

    async def step(self) -> bool:
        """Move one batch; False once everything has moved."""
        if self.progress.done:
            return False
        while self._steps:
            name, prepare, apply = self._steps[0]
            size = self._size
            began = time.monotonic()
            rows, batch = await self.db.run(partial(prepare, size=size))
            prepared = time.monotonic() - began
            if rows == 0:
                self._steps.pop(0)
                continue
            try:
                async with self.db.write() as session:
                    held = time.monotonic()  # the write lock is ours from here to the commit
                    await apply(session, batch)
            except ReadOnlyError:
                return True  # tried again after the pause
            seconds = time.monotonic() - held
            self.last_work = prepared + seconds
            self.progress.add(name, rows, seconds)
            self._resize(seconds)
            return True
        await self._finish()
        return False

    def pause(self) -> float:
        """Seconds to wait before the next batch: at least PAUSE_SECONDS, and
        twice what the last took, so the move takes a third of a core at most."""
        return max(PAUSE_SECONDS, 2 * self.last_work)

    async def run(self) -> Progress:
        """Every batch, one after the other (tests)."""
        while await self.step():
            pass
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
            await record_build(session, BUILD, DONE)
        self.progress.done = True
        log.info("ltm: the store is in its compact layout (%s in %d batches, the longest held the write lock "
                 "%.0f ms)", ", ".join(f"{n} {step}" for step, n in self.progress.rows.items()) or "nothing to move",
                 self.progress.batches, self.progress.longest_seconds * 1000)


def _cursor(conn: Connection, name: str) -> int:
    return int(conn.execute(text("SELECT built_with FROM ltm_index_builds WHERE name = :n"),
                            {"n": name}).scalar() or 0)


# -- 1. a turn's vectors ------------------------------------------------------------------


def _read_turn_vectors(conn: Connection, size: int) -> tuple[int, Any]:
    if not has_table(conn, LEGACY_TURN_VECTORS):
        return 0, None
    rows = conn.execute(text(f"SELECT event_rowid, model, dim, vector FROM {LEGACY_TURN_VECTORS} "
                             "ORDER BY event_rowid LIMIT :n"), {"n": size}).all()
    moved = [(rowid, model, dim, len(blob), encode_vectors(decode(blob, dim, FLOAT32), TURN_BITS))
             for rowid, model, dim, blob in rows
             if dim and dim > 0 and blob and len(blob) % (4 * dim) == 0]  # else torn: embedded again
    return len(rows), (rows[-1][0] if rows else 0, moved)


async def _write_turn_vectors(session: AsyncSession, batch: Any) -> None:
    last, moved = batch
    spaces: dict[tuple[str, int], int] = {}
    values = []
    for rowid, model, dim, length, blob in moved:
        if (model, dim) not in spaces:
            spaces[(model, dim)] = await space_id(session, model, dim, TURN_BITS)
        values.append({"r": rowid, "s": spaces[(model, dim)], "v": blob, "n": length})
    if values:  # only rows still there as read; a vector the fill wrote since is newer: kept
        await session.execute(text(
            "INSERT OR IGNORE INTO ltm_turn_vectors (event_rowid, space, vector) SELECT :r, :s, :v "
            f"WHERE EXISTS (SELECT 1 FROM {LEGACY_TURN_VECTORS} WHERE event_rowid = :r AND length(vector) = :n)"),
            values)
    await session.execute(text(f"DELETE FROM {LEGACY_TURN_VECTORS} WHERE event_rowid <= :last"), {"last": last})


# -- 2. a turn's keyword tokens -------------------------------------------------------------


def _read_turn_rows(conn: Connection, size: int) -> tuple[int, Any]:
    if not has_table(conn, LEGACY_TURN_ROWS):
        return 0, None
    rows = conn.execute(text(f"SELECT f.rowid, e.content FROM {LEGACY_TURN_ROWS} f LEFT JOIN ltm_events e "
                             "ON e.id = f.rowid ORDER BY f.rowid LIMIT :n"), {"n": min(size, TOKENISED_ROWS)}).all()
    terms = []
    for n, (rowid, content) in enumerate(rows):
        if content is not None:
            value = json.loads(content) if isinstance(content, str) else content
            terms.append({"r": rowid, "t": encode(turn_tokens(value or {}), PASSAGE_BREAK)})
        if n % 20 == 19:
            time.sleep(0)  # tokenising holds the GIL: the event loop's turn
    return len(rows), (rows[-1][0] if rows else 0, terms)


# A turn whose terms were written since (a rebuild) keeps them.
_INSERT_TERMS = "INSERT OR IGNORE INTO ltm_turn_terms (event_rowid, terms) VALUES (:r, :t)"


async def _write_turn_rows(session: AsyncSession, batch: Any) -> None:
    last, terms = batch
    if terms:
        await session.execute(text(_INSERT_TERMS), terms)
    await session.execute(text(f"DELETE FROM {LEGACY_TURN_ROWS} WHERE rowid <= :last"), {"last": last})


def _read_withheld_turns(conn: Connection, size: int) -> tuple[int, Any]:
    """A withheld turn had no FTS5 row, but lends its words to the next turn as context."""
    last = _cursor(conn, WITHHELD_CURSOR)
    top = conn.execute(text("SELECT coalesce(max(id), 0) FROM ltm_events")).scalar_one()
    if last >= top:
        return 0, None
    end = last + ID_WINDOW
    roles = ", ".join(f"'{r}'" for r in RECALLED_ROLES)
    rows = conn.execute(text(f"SELECT id, content FROM ltm_events WHERE id > :last AND id <= :end AND withheld "
                             f"AND source_role IN ({roles})"), {"last": last, "end": end}).all()
    terms = [{"r": rowid, "t": encode(turn_tokens(json.loads(c) if isinstance(c, str) else c or {}), PASSAGE_BREAK)}
             for rowid, c in rows[:TOKENISED_ROWS * 5]]
    end = rows[TOKENISED_ROWS * 5][0] - 1 if len(rows) > TOKENISED_ROWS * 5 else end
    return max(1, len(terms)), (end, terms)


async def _write_withheld_turns(session: AsyncSession, batch: Any) -> None:
    end, terms = batch
    if terms:
        await session.execute(text(_INSERT_TERMS), terms)
    await record_build(session, WITHHELD_CURSOR, str(end))


# -- 3. a summary's links --------------------------------------------------------------------


def _read_summary_links(conn: Connection, size: int) -> tuple[int, Any]:
    rows = conn.execute(text(
        "SELECT v.id, i.id, e.id FROM ltm_evidence v JOIN ltm_items i ON i.memory_id = v.memory_id "
        "JOIN ltm_events e ON e.event_id = v.event_id WHERE v.id > :last AND v.extraction_method = 'summary' "
        "AND i.type = 'summary' ORDER BY v.id LIMIT :n"), {"last": _cursor(conn, LINKS_CURSOR), "n": size}).all()
    return len(rows), [tuple(r) for r in rows]


async def _write_summary_links(session: AsyncSession, rows: Any) -> None:
    # Moved only while the old row is there (a summary removed since took its links with it).
    await session.execute(text(
        "INSERT OR IGNORE INTO ltm_summary_links (item_id, event_rowid) SELECT :i, :e "
        "WHERE EXISTS (SELECT 1 FROM ltm_evidence WHERE id = :v)"),
        [{"v": link, "i": item, "e": event} for link, item, event in rows])
    await session.execute(text("DELETE FROM ltm_evidence WHERE id IN (SELECT value FROM json_each(:ids))"),
                          {"ids": json.dumps([link for link, _, _ in rows])})
    await record_build(session, LINKS_CURSOR, str(rows[-1][0]))


# -- 4. a memory's vector -----------------------------------------------------------------------


def _read_memory_vectors(conn: Connection, size: int) -> tuple[int, Any]:
    rows = conn.execute(text("SELECT item_id, dim, vector FROM ltm_item_vectors "
                             "WHERE dim > 0 AND length(vector) = 4 * dim LIMIT :n"), {"n": size}).all()
    return len(rows), [{"r": r, "old": blob, "v": encode_vectors(decode(blob, dim, FLOAT32))}
                       for r, dim, blob in rows]


async def _write_memory_vectors(session: AsyncSession, rows: Any) -> None:
    await session.execute(text("UPDATE ltm_item_vectors SET vector = :v WHERE item_id = :r AND vector = :old"), rows)


# -- 5. JSON as UTF-8 ---------------------------------------------------------------------------


def _reader(table: str, column: str, cursor: str) -> Prepare:
    def read(conn: Connection, size: int) -> tuple[int, Any]:
        rows = conn.execute(text(f"SELECT id, {column} FROM {table} WHERE id > :last ORDER BY id LIMIT :n"),
                            {"last": _cursor(conn, cursor), "n": size}).all()
        changed = [{"r": rowid, "old": value, "v": json.dumps(json.loads(value), ensure_ascii=False)}
                   for rowid, value in rows if isinstance(value, str) and "\\u" in value]
        return len(rows), (cursor, rows[-1][0] if rows else 0, changed)

    return read


def _writer(table: str, column: str) -> Apply:
    async def write(session: AsyncSession, batch: Any) -> None:
        cursor, last, changed = batch
        if changed:
            await session.execute(text(f"UPDATE {table} SET {column} = :v WHERE id = :r AND {column} = :old"), changed)
        await record_build(session, cursor, str(last))

    return write
