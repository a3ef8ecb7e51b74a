"""The keyword rows: every fact's and every turn's search tokens.

A fact's ``scoped`` column prefixes each token with its scope, so a scope's
terms have postings of their own. A turn's are a blob of hashes in
``ltm_turn_terms``: the FTS5 table before migration 0017 took five times
the turn's text (docs/decisions.md#d158).
"""

from __future__ import annotations

import asyncio
import hashlib
from datetime import UTC, datetime

import numpy as np
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from .. import text as tokenizing
from ..clock import as_utc, parse_stored_time, utcnow
from ..enums import RECALLED_ROLES
from ..logs import log
from ..scope import Scope
from ..text import index_text, search_tokens
from .changes import MemoriesReindexed, TurnsRecorded, note
from .tables import MemoryEvent, MemoryItem
from .terms import context_keys, decode, term_keys, with_context
from .turns import CONTEXT_TOKENS, CONTEXT_WINDOW, MAX_PASSAGES, PASSAGE_BREAK, PASSAGE_LAYOUT, turn_tokens
from .vector_rows import delete_long_turn_vectors, has_table

FACT_ROW_INSERT = "INSERT INTO ltm_items_fts (rowid, tokens, scoped) VALUES (:r, :t, :s)"
TERMS_INSERT = "INSERT OR REPLACE INTO ltm_turn_terms (event_rowid, terms) VALUES (:r, :t)"
# The turns' FTS5 table from before migration 0017, until storing.relayout has emptied it.
LEGACY_TURN_ROWS = "ltm_events_fts"


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
    """Add flushed events to the turns' keyword rows, handed to the index
    with the turn before's first words as context. A withheld turn's terms
    are stored for the next turn's context, never searched (docs/decisions.md#d08)."""
    ordered = sorted(events, key=lambda e: (as_utc(e.created_at), e.id or 0))
    indexed = [event for event in ordered if event.source_role in RECALLED_ROLES]

    def tokenise() -> list[list[str]]:
        return [turn_tokens(event.content) for event in indexed]

    # A rebuild's batch of long turns takes seconds: off the event loop
    # (``in_thread``: only at start, before any read stems on the loop).
    every = await asyncio.to_thread(tokenise) if in_thread else tokenise()
    own = {event.id: term_keys(tokens, PASSAGE_BREAK) for event, tokens in zip(indexed, every, strict=True)}
    before: dict[tuple[str, str, str | None], tuple[datetime, np.ndarray] | None] = {}
    rows: list[dict[str, object]] = []
    recorded: dict[Scope, list[tuple[int, np.ndarray]]] = {}
    for event in ordered:
        assert event.id is not None, "flush the events first"
        at = as_utc(event.created_at)
        conversation = (event.scope, event.scope_id, event.session_id)
        if conversation not in before:
            before[conversation] = await _turn_before(session, event)
        previous = before[conversation]
        keys = own.get(event.id)
        if keys is not None:
            rows.append({"r": event.id, "t": keys.astype(np.uint32).tobytes()})
            if not event.withheld:
                context = previous[1] if previous is not None and at - previous[0] <= CONTEXT_WINDOW else None
                recorded.setdefault(Scope(event.scope, event.scope_id), []).append(
                    (event.id, with_context(keys, context)))
        before[conversation] = (at, context_keys(keys, CONTEXT_TOKENS) if keys is not None else _NONE)
    if rows:
        await session.execute(text(TERMS_INSERT), rows)
    note(session, *(TurnsRecorded(scope, tuple(turns)) for scope, turns in recorded.items()))


_NONE = np.zeros(0, np.int64)


async def _turn_before(session: AsyncSession, event: MemoryEvent) -> tuple[datetime, np.ndarray] | None:
    """The latest event of ``event``'s conversation and scope recorded
    within the hour before it, with the terms it lends as context."""
    at = as_utc(event.created_at)
    row = (await session.execute(text(
        "SELECT e.created_at, t.terms FROM ltm_events e LEFT JOIN ltm_turn_terms t ON t.event_rowid = e.id "
        "WHERE e.scope = :kind AND e.scope_id = :id AND e.session_id IS :session AND e.created_at >= :since "
        "AND (e.created_at < :at OR (e.created_at = :at AND e.id < :rowid)) "
        "ORDER BY e.created_at DESC, e.id DESC LIMIT 1"),
        {"kind": event.scope, "id": event.scope_id, "session": event.session_id, "rowid": event.id or 0,
         "at": _stored(at), "since": _stored(at - CONTEXT_WINDOW)})).first()
    if row is None:
        return None
    return parse_stored_time(row[0]), context_keys(decode(row[1]), CONTEXT_TOKENS)


def _stored(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


async def rebuild_turn_rows(session: AsyncSession, batch: int = 1000) -> int:
    """Every turn's keyword terms again, tokenised in a thread: run at start,
    before any read. Returns how many turns were indexed."""
    await session.execute(text("DELETE FROM ltm_turn_terms"))
    if (await session.run_sync(lambda s: has_table(s.connection(), LEGACY_TURN_ROWS))):
        await session.execute(text(f"DELETE FROM {LEGACY_TURN_ROWS}"))
    return await index_turns_after(session, 0, batch)


async def index_turns_after(session: AsyncSession, last: int, batch: int = 1000) -> int:
    """Index every event after row id ``last`` (a bulk insert's), a batch at a time."""
    done = 0
    while True:
        events = list((
            await session.execute(
                select(MemoryEvent).where(MemoryEvent.id > last).order_by(MemoryEvent.id).limit(batch))
        ).scalars())
        if not events:
            return done
        await index_turns(session, events, in_thread=True)
        last = events[-1].id or last
        done += sum(1 for e in events if e.source_role in RECALLED_ROLES)


# -- the stemmer the rows were built with ------------------------------------------

KEYWORDS_BUILD = "keywords"  # its row in ltm_index_builds (migration 0015)


async def match_stemmer(session: AsyncSession) -> bool:
    """Rebuild both keyword tables when another stemmer built them: a stemmed
    index misses unstemmed query words. Run at start, before any namespace loads."""
    stemmer = tokenizing.KEYWORD_STEMMER
    built_with = await recorded_build(session, KEYWORDS_BUILD)
    if built_with == stemmer:
        return False
    log.warning("ltm: the keyword index was built with %s, the plugin now has %s: rebuilding it",
                built_with or "an unrecorded stemmer", stemmer)
    facts = await rebuild_fact_rows(session)
    turns = await rebuild_turn_rows(session)  # a hash cannot be stemmed: tokenised again
    await record_build(session, KEYWORDS_BUILD, stemmer)
    log.info("ltm: keyword index rebuilt with %s (%d memories, %d turns)", stemmer, facts, turns)
    return True


async def recorded_build(session: AsyncSession, name: str) -> str | None:
    return (await session.execute(
        text("SELECT built_with FROM ltm_index_builds WHERE name = :n"), {"n": name})).scalar()


async def record_build(session: AsyncSession, name: str, built_with: str) -> None:
    await session.execute(
        text("INSERT INTO ltm_index_builds (name, built_with, built_at) VALUES (:n, :w, :at) "
             "ON CONFLICT (name) DO UPDATE SET built_with = excluded.built_with, built_at = excluded.built_at"),
        {"n": name, "w": built_with, "at": utcnow().replace(tzinfo=None).isoformat(" ")})


# -- the passages the turns' rows were cut into ---------------------------------

PASSAGES_BUILD = "turn_passages"  # its row in ltm_index_builds (migration 0015)


async def match_turn_passages(session: AsyncSession) -> bool:
    """Rebuild the turns' keyword rows when cut into passages another way,
    and drop the vectors of turns embedded as more than MAX_PASSAGES, so the
    fill embeds them again (docs/decisions.md#d77). Run at start, before any
    namespace is loaded or turn recorded."""
    if await recorded_build(session, PASSAGES_BUILD) == PASSAGE_LAYOUT:
        return False
    turns = await rebuild_turn_rows(session)
    dropped = await delete_long_turn_vectors(session, MAX_PASSAGES)
    await record_build(session, PASSAGES_BUILD, PASSAGE_LAYOUT)
    if turns or dropped:
        log.info("ltm: turns indexed as passages (%s): %d keyword rows rebuilt, %d turns to embed again",
                 PASSAGE_LAYOUT, turns, dropped)
    return True
