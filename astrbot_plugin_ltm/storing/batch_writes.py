"""Write batches in a thread of their own, on a blocking connection.

Through AstrBot's async driver (aiosqlite) every statement costs several
hops between the event loop and the driver's thread (the cursor, the
execute, the rows, the close), each a thread switch and a wake-up of the
loop: an extraction batch's ~13 statements a candidate spent more time
hopping than in SQLite (docs/decisions.md#d94). Here a batch runs as one
coroutine on the writer thread's own event loop, against a connection of
the plugin's own whose statements run where they are called: one hop to the
thread and back per batch (docs/decisions.md#d128).

:meth:`Database.write_batch <.database.Database.write_batch>` keeps the rules
of the single write point around it; this module only provides the thread,
the connection, and :func:`on_event_loop` for what a batch must ask of the
bot's event loop (the embedding provider, the vector caches).

Rows a batch adds and seldom reads back are held to its end
(:func:`add_row`, :func:`write_rows`, docs/decisions.md#d143).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from typing import Any

from sqlalchemy import URL, Table, insert
from sqlalchemy.dialects import registry
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.pool import AsyncAdaptedQueuePool

# session.info key: the event loop that asked for the batch.
ASKED_FROM = "ltm_asked_from"


class _Cursor(sqlite3.Cursor):
    async def _async_soft_close(self) -> None:
        """SQLAlchemy's async results close an async driver's cursor once
        its rows are fetched; this cursor's rows are there to read as they are."""


class _Connection(sqlite3.Connection):
    def cursor(self, factory: Any = _Cursor) -> Any:  # noqa: D102 (sqlite3's own, with our cursor)
        return super().cursor(factory)


class DirectDialect(SQLiteDialect_pysqlite):
    """pysqlite, declared async so that an AsyncSession (the writer's code
    is written against one) drives it: every statement runs at once, in
    the thread that awaits it."""

    is_async = True
    supports_statement_cache = True


registry.register("sqlite.ltm_direct", __name__, "DirectDialect")


def direct_engine(url: URL) -> AsyncEngine:
    """The writer thread's engine on the database file of ``url``, with
    sqlite3's defaults (a 5 s busy timeout), as AstrBot's pooled
    connections have them."""
    return create_async_engine(
        url.set(drivername="sqlite+ltm_direct"),
        poolclass=AsyncAdaptedQueuePool,
        pool_size=1,
        max_overflow=1,
        connect_args={"check_same_thread": False, "factory": _Connection},
    )


class WriterThread:
    """One thread running an event loop of its own, for write batches.
    Started at the first batch; one batch at a time (the write lock)."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._loop is not None

    def submit[T](self, batch: Coroutine[Any, Any, T]) -> Future[T]:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=loop.run_forever, name="ltm-write", daemon=True)
            self._thread.start()
            self._loop = loop
        return asyncio.run_coroutine_threadsafe(batch, self._loop)

    def stop(self) -> None:
        """End the loop and the thread (a batch submitted after starts another)."""
        loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


async def on_event_loop[T](session: AsyncSession, call: Callable[[], Awaitable[T]]) -> T:
    """``call()`` on the event loop that asked for the write ``session``
    belongs to: what a batch needs of the bot's loop (an embedding
    provider's client, the vector caches and their loads) is bound to it.
    Awaited directly when the write runs on that loop (``Database.write``)."""
    loop = session.info.get(ASKED_FROM)
    if loop is None or loop is asyncio.get_running_loop():
        return await call()

    async def called() -> T:
        return await call()

    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(called(), loop))


# -- rows held to the batch's end ------------------------------------------------
# Rows a write batch adds and seldom reads back (its audit, gate-log and
# evidence rows), inserted together at the batch's end.
#
# Added one ORM object at a time, each such row cost an object, its state
# and a unit-of-work flush of its own (the writer's next query autoflushed
# it): 3 of a candidate's ~10 statements, and the flushes a quarter of the
# writer thread's profile at 10k (docs/decisions.md#d143). In a batch
# (:meth:`Database.write_batch <.database.Database.write_batch>`) they are
# kept as values and written by one executemany per table before the commit,
# in the order they were added, so the rows, their ids and the transaction
# are the same. A statement in the batch that reads or deletes such rows is
# preceded by :func:`write_rows` (the write counts' audit counts, a memory's
# evidence links, a removal). Elsewhere they are added to the session as before.

_HELD = "ltm_batch_rows"  # session.info key: {table: [values, ...]} while a batch holds rows


def hold_rows(session: AsyncSession) -> None:
    """From now on, :func:`add_row` keeps this session's rows until :func:`write_rows`."""
    session.info[_HELD] = {}


def add_row(session: AsyncSession, table: Table, values: dict[str, Any], make: Callable[..., object]) -> None:
    """A row of ``table`` with ``values`` (every column but the key): held
    when the session holds rows, else ``make(**values)`` added to it."""
    held: dict[Table, list[dict[str, Any]]] | None = session.info.get(_HELD)
    if held is None:
        session.add(make(**values))
    else:
        held.setdefault(table, []).append(values)


async def write_rows(session: AsyncSession) -> None:
    """Insert the rows held so far, one statement per table; called before
    the batch commits and before a statement that reads those tables."""
    held: dict[Table, list[dict[str, Any]]] | None = session.info.get(_HELD)
    if not held:
        return
    session.info[_HELD] = {}
    for table, rows in held.items():
        await session.execute(insert(table), rows)
