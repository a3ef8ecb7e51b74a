"""Sessions on AstrBot's database, the read-only switch, and the keyword index.

Every write to the plugin's tables goes through :meth:`Database.write`, which
refuses while ``emergency_read_only`` is on: one choke point, so the switch
takes effect on the next write without a restart and nothing can slip past.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from . import migrate as migrations
from .text import fts_match_expression, index_text


class ReadOnlyError(RuntimeError):
    """Raised instead of writing while emergency_read_only is on."""


class Database:
    def __init__(self, engine: AsyncEngine, read_only: Callable[[], bool] = lambda: False) -> None:
        if engine.url.get_backend_name() != "sqlite":
            raise RuntimeError(
                f"astrbot_plugin_ltm needs AstrBot's SQLite database, got {engine.url.get_backend_name()}"
            )
        self.engine = engine
        self.is_read_only = read_only
        self._sessions = async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)
        # SQLite has one writer; serialising our own writes avoids busy waits
        # between the recorder's flusher and the extraction worker.
        self._write_lock = asyncio.Lock()

    @property
    def path(self) -> str:
        return self.engine.url.database or ""

    async def migrate(self) -> list[int]:
        return await asyncio.to_thread(migrations.migrate, self.path)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        async with self._sessions() as session:
            yield session

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        """A transaction: committed on success, rolled back on any error."""
        if self.is_read_only():
            raise ReadOnlyError("emergency_read_only is on: the memory store takes no writes")
        async with self._write_lock:
            if self.is_read_only():  # switched on while we waited
                raise ReadOnlyError("emergency_read_only is on: the memory store takes no writes")
            async with self._sessions() as session, session.begin():
                yield session


async def fts_upsert(session: AsyncSession, rowid: int, fact: str) -> None:
    await session.execute(text("DELETE FROM ltm_items_fts WHERE rowid = :r"), {"r": rowid})
    await session.execute(
        text("INSERT INTO ltm_items_fts (rowid, tokens) VALUES (:r, :t)"),
        {"r": rowid, "t": index_text(fact)},
    )


async def fts_delete(session: AsyncSession, rowid: int) -> None:
    await session.execute(text("DELETE FROM ltm_items_fts WHERE rowid = :r"), {"r": rowid})


async def fts_search(
    session: AsyncSession,
    tokens: list[str],
    scopes: list[tuple[str, str]] | None,
    statuses: tuple[str, ...],
    limit: int,
) -> list[tuple[int, float]]:
    """(item rowid, bm25) of the best keyword matches in the given scopes
    (``None``: every scope). bm25 is negated so that larger is better.
    """
    if not tokens or scopes == []:
        return []
    scope_sql = " OR ".join(
        f"(i.scope = :s{n} AND i.scope_id = :i{n})" for n in range(len(scopes or []))
    ) or "1"
    status_sql = ", ".join(f":st{n}" for n in range(len(statuses)))
    params: dict[str, object] = {"q": fts_match_expression(tokens), "lim": limit}
    for n, (scope, scope_id) in enumerate(scopes or []):
        params[f"s{n}"], params[f"i{n}"] = scope, scope_id
    for n, status in enumerate(statuses):
        params[f"st{n}"] = status
    rows = await session.execute(
        text(
            "SELECT f.rowid, -bm25(ltm_items_fts) AS score FROM ltm_items_fts f "
            "JOIN ltm_items i ON i.id = f.rowid "
            f"WHERE ltm_items_fts MATCH :q AND ({scope_sql}) AND i.status IN ({status_sql}) "
            "ORDER BY bm25(ltm_items_fts) LIMIT :lim"
        ),
        params,
    )
    return [(int(r[0]), float(r[1])) for r in rows]


async def events_fts_search(
    session: AsyncSession,
    tokens: list[str],
    scopes: list[tuple[str, str]],
    limit: int,
    include_pending: bool,
) -> list[tuple[int, float]]:
    """(event rowid, bm25) of the best keyword matches among the scopes'
    user and tool events (never the assistant's own lines) that may be
    shown to the model: evidence of an active memory, or — when
    ``include_pending`` — not extracted yet. A turn behind a shadow,
    disabled or deleted memory, or one extraction found nothing in, is never
    eligible: operators decide what the bot knows, not the raw log."""
    if not tokens or not scopes:
        return []
    scope_sql = " OR ".join(f"(e.scope = :s{n} AND e.scope_id = :i{n})" for n in range(len(scopes)))
    params: dict[str, object] = {"q": fts_match_expression(tokens), "lim": limit}
    for n, (scope, scope_id) in enumerate(scopes):
        params[f"s{n}"], params[f"i{n}"] = scope, scope_id
    rows = await session.execute(
        text(
            "SELECT f.rowid, -bm25(ltm_events_fts) FROM ltm_events_fts f JOIN ltm_events e ON e.id = f.rowid "
            f"WHERE ltm_events_fts MATCH :q AND ({scope_sql}) AND e.source_role IN ('user', 'tool') "
            # CROSS JOIN keeps SQLite's join order: evidence by event id
            # (ix_ltm_evidence_event), then the item by its unique id;
            # a plain JOIN was planned as a scan of every active item.
            "AND (EXISTS (SELECT 1 FROM ltm_evidence v CROSS JOIN ltm_items i ON i.memory_id = v.memory_id "
            "             WHERE v.event_id = e.event_id AND i.status = 'active')"
            f"     {'OR e.extraction_status = ' + repr('pending') if include_pending else ''}) "
            "ORDER BY bm25(ltm_events_fts) LIMIT :lim"
        ),
        params,
    )
    return [(int(r[0]), float(r[1])) for r in rows]


def event_search_text(content: dict) -> str:
    """The words of a raw event, for the events' keyword index."""
    if "tool" in content:
        return f"{content.get('tool', '')} {content.get('result', '')}"
    return str(content.get("text", ""))


async def events_fts_insert(session: AsyncSession, rows: list[tuple[int, dict]]) -> None:
    for rowid, content in rows:
        await session.execute(
            text("INSERT INTO ltm_events_fts (rowid, tokens) VALUES (:r, :t)"),
            {"r": rowid, "t": index_text(event_search_text(content))},
        )


async def events_fts_backfill(session: AsyncSession, batch: int = 1000) -> int:
    """Index events recorded before the events' keyword index existed."""
    done = 0
    while True:
        last = (await session.execute(text("SELECT COALESCE(MAX(rowid), 0) FROM ltm_events_fts"))).scalar_one()
        rows = (
            await session.execute(
                text("SELECT id, content FROM ltm_events WHERE id > :last ORDER BY id LIMIT :n"),
                {"last": last, "n": batch},
            )
        ).all()
        if not rows:
            return done
        await events_fts_insert(
            session, [(r[0], json.loads(r[1]) if isinstance(r[1], str) else r[1]) for r in rows]
        )
        done += len(rows)


async def fts_rebuild(session: AsyncSession) -> int:
    """Rebuild the keyword index from ``ltm_items`` (the source of truth)."""
    await session.execute(text("DELETE FROM ltm_items_fts"))
    rows = (await session.execute(text("SELECT id, fact FROM ltm_items"))).all()
    for rowid, fact in rows:
        await session.execute(
            text("INSERT INTO ltm_items_fts (rowid, tokens) VALUES (:r, :t)"),
            {"r": rowid, "t": index_text(fact)},
        )
    return len(rows)
