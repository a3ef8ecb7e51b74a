"""The read pipeline: the block to inject for one message.

Three steps off the event loop: the retrievers side by side (keyword
namespaces, the embedding provider and FAISS), the candidates' rows loaded
on the database's read threads, then one pass in a thread that ranks them
(ranking.py) and fits the budget (block.py). With a rerank provider, its
call comes between the ranking and the fit (reranking.py). Memories and raw turns are
candidates alike: a memory is a compact, reviewed fact; a turn is what was
said, for what no memory covers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any, NamedTuple

from sqlalchemy import Connection

from ..clock import Clock, as_utc, utcnow
from ..config import READ_SECONDS, ReadPolicy
from ..enums import MemoryType
from ..extension_points import Found, Query, Retriever, TokenCounter
from ..indexes.keywords import TurnRanker
from ..scope import Scope
from ..storing.database import Database
from . import bot_lines
from .asking import asks_for_suggestions, event_parts
from .block import BlockBuilder, Focus, MemoryBlock, Pinned, language_of
from .bot_lines import asks_what_the_bot_said
from .dates import First, Period, named_period
from .explain import explain_hits
from .followers import Follower, load_followers
from .history import History
from .periods import PeriodRows, load_period, resolve
from .ranking import Ranked, leading, rank, spread
from .reranking import Reranking
from .rows import EventRow, ItemView, load_evidence, load_memories, load_turns, usable
from .summary_lines import behind_their_turns
from .trace import BUDGET, Trace

# Hits each retriever returns per corpus, best first (docs/decisions.md#d06).
HITS_PER_SEARCH = 50


@dataclass(frozen=True)
class Only:
    """What a read may bring, beyond the policy (the memory_search tool):
    memories of these types (then no turns), said or confirmed in
    [since, until)."""

    types: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None

    def keeps_memory(self, item: ItemView) -> bool:
        return (not self.types or item.type in self.types) and self._within(item.updated_at)

    def keeps_turn(self, turn: EventRow) -> bool:
        return not self.types and self._within(turn.created_at)

    def _within(self, at: datetime) -> bool:
        at = as_utc(at)
        return (self.since is None or at >= self.since) and (self.until is None or at < self.until)


class Ranking(NamedTuple):
    """What a read ranks its candidates from (ranking.rank)."""

    found: list[Found]
    items: dict[int, ItemView]
    evidence: dict[str, frozenset[str]]
    turns: dict[int, EventRow]
    policy: ReadPolicy
    now: datetime
    period: Period | None
    in_period: frozenset[int]
    about: Focus
    preferences: bool

    def ranked(self, spread_days: bool = True) -> list[Ranked]:
        return rank(self.found, self.items, self.evidence, self.turns, self.policy, self.now, self.period,
                    self.in_period, self.preferences, self.about.tokens, spread_days)


class MemoryReader:
    def __init__(self, db: Database, retrievers: Sequence[Retriever], counter: TokenCounter, clock: Clock = utcnow,
                 unbacked_turns: Callable[[], bool] = lambda: False, tz: tzinfo = UTC,
                 reranking: Reranking | None = None,
                 turn_ranker: Callable[[list[Scope]], TurnRanker] | None = None) -> None:
        self.db = db
        self.retrievers = list(retrievers)
        self.builder = BlockBuilder(counter)
        self._clock = clock
        # Whether turns no memory cites may be shown (storing.turns): only
        # where facts go live without review (the engine says: mode auto).
        self._unbacked_turns = unbacked_turns
        # The user's time zone (AstrBot's setting): what "昨天" means.
        self.tz = tz
        self.reranking = reranking
        # The keyword index's ranking of a named period's turns (indexes.keywords.TurnRanker).
        self.turn_ranker = turn_ranker

    @property
    def counter(self) -> TokenCounter:
        return self.builder.counter

    async def read(self, scopes: list[Scope], query: str, policy: ReadPolicy, *, only: Only | None = None,
                   ids: bool = False, history: History | None = None, trace: Trace | None = None,
                   pinned: Pinned | None = None, follower: Follower | None = None) -> MemoryBlock:
        """The block for ``query``; ``ids``: each memory line carries its
        short id (for the memory_expand tool); ``history``: the request's
        earlier messages, whose turns are not recalled again (history.py);
        ``trace``: filled with the lines taken and the hits and candidates
        left out, and why; ``pinned``: placed under the block's opening
        when it fits, before the ranked candidates (last_time.py);
        ``follower``: the speaker whose profile facts follow them into this
        group, marked as theirs (followers.py)."""
        started = time.monotonic()  # the read's share of READ_SECONDS, for a reranker's call
        language = language_of(query)
        if pinned is not None and not self.builder.fits_alone(pinned, policy, language):
            if trace is not None:  # it does not fit at all
                trace.leave_out(pinned.text, pinned.source, pinned.selected.memory_id, 1.0, BUDGET)
            pinned = None
        if not policy.enable or not scopes or (policy.max_items <= 0 and policy.max_events <= 0):
            if pinned is None:
                return MemoryBlock()
            return self.builder.fit([], policy, language, trace=trace, pinned=pinned)
        now = self._clock()
        q = Query.of(query)
        unbacked = self._unbacked_turns()
        # A question comparing events is searched as the events it names, each
        # on its own: as a whole, the turns matching several of its words
        # would outrank each event's own (asking.py, docs/decisions.md#d84).
        queries = [Query.of(part) for part in event_parts(query)] or [q]
        found: list[Found] = list(await asyncio.gather(
            *(r.search(scopes, each, HITS_PER_SEARCH) for each in queries for r in self.retrievers)))
        # Most messages name no time: then no third trip to a read thread.
        names = named_period(query, now, self.tz)
        ranker = None if names is None or self.turn_ranker is None else self.turn_ranker(scopes)
        # The memories and the turns in one trip: two cost more in hops and
        # connections than they gained side by side (docs/decisions.md#d133).
        (items, evidence, turns), named = await asyncio.gather(
            self.db.run(lambda conn: self._candidates(conn, scopes, found, unbacked, policy, now, follower)),
            self._nothing() if names is None else
            self.db.run(lambda conn: self._named(conn, scopes, names, unbacked, policy, now, q.tokens, ranker)),
        )
        period: Period | None = None
        in_period: frozenset[int] = frozenset()
        ranked_by: list[Found] = found
        if named is not None:  # the period's memories and turns join the candidates, lifted (ranking.rank)
            period, in_period = named.period, frozenset(named.memories)
            # Its keyword ranking counts as one more retriever's (periods.py, docs/decisions.md#d84).
            ranked_by = [*found, Found(turns=named.ranking)]
            items = {**named.memories, **items}
            evidence = {**named.evidence, **evidence}
            turns = {**named.turns, **turns}
            # Each search saw its own turns: a summary's among both (storing.evidence.evidence_of).
            summaries = [i.memory_id for i in items.values()
                         if i.type == MemoryType.SUMMARY and i.memory_id in evidence]
            if summaries:
                evidence.update(await self.db.run(lambda conn: load_evidence(conn, summaries, turns.keys())))
        if only is not None:
            items = {k: i for k, i in items.items() if only.keeps_memory(i)}
            turns = {k: t for k, t in turns.items() if only.keeps_turn(t)}
        if history is not None:  # the model reads these turns in the request already
            turns = {k: t for k, t in turns.items() if not history.holds_turn(t.content)}
        if trace is not None:  # the hits that never became candidates, and why
            memory_hits = leading([f.memories for f in found]) - set(items) if policy.max_items > 0 else set()
            turn_hits = leading([f.turns for f in found]) - set(turns) if policy.max_events > 0 else set()
            await self.db.run(lambda conn: explain_hits(conn, scopes, memory_hits, turn_hits, policy, now, trace))
        # None: bot_lines.BOT_SHARE (docs/decisions.md#d119)
        bot_share = None if asks_what_the_bot_said(query) else bot_lines.CONTEXT_SHARE
        # A summary of the period the message names is shown whole; others by what the message is about.
        about = Focus(frozenset(q.tokens), in_period)
        ranking = Ranking(ranked_by, items, evidence, turns, policy, now, period, in_period, about,
                          asks_for_suggestions(query))
        fitting = (policy, language, ids, about, trace, pinned, bot_share)
        if self.reranking is None or not self.reranking.on:  # one trip to a thread
            return await asyncio.to_thread(self._rank_and_fit, ranking, fitting)
        # The reranker reads the candidates before they are spread over their days: the spread is the
        # block's rule for sessions that share a day, not a judgement of what answers the message.
        ranked, documents = await asyncio.to_thread(self._rank_for_reranker, ranking)
        ranked = await self.reranking.apply(query, ranked, documents, READ_SECONDS - (time.monotonic() - started))
        return await asyncio.to_thread(self._fit_spread, ranked, fitting)

    @staticmethod
    async def _nothing() -> None:
        return None

    def _named(self, conn: Connection, scopes: list[Scope], names: Period | First, unbacked: bool,
               policy: ReadPolicy, now: datetime, tokens: Sequence[str],
               ranker: TurnRanker | None) -> PeriodRows | None:
        """The memories and turns of the period the message names."""
        period = resolve(conn, scopes, names, self.tz)
        return None if period is None else load_period(conn, scopes, period, unbacked, policy, now, tokens, ranker)

    def _candidates(self, conn: Connection, scopes: list[Scope], found: list[Found], unbacked: bool,
                    policy: ReadPolicy, now: datetime, follower: Follower | None
                    ) -> tuple[dict[int, ItemView], dict[str, frozenset[str]], dict[int, EventRow]]:
        """The memories with their evidence, and the turns: the turns first,
        for a summary's evidence is only looked for among them."""
        turns = self._turns(conn, scopes, found, unbacked, policy)
        return (*self._memories(conn, scopes, found, policy, now, turns.keys(), follower), turns)

    @staticmethod
    def _memories(conn: Connection, scopes: list[Scope], found: list[Found], policy: ReadPolicy, now: datetime,
                  turns: Collection[int], follower: Follower | None = None
                  ) -> tuple[dict[int, ItemView], dict[str, frozenset[str]]]:
        """The usable memories among the hits and each scope's most
        important ones, with the event ids of the hits' evidence (a
        summary's among ``turns``); and the profile facts that follow
        ``follower`` into the group."""
        if policy.max_items <= 0:
            return {}, {}
        hits = leading([f.memories for f in found])
        items: dict[int, ItemView] = {i.id: i for i in load_memories(conn, scopes, hits, policy)
                                      if usable(i, policy, now)}
        if follower is not None:
            items.update({i.id: i for i in load_followers(conn, follower, policy, now) if i.id not in items})
        return items, load_evidence(conn, [items[r].memory_id for r in hits if r in items], turns)

    @staticmethod
    def _turns(conn: Connection, scopes: list[Scope], found: list[Found], unbacked: bool,
               policy: ReadPolicy) -> dict[int, EventRow]:
        if policy.max_events <= 0:
            return {}
        return load_turns(conn, scopes, list(leading([f.turns for f in found])), unbacked)

    def _rank_and_fit(self, ranking: Ranking, fitting: tuple[Any, ...]) -> MemoryBlock:
        return self.builder.fit(ranking.ranked(), *fitting)

    def _rank_for_reranker(self, ranking: Ranking) -> tuple[list[Ranked], list[str]]:
        """The candidates ranked, not yet spread over their days, and the texts the reranker reads."""
        assert self.reranking is not None
        ranked = ranking.ranked(spread_days=False)
        return ranked, self.reranking.documents(ranked, ranking.about)

    def _fit_spread(self, ranked: list[Ranked], fitting: tuple[Any, ...]) -> MemoryBlock:
        # A summary the reranker lifted still goes no higher than its best turn (docs/decisions.md#d114).
        return self.builder.fit(spread(behind_their_turns(ranked)), *fitting)
