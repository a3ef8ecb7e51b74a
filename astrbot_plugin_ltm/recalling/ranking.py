"""Ranking the candidates of a read, memories and raw turns alike: rankings fused by
reciprocal rank, plus a share of the best similarity of the candidate's day, weighed
with importance and recency (ReadPolicy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

from ..clock import as_utc
from ..enums import MemoryType
from ..extension_points import Found
from .read import Read
from .rows import EventRow, ItemView

# Reciprocal-rank fusion needs no calibration between bm25, cosine or models (docs/decisions.md#d02).
RRF_K = 10
# Of each corpus's hits, the fused rankings' first are loaded and ranked (docs/decisions.md#d06).
LOAD_LIMIT = 60
RECENCY_DAYS = 30.0  # recency decays as 1 / (1 + days / 30)
# Keeps one day's turns from filling the block when a question spans sessions (docs/decisions.md#d63).
DAY_SPREAD = 0.03


@dataclass(slots=True)
class Ranked:
    """A scored candidate: a memory (with its evidence's event ids) or a raw turn."""

    score: float
    memory: ItemView | None = None
    turn: EventRow | None = None
    covers: frozenset[str] = frozenset()


def fuse(rankings: Sequence[Sequence[int]]) -> dict[int, float]:
    """Reciprocal-rank fusion of rankings of the same corpus."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, rowid in enumerate(ranking):
            fused[rowid] = fused.get(rowid, 0.0) + 1.0 / (RRF_K + rank + 1)
    return fused


def leading(rankings: Sequence[Sequence[int]]) -> set[int]:
    """The LOAD_LIMIT rows the fused rankings put first."""
    fused = fuse(rankings)
    return set(sorted(fused, key=lambda rowid: -fused[rowid])[:LOAD_LIMIT])


def turn_rankings(read: Read) -> list[list[int]]:
    """The rankings of the read's candidate turns: the retrievers', the named period's,
    then those the stages added (``Read.added``)."""
    found = read.found if read.period is None else [*read.found, Found(turns=read.period_turns)]
    return [[r for r in f.turns if r in read.turns] for f in found] + read.added


def time_decay(updated_at: datetime, now: datetime) -> float:
    days = max(0.0, (now - as_utc(updated_at)).total_seconds() / 86400.0)
    return 1.0 / (1.0 + days / RECENCY_DAYS)


def rank(read: Read, spread_days: bool = True) -> list[Ranked]:
    """Every usable memory and showable turn, best first; ``spread_days`` False: not yet
    spread (``spread``), as a reranker reads them."""
    policy, items, turns = read.policy, read.items, read.turns
    # A hit that may not be shown takes no rank from those that may.
    memory_sims = fuse([[r for r in f.memories if r in items] for f in read.found])
    turn_sims = fuse(turn_rankings(read))
    best = max([*memory_sims.values(), *turn_sims.values()], default=0.0) or 1.0
    # A turn extraction kept nothing of has no importance: small talk makes way (docs/decisions.md#d73).
    # Times made aware once per candidate: a read ranks a hundred or more (docs/decisions.md#d133).
    candidates: list[tuple[ItemView | EventRow, float, datetime, float]] = [
        (item, memory_sims.get(rowid, 0.0) / best, as_utc(item.updated_at), item.importance)
        for rowid, item in items.items()
    ] + [
        (turn, turn_sims.get(rowid, 0.0) / best, as_utc(turn.created_at),
         0.0 if turn.nothing_kept else policy.event_importance)
        for rowid, turn in turns.items()
    ]
    days = [when.date() for _, _, when, _ in candidates]
    # An answer is often a few turns from the matching words: the day's best lifts all (docs/decisions.md#d05).
    day_best: dict[date, float] = {}
    for (_, sim, _, _), day in zip(candidates, days, strict=True):
        day_best[day] = max(day_best.get(day, 0.0), sim)
    ranked: list[Ranked] = []
    turn_days: dict[int, date] = {}  # a turn's day, for spread
    for (row, sim, when, importance), day in zip(candidates, days, strict=True):
        # A named time lifts its period's candidates fully, and nothing outside it (docs/decisions.md#d61).
        if read.period is not None:
            inside = read.period.holds(row.created_at) if isinstance(row, EventRow) else row.id in read.in_period
            lift = 1.0 if inside else 0.0
        else:
            lift = day_best[day]
        score = (policy.similarity_weight * sim + policy.day_weight * lift
                 + policy.importance_weight * importance + policy.recency_weight * time_decay(when, read.now))
        if isinstance(row, EventRow):
            ranked.append(Ranked(score, turn=row))
            turn_days[id(row)] = day
        else:
            ranked.append(Ranked(score, memory=row, covers=read.evidence.get(row.memory_id, frozenset())))
    ranked = behind_their_turns(ranked)  # docs/decisions.md#d114
    ranked.sort(key=_order)
    return spread(ranked, turn_days) if spread_days else ranked


def behind_their_turns(ranked: list[Ranked]) -> list[Ranked]:
    """Each summary scored at most as its best own turn, and left out with none: a word
    that tells a session apart brings its turns too (docs/decisions.md#d114)."""
    turn_score = {r.turn.event_id: r.score for r in ranked if r.turn is not None}
    if not turn_score:
        return ranked
    kept: list[Ranked] = []
    for r in ranked:
        if r.memory is not None and r.memory.type == MemoryType.SUMMARY:
            own = [turn_score[event_id] for event_id in r.covers if event_id in turn_score]
            if not own:
                continue
            r.score = min(r.score, math.nextafter(max(own), -math.inf))  # after that turn, even on a tie
        kept.append(r)
    return kept


def spread(ranked: list[Ranked], days: dict[int, date] | None = None) -> list[Ranked]:
    """Each turn lowered by DAY_SPREAD × the turns of its day ranked before it, re-sorted."""
    before: dict[date, int] = {}
    for r in ranked:
        if r.turn is not None:
            day = days[id(r.turn)] if days is not None else as_utc(r.turn.created_at).date()
            n = before.get(day, 0)
            r.score -= DAY_SPREAD * n
            before[day] = n + 1
    ranked.sort(key=_order)
    return ranked


def _order(r: Ranked) -> tuple[float, int, float, int]:
    """Ties: memories before turns, then by confidence, then by age (stable across reads)."""
    if r.memory is not None:
        return (-r.score, 0, -r.memory.confidence, r.memory.id or 0)
    assert r.turn is not None
    return (-r.score, 1, 0.0, r.turn.id)
