"""The change channel: every write path hands its changes, after commit and
only then, to every derived index in one order; a write that rolls back
hands over nothing and leaves every index as it was."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from astrbot_plugin_ltm.enums import Corpus
from astrbot_plugin_ltm.operating.queries import ItemFilter
from astrbot_plugin_ltm.operating.transfer import export_items, import_items
from astrbot_plugin_ltm.scope import Scope
from astrbot_plugin_ltm.storing.changes import (
    Change,
    MemoryRemoved,
    MemoryWritten,
    ScopeForgotten,
    TurnsDeleted,
    TurnsRecorded,
    TurnsWithheld,
    VectorsStored,
)
from astrbot_plugin_ltm.storing.tables import MemoryItem
from astrbot_plugin_ltm.text import query_tokens
from bench.embedders import HashEmbedder

ALICE = Scope("user", "qq:alice")
AUTO = {"write_policy": {"mode": "auto"}}


class Recorder:
    """A derived index of its own: subscribes like any other and keeps
    every batch of changes it is handed, in order."""

    def __init__(self, name: str, log: list[tuple[str, list[Change]]]) -> None:
        self.name, self.log = name, log

    async def follow(self, changes: Sequence[Change]) -> None:
        self.log.append((self.name, list(changes)))


@pytest.fixture
async def channel(make_ltm, monkeypatch):
    """An engine whose keyword and vector indexes (and a third, new index)
    report each batch of changes they are handed."""
    ltm = await make_ltm(AUTO, embedder=HashEmbedder(32))
    log: list[tuple[str, list[Change]]] = []
    for name, index in (("keywords", ltm.engine.keyword_index), ("vectors", ltm.engine.vector_index)):
        real = index.follow

        async def spy(changes, name=name, real=real):
            log.append((name, list(changes)))
            await real(changes)

        monkeypatch.setattr(index, "follow", spy)
    ltm.engine.db.subscribe(Recorder("new index", log))
    ltm.log = log
    return ltm


def handed(ltm, *types: type) -> list[Any]:
    """The changes of ``types`` handed over since the log was last cleared,
    checking each batch reached every index, in subscription order."""
    names = [name for name, _ in ltm.log]
    assert names == ["keywords", "vectors", "new index"] * (len(names) // 3), names
    batches = [changes for _, changes in ltm.log]
    for n in range(0, len(batches), 3):
        assert batches[n] == batches[n + 1] == batches[n + 2]  # the same changes, to each
    ltm.log.clear()
    return [c for changes in batches[::3] for c in changes if isinstance(c, types)]


async def keyword_hits(ltm, words: str, corpus: Corpus = Corpus.MEMORIES) -> set[int]:
    return {rowid for rowid, _ in await ltm.engine.keyword_index.search([ALICE], corpus, query_tokens(words), 50)}


async def learn(ltm, origin, said: str, fact: str) -> MemoryItem:
    await ltm.turn(origin("alice"), said, "OK.", {"fact": fact, "fact_key": fact})
    return await ltm.item(MemoryItem.fact == fact)


# -- each write path reaches each index ------------------------------------------------------


async def test_recorded_turns_reach_every_index_the_bots_reply_too(channel, origin):
    assert await keyword_hits(channel, "bees", Corpus.TURNS) == set()  # loaded, so a commit reaches it at once
    channel.log.clear()
    (user, bot) = await channel.record(origin("alice"), "I keep bees in Kent", "Bees in Kent, lovely!")
    (recorded,) = handed(channel, TurnsRecorded)
    assert recorded.scope == ALICE and [rowid for rowid, _ in recorded.turns] == [user.id, bot.id]
    assert await keyword_hits(channel, "bees", Corpus.TURNS) == {user.id, bot.id}


async def test_the_writer_hands_over_a_new_memory_and_a_superseded_one(channel, origin):
    await channel.record(origin("alice"), "I keep bees in Kent")
    channel.log.clear()
    channel.gateway.facts({"fact": "Alice keeps bees", "fact_key": "alice_hobby"})
    await channel.engine.worker.run_once(ignore_idle=True)
    (written,) = handed(channel, MemoryWritten)
    item = await channel.item()
    assert (written.item_id, written.created, written.scope) == (item.id, True, ALICE)
    assert "bee" in (written.fact_tokens or ())
    assert await keyword_hits(channel, "bees") == {item.id}
    await channel.record(origin("alice"), "Actually I no longer keep bees")
    channel.log.clear()
    channel.gateway.facts({"fact": "Alice doesn't keep bees any more", "fact_key": "alice_hobby"})
    await channel.engine.worker.run_once(ignore_idle=True)
    closed, successor = handed(channel, MemoryWritten)
    # the old value stays as history (its status changed); the new one is a new memory
    assert closed.item_id == item.id and not closed.created
    assert successor.item_id != item.id and successor.created and "bee" in (successor.fact_tokens or ())


async def test_operator_edits_deletes_and_reviews_reach_every_index(channel, origin):
    item = await learn(channel, origin, "I live in Paris", "Alice lives in Paris")
    await channel.engine.worker.fill_vectors()
    channel.log.clear()
    await channel.engine.admin.update_item(item.memory_id, {"fact": "Alice lives in Lisbon"}, "operator:root")
    (edited,) = handed(channel, MemoryWritten)
    assert edited.item_id == item.id and "lisbon" in (edited.fact_tokens or ())
    assert await keyword_hits(channel, "Lisbon") == {item.id} and await keyword_hits(channel, "Paris") == set()
    await channel.engine.admin.update_item(item.memory_id, {"status": "disabled"}, "operator:root")
    (status,) = handed(channel, MemoryWritten)
    assert status.fact_tokens is None
    await channel.engine.admin.review([item.memory_id], "approve", "operator:root")
    assert len(handed(channel, MemoryWritten)) == 1
    await channel.engine.admin.delete(item.memory_id, "operator:root")
    (removed,) = handed(channel, MemoryRemoved)
    assert removed.item_id == item.id
    assert await keyword_hits(channel, "Lisbon") == set()
    other = await learn(channel, origin, "I like tea", "Alice likes tea")
    channel.log.clear()
    await channel.engine.admin.review([other.memory_id], "reject", "operator:root")
    assert [c.item_id for c in handed(channel, MemoryRemoved)] == [other.id]


async def test_forgetting_a_scope_reaches_every_index(channel, origin):
    item = await learn(channel, origin, "My dog is called Rex", "Alice's dog is Rex")
    assert await keyword_hits(channel, "Rex", Corpus.TURNS)
    channel.log.clear()
    await channel.engine.admin.forget_scope(ALICE, "user:alice")
    changes = handed(channel, MemoryRemoved, ScopeForgotten, TurnsWithheld)
    assert MemoryRemoved(ALICE, item.id) in changes and ScopeForgotten(ALICE) in changes
    assert await keyword_hits(channel, "Rex", Corpus.TURNS) == set()
    assert await keyword_hits(channel, "Rex") == set()


async def test_explicit_memories_reach_every_index(channel, origin):
    outcome = await channel.engine.remember(origin("alice"), "I am allergic to peanuts")
    (written,) = handed(channel, MemoryWritten)
    assert written.created and written.scope == ALICE
    assert outcome.memory_id
    await channel.record(origin("alice"), "Remember that I work night shifts")
    changes = handed(channel, MemoryWritten, TurnsRecorded)
    assert {type(c) for c in changes} == {MemoryWritten, TurnsRecorded}  # one write: the turn and its memory


async def test_an_import_reaches_every_index(channel, make_ltm, origin):
    source = await make_ltm(AUTO, name="source.db")
    await source.turn(origin("alice"), "I play chess on Sundays", "OK.", {"fact": "Alice plays chess"})
    export = await export_items(source.engine.db, ItemFilter())
    channel.log.clear()
    report = await import_items(channel.engine.db, json.loads(json.dumps(export)), "operator:root", False)
    assert len(report.added) == 1
    changes = handed(channel, MemoryWritten, TurnsRecorded)
    assert {type(c) for c in changes} == {MemoryWritten, TurnsRecorded}
    assert len(await keyword_hits(channel, "chess")) == 1


async def test_the_retention_sweep_reaches_every_index(channel, origin):
    channel.configure({"retention_days": {"episode": 1}})
    await channel.turn(origin("alice"), "We went to the zoo", "OK.", {"fact": "Alice went to the zoo",
                                                                      "type": "episode"})
    item = await channel.item()
    channel.clock.advance(days=2)
    channel.log.clear()
    assert await channel.engine.worker.sweep_expired() == 1
    assert [c.item_id for c in handed(channel, MemoryWritten)] == [item.id]


async def test_old_turns_deleted_by_retention_reach_every_index(channel, origin):
    events = await channel.record(origin("alice"), "We rowed across the lake", "Nice.")
    await channel.engine.worker.drain()  # extraction done with them; no memory cites them
    assert await keyword_hits(channel, "rowed lake", Corpus.TURNS)  # loaded, so a commit reaches it at once
    channel.clock.advance(days=40)
    channel.log.clear()
    assert await channel.engine.worker.turn_retention.sweep(channel.clock(), 30) == 2
    (deleted,) = handed(channel, TurnsDeleted)
    assert deleted.scope == ALICE and set(deleted.rowids) == {e.id for e in events}
    assert await keyword_hits(channel, "rowed lake", Corpus.TURNS) == set()


async def test_the_vector_fill_and_eviction_reach_every_index(channel, origin):
    channel.configure({"write_policy": {"max_items_per_scope": 1}})
    channel.log.clear()
    first = await learn(channel, origin, "I like tea", "Alice likes tea")  # extracted, then embedded
    stored = handed(channel, VectorsStored)
    assert {c.corpus for c in stored} == {Corpus.MEMORIES, Corpus.TURNS}
    assert first.id in next(c for c in stored if c.corpus == Corpus.MEMORIES).rowids
    assert first.id in (await channel.engine.embeddings.query([ALICE], "Alice likes tea", 5)).memories
    await learn(channel, origin, "I like coffee", "Alice likes coffee")  # evicts the first
    assert first.id in [c.item_id for c in handed(channel, MemoryRemoved)]
    assert first.id not in (await channel.engine.embeddings.query([ALICE], "Alice likes tea", 5)).memories


async def test_a_memory_edited_after_the_fill_caught_up_is_embedded_again(channel, origin):
    # The fill only looks above what it has checked, lowered through the
    # channel when a fact is written (docs/decisions.md#d94).
    old = await learn(channel, origin, "I live in Paris", "Alice lives in Paris")
    newer = await learn(channel, origin, "I like tea", "Alice likes tea")
    await channel.engine.worker.fill_vectors()
    assert await channel.engine.worker.fill_vectors() == 0  # caught up
    channel.log.clear()
    await channel.engine.admin.update_item(old.memory_id, {"fact": "Alice lives in Lisbon"}, "operator:root")
    assert await channel.engine.worker.fill_vectors() == 1
    (stored,) = [c for c in handed(channel, VectorsStored) if c.corpus == Corpus.MEMORIES]
    assert stored.rowids == (old.id,) and newer.id not in stored.rowids
    assert old.id in (await channel.engine.embeddings.query([ALICE], "Alice lives in Lisbon", 5)).memories


# -- a write that rolls back reaches no index ---------------------------------------------------------


async def test_a_write_that_rolls_back_hands_over_nothing_and_changes_no_index(channel, origin):
    kept = await learn(channel, origin, "I keep bees", "Alice keeps bees")
    await channel.engine.worker.fill_vectors()
    assert await keyword_hits(channel, "bees") == {kept.id}
    assert kept.id in (await channel.engine.embeddings.query([ALICE], "Alice keeps bees", 5)).memories
    channel.log.clear()
    with pytest.raises(RuntimeError):
        async with channel.engine.db.write() as session:
            stored = await session.get(MemoryItem, kept.id)
            from astrbot_plugin_ltm.storing.removal import forget_turns, remove_memory

            await remove_memory(session, stored, withhold=True)
            await forget_turns(session, ALICE)
            raise RuntimeError("the rest of the write failed")
    assert channel.log == []
    assert await keyword_hits(channel, "bees") == {kept.id}
    assert await keyword_hits(channel, "bees", Corpus.TURNS)
    assert kept.id in (await channel.engine.embeddings.query([ALICE], "Alice keeps bees", 5)).memories
    assert len(await channel.items()) == 1
