"""The database: sessions on AstrBot's SQLite file, the read-only switch, the single
write point and its change channel, and threads for reads. One choke point, so
emergency_read_only takes effect on the next write and indexes see every commit.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, Table, create_engine, event, insert, text
from sqlalchemy.dialects import registry
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session
from sqlalchemy.pool import AsyncAdaptedQueuePool

from ..faults import Faults
from ..i18n import msg
from ..logs import log
from . import migrate as migrations
from .changes import Change, DerivedIndex, taken

T = TypeVar("T")
# A few turns' reads at once, without crowding AstrBot on a bot's two or so cores.
READ_THREADS = 4
# Cache builds (seconds for a large scope) must not take a read's threads (docs/decisions.md#d15).
LOAD_THREADS = 4
# Wait for another connection's write lock before giving up with a clear message (docs/decisions.md#d91).
WRITE_LOCK_WAIT = 120.0


class ReadOnlyError(RuntimeError):
    """Raised instead of writing while emergency_read_only is on."""


class DatabaseBusyError(RuntimeError):
    """Another connection kept the write lock for WRITE_LOCK_WAIT seconds; nothing was written."""


def is_busy(exc: BaseException) -> bool:
    """SQLite's "database is locked" / "database is busy"."""
    return isinstance(exc, OperationalError) and any(
        word in str(exc.orig).lower() for word in ("database is locked", "database is busy"))


def is_full(exc: BaseException) -> bool:
    """SQLite's "database or disk is full" (SQLITE_FULL), or ENOSPC from a file write."""
    if isinstance(exc, OperationalError):
        return "full" in str(exc.orig).lower()
    return isinstance(exc, OSError) and exc.errno == 28


def _query_only(dbapi_connection: Any, _record: Any) -> None:
    # The read connections can never write, whatever a bug asks of them.
    dbapi_connection.execute("PRAGMA query_only = ON")
    # 1 MB of pages, not SQLite's 2: eight of them, over pages the OS caches anyway (docs/decisions.md#d161).
    dbapi_connection.execute("PRAGMA cache_size = -1024")


class Database:
    def __init__(self, sql_engine: AsyncEngine, read_only: Callable[[], bool] = lambda: False) -> None:
        if sql_engine.url.get_backend_name() != "sqlite":
            raise RuntimeError(
                f"astrbot_plugin_ltm needs AstrBot's SQLite database, got {sql_engine.url.get_backend_name()}"
            )
        self.sql_engine = sql_engine
        self.is_read_only = read_only
        self._sessions = async_sessionmaker(sql_engine, class_=AsyncSession, expire_on_commit=False)
        # SQLite has one writer: serialising ours avoids busy waits between the flusher and the worker.
        self._write_lock = asyncio.Lock()
        self.read_pool = self._read_pool(sql_engine)
        self._read_threads: ThreadPoolExecutor | None = None
        self._load_threads: ThreadPoolExecutor | None = None
        # write_batch's thread, its event loop, and its connection (docs/decisions.md#d128)
        self._batch_thread: threading.Thread | None = None
        self._batch_loop: asyncio.AbstractEventLoop | None = None
        self.batch_engine = _batch_engine(sql_engine.url)
        self._batch_sessions = async_sessionmaker(self.batch_engine, class_=AsyncSession, expire_on_commit=False)
        self._indexes: list[DerivedIndex] = []
        self.faults = Faults()  # what goes wrong now, for /ltm status (faults.py)
        self.lock_wait = WRITE_LOCK_WAIT

    @property
    def path(self) -> str:
        return self.sql_engine.url.database or ""

    @staticmethod
    def _read_pool(sql_engine: AsyncEngine) -> Engine:
        """Blocking connections to the same file, for :meth:`run` and :meth:`load`."""
        database = sql_engine.url.database or ""
        if database in ("", ":memory:") or database.startswith("file::memory:"):
            raise RuntimeError("astrbot_plugin_ltm needs a SQLite database file, not an in-memory one")
        pool = create_engine(
            sql_engine.url.set(drivername="sqlite+pysqlite"),
            connect_args={"check_same_thread": False},
            pool_size=READ_THREADS + LOAD_THREADS,
            max_overflow=0,
        )
        event.listen(pool, "connect", _query_only)
        return pool

    # -- the change channel --------------------------------------------------

    def subscribe(self, index: DerivedIndex) -> None:
        """``index`` follows every write committed from now on, after earlier subscribers."""
        self._indexes.append(index)

    async def _hand_over(self, changes: Sequence[Change]) -> None:
        for index in self._indexes:
            try:
                await index.follow(changes)
            except Exception:  # the write stands; an index is a cache and reloads
                log.exception("ltm: %s could not follow a committed write", type(index).__name__)

    # -- writing -----------------------------------------------------------------

    @asynccontextmanager
    async def write(self, *, persons_choice: bool = False) -> AsyncIterator[AsyncSession]:
        """A transaction, committed on success. Refused while read-only unless
        ``persons_choice`` (a pause), which read-only must not lose (docs/privacy.md)."""
        refuses = self.is_read_only if not persons_choice else (lambda: False)
        if refuses():
            raise ReadOnlyError(str(msg("api.read_only")))
        async with self._write_lock:
            if refuses():  # switched on while we waited
                raise ReadOnlyError(str(msg("api.read_only")))
            async with self._sessions() as session:
                async with session.begin():
                    await self._take_write_lock(session)
                    yield session
                # Under the write lock, so indexes take the writes in SQLite's order.
                changes = taken(session)
                if changes:
                    await self._hand_over(changes)

    async def write_batch(self, work: Callable[[AsyncSession], Awaitable[T]],
                          first: Callable[[], Awaitable[object]] | None = None) -> T:
        """:meth:`write`'s rules, but ``work`` runs in the batch thread on a blocking
        connection: dozens of statements cost one hop, not several each
        (docs/decisions.md#d128). ``first()`` runs on this loop under the write
        lock, for what ``work`` needs of this loop (embeddings, vector caches)."""
        if self.is_read_only():
            raise ReadOnlyError(str(msg("api.read_only")))
        async with self._write_lock:
            if self.is_read_only():
                raise ReadOnlyError(str(msg("api.read_only")))
            if first is not None:
                await first()
            done = asyncio.wrap_future(self._in_batch_thread(self._batch(work)))
            try:
                result, changes = await asyncio.shield(done)
            except asyncio.CancelledError:
                # The batch ends in its thread all the same: what it committed reaches the indexes.
                try:
                    _, changes = await done
                except Exception:
                    changes = []
                if changes:
                    await self._hand_over(changes)
                raise
            if changes:
                await self._hand_over(changes)
            return result

    def _in_batch_thread[R](self, batch: Coroutine[Any, Any, R]) -> Future[R]:
        """``batch`` on the batch thread's loop, both started at the first."""
        if self._batch_loop is None:
            self._batch_loop = asyncio.new_event_loop()
            self._batch_thread = threading.Thread(target=self._batch_loop.run_forever, name="ltm-write",
                                                  daemon=True)
            self._batch_thread.start()
        return asyncio.run_coroutine_threadsafe(batch, self._batch_loop)

    async def _batch(self, work: Callable[[AsyncSession], Awaitable[T]]) -> tuple[T, list[Change]]:
        async with self._batch_sessions() as session:
            session.info[_HELD] = {}  # rows held to the batch's end (below)
            async with session.begin():
                await self._take_write_lock(session)
                result = await work(session)
                await write_rows(session)
            return result, taken(session)

    async def _take_write_lock(self, session: AsyncSession) -> None:
        """BEGIN IMMEDIATE, waiting while another connection holds the lock: a deferred
        transaction's upgrade fails at once with "database is locked" (docs/decisions.md#d91)."""
        started = time.monotonic()
        pause = 0.05
        while True:
            try:
                await session.execute(text("BEGIN IMMEDIATE"))
            except OperationalError as exc:
                if not is_busy(exc):
                    raise
                waited = time.monotonic() - started
                if waited >= self.lock_wait:
                    self.faults.clear("busy")
                    log.error("ltm: the database stayed locked by another connection for %.0f s; a write "
                              "was given up", waited)
                    raise DatabaseBusyError(str(msg("fault.db_busy_gave_up", seconds=round(waited)))) from None
                if "busy" not in self.faults:
                    log.warning("ltm: another connection holds the database's write lock; memory writes wait")
                self.faults.report("busy", msg("fault.db_busy", seconds=round(waited)))
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)
                continue
            if "busy" in self.faults:
                log.info("ltm: the database's write lock is free again after %.1f s",
                         time.monotonic() - started)
                self.faults.clear("busy")
            return

    # -- reading -----------------------------------------------------------------

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        async with self._sessions() as session:
            yield session

    async def run(self, fn: Callable[[Connection], T]) -> T:
        """``fn(connection)`` on a read-only connection in a worker thread: a step's
        statements cost one hop, not several each via the async driver (docs/decisions.md#d16)."""
        if self._read_threads is None:
            self._read_threads = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="ltm-read")
        return await asyncio.get_running_loop().run_in_executor(self._read_threads, self._call, fn)

    async def run_session(self, fn: Callable[[Session], T]) -> T:
        """:meth:`run` with an ORM session, for whole-row reads in one hop
        (docs/decisions.md#d128); objects come back loaded and detached."""
        def in_session(connection: Connection) -> T:
            with Session(connection, expire_on_commit=False) as session:
                return fn(session)

        return await self.run(in_session)

    async def load(self, fn: Callable[[Connection], T]) -> T:
        """:meth:`run` on threads of their own, for cache builds that may take seconds."""
        if self._load_threads is None:
            self._load_threads = ThreadPoolExecutor(LOAD_THREADS, thread_name_prefix="ltm-load")
        return await asyncio.get_running_loop().run_in_executor(self._load_threads, self._call, fn)

    def _call(self, fn: Callable[[Connection], T]) -> T:
        with self.read_pool.connect() as connection:
            return fn(connection)

    # -- lifecycle ---------------------------------------------------------------

    async def migrate(self) -> list[int]:
        return await asyncio.to_thread(migrations.migrate, self.path)

    async def close(self) -> None:
        """Let reads finish, close the read connections, then the batch thread's once no batch runs."""
        for threads in (self._read_threads, self._load_threads):
            if threads is not None:
                await asyncio.to_thread(threads.shutdown, wait=True)
        self._read_threads = self._load_threads = None
        self.read_pool.dispose()
        async with self._write_lock:  # no batch running
            loop, thread, self._batch_loop, self._batch_thread = self._batch_loop, self._batch_thread, None, None
            if loop is not None and thread is not None:
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self.batch_engine.dispose(), loop))
                loop.call_soon_threadsafe(loop.stop)
                await asyncio.to_thread(thread.join)
                loop.close()


# -- the batch thread's connection ------------------------------------------------
# Through aiosqlite each statement costs several thread hops: a batch spent more
# time hopping than in SQLite (docs/decisions.md#d94). This one runs in place.


class _Cursor(sqlite3.Cursor):
    async def _async_soft_close(self) -> None:
        """SQLAlchemy's async results call this; a sqlite3 cursor has nothing to close."""


class _Connection(sqlite3.Connection):
    def cursor(self, factory: Any = _Cursor) -> Any:  # noqa: D102 (sqlite3's own, with our cursor)
        return super().cursor(factory)


class DirectDialect(SQLiteDialect_pysqlite):
    """pysqlite declared async, so the writer's AsyncSession code drives it in place."""

    is_async = True
    supports_statement_cache = True


registry.register("sqlite.ltm_direct", __name__, "DirectDialect")


def _batch_engine(url: Any) -> AsyncEngine:
    """sqlite3's defaults (a 5 s busy timeout), as AstrBot's pooled connections have them."""
    return create_async_engine(
        url.set(drivername="sqlite+ltm_direct"),
        poolclass=AsyncAdaptedQueuePool,
        pool_size=1,
        max_overflow=1,
        connect_args={"check_same_thread": False, "factory": _Connection},
    )


# -- rows held to the batch's end ------------------------------------------------
# ORM objects cost a flush each, a quarter of the batch at 10k (docs/decisions.md#d143): executemany instead.

_HELD = "ltm_batch_rows"  # session.info key: {table: [values, ...]} while a batch holds rows


def add_row(session: AsyncSession, table: Table, values: dict[str, Any], make: Callable[..., object]) -> None:
    """Held when the session holds rows, else ``make(**values)`` added to it."""
    held: dict[Table, list[dict[str, Any]]] | None = session.info.get(_HELD)
    if held is None:
        session.add(make(**values))
    else:
        held.setdefault(table, []).append(values)


async def write_rows(session: AsyncSession) -> None:
    """Insert the held rows; before the commit and before a statement that reads those tables."""
    held: dict[Table, list[dict[str, Any]]] | None = session.info.get(_HELD)
    if not held:
        return
    session.info[_HELD] = {}
    for table, rows in held.items():
        await session.execute(insert(table), rows)
