"""The keyword rows: SQLite's FTS5 tables of every fact and of every turn
the reader may show, each row holding the text's search tokens
(text.search_tokens: English stems, CJK bigrams).

``ltm_items_fts`` has two columns: ``tokens`` (plain, for the operators'
search over every scope) and ``scoped`` (each token prefixed with its
scope, so a scope's terms have postings of their own); ``ltm_events_fts``
has ``scoped`` only. The reader's keyword index (indexes.keywords) is
loaded from these rows and follows them through the change channel.
"""

from __future__ import annotations

import asyncio
import hashlib
from datetime import datetime
from typing import Any

from sqlalchemy import and_, or_, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from .. import text as tokenizing
from ..clock import as_utc, utcnow
from ..enums import RECALLED_ROLES
from ..logs import log
from ..scope import Scope
from ..text import index_text, search_tokens
from .changes import MemoriesReindexed, TurnsRecorded, note
from .tables import MemoryEvent, MemoryItem
from .turns import CONTEXT_WINDOW, MAX_PASSAGES, PASSAGE_BREAK, PASSAGE_LAYOUT, turn_tokens
from .vector_rows import delete_long_turn_vectors

FACT_ROW_INSERT = "INSERT INTO ltm_items_fts (rowid, tokens, scoped) VALUES (:r, :t, :s)"
TURN_ROW_INSERT = "INSERT INTO ltm_events_fts (rowid, scoped) VALUES (:r, :s)"


def scope_prefix(scope: str, scope_id: str) -> str:
    """What a scope's terms start with in the ``scoped`` columns
    (migrations 0003 and 0005 repeat this function: they stand alone)."""
    return hashlib.blake2b(f"{scope}\x1f{scope_id}".encode(), digest_size=8).hexdigest()


def scoped_tokens(scope: str, scope_id: str, tokens: list[str]) -> str:
    prefix = scope_prefix(scope, scope_id)
    return " ".join(token if token == PASSAGE_BREAK else prefix + token for token in tokens)


def scoped_text(scope: str, scope_id: str, text_: str) -> str:
    """The ``scoped`` column of a row whose words are ``text_``."""
    return scoped_tokens(scope, scope_id, search_tokens(text_))


def fact_row(rowid: int, scope: str, scope_id: str, fact: str) -> dict[str, object]:
    return {"r": rowid, "t": index_text(fact), "s": scoped_text(scope, scope_id, fact)}


# -- facts -----------------------------------------------------------------------


async def write_fact_row(session: AsyncSession, item: MemoryItem) -> tuple[str, ...]:
    """Index an item's fact under its scope; returns its keyword tokens
    (for the change the caller notes)."""
    assert item.id is not None, "flush the item first"
    row = fact_row(item.id, item.scope, item.scope_id, item.fact)
    await session.execute(text("DELETE FROM ltm_items_fts WHERE rowid = :r"), {"r": item.id})
    await session.execute(text(FACT_ROW_INSERT), row)
    return tuple(str(row["t"]).split())


async def delete_fact_row(session: AsyncSession, item_id: int) -> None:
    await session.execute(text("DELETE FROM ltm_items_fts WHERE rowid = :r"), {"r": item_id})


async def rebuild_fact_rows(session: AsyncSession) -> int:
    """Rebuild every fact's keyword row from ``ltm_items`` (an operator's
    repair, and the scale benchmark's)."""
    await session.execute(text("DELETE FROM ltm_items_fts"))
    rows = (await session.execute(text("SELECT id, scope, scope_id, fact FROM ltm_items"))).all()
    if rows:
        await session.execute(text(FACT_ROW_INSERT), [fact_row(*r) for r in rows])
    note(session, MemoriesReindexed())
    return len(rows)


# -- turns -----------------------------------------------------------------------


async def index_turns(session: AsyncSession, events: list[MemoryEvent], in_thread: bool = False) -> None:
    """Add events (flushed, so they have ids) to the turns' keyword rows,
    each with its conversation's event before it as context. Only turns the
    reader may show are indexed (storing.turns: RECALLED_ROLES); withheld
    turns never are."""
    ordered = sorted(events, key=lambda e: (as_utc(e.created_at), e.id or 0))
    before: dict[str | None, tuple[datetime, dict[str, Any]] | None] = {}
    indexed: list[tuple[MemoryEvent, dict[str, Any] | None]] = []
    for event in ordered:
        assert event.id is not None, "flush the events first"
        at = as_utc(event.created_at)
        if event.session_id not in before:
            before[event.session_id] = await _event_before(session, event) if event.session_id else None
        previous = before[event.session_id]
        if event.source_role in RECALLED_ROLES and not event.withheld:
            indexed.append((event, previous[1] if previous is not None and at - previous[0] <= CONTEXT_WINDOW
                            else None))
        if event.session_id:
            before[event.session_id] = (at, event.content)

    def tokenise() -> list[list[str]]:
        return [turn_tokens(event.content, context) for event, context in indexed]

    # A rebuild's batch of long turns takes seconds: off the event loop
    # (``in_thread``: only at start, before any read stems on the loop).
    every = await asyncio.to_thread(tokenise) if in_thread else tokenise()
    rows: list[dict[str, object]] = []
    recorded: dict[Scope, list[tuple[int, tuple[str, ...]]]] = {}
    for (event, _), tokens in zip(indexed, every, strict=True):
        assert event.id is not None
        rows.append({"r": event.id, "s": scoped_tokens(event.scope, event.scope_id, tokens)})
        recorded.setdefault(Scope(event.scope, event.scope_id), []).append((event.id, tuple(tokens)))
    if rows:
        await session.execute(text(TURN_ROW_INSERT), rows)
    note(session, *(TurnsRecorded(scope, tuple(turns)) for scope, turns in recorded.items()))


async def _event_before(session: AsyncSession, event: MemoryEvent) -> tuple[datetime, dict[str, Any]] | None:
    """The latest event of ``event``'s conversation recorded before it."""
    at = event.created_at
    row = (
        await session.execute(
            select(MemoryEvent.created_at, MemoryEvent.content)
            .where(
                MemoryEvent.session_id == event.session_id,
                or_(MemoryEvent.created_at < at,
                    and_(MemoryEvent.created_at == at, MemoryEvent.id < (event.id or 0))),
            )
            .order_by(MemoryEvent.created_at.desc(), MemoryEvent.id.desc())
            .limit(1)
        )
    ).first()
    return None if row is None else (as_utc(row[0]), row[1] or {})


async def backfill_turn_rows(session: AsyncSession, batch: int = 1000) -> int:
    """Index the turns recorded before the turns' keyword rows existed
    (every event after the last one indexed), tokenised in a thread: run
    at start, before any read. Returns how many."""
    done = 0
    last = (await session.execute(text("SELECT COALESCE(MAX(rowid), 0) FROM ltm_events_fts"))).scalar_one()
    while True:
        events = list((
            await session.execute(
                select(MemoryEvent).where(MemoryEvent.id > last).order_by(MemoryEvent.id).limit(batch))
        ).scalars())
        if not events:
            return done
        await index_turns(session, events, in_thread=True)
        last = events[-1].id
        done += sum(1 for e in events if e.source_role in RECALLED_ROLES)


# -- the stemmer the rows were built with ------------------------------------------

KEYWORDS_BUILD = "keywords"  # its row in ltm_index_builds (migration 0015)


async def match_stemmer(session: AsyncSession) -> bool:
    """Rebuild both keyword tables when the stemmer that built them is not
    the one the plugin has now (snowballstemmer installed or removed since,
    or another minor release): a stemmed index misses unstemmed query words
    and the other way round. Run at start, before any namespace is loaded
    (a plugin reload starts afresh). True if rebuilt."""
    stemmer = tokenizing.KEYWORD_STEMMER
    built_with = await _built_with(session, KEYWORDS_BUILD)
    if built_with == stemmer:
        return False
    log.warning("ltm: the keyword index was built with %s, the plugin now has %s: rebuilding it",
                built_with or "an unrecorded stemmer", stemmer)
    facts = await rebuild_fact_rows(session)
    if built_with == tokenizing.NO_STEMMER:
        turns = await _stem_turn_rows(session)
    else:  # stems cannot be undone, nor one release's turned into another's: tokenise again
        await session.execute(text("DELETE FROM ltm_events_fts"))
        turns = await backfill_turn_rows(session)
    await _record_build(session, KEYWORDS_BUILD, stemmer)
    log.info("ltm: keyword index rebuilt with %s (%d memories, %d turns)", stemmer, facts, turns)
    return True


async def _built_with(session: AsyncSession, name: str) -> str | None:
    return (await session.execute(
        text("SELECT built_with FROM ltm_index_builds WHERE name = :n"), {"n": name})).scalar()


async def _record_build(session: AsyncSession, name: str, built_with: str) -> None:
    await session.execute(
        text("INSERT INTO ltm_index_builds (name, built_with, built_at) VALUES (:n, :w, :at) "
             "ON CONFLICT (name) DO UPDATE SET built_with = excluded.built_with, built_at = excluded.built_at"),
        {"n": name, "w": built_with, "at": utcnow().replace(tzinfo=None).isoformat(" ")})


# -- the passages the turns' rows were cut into ---------------------------------

PASSAGES_BUILD = "turn_passages"  # its row in ltm_index_builds (migration 0015)


async def match_turn_passages(session: AsyncSession) -> bool:
    """Rebuild the turns' keyword rows when they were cut into passages
    another way (storing.turns.PASSAGE_LAYOUT; rows from before passages
    are one document a turn), and drop the vectors of turns embedded as
    more than MAX_PASSAGES sentences, so the fill embeds them again as
    passages (docs/decisions.md#d77). Run at start, in the write
    transaction, before any namespace is loaded or turn recorded; a
    FAISS file of the dropped vectors no longer matches its rows and is
    rebuilt. True if rebuilt."""
    if await _built_with(session, PASSAGES_BUILD) == PASSAGE_LAYOUT:
        return False
    await session.execute(text("DELETE FROM ltm_events_fts"))
    turns = await backfill_turn_rows(session)
    dropped = await delete_long_turn_vectors(session, MAX_PASSAGES)
    await _record_build(session, PASSAGES_BUILD, PASSAGE_LAYOUT)
    if turns or dropped:
        log.info("ltm: turns indexed as passages (%s): %d keyword rows rebuilt, %d turns to embed again",
                 PASSAGE_LAYOUT, turns, dropped)
    return True


PREFIX_CHARS = 16  # scope_prefix: 8 bytes as hex


def _stemmed_scoped(rows: list[tuple[int, str]]) -> list[dict[str, object]]:
    return [{"r": rowid, "s": " ".join(t[:PREFIX_CHARS] + tokenizing.stem(t[PREFIX_CHARS:])
                                       for t in (scoped or "").split())} for rowid, scoped in rows]


async def _stem_turn_rows(session: AsyncSession, batch: int = 2000) -> int:
    """Stem the tokens of turn rows built without a stemmer, in place: they
    are the words as written, one token a word, so stemming each gives what
    tokenising the turn again would, without its context look-ups (about
    20 times faster). The stemming runs in a thread, off the event loop."""
    done, last = 0, 0
    while rows := [(r[0], r[1]) for r in (await session.execute(
            text("SELECT rowid, scoped FROM ltm_events_fts WHERE rowid > :last ORDER BY rowid LIMIT :n"),
            {"last": last, "n": batch})).all()]:
        stemmed = await asyncio.to_thread(_stemmed_scoped, rows)
        await session.execute(text("DELETE FROM ltm_events_fts WHERE rowid > :a AND rowid <= :b"),
                              {"a": last, "b": rows[-1][0]})
        await session.execute(text(TURN_ROW_INSERT), stemmed)
        last = rows[-1][0]
        done += len(rows)
    return done
