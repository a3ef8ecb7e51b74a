"""``retention_days.turns`` (learning/retention.py, storing/archive.py,
docs/decisions.md#d159): turns older than the setting that no memory cites
go, with their vectors and keyword terms, in batches, each with one audit
row; the turns a fact or a summary cites, the evidence and the memories
stay; off (-1) by default."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest
from sqlalchemy import text

from astrbot_plugin_ltm.enums import AuditAction, Corpus, MemoryType, Status
from astrbot_plugin_ltm.learning import retention
from astrbot_plugin_ltm.storing.evidence import link_summary
from astrbot_plugin_ltm.storing.tables import MemoryItem
from astrbot_plugin_ltm.text import query_tokens


class HashEmbedder:
    model_id = "hash-32"

    async def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), 32), np.float32)
        for i, said in enumerate(texts):
            for token in re.findall(r"\w+", said.lower()):
                out[i, int(hashlib.md5(token.encode()).hexdigest(), 16) % 32] += 1
        return out


FACT = {"type": "preference", "fact": "Alice keeps bees in Kent", "fact_key": "alice_hobby", "line": 1}


async def old_and_new(make_ltm, origin, days: int = 30):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}, "retention_days": {"turns": days}},
                         embedder=HashEmbedder())
    alice, bob = origin("alice"), origin("bob")
    cited, _ = await ltm.turn(alice, "I keep bees in Kent", "Lovely.", FACT)  # a fact cites the message
    chat = [await ltm.record(bob, f"the weather on day {n} was grey and windy", "Hm.") for n in range(3)]
    summarised = await ltm.record(bob, "we talked about the lighthouse tour", "Nice.")
    async with ltm.engine.db.write() as session:  # a summary covering that exchange
        summary = MemoryItem(scope="user", scope_id=summarised[0].scope_id, type=MemoryType.SUMMARY,
                             fact="Bob talked about a lighthouse tour", fact_key="summary_session_x",
                             status=Status.ACTIVE, confidence=0.8, created_at=ltm.clock(), updated_at=ltm.clock())
        session.add(summary)
        await session.flush()
        await link_summary(session, summary, [e.event_id for e in summarised])
    await ltm.engine.worker.drain()  # extraction is done with them (no fact: the model answers [])
    await ltm.engine.worker.fill_vectors()
    ltm.clock.advance(days=days + 5)
    recent = await ltm.record(bob, "the weather today is grey and windy too", "Hm.")
    await ltm.engine.worker.fill_vectors()
    return ltm, cited, [e for turn in chat for e in turn], summarised, recent


async def rowids(ltm, table: str, key: str) -> set[int]:
    async with ltm.engine.db.read() as session:
        return set((await session.execute(text(f"SELECT {key} FROM {table}"))).scalars())


async def test_old_turns_no_memory_cites_go_with_their_vectors_and_terms_one_audit_row_a_batch(
        make_ltm, origin, monkeypatch):
    monkeypatch.setattr(retention, "FIRST_BATCH", 2)  # several batches of two
    monkeypatch.setattr(retention, "MAX_BATCH", 2)
    ltm, cited, chat, summarised, recent = await old_and_new(make_ltm, origin)
    bob = ltm.engine.resolver.user_scope(origin("bob"))
    windy = query_tokens("grey windy weather")
    said = {e.id for e in chat + recent if e.source_role == "user"}  # (the bot's "Hm." is small talk, withheld)
    found = {rowid for rowid, _ in await ltm.engine.keyword_index.search([bob], Corpus.TURNS, windy, 50)}
    assert found == said  # loaded: it follows the deletions

    # bob's chat and alice's "Lovely." (the fact cites her message only) are old and cited by nothing
    gone = {e.id for e in chat} | {cited[1].id}
    kept = {cited[0].id} | {e.id for e in summarised + recent}
    assert await ltm.engine.worker.turn_retention.sweep(ltm.clock(), 30) == len(gone)
    assert gone.isdisjoint(await rowids(ltm, "ltm_events", "id")) and kept <= await rowids(ltm, "ltm_events", "id")
    for table in ("ltm_turn_vectors", "ltm_turn_terms"):
        assert gone.isdisjoint(await rowids(ltm, table, "event_rowid")), table
        assert recent[0].id in await rowids(ltm, table, "event_rowid"), table
    # the memories and their evidence stay
    assert [i.fact for i in await ltm.items() if i.type != MemoryType.SUMMARY] == ["Alice keeps bees in Kent"]
    assert len(await ltm.evidence()) == 1 and await ltm.sql("SELECT count(*) FROM ltm_summary_links") == [(2,)]
    # the indexes followed: only the recent exchange is found
    found = {rowid for rowid, _ in await ltm.engine.keyword_index.search([bob], Corpus.TURNS, windy, 50)}
    assert found == {e.id for e in recent if e.source_role == "user"}
    near = (await ltm.engine.embeddings.query([bob], "grey windy weather", 50)).turns
    assert near and gone.isdisjoint(near)
    # one audit row a batch (seven turns, two a batch), saying how many and why
    rows = await ltm.audit()
    batches = [a for a in rows if a.action == AuditAction.DELETE_TURNS]
    assert [a.detail["turns"] for a in batches] == [2, 2, 2, 1]
    assert all(a.actor == "system:retention" and "30 days" in a.reason for a in batches)
    # nothing more to do; a later sweep looks at what became old since, not the whole archive again
    assert await ltm.engine.worker.turn_retention.sweep(ltm.clock(), 30) == 0
    await ltm.engine.stop()


async def test_a_dry_run_counts_what_would_go_and_deletes_nothing(make_ltm, origin):
    ltm, _, chat, _, _ = await old_and_new(make_ltm, origin)
    before = await rowids(ltm, "ltm_events", "id")
    done, _ = await retention.sweep_turns(ltm.engine.db, ltm.clock() - retention.timedelta(days=30),
                                          "operator:root", "dry", dry_run=True)
    assert done.deleted == len(chat) + 1 and done.bytes > 0 and done.batches == 0  # and alice's "Lovely."
    assert await rowids(ltm, "ltm_events", "id") == before
    await ltm.engine.stop()


@pytest.mark.parametrize("days", [-1])
async def test_turns_are_kept_for_ever_by_default(make_ltm, origin, days):
    ltm, *_ = await old_and_new(make_ltm, origin, days=30)
    ltm.configure({"retention_days": {"turns": days}})
    before = await rowids(ltm, "ltm_events", "id")
    assert ltm.engine.config.turns_retention_days is None
    await ltm.engine.worker._step()  # the hourly sweep
    assert await rowids(ltm, "ltm_events", "id") == before
    await ltm.engine.stop()
