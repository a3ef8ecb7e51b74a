"""The read pipeline (design §4): retrieve, score, filter for diversity, fit
the budget, format.

The budget is a hard limit: the block is measured with the same token
counter that decides what fits, header and footer included.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from datetime import datetime, timedelta
from typing import Any, ClassVar

from sqlalchemy import Connection, text

from .db import Database, events_fts_search
from .models import MemoryEvent, MemoryItem, as_utc, utcnow
from .policy import ReadPolicy, Status
from .retrieval import Query, Retriever
from .scope import Scope
from .text import token_set_similarity
from .tokens import TokenCounter

HEADER = "[Long-term Memory]"
FOOTER = "[End Memory]"
# Items with no keyword or vector hit that still compete on importance and
# recency; bounded so a 100k-item scope costs the same as a small one.
BASELINE_POOL = 50
SEARCH_LIMIT = 50
NEAR_DUPLICATE = 0.8
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

    COLUMNS: ClassVar[str] = "event_id, scope, scope_id, source_type, source_role, content, sender_id, sender_name, created_at"
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
    fact: str
    confidence: float
    score: float
    scope: str


@dataclass
class MemoryBlock:
    text: str = ""
    items: list[Selected] = field(default_factory=list)  # memories (≤ max_items)
    tokens: int = 0
    events: list[Selected] = field(default_factory=list)  # raw turns (≤ max_events)

    def __bool__(self) -> bool:
        return bool(self.items or self.events)


def time_decay(updated_at: datetime, now: datetime) -> float:
    days = max(0.0, (now - as_utc(updated_at)).total_seconds() / 86400.0)
    return 1.0 / (1.0 + days / 30.0)


def format_line(item: ItemView) -> str:
    return f"- [{item.type}] {item.fact} (confidence: {item.confidence:.2f})"


def format_event_line(event: MemoryEvent | EventRow) -> str:
    """A raw turn, tagged with when it was said and by whom."""
    content = event.content or {}
    when = as_utc(event.created_at).strftime("%Y-%m-%d")
    if event.source_type == "tool_result":
        body = f"tool {content.get('tool', '?')}: {content.get('result', '')}"
    else:
        body = f"{event.sender_name or event.sender_id or 'someone'}: {content.get('text', '')}"
    body = " ".join(body.split())
    if len(body) > EVENT_CHARS:
        body = body[:EVENT_CHARS] + "…"
    return f"- [said {when}] {body}"


class _Budget:
    """Lines under max_tokens: a line costs its own tokens plus its newline."""

    def __init__(self, count, max_tokens: int) -> None:
        self.count = count
        self.max_tokens = max_tokens
        self.used = count(HEADER + "\n" + FOOTER)
        self.lines: list[str] = []

    @property
    def open(self) -> bool:
        return self.used <= self.max_tokens

    def take(self, line: str) -> bool:
        cost = self.count("\n" + line)
        if self.used + cost > self.max_tokens:
            return False  # a shorter, lower-ranked line may still fit
        self.used += cost
        self.lines.append(line)
        return True

    def text(self) -> tuple[str, int]:
        text = "\n".join([HEADER, *self.lines, FOOTER])
        return text, self.count(text)


class MemoryReader:
    def __init__(
        self,
        retrievers: Sequence[Retriever],
        counter: TokenCounter,
        clock: Callable[[], datetime] = utcnow,
        include_pending: Callable[[], bool] = lambda: False,
    ) -> None:
        self.retrievers = list(retrievers)
        self.counter = counter
        # The same facts and turns are measured read after read; tokenising
        # them again was a fifth of a read. Keyed by the exact text, so a
        # cached count is always the counter's own answer.
        self._count = lru_cache(maxsize=COUNT_CACHE)(counter.count)
        self._clock = clock
        # Unextracted turns may be shown only where facts would go live
        # without review (mode auto); the engine says which mode is on.
        self._include_pending = include_pending

    async def read(self, db: Database, scopes: list[Scope], query: str, policy: ReadPolicy) -> MemoryBlock:
        """The block for ``query``.

        Two steps, each on the database's read threads (Database.run), so
        the event loop only waits: first the searches, side by side —
        keyword and vector over memories, keyword over raw turns (SQLite,
        FAISS and the embedding provider work in parallel) — then one pass
        that loads the candidates, ranks them and fits the budget.
        """
        if not policy.enable or not scopes or policy.max_items <= 0:
            return MemoryBlock()
        now = self._clock()
        q = Query.of(query)
        include_pending = self._include_pending()
        pairs = [(s.kind, s.id) for s in scopes]

        async def keyword_turns() -> list[str]:
            if policy.max_events <= 0 or not q.tokens:
                return []
            found = await db.run(
                lambda conn: events_fts_search(conn, q.tokens, pairs, SEARCH_LIMIT, include_pending)
            )
            return [event_id for event_id, _ in found]

        *found, turns = await asyncio.gather(
            *(r.search(db, scopes, q, SEARCH_LIMIT) for r in self.retrievers), keyword_turns()
        )
        # Fusion of keyword and vector similarity: the larger of the two.
        # Measured on LoCoMo (bench/locomo.py, 2 dev conversations, 800
        # tokens): max 0.682 evidence recall, mean 0.683, reciprocal-rank
        # fusion 0.669. Max is as good as any and keeps a strong keyword hit
        # (a name, a number) from being diluted by a weak vector score.
        sims: dict[int, float] = {}
        for hits in found:
            for rowid, sim in hits.items():
                sims[rowid] = max(sims.get(rowid, 0.0), sim)
        return await db.run(lambda conn: self._compose(conn, scopes, sims, turns, policy, now))

    def _compose(
        self,
        conn: Connection,
        scopes: list[Scope],
        sims: dict[int, float],
        turns: list[str],
        policy: ReadPolicy,
        now: datetime,
    ) -> MemoryBlock:
        scored = []
        for item in self._load(conn, scopes, set(sims), policy):
            if not self._usable(item, policy, now):
                continue
            score = (
                policy.similarity_weight * sims.get(item.id, 0.0)
                + policy.importance_weight * item.importance
                + policy.recency_weight * time_decay(item.updated_at, now)
            )
            scored.append((score, item))
        scored.sort(key=lambda pair: (-pair[0], -pair[1].confidence, pair[1].id))
        budget = _Budget(self._count, policy.max_tokens)
        chosen = self._select(scored, policy, budget)
        taken = {c.memory_id for c in chosen}
        # Relevant memories the caps kept out still point at useful turns.
        left_out = [i for _, i in scored if i.memory_id not in taken and sims.get(i.id, 0) > 0][:SEARCH_LIMIT]
        events = self._events(conn, turns, chosen, left_out, budget, policy) if budget.open else []
        return self._assemble(budget, chosen, events, policy)

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

    def _fit(self, scored: list[tuple[float, ItemView]], policy: ReadPolicy) -> MemoryBlock:
        """The memories alone, within the budget (pure: no database)."""
        budget = _Budget(self._count, policy.max_tokens)
        return self._assemble(budget, self._select(scored, policy, budget), [], policy)

    @staticmethod
    def _select(scored: list[tuple[float, ItemView]], policy: ReadPolicy, budget: _Budget) -> list[Selected]:
        """Best-scored memories under max_items, max_per_type and the tokens,
        skipping near-duplicates of what is already chosen."""
        if not budget.open:
            return []
        per_type: dict[str, int] = {}
        chosen: list[Selected] = []
        for score, item in scored:
            if len(chosen) >= policy.max_items:
                break
            if per_type.get(item.type, 0) >= policy.max_per_type:
                continue
            if any(token_set_similarity(item.fact, c.fact) >= NEAR_DUPLICATE for c in chosen):
                continue
            if budget.take(format_line(item)):
                per_type[item.type] = per_type.get(item.type, 0) + 1
                chosen.append(Selected(item.memory_id, item.type, item.fact, item.confidence,
                                       round(score, 4), f"{item.scope}:{item.scope_id}"))
        return chosen

    @staticmethod
    def _assemble(budget: _Budget, chosen: list[Selected], events: list[Selected], policy: ReadPolicy) -> MemoryBlock:
        text, tokens = budget.text()
        while tokens > policy.max_tokens and budget.lines:
            # BPE merges across lines can make the whole differ from the sum.
            budget.lines.pop()
            (events or chosen).pop()
            text, tokens = budget.text()
        if not (chosen or events):
            return MemoryBlock()
        return MemoryBlock(text=text, tokens=tokens, items=chosen, events=events)

    def _events(
        self,
        conn: Connection,
        keyword_ids: list[str],
        chosen: list[Selected],
        left_out: list[ItemView],
        budget: _Budget,
        policy: ReadPolicy,
    ) -> list[Selected]:
        """Raw turns for the rest of the budget, from two rankings merged by
        reciprocal rank: the sources of the best memories the caps left out
        (ranked by the memories' fused score), and ``keyword_ids``, keyword
        matches among the turns that may be shown (db.events_fts_search). A
        turn already behind a chosen memory adds nothing and is skipped."""
        if policy.max_events <= 0:
            return []
        evidence = self._evidence(conn, [c.memory_id for c in chosen] + [i.memory_id for i in left_out])
        covered = {e for c in chosen for e in evidence.get(c.memory_id, [])}
        sources = [e for item in left_out for e in evidence.get(item.memory_id, [])]
        fused: dict[str, float] = {}
        for ranking in (sources, keyword_ids):
            for rank, event_id in enumerate(dict.fromkeys(ranking)):
                fused[event_id] = fused.get(event_id, 0.0) + 1.0 / (60 + rank + 1)
        order = [e for e in sorted(fused, key=lambda e: -fused[e]) if e not in covered]
        if not order:
            return []
        rows = {
            row.event_id: EventRow.of(row)
            for row in conn.execute(
                text(f"SELECT {EventRow.COLUMNS} FROM ltm_events WHERE event_id IN (SELECT value FROM json_each(:ids))"),
                {"ids": json.dumps(order[:SEARCH_LIMIT])},
            )
        }
        best = fused[order[0]]
        picked: list[Selected] = []
        for event_id in order:
            event = rows.get(event_id)
            if event is None or event.source_role not in ("user", "tool"):
                continue
            if len(picked) >= policy.max_events:
                break
            line = format_event_line(event)
            if budget.take(line):
                picked.append(Selected(event.event_id, "event", line, 1.0, round(fused[event_id] / best, 4),
                                       f"{event.scope}:{event.scope_id}"))
        return picked

    @staticmethod
    def _evidence(conn: Connection, memory_ids: list[str]) -> dict[str, list[str]]:
        if not memory_ids:
            return {}
        rows = conn.execute(
            text("SELECT memory_id, event_id FROM ltm_evidence "
                 "WHERE memory_id IN (SELECT value FROM json_each(:ids)) ORDER BY id"),
            {"ids": json.dumps(memory_ids)},
        )
        out: dict[str, list[str]] = {}
        for memory_id, event_id in rows:
            out.setdefault(memory_id, []).append(event_id)
        return out
