"""Sessions on AstrBot's database, the read-only switch, and the keyword index.

Every write to the plugin's tables goes through :meth:`Database.write`, which
refuses while ``emergency_read_only`` is on: one choke point, so the switch
takes effect on the next write without a restart and nothing can slip past.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, and_, create_engine, event, or_, select, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from . import keywords
from . import migrate as migrations
from .logs import log
from .models import MemoryEvent, MemoryItem, as_utc
from .scope import Scope
from .text import fts_match_expression, index_text, search_tokens, sentences


class ReadOnlyError(RuntimeError):
    """Raised instead of writing while emergency_read_only is on."""


T = TypeVar("T")
# Threads for Database.run: the reads of a few turns at once (each read
# runs up to three searches side by side), not so many that they crowd out
# AstrBot's own use of the two or so cores a bot has.
READ_THREADS = 4
# Threads for Database.load: building a large cache (a scope's keyword or
# vector namespace: seconds at 100k rows) must not take the threads a read
# needs for its own queries. Keyword namespaces take at most half of them
# (keywords.LOADS), so vector namespaces never wait behind them.
LOAD_THREADS = 4


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
        self._load_threads: ThreadPoolExecutor | None = None
        # The reader's keyword namespaces; kept in step with the FTS tables
        # by the changes each write notes (keywords.note), once committed.
        self.keywords = keywords.KeywordIndex(scope_prefix)

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
            pool_size=READ_THREADS + LOAD_THREADS,
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

    async def load(self, fn: Callable[[Connection], T]) -> T:
        """Like :meth:`run`, on threads of their own (LOAD_THREADS): for
        building caches from SQLite, which may take seconds."""
        if self._load_threads is None:
            self._load_threads = ThreadPoolExecutor(LOAD_THREADS, thread_name_prefix="ltm-load")
        return await asyncio.get_running_loop().run_in_executor(self._load_threads, self._call, fn)

    def _call(self, fn: Callable[[Connection], T]) -> T:
        with self.read_engine.connect() as connection:
            return fn(connection)

    async def close(self) -> None:
        """Let running reads finish, then close the read connections."""
        for threads in (self._read_threads, self._load_threads):
            if threads is not None:
                await asyncio.to_thread(threads.shutdown, wait=True)
        self._read_threads = self._load_threads = None
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
            async with self._sessions() as session:
                try:
                    async with session.begin():
                        yield session
                except BaseException:
                    for undo in session.info.pop(_AFTER_ROLLBACK, []):
                        try:
                            undo()
                        except Exception:
                            log.exception("ltm: undoing a cache change after a rollback failed")
                    raise
                # Committed: now the caches may follow (never before, so a
                # rolled-back write leaves them as they were).
                changes = keywords.noted(session)
                if changes:  # a merge of a large namespace takes a while
                    await asyncio.to_thread(self.keywords.apply, changes)
                for follow in session.info.pop(_AFTER_COMMIT, []):
                    try:
                        follow()
                    except Exception:  # the write stands; a cache is only late
                        log.exception("ltm: updating a cache after a commit failed")


_AFTER_COMMIT = "ltm_after_commit"
_AFTER_ROLLBACK = "ltm_after_rollback"


def after_commit(session: AsyncSession, follow: Callable[[], None]) -> None:
    """Run ``follow`` once the write transaction of ``session`` has
    committed (Database.write): for caches of what it changed."""
    session.info.setdefault(_AFTER_COMMIT, []).append(follow)


def after_rollback(session: AsyncSession, undo: Callable[[], None]) -> None:
    """Run ``undo`` if the write transaction of ``session`` rolls back
    (Database.write): for a cache changed before the commit."""
    session.info.setdefault(_AFTER_ROLLBACK, []).append(undo)


def scope_prefix(scope: str, scope_id: str) -> str:
    """What a scope's terms start with in the keyword indexes' ``scoped``
    column (migrations 0003 and 0005 repeat this function)."""
    return hashlib.blake2b(f"{scope}\x1f{scope_id}".encode(), digest_size=8).hexdigest()


def scoped_text(scope: str, scope_id: str, text_: str) -> str:
    """The ``scoped`` column of a row: its search tokens, each prefixed with
    its scope, so each scope's terms have postings of their own."""
    return scoped_tokens(scope, scope_id, search_tokens(text_))


def scoped_tokens(scope: str, scope_id: str, tokens: list[str]) -> str:
    prefix = scope_prefix(scope, scope_id)
    return " ".join(prefix + token for token in tokens)


Scopes = list[tuple[str, str]] | None  # None: every scope (the items' plain tokens)


def _terms(token: str, scopes: Scopes) -> list[str]:
    if scopes is None:
        return [token]
    return [scope_prefix(scope, scope_id) + token for scope, scope_id in dict.fromkeys(scopes)]


def _match(tokens: list[str], scopes: Scopes) -> str:
    terms = [term for token in tokens for term in _terms(token, scopes)]
    return f"{'tokens' if scopes is None else 'scoped'} : ({fts_match_expression(terms)})"


def _ranked(
    conn: Connection,
    match: str,
    rank: str,
    accept: str,
    params: dict[str, object],
    limit: int,
) -> list[tuple[int, float]]:
    """(item rowid, -bm25) of the best matches whose item passes ``accept``
    (SQL over ltm_items, aliased ``x``), best first.

    The index ranks on its own and the rows are checked afterwards, a few
    times the limit at a time: checking every match with a join costs a
    lookup per match, tens of thousands at scale.
    """
    window = 4 * limit
    while True:
        # One statement: the window of best matches, how many there were
        # (the row whose first column is 0), and the ones that pass.
        rows = conn.execute(
            text(
                f"WITH top AS MATERIALIZED (SELECT rowid AS id, {rank} AS rank FROM ltm_items_fts "
                f"WHERE ltm_items_fts MATCH :q ORDER BY {rank} LIMIT :k) "
                "SELECT 0, (SELECT count(*) FROM top), NULL UNION ALL "
                "SELECT * FROM (SELECT 1, x.id, -top.rank FROM top CROSS JOIN ltm_items x ON x.id = top.id "
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
    row = item_index_row(item.id, item.scope, item.scope_id, item.fact)
    await session.execute(text("DELETE FROM ltm_items_fts WHERE rowid = :r"), {"r": item.id})
    await session.execute(text(ITEM_INDEX_INSERT), row)
    keywords.note(session, keywords.Change(keywords.MEMORIES, Scope(item.scope, item.scope_id), item.id,
                                           tuple(str(row["t"]).split())))


async def fts_delete(session: AsyncSession, item: MemoryItem) -> None:
    await session.execute(text("DELETE FROM ltm_items_fts WHERE rowid = :r"), {"r": item.id})
    keywords.note(session, keywords.Change(keywords.MEMORIES, Scope(item.scope, item.scope_id), item.id, None))


def fts_search(
    conn: Connection,
    tokens: list[str],
    scopes: list[tuple[str, str]] | None,
    statuses: tuple[str, ...],
    limit: int,
) -> list[tuple[int, float]]:
    """(item rowid, -bm25) of the best keyword matches with one of
    ``statuses`` in the given scopes (``None``: every scope), best first:
    the operators' search (the reader's is keywords.py)."""
    if not tokens or scopes == [] or not statuses:
        return []
    marks = ", ".join(f":st{n}" for n in range(len(statuses)))
    rank = "bm25(ltm_items_fts, 1.0, 0.0)" if scopes is None else "bm25(ltm_items_fts, 0.0, 1.0)"
    # "+" keeps SQLite on the rowids: with an index on status it would
    # rather read every active item and test each against the id list.
    return _ranked(
        conn, _match(tokens, scopes), rank, f"+x.status IN ({marks})",
        {f"st{n}": status for n, status in enumerate(statuses)}, limit,
    )


# Raw turns the model may be shown (SQL over an ltm_events row aliased x).
# A turn said by a person or a tool, not withheld (a memory it backed was
# deleted or rejected, or its scope forgotten), and behind no memory that
# is held back (shadow, awaiting approval, disabled, expired): operators
# decide what the bot knows, and a raw turn must not leak a memory they
# have not let through. Where facts go live without review (mode auto),
# that is all; otherwise only turns behind active memories qualify. The
# subquery is NULL without evidence, 0 if any memory is not active, else 1.
_BACKING = (
    "(SELECT min(i.status = 'active') FROM ltm_evidence v CROSS JOIN ltm_items i "
    "ON i.memory_id = v.memory_id WHERE v.event_id = x.event_id)"
)
SHOWN_ROLES = ("user", "tool")


def shown_turns(unbacked: bool) -> str:
    """The SQL condition for a raw turn that may be shown (see above);
    ``unbacked``: turns behind no memory qualify too (mode auto). CROSS
    JOIN keeps SQLite's join order: evidence by event id
    (ix_ltm_evidence_event), then the item by its unique id."""
    backing = f"coalesce({_BACKING}, 1) = 1" if unbacked else f"{_BACKING} = 1"
    roles = ", ".join(f"'{role}'" for role in SHOWN_ROLES)
    return f"x.source_role IN ({roles}) AND NOT x.withheld AND {backing}"


def event_search_text(content: dict) -> str:
    """The words of a raw event, for the events' keyword index."""
    if "tool" in content:
        return f"{content.get('tool', '')} {content.get('result', '')}"
    return str(content.get("text", ""))


def _turn_parts(source_type: str, content: dict, speaker: str | None) -> tuple[str, str]:
    """Who (or which tool) said it, and what."""
    if source_type == "tool_result":
        return f"tool {content.get('tool', '?')}", str(content.get("result", ""))
    return speaker or "someone", str(content.get("text", ""))


def turn_text(source_type: str, content: dict, speaker: str | None) -> str:
    """A raw turn as one line of text, who said it first: what the model is
    shown (reader.format_event_line)."""
    who, said = _turn_parts(source_type, content, speaker)
    return " ".join(f"{who}: {said}".split())


def turn_passages(source_type: str, content: dict, speaker: str | None) -> list[str]:
    """What a raw turn is embedded as: each sentence on its own, after who
    said it (text.sentences). A turn is found by its best sentence: one
    vector of a whole turn blurs its topics together. Measured on LoCoMo
    (the dev questions' evidence turns among a conversation's top 15 by
    all-MiniLM-L6-v2): whole turns 0.558, sentences 0.666, sentences
    without the speaker 0.420 (questions name people)."""
    who, said = _turn_parts(source_type, content, speaker)
    return [" ".join(f"{who}: {sentence}".split()) for sentence in sentences(said)] or [f"{who}:"]


# A turn is indexed with the first words of the turn before it in the same
# conversation, if that came within the hour: "who performed?" — "Matt
# Patterson" is found by "who performed". Measured on LoCoMo (bench/locomo,
# 5 dev conversations): 0.773 evidence recall without, 0.802 with. Only the
# keyword index gets the context: embedding it too measured worse (in a
# replay outside the plugin). Migration 0005 applies the same rule to the
# events indexed before it.
CONTEXT_TOKENS = 60
CONTEXT_WINDOW = timedelta(hours=1)


def event_tokens(content: dict, context: dict | None = None) -> list[str]:
    """An event's search tokens; ``context``: the content of the event before
    it in its conversation (see CONTEXT_TOKENS)."""
    tokens = search_tokens(event_search_text(content))
    if context is not None:
        tokens += search_tokens(event_search_text(context))[:CONTEXT_TOKENS]
    return tokens


def event_index_row(rowid: int, scope: str, scope_id: str, content: dict,
                    context: dict | None = None) -> dict[str, object]:
    """The keyword-index row of an event (see event_tokens)."""
    return {"r": rowid, "s": scoped_tokens(scope, scope_id, event_tokens(content, context))}


async def index_events(session: AsyncSession, events: list[MemoryEvent]) -> None:
    """Add events (flushed, so they have ids) to the events' keyword index,
    each with its conversation's turn before it as context. Only the turns
    the reader may show are indexed: the bot's own lines never are."""
    ordered = sorted(events, key=lambda e: (as_utc(e.created_at), e.id))
    before: dict[str | None, tuple[datetime, dict] | None] = {}
    rows = []
    for recorded in ordered:
        at = as_utc(recorded.created_at)
        if recorded.session_id not in before:
            before[recorded.session_id] = await _event_before(session, recorded) if recorded.session_id else None
        prev = before[recorded.session_id]
        if recorded.source_role in SHOWN_ROLES:
            context = prev[1] if prev is not None and at - prev[0] <= CONTEXT_WINDOW else None
            tokens = event_tokens(recorded.content, context)
            rows.append({"r": recorded.id, "s": scoped_tokens(recorded.scope, recorded.scope_id, tokens)})
            keywords.note(session, keywords.Change(
                keywords.TURNS, Scope(recorded.scope, recorded.scope_id), recorded.id, tuple(tokens)))
        if recorded.session_id:
            before[recorded.session_id] = (at, recorded.content)
    if rows:
        await session.execute(text(EVENT_INDEX_INSERT), rows)


async def _event_before(session: AsyncSession, event: MemoryEvent) -> tuple[datetime, dict] | None:
    """The latest event of ``event``'s conversation recorded before it."""
    at = event.created_at
    row = (
        await session.execute(
            select(MemoryEvent.created_at, MemoryEvent.content)
            .where(
                MemoryEvent.session_id == event.session_id,
                or_(MemoryEvent.created_at < at, and_(MemoryEvent.created_at == at, MemoryEvent.id < event.id)),
            )
            .order_by(MemoryEvent.created_at.desc(), MemoryEvent.id.desc())
            .limit(1)
        )
    ).first()
    return None if row is None else (as_utc(row[0]), row[1] or {})


async def events_fts_backfill(session: AsyncSession, batch: int = 1000) -> int:
    """Index the turns recorded before the events' keyword index existed
    (those after the last indexed one)."""
    done = 0
    last = (await session.execute(text("SELECT COALESCE(MAX(rowid), 0) FROM ltm_events_fts"))).scalar_one()
    while True:
        events = (
            await session.execute(select(MemoryEvent).where(MemoryEvent.id > last).order_by(MemoryEvent.id).limit(batch))
        ).scalars().all()
        if not events:
            return done
        await index_events(session, list(events))
        last = events[-1].id
        done += sum(1 for e in events if e.source_role in SHOWN_ROLES)


async def fts_rebuild(session: AsyncSession) -> int:
    """Rebuild the items' keyword index from ``ltm_items`` (the source of truth)."""
    await session.execute(text("DELETE FROM ltm_items_fts"))
    keywords.note(session, keywords.Change(keywords.MEMORIES, None, None, None))
    rows = (await session.execute(text("SELECT id, scope, scope_id, fact FROM ltm_items"))).all()
    if rows:
        await session.execute(text(ITEM_INDEX_INSERT), [item_index_row(*r) for r in rows])
    return len(rows)
