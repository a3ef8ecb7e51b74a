"""The read pipeline (design §4): retrieve, score, filter for diversity, fit
the budget, format.

The budget is a hard limit: the block is measured with the same token
counter that decides what fits, header and footer included.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from .db import events_fts_search
from .models import MemoryEvent, MemoryEvidence, MemoryItem, as_utc, utcnow
from .policy import ReadPolicy, Status
from .retrieval import Retriever
from .scope import Scope
from .text import query_tokens, token_set_similarity
from .tokens import TokenCounter

HEADER = "[Long-term Memory]"
FOOTER = "[End Memory]"
# Items with no keyword or vector hit that still compete on importance and
# recency; bounded so a 100k-item scope costs the same as a small one.
BASELINE_POOL = 50
SEARCH_LIMIT = 50
NEAR_DUPLICATE = 0.8
EVENT_CHARS = 300  # a raw turn is cut to this many characters


Sessions = Callable[[], AbstractAsyncContextManager[AsyncSession]]


class ItemView(Protocol):
    """What the reader reads of an item: a MemoryItem, or a plain row of
    ltm_items (loading rows skips the ORM's per-object cost, which was a
    third of a read)."""

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


def format_event_line(event: MemoryEvent) -> str:
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
        self._clock = clock
        # Unextracted turns may be shown only where facts would go live
        # without review (mode auto); the engine says which mode is on.
        self._include_pending = include_pending

    async def read(
        self, sessions: Sessions, scopes: list[Scope], query: str, policy: ReadPolicy
    ) -> MemoryBlock:
        """The block for ``query``. ``sessions`` opens a read session; the
        searches that do not depend on each other (keyword and vector over
        memories, keyword over raw turns) each get their own and run at the
        same time: SQLite, FAISS and the embedding provider work in
        parallel instead of one after the other."""
        if not policy.enable or not scopes or policy.max_items <= 0:
            return MemoryBlock()
        now = self._clock()
        tokens = query_tokens(query)

        async def search(retriever: Retriever) -> dict[int, float]:
            async with sessions() as session:
                return await retriever.search(session, scopes, query, SEARCH_LIMIT)

        async def keyword_turns() -> list[str]:
            if policy.max_events <= 0 or not tokens:
                return []
            async with sessions() as session:
                found = await events_fts_search(
                    session, tokens, [(s.kind, s.id) for s in scopes], SEARCH_LIMIT, self._include_pending()
                )
            return [event_id for event_id, _ in found]

        *found, turns = await asyncio.gather(*(search(r) for r in self.retrievers), keyword_turns())
        # Fusion of keyword and vector similarity: the larger of the two.
        # Measured on LoCoMo (bench/locomo.py, 2 dev conversations, 800
        # tokens): max 0.682 evidence recall, mean 0.683, reciprocal-rank
        # fusion 0.669. Max is as good as any and keeps a strong keyword hit
        # (a name, a number) from being diluted by a weak vector score.
        sims: dict[int, float] = {}
        for hits in found:
            for rowid, sim in hits.items():
                sims[rowid] = max(sims.get(rowid, 0.0), sim)
        async with sessions() as session:
            items = await self._load(session, scopes, set(sims), policy)
            scored = []
            for item in items:
                if not self._usable(item, policy, now):
                    continue
                score = (
                    policy.similarity_weight * sims.get(item.id, 0.0)
                    + policy.importance_weight * item.importance
                    + policy.recency_weight * time_decay(item.updated_at, now)
                )
                scored.append((score, item))
            scored.sort(key=lambda pair: (-pair[0], -pair[1].confidence, pair[1].id))
            budget = _Budget(self.counter.count, policy.max_tokens)
            chosen = self._select(scored, policy, budget)
            taken = {c.memory_id for c in chosen}
            # Relevant memories the caps kept out still point at useful turns.
            left_out = [i for _, i in scored if i.memory_id not in taken and sims.get(i.id, 0) > 0][:SEARCH_LIMIT]
            events = (
                await self._events(session, turns, chosen, left_out, budget, policy) if budget.open else []
            )
        return self._assemble(budget, chosen, events, policy)

    @staticmethod
    def _usable(item: ItemView, policy: ReadPolicy, now: datetime) -> bool:
        if item.status != Status.ACTIVE or item.confidence < policy.min_confidence:
            return False
        # The sweep marks expired items in the background; until it has,
        # the reader must not serve them either.
        return item.ttl_days is None or as_utc(item.updated_at) + timedelta(days=item.ttl_days) > now

    async def _load(
        self, session: AsyncSession, scopes: list[Scope], rowids: set[int], policy: ReadPolicy
    ) -> list[ItemView]:
        wanted = {(s.kind, s.id) for s in scopes}
        found: dict[int, ItemView] = {}
        items = MemoryItem.__table__
        if rowids:
            # By primary key; scope and status are checked here, so a hit can
            # never bring in another scope's memory.
            for item in await session.execute(select(items).where(items.c.id.in_(rowids))):
                if (item.scope, item.scope_id) in wanted and item.status == Status.ACTIVE:
                    found[item.id] = item
        # One query per scope, each served by ix_ltm_items_scope_status in
        # importance order; an OR over scopes made SQLite scan every active
        # item in the database. "+confidence" keeps SQLite from reading the
        # whole scope through ix_ltm_items_scope_confidence and sorting it.
        confident = text("+ltm_items.confidence >= :min_confidence").bindparams(
            min_confidence=policy.min_confidence
        )
        for scope in scopes:
            baseline = (
                select(items)
                .where(items.c.scope == scope.kind, items.c.scope_id == scope.id,
                       items.c.status == Status.ACTIVE, confident)
                .order_by(items.c.importance.desc())
                .limit(BASELINE_POOL)
            )
            for item in await session.execute(baseline):
                found.setdefault(item.id, item)
        return [i for i in found.values() if i.confidence >= policy.min_confidence]

    def _fit(self, scored: list[tuple[float, ItemView]], policy: ReadPolicy) -> MemoryBlock:
        """The memories alone, within the budget (pure: no database)."""
        budget = _Budget(self.counter.count, policy.max_tokens)
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

    async def _events(
        self,
        session: AsyncSession,
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
        evidence = await self._evidence(session, [c.memory_id for c in chosen] + [i.memory_id for i in left_out])
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
            e.event_id: e
            for e in (
                await session.execute(select(MemoryEvent).where(MemoryEvent.event_id.in_(order[:SEARCH_LIMIT])))
            ).scalars()
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
    async def _evidence(session: AsyncSession, memory_ids: list[str]) -> dict[str, list[str]]:
        if not memory_ids:
            return {}
        rows = await session.execute(
            select(MemoryEvidence.memory_id, MemoryEvidence.event_id)
            .where(MemoryEvidence.memory_id.in_(memory_ids))
            .order_by(MemoryEvidence.id)
        )
        out: dict[str, list[str]] = {}
        for memory_id, event_id in rows:
            out.setdefault(memory_id, []).append(event_id)
        return out
