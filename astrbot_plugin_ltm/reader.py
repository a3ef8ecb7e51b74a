"""The read pipeline (design §4): retrieve, score, filter for diversity, fit
the budget, format.

The budget is a hard limit: the block is measured with the same token
counter that decides what fits, header and footer included.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import or_, select, and_
from sqlalchemy.ext.asyncio import AsyncSession

from .models import MemoryItem, as_utc, utcnow
from .policy import ReadPolicy, Status
from .retrieval import Retriever
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


@dataclass(frozen=True)
class Selected:
    memory_id: str
    type: str
    fact: str
    confidence: float
    score: float
    scope: str


@dataclass
class MemoryBlock:
    text: str = ""
    items: list[Selected] = field(default_factory=list)
    tokens: int = 0

    def __bool__(self) -> bool:
        return bool(self.items)


def time_decay(updated_at: datetime, now: datetime) -> float:
    days = max(0.0, (now - as_utc(updated_at)).total_seconds() / 86400.0)
    return 1.0 / (1.0 + days / 30.0)


def format_line(item: MemoryItem) -> str:
    return f"- [{item.type}] {item.fact} (confidence: {item.confidence:.2f})"


class MemoryReader:
    def __init__(
        self,
        retrievers: Sequence[Retriever],
        counter: TokenCounter,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.retrievers = list(retrievers)
        self.counter = counter
        self._clock = clock

    async def read(
        self, session: AsyncSession, scopes: list[Scope], query: str, policy: ReadPolicy
    ) -> MemoryBlock:
        if not policy.enable or not scopes or policy.max_items <= 0:
            return MemoryBlock()
        now = self._clock()
        sims: dict[int, float] = {}
        for retriever in self.retrievers:
            for rowid, sim in (await retriever.search(session, scopes, query, SEARCH_LIMIT)).items():
                sims[rowid] = max(sims.get(rowid, 0.0), sim)
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
        return self._fit(scored, policy)

    @staticmethod
    def _usable(item: MemoryItem, policy: ReadPolicy, now: datetime) -> bool:
        if item.status != Status.ACTIVE or item.confidence < policy.min_confidence:
            return False
        # The sweep marks expired items in the background; until it has,
        # the reader must not serve them either.
        return item.ttl_days is None or as_utc(item.updated_at) + timedelta(days=item.ttl_days) > now

    async def _load(
        self, session: AsyncSession, scopes: list[Scope], rowids: set[int], policy: ReadPolicy
    ) -> list[MemoryItem]:
        in_scopes = or_(
            *(and_(MemoryItem.scope == s.kind, MemoryItem.scope_id == s.id) for s in scopes)
        )
        base = select(MemoryItem).where(
            in_scopes, MemoryItem.status == Status.ACTIVE, MemoryItem.confidence >= policy.min_confidence
        )
        found: dict[int, MemoryItem] = {}
        if rowids:
            for item in (await session.execute(base.where(MemoryItem.id.in_(rowids)))).scalars():
                found[item.id] = item
        baseline = base.order_by(MemoryItem.importance.desc(), MemoryItem.updated_at.desc()).limit(
            BASELINE_POOL
        )
        for item in (await session.execute(baseline)).scalars():
            found.setdefault(item.id, item)
        return list(found.values())

    def _fit(self, scored: list[tuple[float, MemoryItem]], policy: ReadPolicy) -> MemoryBlock:
        count = self.counter.count
        # A line costs its own tokens plus the newline joining it.
        used = count(HEADER + "\n" + FOOTER)
        if used > policy.max_tokens:
            return MemoryBlock()
        per_type: dict[str, int] = {}
        chosen: list[tuple[MemoryItem, float, str]] = []
        for score, item in scored:
            if len(chosen) >= policy.max_items:
                break
            if per_type.get(item.type, 0) >= policy.max_per_type:
                continue
            if any(token_set_similarity(item.fact, c.fact) >= NEAR_DUPLICATE for c, _, _ in chosen):
                continue
            line = format_line(item)
            cost = count("\n" + line)
            if used + cost > policy.max_tokens:
                continue  # a shorter, lower-scored line may still fit
            used += cost
            per_type[item.type] = per_type.get(item.type, 0) + 1
            chosen.append((item, score, line))
        if not chosen:
            return MemoryBlock()
        while chosen:
            text = "\n".join([HEADER, *(line for _, _, line in chosen), FOOTER])
            tokens = count(text)
            if tokens <= policy.max_tokens:
                break
            chosen.pop()  # BPE merges across lines can differ from the sum
        else:
            return MemoryBlock()
        return MemoryBlock(
            text=text,
            tokens=tokens,
            items=[
                Selected(i.memory_id, i.type, i.fact, i.confidence, round(s, 4), f"{i.scope}:{i.scope_id}")
                for i, s, _ in chosen
            ],
        )
