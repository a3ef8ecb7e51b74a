"""The read path: the block to inject for one message. Memories (compact, reviewed)
and raw turns (for what no memory covers) are candidates alike.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, tzinfo

from sqlalchemy import Connection

from ..clock import Clock, utcnow
from ..config import READ_SECONDS
from ..enums import MemoryType
from ..extension_points import Query, Retriever, TokenCounter
from ..indexes.keywords import TurnRanker
from ..scope import Scope
from ..storing.database import Database
from .asking import event_parts
from .block import BlockBuilder, MemoryBlock
from .bot_lines import bot_share
from .dates import First, Period, named_period
from .explain import explain_hits
from .followers import load_followers
from .periods import PeriodRows, first_day, load_period
from .ranking import Ranked, behind_their_turns, leading, rank, spread
from .read import Focus, Read
from .reranking import Reranking
from .rows import EventRow, ItemRow, ItemView, load_evidence, load_memories, load_turns, usable
from .trace import BUDGET

# Hits each retriever returns per corpus, best first (docs/decisions.md#d06).
HITS_PER_SEARCH = 50


class MemoryReader:
    def __init__(self, db: Database, retrievers: Sequence[Retriever], counter: TokenCounter, clock: Clock = utcnow,
                 unbacked_turns: Callable[[], bool] = lambda: False, tz: tzinfo = UTC,
                 reranking: Reranking | None = None,
                 turn_ranker: Callable[[list[Scope]], TurnRanker] | None = None) -> None:
        self.db = db
        self.retrievers = list(retrievers)
        self.builder = BlockBuilder(counter)
        self._clock = clock
        # Whether turns no memory cites may be shown: only where facts go live unreviewed (mode auto).
        self._unbacked_turns = unbacked_turns
        # The user's time zone (AstrBot's setting): what "昨天" means.
        self.tz = tz
        self.reranking = reranking
        # The keyword index's ranking of a named period's turns (indexes.keywords.TurnRanker).
        self.turn_ranker = turn_ranker

    @property
    def counter(self) -> TokenCounter:
        return self.builder.counter

    async def read(self, read: Read) -> MemoryBlock:
        """The block for ``read``, with its trace (if any) filled."""
        started = time.monotonic()  # the read's share of READ_SECONDS, for a reranker's call
        if read.pinned is not None and not self.builder.fits_alone(read):
            if read.trace is not None:  # it does not fit at all
                read.trace.leave_out(read.pinned.text, read.pinned.source, read.pinned.selected.memory_id, 1.0,
                                     BUDGET)
            read.pinned = None
        policy = read.policy
        if not policy.enable or not read.scopes or (policy.max_items <= 0 and policy.max_events <= 0):
            return MemoryBlock() if read.pinned is None else self.builder.fit([], read)
        read.now = self._clock()
        for stage in self.stages:
            await stage(read)
        if self.reranking is None or not self.reranking.on:  # one trip to a thread
            return await asyncio.to_thread(lambda: self.builder.fit(rank(read), read))
        # The reranker reads candidates before the spread, the block's rule for sessions sharing a day.
        ranked, documents = await asyncio.to_thread(self._rank_for_reranker, read)
        ranked = await self.reranking.apply(read.question, ranked, documents,
                                            READ_SECONDS - (time.monotonic() - started))
        # A summary the reranker lifted still goes no higher than its best turn (docs/decisions.md#d114).
        return await asyncio.to_thread(lambda: self.builder.fit(spread(behind_their_turns(ranked)), read))

    @property
    def stages(self) -> tuple[Callable[[Read], Awaitable[None]], ...]:
        """What a read goes through before ranking: a new heuristic is one more stage, not
        one more parameter."""
        return self._retrieve, self._load_rows, self._leave_out, self._explain, self._bots_share, self._focus

    async def _retrieve(self, read: Read) -> None:
        # Searched as the events it names, each on its own (asking.py, docs/decisions.md#d84).
        queries = [Query.of(part) for part in event_parts(read.question)] or [read.query]
        read.found = list(await asyncio.gather(
            *(r.search(read.scopes, each, HITS_PER_SEARCH) for each in queries for r in self.retrievers)))

    async def _load_rows(self, read: Read) -> None:
        """The candidates' rows, and the named period's, which join them."""
        unbacked = self._unbacked_turns()
        # Most messages name no time: then no third trip to a read thread.
        names = named_period(read.question, read.now, self.tz)
        ranker = None if names is None or self.turn_ranker is None else self.turn_ranker(read.scopes)
        # Memories and turns in one trip: two cost more than they gained side by side (docs/decisions.md#d133).
        (read.items, read.evidence, read.turns), named = await asyncio.gather(
            self.db.run(lambda conn: self._candidates(conn, read, unbacked)),
            asyncio.sleep(0) if names is None else  # (None)
            self.db.run(lambda conn: self._named(conn, read, names, unbacked, ranker)),
        )
        if named is None:
            return
        # The period's candidates join, lifted; its keyword ranking is one more retriever's (docs/decisions.md#d84).
        read.period, read.in_period, read.period_turns = named.period, frozenset(named.memories), named.ranking
        read.items = {**named.memories, **read.items}
        read.evidence = {**named.evidence, **read.evidence}
        read.turns = {**named.turns, **read.turns}
        # Each search saw its own turns: a summary's among both (storing.evidence.evidence_of).
        summaries = [i.memory_id for i in read.items.values()
                     if i.type == MemoryType.SUMMARY and i.memory_id in read.evidence]
        if summaries:
            read.evidence.update(await self.db.run(lambda conn: load_evidence(conn, summaries, read.turns.keys())))

    @staticmethod
    async def _leave_out(read: Read) -> None:
        """What the read may not bring (Only), and the turns the model reads in the request already."""
        if read.only is not None:
            only = read.only
            read.items = {k: i for k, i in read.items.items() if only.keeps_memory(i)}
            read.turns = {k: t for k, t in read.turns.items() if only.keeps_turn(t)}
        if read.history is not None:
            history = read.history
            read.turns = {k: t for k, t in read.turns.items() if not history.holds_turn(t.content)}

    async def _explain(self, read: Read) -> None:
        """The hits that never became candidates, and why."""
        if read.trace is None:
            return
        policy = read.policy
        memory_hits = leading([f.memories for f in read.found]) - set(read.items) if policy.max_items > 0 else set()
        turn_hits = leading([f.turns for f in read.found]) - set(read.turns) if policy.max_events > 0 else set()
        await self.db.run(lambda conn: explain_hits(conn, read, memory_hits, turn_hits))

    @staticmethod
    async def _bots_share(read: Read) -> None:
        read.bot_share = bot_share(read.question)

    @staticmethod
    async def _focus(read: Read) -> None:
        # A summary of the period the message names is shown whole; others by what the message is about.
        read.focus = Focus(frozenset(read.query.tokens), read.in_period)

    def _named(self, conn: Connection, read: Read, names: Period | First, unbacked: bool,
               ranker: TurnRanker | None) -> PeriodRows | None:
        """The memories and turns of the period the message names."""
        period = first_day(conn, read.scopes, self.tz) if isinstance(names, First) else names
        return None if period is None else load_period(conn, read, period, unbacked, ranker)

    def _candidates(self, conn: Connection, read: Read, unbacked: bool
                    ) -> tuple[dict[int, ItemView], dict[str, frozenset[str]], dict[int, EventRow]]:
        """The turns first, for a summary's evidence is only looked for among them; then the
        memories with their evidence."""
        policy = read.policy
        turns: dict[int, EventRow] = {} if policy.max_events <= 0 else \
            load_turns(conn, read.scopes, list(leading([f.turns for f in read.found])), unbacked)
        if policy.max_items <= 0:
            return {}, {}, turns
        hits = leading([f.memories for f in read.found])
        items: dict[int, ItemView] = {i.id: i for i in self._usable(conn, read, hits)}
        if read.follower is not None:
            items.update({i.id: i for i in load_followers(conn, read.follower, policy, read.now) if i.id not in items})
        return items, load_evidence(conn, [items[r].memory_id for r in hits if r in items], turns.keys()), turns

    def _usable(self, conn: Connection, read: Read, hits: set[int]) -> list[ItemRow]:
        """The usable memories among ``hits`` and each scope's most important ones."""
        return [i for i in load_memories(conn, read.scopes, hits, read.policy) if usable(i, read.policy, read.now)]

    def _rank_for_reranker(self, read: Read) -> tuple[list[Ranked], list[str]]:
        """The candidates ranked, not yet spread over their days, and the texts the reranker reads."""
        assert self.reranking is not None and read.focus is not None
        ranked = rank(read, spread_days=False)
        return ranked, self.reranking.documents(ranked, read.focus)
