"""The background fill: memories and turns without a vector of the current
model get one, a batch at a time, written through the single write point
(so the vector namespaces follow through the change channel)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, and_, func, select
from sqlalchemy.orm import Session

from ..clock import Clock, utcnow
from ..enums import RECALLED_ROLES, Corpus
from ..scope import Scope
from ..storing.changes import Change, MemoryWritten
from ..storing.database import Database, ReadOnlyError
from ..storing.tables import MemoryEvent, MemoryItem, MemoryVector
from ..storing.turns import turn_passages
from ..storing.vector_rows import (
    LEGACY_TURN_VECTORS,
    delete_other_models,
    has_table,
    legacy_turn_lacks_vector,
    store_vectors,
    turn_has_vector,
    whole_memory_vector,
)
from .embeddings import Embeddings

BATCH = 64  # memories or turns per embedding call (docs/decisions.md#d29)
NO_NOTE = 2**63


class VectorFill:
    def __init__(self, db: Database, embeddings: Embeddings, speaker_of: Callable[[Any], str | None],
                 embed_turns: Callable[[], bool] = lambda: True, clock: Clock = utcnow,
                 batch_size: int = BATCH) -> None:
        # A turn is embedded as the block shows it, speaker first; the rule of
        # who a turn is said by belongs to recalling/bot_lines.py (the engine passes it).
        self.speaker_of = speaker_of
        self.db = db
        self.embeddings = embeddings
        self.embed_turns = embed_turns
        self.clock = clock
        self.batch_size = batch_size
        # Per model, the event id below which every turn has been looked at: events
        # are only appended, so the fill never walks the whole table again.
        self._turns_checked: dict[str, int] = {}
        # The same for memories, lowered through the change channel: a round no
        # longer scans every vector row (150 ms at 10k, docs/decisions.md#d94).
        self._items_checked: dict[str, int] = {}
        self._rounds: dict[int, int] = {}  # per running round, the lowest mark a write noted during it
        db.subscribe(self)

    async def follow(self, changes: Sequence[Change]) -> None:
        for change in changes:
            if isinstance(change, MemoryWritten) and change.fact_tokens is not None:
                below = change.item_id - 1
                self._items_checked = {space: min(at, below) for space, at in self._items_checked.items()}
                self._rounds = {n: min(at, below) for n, at in self._rounds.items()}

    def _of_dimension(self, column: Any, model: str) -> tuple[ColumnElement[bool], ...]:
        """A vector of the dimension the model answers in now: one of
        another (the provider was reconfigured) counts as none, so the
        fill replaces it and a namespace never holds two (faults.md)."""
        dim = self.embeddings.dims.get(model)
        return () if dim is None else (column == dim,)

    async def fill(self) -> int:
        """Embed a batch of memories, then of turns, that have no vector of
        the current model. Returns how many were embedded."""
        if self.embeddings.embedder is None:
            return 0
        if not self.embeddings.model:  # an AstrBot provider names its model on first use
            await self.embeddings.embed(["model probe"], timeout=self.embeddings.query_timeout * 4)
        model = self.embeddings.model
        if not model:
            return 0
        done = await self._fill_memories(model)
        if self.embed_turns():
            done += await self._fill_turns(model)
        return done

    async def fill_all(self, max_rounds: int = 1000) -> int:
        """Batch after batch until nothing is left (or ``max_rounds``)."""
        total = 0
        for _ in range(max_rounds):
            done = await self.fill()
            if not done:
                break
            total += done
        return total

    async def _fill_memories(self, model: str) -> int:
        space = f"{model}@{self.embeddings.dims.get(model, 0)}"
        checked = self._items_checked.get(space, 0)
        self._items_checked = {space: checked}
        round_id = id(object())
        self._rounds[round_id] = NO_NOTE
        try:
            return await self._fill_memories_above(model, space, checked, round_id)
        finally:
            self._rounds.pop(round_id, None)

    async def _fill_memories_above(self, model: str, space: str, checked: int, round_id: int) -> int:
        of_dimension = self._of_dimension(MemoryVector.dim, model)

        def read(session: Session) -> tuple[int, list[MemoryItem]]:
            last = session.execute(select(func.coalesce(func.max(MemoryItem.id), 0))).scalar_one() or 0
            return last, list(session.scalars(
                select(MemoryItem)
                .outerjoin(MemoryVector, and_(MemoryVector.item_id == MemoryItem.id, MemoryVector.model == model,
                                              whole_memory_vector(), *of_dimension))
                .where(MemoryItem.id > checked, MemoryItem.id <= last, MemoryVector.item_id.is_(None))
                .order_by(MemoryItem.id)
                .limit(self.batch_size)
            ))

        # Both statements in one hop to a read thread (docs/decisions.md#d128).
        last, items = await self.db.run_session(read)
        if not items:
            self._advance_items(space, last, round_id)
            return 0
        missing = [i.fact for i in items if self.embeddings.primed(i.fact) is None]
        embedded = await self.embeddings.embed(missing, timeout=self.embeddings.query_timeout * 10) \
            if missing else np.zeros((0, 1), np.float32)
        if embedded is None:
            return 0
        fresh = dict(zip(missing, embedded, strict=True))
        vectors = {i.id: self.embeddings.primed(i.fact) if i.fact not in fresh else fresh[i.fact] for i in items}
        facts = {i.id: i.fact for i in items}
        try:
            async with self.db.write() as session:
                # An item whose fact changed meanwhile waits for the next round.
                current = dict((await session.execute(
                    select(MemoryItem.id, MemoryItem.fact).where(MemoryItem.id.in_(list(facts))))).all())
                keep = [(i.id, Scope(i.scope, i.scope_id)) for i in items
                        if i.id is not None and current.get(i.id) == facts[i.id]]
                if not keep:
                    return 0
                rowids = [rowid for rowid, _ in keep]
                await delete_other_models(session, Corpus.MEMORIES, rowids, model)
                await store_vectors(session, Corpus.MEMORIES, keep, model,
                                    [np.asarray(vectors[rowid])[None, :] for rowid in rowids], self.clock())
        except ReadOnlyError:
            return 0
        # Those whose fact changed meanwhile were noted below this mark.
        self._advance_items(space, max(i.id for i in items if i.id is not None), round_id)
        return len(keep)

    def _advance_items(self, space: str, checked: int, round_id: int) -> None:
        """Every memory up to ``checked`` has a vector of ``space``, but for
        those a write noted during the round."""
        if space in self._items_checked:  # not switched to another model meanwhile
            self._items_checked[space] = min(checked, self._rounds.get(round_id, NO_NOTE))

    async def _fill_turns(self, model: str) -> int:
        """Every turn not withheld is embedded, in every mode (a bot switched to
        auto then finds them), as the reader is shown it."""
        # Filling for this model deletes the turns' vectors of any other, so
        # how far another model got no longer holds (a switch A → B → A).
        space = f"{model}@{self.embeddings.dims.get(model, 0)}"  # a new dimension starts over
        checked = self._turns_checked.get(space, 0)
        self._turns_checked = {space: checked}
        dim = self.embeddings.dims.get(model)

        def read(session: Session) -> tuple[int, list[MemoryEvent]]:
            last = session.execute(select(func.coalesce(func.max(MemoryEvent.id), 0))).scalar_one() or 0
            missing = [~turn_has_vector(model, dim)]
            if has_table(session.connection(), LEGACY_TURN_VECTORS):  # rows from before 0017, until moved
                missing.append(legacy_turn_lacks_vector(model, dim))
            return last, list(session.scalars(
                select(MemoryEvent)
                .where(MemoryEvent.id > checked, MemoryEvent.id <= last, *missing,
                       MemoryEvent.source_role.in_(RECALLED_ROLES), MemoryEvent.withheld.is_(False))
                .order_by(MemoryEvent.id)
                .limit(self.batch_size)
            ))

        last, events = await self.db.run_session(read)
        if not events:
            self._turns_checked[space] = last
            return 0
        passages = [turn_passages(e.source_type, e.content, self.speaker_of(e)) for e in events]
        flat = await self.embeddings.embed([p for ps in passages for p in ps],
                                           timeout=self.embeddings.query_timeout * 10)
        if flat is None:
            return 0
        vectors = np.split(flat, np.cumsum([len(ps) for ps in passages])[:-1])
        rowids = [e.id for e in events if e.id is not None]
        try:
            async with self.db.write() as session:
                # A turn withheld meanwhile gets no vector.
                withheld = set((await session.execute(
                    select(MemoryEvent.id).where(MemoryEvent.id.in_(rowids), MemoryEvent.withheld))).scalars())
                keep = [n for n, e in enumerate(events) if e.id not in withheld]
                await delete_other_models(session, Corpus.TURNS, rowids, model)
                await store_vectors(session, Corpus.TURNS,
                                    [(rowids[n], Scope(events[n].scope, events[n].scope_id)) for n in keep],
                                    model, [vectors[n] for n in keep], self.clock())
        except ReadOnlyError:
            return 0
        self._turns_checked[space] = rowids[-1]
        return len(keep)
