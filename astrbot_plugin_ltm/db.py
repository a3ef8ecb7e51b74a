"""Sessions on AstrBot's database, the read-only switch, and the keyword index.

Every write to the plugin's tables goes through :meth:`Database.write`, which
refuses while ``emergency_read_only`` is on: one choke point, so the switch
takes effect on the next write without a restart and nothing can slip past.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from . import migrate as migrations
from .models import MemoryItem
from .text import fts_match_expression, index_text, search_tokens


class ReadOnlyError(RuntimeError):
    """Raised instead of writing while emergency_read_only is on."""


T = TypeVar("T")
# Threads for Database.run: the reads of a few turns at once (each read
# runs up to three searches side by side), not so many that they crowd out
# AstrBot's own use of the two or so cores a bot has.
READ_THREADS = 4


def _query_only(dbapi_connection: Any, _record: Any) -> None:
    # The read connections can never write, whatever a bug asks of them.
    dbapi_connection.execute("PRAGMA query_only = ON")


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
        self.read_engine = self._read_engine(engine)
        self._read_threads: ThreadPoolExecutor | None = None

    @property
    def path(self) -> str:
        return self.engine.url.database or ""

    @staticmethod
    def _read_engine(engine: AsyncEngine) -> Engine:
        """Blocking connections to the same file, for :meth:`run`."""
        database = engine.url.database or ""
        if database in ("", ":memory:") or database.startswith("file::memory:"):
            raise RuntimeError("astrbot_plugin_ltm needs a SQLite database file, not an in-memory one")
        read_engine = create_engine(
            engine.url.set(drivername="sqlite+pysqlite"),
            connect_args={"check_same_thread": False},
            pool_size=READ_THREADS,
            max_overflow=0,
        )
        event.listen(read_engine, "connect", _query_only)
        return read_engine

    async def run(self, fn: Callable[[Connection], T]) -> T:
        """``fn(connection)`` on a read-only connection in a worker thread.

        The read path's searches are written against this: all of a step's
        statements then cost one hop to a thread. Through aiosqlite every
        statement costs several hops between the event loop and the
        connection's thread (execute, fetch, close) and each hop waits for
        the loop: at 10k items those waits were two thirds of a read.
        """
        if self._read_threads is None:
            self._read_threads = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="ltm-read")
        return await asyncio.get_running_loop().run_in_executor(self._read_threads, self._call, fn)

    def _call(self, fn: Callable[[Connection], T]) -> T:
        with self.read_engine.connect() as connection:
            return fn(connection)

    async def close(self) -> None:
        """Let running reads finish, then close the read connections."""
        threads, self._read_threads = self._read_threads, None
        if threads is not None:
            await asyncio.to_thread(threads.shutdown, wait=True)
        self.read_engine.dispose()

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


def scope_prefix(scope: str, scope_id: str) -> str:
    """What a scope's terms start with in the keyword indexes' ``scoped``
    column (migration 0003 repeats this function)."""
    return hashlib.blake2b(f"{scope}\x1f{scope_id}".encode(), digest_size=8).hexdigest()


def scoped_text(scope: str, scope_id: str, text_: str) -> str:
    """The ``scoped`` column of a row: its search tokens, each prefixed with
    its scope, so each scope's terms have postings of their own."""
    prefix = scope_prefix(scope, scope_id)
    return " ".join(prefix + token for token in search_tokens(text_))


Scopes = list[tuple[str, str]] | None  # None: every scope (the items' plain tokens)


def _terms(token: str, scopes: Scopes) -> list[str]:
    if scopes is None:
        return [token]
    return [scope_prefix(scope, scope_id) + token for scope, scope_id in dict.fromkeys(scopes)]


def _match(tokens: list[str], scopes: Scopes) -> str:
    terms = [term for token in tokens for term in _terms(token, scopes)]
    return f"{'tokens' if scopes is None else 'scoped'} : ({fts_match_expression(terms)})"


# bm25 weighs a term by walking every row of the scope that holds it, so a
# term in 60,000 rows costs tens of milliseconds per query. Terms are taken
# rarest first until their rows add up to this many; a term held by more
# rows than that on its own is left out (in a scope that large it is all but
# a stopword; vector search still covers the query). A scope smaller than
# this is always searched with every term.
MAX_POSTINGS = 5_000
_DF_TTL_SECONDS = 600.0


class TermFrequencies:
    """How many rows of a keyword index hold each term (fts5vocab), cached
    for a while: counting a term is itself a walk over its rows. A stale
    count only misjudges what a term costs; a term is never left out for
    being rare, so one that was absent when counted is still searched."""

    def __init__(self, max_entries: int = 50_000) -> None:
        self._cache: OrderedDict[tuple[str, str, str], tuple[int, float]] = OrderedDict()
        self._lock = threading.Lock()  # reads run in several threads
        self.max_entries = max_entries

    def get(self, conn: Connection, table: str, tokens: list[str]) -> dict[str, int]:
        where = str(conn.engine.url)
        now = time.monotonic()
        found: dict[str, int] = {}
        with self._lock:
            for token in tokens:
                hit = self._cache.get((where, table, token))
                if hit is not None and now - hit[1] < _DF_TTL_SECONDS:
                    found[token] = hit[0]
        todo = [t for t in tokens if t not in found]
        if todo:
            marks = ", ".join(f":t{n}" for n in range(len(todo)))
            rows = conn.execute(
                text(f"SELECT term, doc FROM {table}_vocab WHERE term IN ({marks})"),
                {f"t{n}": t for n, t in enumerate(todo)},
            )
            counted = {str(term): int(doc) for term, doc in rows}
            with self._lock:
                for token in todo:
                    found[token] = counted.get(token, 0)
                    self._cache[(where, table, token)] = (found[token], now)
                while len(self._cache) > self.max_entries:
                    self._cache.popitem(last=False)
        return found

    def affordable(self, conn: Connection, table: str, tokens: list[str], scopes: Scopes) -> list[str]:
        """The query tokens worth searching in ``scopes``: rarest first while
        their rows add up to MAX_POSTINGS."""
        df = self.get(conn, table, [term for token in tokens for term in _terms(token, scopes)])
        rows = {token: sum(df[term] for term in _terms(token, scopes)) for token in tokens}
        kept: list[str] = []
        postings = 0
        for token in sorted(tokens, key=lambda t: rows[t]):
            if postings + rows[token] > MAX_POSTINGS:
                break
            kept.append(token)
            postings += rows[token]
        return kept


term_frequencies = TermFrequencies()


def _ranked(
    conn: Connection,
    table: str,
    match: str,
    rank: str,
    accept: str,
    params: dict[str, object],
    limit: int,
    key: str = "id",
) -> list[tuple[Any, float]]:
    """(the row's ``key`` column, -bm25) of the best matches whose row
    passes ``accept`` (SQL over the row's table, aliased ``x``), best first.

    The index ranks on its own and the rows are checked afterwards, a few
    times the limit at a time: checking every match with a join costs a
    lookup per match, tens of thousands at scale.
    """
    source = {"ltm_items_fts": "ltm_items", "ltm_events_fts": "ltm_events"}[table]
    window = 4 * limit
    while True:
        # One statement: the window of best matches, how many there were
        # (the row whose first column is 0), and the ones that pass.
        rows = conn.execute(
            text(
                f"WITH top AS MATERIALIZED (SELECT rowid AS id, {rank} AS rank FROM {table} "
                f"WHERE {table} MATCH :q ORDER BY {rank} LIMIT :k) "
                "SELECT 0, (SELECT count(*) FROM top), NULL UNION ALL "
                f"SELECT * FROM (SELECT 1, x.{key}, -top.rank FROM top CROSS JOIN {source} x ON x.id = top.id "
                f"WHERE {accept} ORDER BY top.rank LIMIT :lim)"
            ),
            {**params, "q": match, "k": window, "lim": limit},
        ).all()
        matched = next(row[1] for row in rows if row[0] == 0)
        ranked = sorted(((row[1], float(row[2])) for row in rows if row[0] == 1), key=lambda hit: -hit[1])
        if len(ranked) >= limit or matched < window or window >= 64 * limit:
            return ranked
        window *= 4  # too few passed: look further down the ranking


ITEM_INDEX_INSERT = "INSERT INTO ltm_items_fts (rowid, tokens, scoped) VALUES (:r, :t, :s)"
EVENT_INDEX_INSERT = "INSERT INTO ltm_events_fts (rowid, scoped) VALUES (:r, :s)"


def item_index_row(rowid: int, scope: str, scope_id: str, fact: str) -> dict[str, object]:
    return {"r": rowid, "t": index_text(fact), "s": scoped_text(scope, scope_id, fact)}


async def fts_upsert(session: AsyncSession, item: MemoryItem) -> None:
    """Index an item's fact under its scope."""
    await session.execute(text("DELETE FROM ltm_items_fts WHERE rowid = :r"), {"r": item.id})
    await session.execute(text(ITEM_INDEX_INSERT), item_index_row(item.id, item.scope, item.scope_id, item.fact))


async def fts_delete(session: AsyncSession, rowid: int) -> None:
    await session.execute(text("DELETE FROM ltm_items_fts WHERE rowid = :r"), {"r": rowid})


def fts_search(
    conn: Connection,
    tokens: list[str],
    scopes: list[tuple[str, str]] | None,
    statuses: tuple[str, ...],
    limit: int,
    every_term: bool = False,
) -> list[tuple[int, float]]:
    """(item rowid, -bm25) of the best keyword matches with one of
    ``statuses`` in the given scopes (``None``: every scope), best first.
    The reader leaves out terms too common to pay for (MAX_POSTINGS); an
    operator's search (``every_term``) uses every term, however common."""
    if not tokens or scopes == [] or not statuses:
        return []
    if not every_term:
        tokens = term_frequencies.affordable(conn, "ltm_items_fts", tokens, scopes)
        if not tokens:
            return []
    marks = ", ".join(f":st{n}" for n in range(len(statuses)))
    rank = "bm25(ltm_items_fts, 1.0, 0.0)" if scopes is None else "bm25(ltm_items_fts, 0.0, 1.0)"
    # "+" keeps SQLite on the rowids: with an index on status it would
    # rather read every active item and test each against the id list.
    return _ranked(
        conn, "ltm_items_fts", _match(tokens, scopes), rank, f"+x.status IN ({marks})",
        {f"st{n}": status for n, status in enumerate(statuses)}, limit,
    )


def events_fts_search(
    conn: Connection,
    tokens: list[str],
    scopes: list[tuple[str, str]],
    limit: int,
    include_pending: bool,
) -> list[tuple[str, float]]:
    """(event_id, -bm25) of the best keyword matches among the scopes'
    user and tool events (never the assistant's own lines) that may be
    shown to the model: evidence of an active memory, or — when
    ``include_pending`` — not extracted yet. A turn behind a shadow,
    disabled or deleted memory, or one extraction found nothing in, is never
    eligible: operators decide what the bot knows, not the raw log."""
    if not tokens or not scopes:
        return []
    tokens = term_frequencies.affordable(conn, "ltm_events_fts", tokens, scopes)
    if not tokens:
        return []
    accept = (
        "x.source_role IN ('user', 'tool') AND ("
        # CROSS JOIN keeps SQLite's join order: evidence by event id
        # (ix_ltm_evidence_event), then the item by its unique id.
        "EXISTS (SELECT 1 FROM ltm_evidence v CROSS JOIN ltm_items i ON i.memory_id = v.memory_id "
        "        WHERE v.event_id = x.event_id AND i.status = 'active')"
        + (" OR x.extraction_status = 'pending'" if include_pending else "")
        + ")"
    )
    return _ranked(
        conn, "ltm_events_fts", _match(tokens, scopes), "bm25(ltm_events_fts)", accept, {}, limit, "event_id"
    )


def event_search_text(content: dict) -> str:
    """The words of a raw event, for the events' keyword index."""
    if "tool" in content:
        return f"{content.get('tool', '')} {content.get('result', '')}"
    return str(content.get("text", ""))


def event_index_row(rowid: int, scope: str, scope_id: str, content: dict) -> dict[str, object]:
    return {"r": rowid, "s": scoped_text(scope, scope_id, event_search_text(content))}


async def events_fts_insert(session: AsyncSession, rows: list[dict[str, object]]) -> None:
    """Index events; each row from :func:`event_index_row`."""
    if rows:
        await session.execute(text(EVENT_INDEX_INSERT), rows)


async def events_fts_backfill(session: AsyncSession, batch: int = 1000) -> int:
    """Index events recorded before the events' keyword index existed."""
    done = 0
    while True:
        last = (await session.execute(text("SELECT COALESCE(MAX(rowid), 0) FROM ltm_events_fts"))).scalar_one()
        rows = (
            await session.execute(
                text("SELECT id, scope, scope_id, content FROM ltm_events WHERE id > :last ORDER BY id LIMIT :n"),
                {"last": last, "n": batch},
            )
        ).all()
        if not rows:
            return done
        await events_fts_insert(session, [
            event_index_row(r[0], r[1], r[2], json.loads(r[3]) if isinstance(r[3], str) else r[3]) for r in rows
        ])
        done += len(rows)


async def fts_rebuild(session: AsyncSession) -> int:
    """Rebuild the items' keyword index from ``ltm_items`` (the source of truth)."""
    await session.execute(text("DELETE FROM ltm_items_fts"))
    rows = (await session.execute(text("SELECT id, scope, scope_id, fact FROM ltm_items"))).all()
    if rows:
        await session.execute(text(ITEM_INDEX_INSERT), [item_index_row(*r) for r in rows])
    return len(rows)
