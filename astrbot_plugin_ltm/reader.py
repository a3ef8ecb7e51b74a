"""The read pipeline (design §4): retrieve, score, filter for diversity, fit
the budget, format.

Memories and raw turns are candidates alike: each retriever ranks both, the
rankings are fused into the similarity term of the design's score (§4.3),
to which each candidate adds a share of the best similarity of its day
(ReadPolicy.day_weight), and one walk down the scores fills the budget
under the caps (max_items and max_per_type for memories, max_events for
turns). A memory is a compact, reviewed fact; a turn is what was said, for
what no memory covers. The budget is a hard limit: the block is measured
with the same token counter that decides what fits, header and footer
included.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from datetime import date, datetime, timedelta
from typing import Any, ClassVar

from sqlalchemy import Connection, text

from .db import Database, shown_turns, turn_text
from .models import MemoryEvent, MemoryItem, as_utc, utcnow
from .policy import ReadPolicy, Status
from .retrieval import Found, Query, Retriever
from .scope import Scope
from .text import token_set_similarity
from .tokens import TokenCounter

HEADER = "[Long-term Memory]"
FOOTER = "[End Memory]"
# Items with no keyword or vector hit that still compete on importance and
# recency; bounded so a 100k-item scope costs the same as a small one.
BASELINE_POOL = 20
SEARCH_LIMIT = 50
# Of each kind's hits, the ones loaded and ranked: those the fused rankings
# put first. On LoCoMo, 60 of the up to 100 hits lost 0.001 of evidence
# recall and 40 lost 0.005; at 10k items, loading 60 instead of all cut a
# read's loading by a third.
LOAD_LIMIT = 60
# Reciprocal-rank fusion: a candidate's similarity is the sum over the
# rankings it is in (keyword and vector, of memories and of turns) of
# 1 / (RRF_K + rank), scaled so the best candidate of the read has 1. Ranks
# need no calibration between bm25 and cosine, nor between embedding
# models. Measured on LoCoMo (bench/locomo.py, the 5 dev conversations in
# one database, 800 tokens): k = 10 gave 0.802 evidence recall, k = 5
# 0.795, k = 20 0.793, k = 60 (the usual default) 0.766. With turns
# embedded by sentence and stemmed keywords, k from 7 to 20 measured within
# half a point of each other (0.820–0.825), k = 30 0.816. Before turns were
# candidates, fusing by the larger of the scaled scores had measured as well
# as RRF on memories alone; with turns, in a replay of the same ranking
# outside the plugin, it lost 3 points to RRF.
RRF_K = 10
NEAR_DUPLICATE = 0.8
# The walk down the candidates ends when this many lines in a row did not
# fit: the block is full, and counting the tokens of every candidate left
# was most of the ranking's time (LoCoMo recall: the same with 12, 24 or
# no limit).
FULL_AFTER_MISSES = 12
EVENT_CHARS = 300  # a raw turn is cut to this many characters
COUNT_CACHE = 20_000  # lines whose token count is kept (~100 bytes each)


def _stored_time(value: datetime | str) -> datetime:
    # SQLite holds SQLAlchemy's datetimes as naive UTC text.
    return as_utc(value if isinstance(value, datetime) else datetime.fromisoformat(value))


@dataclass(slots=True)
class ItemRow:
    """An item as the read path loads it: the columns it uses, converted by
    hand. Through the ORM, or SQLAlchemy's per-column result processing,
    loading a read's few hundred candidates cost more than finding them."""

    COLUMNS: ClassVar[str] = (
        "id, memory_id, scope, scope_id, type, fact, confidence, importance, status, ttl_days, updated_at"
    )
    id: int
    memory_id: str
    scope: str
    scope_id: str
    type: str
    fact: str
    confidence: float
    importance: float
    status: str
    ttl_days: int | None
    updated_at: datetime

    @classmethod
    def of(cls, row: Sequence[Any]) -> ItemRow:
        return cls(*row[:-1], _stored_time(row[-1]))


# What the ranking reads of an item: a loaded row, or a MemoryItem (_fit).
ItemView = ItemRow | MemoryItem


@dataclass(slots=True)
class EventRow:
    """A raw turn as the read path loads it (see ItemRow)."""

    COLUMNS: ClassVar[str] = (
        "id, event_id, scope, scope_id, source_type, source_role, content, sender_id, sender_name, created_at"
    )
    id: int
    event_id: str
    scope: str
    scope_id: str
    source_type: str
    source_role: str
    content: dict[str, Any]
    sender_id: str | None
    sender_name: str | None
    created_at: datetime

    @classmethod
    def of(cls, row: Sequence[Any]) -> EventRow:
        *columns, content, sender_id, sender_name, created_at = row
        return cls(*columns, json.loads(content) if isinstance(content, str) else content,
                   sender_id, sender_name, _stored_time(created_at))


@dataclass(frozen=True)
class Selected:
    memory_id: str  # the event_id for a raw turn
    type: str  # a memory type, or "event" for a raw turn
    fact: str  # the memory's fact, or the turn's whole line
    confidence: float
    score: float
    scope: str


@dataclass
class MemoryBlock:
    text: str = ""
    items: list[Selected] = field(default_factory=list)  # memories (≤ max_items), best first
    tokens: int = 0
    events: list[Selected] = field(default_factory=list)  # raw turns (≤ max_events), oldest first

    def __bool__(self) -> bool:
        return bool(self.items or self.events)


@dataclass(slots=True)
class Ranked:
    """A scored candidate: a memory (with the event ids of its evidence) or
    a raw turn."""

    score: float
    memory: ItemView | None = None
    turn: EventRow | None = None
    covers: frozenset[str] = frozenset()


def time_decay(updated_at: datetime, now: datetime) -> float:
    days = max(0.0, (now - as_utc(updated_at)).total_seconds() / 86400.0)
    return 1.0 / (1.0 + days / 30.0)


def format_line(item: ItemView) -> str:
    return f"- [{item.type}] {item.fact} (confidence: {item.confidence:.2f})"


def format_event_line(event: MemoryEvent | EventRow) -> str:
    """A raw turn: who, then what (under its day's heading, turn_day)."""
    body = turn_text(event.source_type, event.content or {}, event.sender_name or event.sender_id)
    if len(body) > EVENT_CHARS:
        body = body[:EVENT_CHARS] + "…"
    return f"- {body}"


def turn_day(event: MemoryEvent | EventRow) -> str:
    """The heading raw turns said on one day share: their provenance tag,
    written once per day instead of on every line (10 tokens a line)."""
    return f"[said {as_utc(event.created_at):%Y-%m-%d}]"


def fuse(rankings: Sequence[Sequence[int]]) -> dict[int, float]:
    """Reciprocal-rank fusion of rankings of the same kind of row (RRF_K)."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, rowid in enumerate(ranking):
            fused[rowid] = fused.get(rowid, 0.0) + 1.0 / (RRF_K + rank + 1)
    return fused


class MemoryReader:
    def __init__(
        self,
        retrievers: Sequence[Retriever],
        counter: TokenCounter,
        clock: Callable[[], datetime] = utcnow,
        unbacked_turns: Callable[[], bool] = lambda: False,
    ) -> None:
        self.retrievers = list(retrievers)
        self.counter = counter
        # The same facts and turns are measured read after read; tokenising
        # them again was a fifth of a read. Keyed by the exact text, so a
        # cached count is always the counter's own answer.
        self._count = lru_cache(maxsize=COUNT_CACHE)(counter.count)
        self._clock = clock
        # Whether turns no memory backs may be shown (db.shown_turns): only
        # where facts go live without review (the engine says: mode auto).
        self._unbacked_turns = unbacked_turns

    async def read(self, db: Database, scopes: list[Scope], query: str, policy: ReadPolicy) -> MemoryBlock:
        """The block for ``query``, in three steps off the event loop: the
        retrievers side by side (the keyword namespaces, the embedding
        provider and FAISS), the candidates' rows loaded on the database's
        read threads (Database.run), then one pass in a thread that ranks
        them and fits the budget.
        """
        if not policy.enable or not scopes or (policy.max_items <= 0 and policy.max_events <= 0):
            return MemoryBlock()
        now = self._clock()
        q = Query.of(query)
        unbacked = self._unbacked_turns()
        found: list[Found] = await asyncio.gather(*(r.search(db, scopes, q, SEARCH_LIMIT) for r in self.retrievers))
        (items, evidence), events = await asyncio.gather(
            db.run(lambda conn: self._memories(conn, scopes, found, policy, now)),
            db.run(lambda conn: self._turns(conn, scopes, found, unbacked, policy)),
        )
        return await asyncio.to_thread(self._rank, found, items, evidence, events, policy, now)

    def _memories(
        self, conn: Connection, scopes: list[Scope], found: list[Found], policy: ReadPolicy, now: datetime
    ) -> tuple[dict[int, ItemView], dict[str, frozenset[str]]]:
        """The usable memories among the hits and each scope's most
        important ones, with the event ids of the hits' evidence."""
        if policy.max_items <= 0:
            return {}, {}
        hits = _leading([f.memories for f in found])
        items = {i.id: i for i in self._load(conn, scopes, hits, policy) if self._usable(i, policy, now)}
        return items, self._evidence(conn, [items[r].memory_id for r in hits if r in items])

    def _rank(
        self,
        found: list[Found],
        items: dict[int, ItemView],
        evidence: dict[str, frozenset[str]],
        events: dict[int, EventRow],
        policy: ReadPolicy,
        now: datetime,
    ) -> MemoryBlock:
        # Ranked among what may be shown: a retriever's hits that are not
        # active, or not to be shown, take no rank from those that are.
        memories = fuse([[r for r in f.memories if r in items] for f in found])
        turns = fuse([[r for r in f.turns if r in events] for f in found])
        best = max([*memories.values(), *turns.values()], default=0.0) or 1.0
        # (row, similarity, when, importance); a memory's day is that of
        # its last change, a turn's the day it was said.
        candidates: list[tuple[ItemView | EventRow, float, datetime, float]] = [
            (item, memories.get(item.id, 0.0) / best, item.updated_at, item.importance) for item in items.values()
        ] + [
            (event, turns.get(event.id, 0.0) / best, event.created_at, policy.event_importance)
            for event in events.values()
        ]
        days = [as_utc(when).date() for _, _, when, _ in candidates]
        # What was said around the best match is read with it: every
        # candidate gains day_weight × the best similarity of its day
        # (an answer is often a few turns from the words that match: "Where
        # did you go?" — "To the lake."). See ReadPolicy.day_weight.
        day_best: dict[date, float] = {}
        for (_, sim, _, _), day in zip(candidates, days):
            day_best[day] = max(day_best.get(day, 0.0), sim)
        ranked: list[Ranked] = []
        for (row, sim, when, importance), day in zip(candidates, days):
            score = (policy.similarity_weight * sim + policy.day_weight * day_best[day]
                     + policy.importance_weight * importance + policy.recency_weight * time_decay(when, now))
            if isinstance(row, EventRow):
                ranked.append(Ranked(score, turn=row))
            else:
                ranked.append(Ranked(score, memory=row, covers=evidence.get(row.memory_id, frozenset())))
        ranked.sort(key=_order)
        return self._fit(ranked, policy)

    @staticmethod
    def _usable(item: ItemView, policy: ReadPolicy, now: datetime) -> bool:
        if item.status != Status.ACTIVE or item.confidence < policy.min_confidence:
            return False
        # The sweep marks expired items in the background; until it has,
        # the reader must not serve them either.
        return item.ttl_days is None or as_utc(item.updated_at) + timedelta(days=item.ttl_days) > now

    @staticmethod
    def _load(conn: Connection, scopes: list[Scope], rowids: set[int], policy: ReadPolicy) -> list[ItemRow]:
        """The hits by primary key and each scope's most important items, in
        one statement. Scope and status are checked here, so a hit can never
        bring in another scope's memory."""
        params: dict[str, object] = {
            "ids": json.dumps(sorted(rowids)), "active": Status.ACTIVE,
            "min_confidence": policy.min_confidence, "pool": BASELINE_POOL,
        }
        parts = [f"SELECT {ItemRow.COLUMNS} FROM ltm_items WHERE id IN (SELECT value FROM json_each(:ids))"]
        # A subquery per scope, each served by ix_ltm_items_scope_status in
        # importance order; an OR over scopes made SQLite scan every active
        # item in the database. "+confidence" keeps SQLite from reading the
        # whole scope through ix_ltm_items_scope_confidence and sorting it.
        for n, scope in enumerate(scopes):
            parts.append(
                f"SELECT * FROM (SELECT {ItemRow.COLUMNS} FROM ltm_items WHERE scope = :kind{n} "
                f"AND scope_id = :id{n} AND status = :active AND +confidence >= :min_confidence "
                "ORDER BY importance DESC LIMIT :pool)"
            )
            params[f"kind{n}"], params[f"id{n}"] = scope.kind, scope.id
        wanted = {(s.kind, s.id) for s in scopes}
        found: dict[int, ItemRow] = {}
        for row in conn.execute(text(" UNION ALL ".join(parts)), params):
            rowid, _, scope, scope_id, _, _, confidence, _, status, _, _ = row
            if (scope, scope_id) in wanted and status == Status.ACTIVE \
                    and confidence >= policy.min_confidence and rowid not in found:
                found[rowid] = ItemRow.of(row)
        return list(found.values())

    @staticmethod
    def _turns(conn: Connection, scopes: list[Scope], found: list[Found], unbacked: bool,
               policy: ReadPolicy) -> dict[int, EventRow]:
        """The found turns that may be shown (db.shown_turns; ``unbacked``:
        also those no memory backs), of the scopes."""
        hits = list(_leading([f.turns for f in found]))
        if policy.max_events <= 0 or not hits:
            return {}
        wanted = {(s.kind, s.id) for s in scopes}
        rows = conn.execute(
            text(f"SELECT {EventRow.COLUMNS} FROM ltm_events x "
                 f"WHERE x.id IN (SELECT value FROM json_each(:ids)) AND {shown_turns(unbacked)}"),
            {"ids": json.dumps(hits)},
        )
        return {row[0]: EventRow.of(row) for row in rows if (row[2], row[3]) in wanted}

    @staticmethod
    def _evidence(conn: Connection, memory_ids: list[str]) -> dict[str, frozenset[str]]:
        """Memory id -> the event ids of its evidence."""
        if not memory_ids:
            return {}
        rows = conn.execute(
            text("SELECT memory_id, event_id FROM ltm_evidence "
                 "WHERE memory_id IN (SELECT value FROM json_each(:ids))"),
            {"ids": json.dumps(memory_ids)},
        )
        out: dict[str, set[str]] = {}
        for memory_id, event_id in rows:
            out.setdefault(memory_id, set()).add(event_id)
        return {k: frozenset(v) for k, v in out.items()}

    def _fit(self, ranked: list[Ranked], policy: ReadPolicy) -> MemoryBlock:
        """The best-scored candidates under the caps and the token budget
        (pure: no database). Memories: max_items, max_per_type, and no
        near-duplicate of one already chosen. Turns: max_events, and none
        behind a chosen memory (one chosen before its memory goes when the
        memory comes). A line that does not fit is skipped, as a shorter,
        lower-ranked one may still fit."""
        frame = self._count(HEADER + "\n" + FOOTER)
        if frame > policy.max_tokens:
            return MemoryBlock()
        used = frame
        chosen: list[tuple[Ranked, str, Selected]] = []
        per_type: dict[str, int] = {}
        n_memories = n_turns = 0
        covered: set[str] = set()
        chosen_facts: list[str] = []
        days: set[str] = set()  # the headings of the turns chosen so far
        misses = 0
        for r in ranked:
            if n_memories >= policy.max_items and n_turns >= policy.max_events:
                break
            if r.memory is not None:
                item = r.memory
                if n_memories >= policy.max_items or per_type.get(item.type, 0) >= policy.max_per_type:
                    continue
                line = format_line(item)
            else:
                event = r.turn
                if n_turns >= policy.max_events or event.event_id in covered:
                    continue
                line = format_event_line(event)
                day = turn_day(event)
            cost = self._count("\n" + line)
            if r.turn is not None and day not in days:
                cost += self._count("\n" + day)
            if used + cost > policy.max_tokens:
                misses += 1
                if misses >= FULL_AFTER_MISSES:
                    break
                continue
            misses = 0
            if r.memory is not None:
                # Last, as it is the dearest check: most candidates fail the
                # caps or the budget first.
                if any(token_set_similarity(item.fact, fact) >= NEAR_DUPLICATE for fact in chosen_facts):
                    continue
                chosen_facts.append(item.fact)
                selected = Selected(item.memory_id, item.type, item.fact, item.confidence, round(r.score, 4),
                                    f"{item.scope}:{item.scope_id}")
                n_memories += 1
                per_type[item.type] = per_type.get(item.type, 0) + 1
                covered |= r.covers
                # A turn it covers that outranked it says the same again.
                repeated = [c for c in chosen if c[0].turn is not None and c[0].turn.event_id in r.covers]
                if repeated:
                    chosen = [c for c in chosen if c not in repeated]
                    n_turns -= len(repeated)
                    days = {turn_day(c[0].turn) for c in chosen if c[0].turn is not None}
                    used = self._cost(chosen, days) + frame
            else:
                selected = Selected(event.event_id, "event", f"{day} {line[2:]}", 1.0, round(r.score, 4),
                                    f"{event.scope}:{event.scope_id}")
                n_turns += 1
                days.add(day)
            used += cost
            chosen.append((r, line, selected))
        return self._assemble(chosen, policy)

    def _cost(self, chosen: list[tuple[Ranked, str, Selected]], days: set[str]) -> int:
        """The tokens of the chosen lines and of the turns' day headings."""
        return sum(self._count("\n" + line) for _, line, _ in chosen) + sum(self._count("\n" + d) for d in days)

    def _assemble(self, chosen: list[tuple[Ranked, str, Selected]], policy: ReadPolicy) -> MemoryBlock:
        """Memories best first, then turns oldest first under their days'
        headings (a conversation reads in order), measured whole: BPE
        merges across lines can make the block dearer than the sum of its
        lines, so the lowest-scored entry goes until it fits."""
        while chosen:
            memories = [(r, line, s) for r, line, s in chosen if r.memory is not None]
            turns = sorted(((r, line, s) for r, line, s in chosen if r.turn is not None),
                           key=lambda c: (c[0].turn.created_at, c[0].turn.id))
            lines = [HEADER, *(line for _, line, _ in memories)]
            day = None
            for r, line, _ in turns:
                if turn_day(r.turn) != day:
                    day = turn_day(r.turn)
                    lines.append(day)
                lines.append(line)
            text_ = "\n".join([*lines, FOOTER])
            tokens = self._count(text_)
            if tokens <= policy.max_tokens:
                return MemoryBlock(text=text_, tokens=tokens, items=[s for _, _, s in memories],
                                   events=[s for _, _, s in turns])
            chosen.remove(min(chosen, key=lambda c: c[0].score))
        return MemoryBlock()


def _leading(rankings: list[list[int]]) -> set[int]:
    """The LOAD_LIMIT rows the rankings put first (fused): the rest could
    only be reached if nearly all of these were left out."""
    fused = fuse(rankings)
    return set(sorted(fused, key=lambda rowid: -fused[rowid])[:LOAD_LIMIT])


def _order(r: Ranked) -> tuple:
    """Best score first; ties: memories before turns, then by confidence,
    then by age (stable across reads)."""
    if r.memory is not None:
        return (-r.score, 0, -r.memory.confidence, r.memory.id)
    return (-r.score, 1, 0.0, r.turn.id)
