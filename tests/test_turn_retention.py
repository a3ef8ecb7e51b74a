"""``retention_days.turns`` (learning/retention.py, storing/archive.py,
docs/decisions.md#d163): turns older than the setting that no memory cites
go, with their vectors and keyword terms, in batches, each with one audit
row; the turns a fact or a summary cites, the evidence and the memories
stay; off (-1) by default."""

from __future__ import annotations

import pytest

from astrbot_plugin_ltm.enums import AuditAction, Corpus, MemoryType
from astrbot_plugin_ltm.learning import retention
from astrbot_plugin_ltm.text import query_tokens
from tests.helpers import old_and_new, rowids


async def test_old_turns_no_memory_cites_go_with_their_vectors_and_terms_one_audit_row_a_batch(
        make_ltm, origin, monkeypatch):
    monkeypatch.setattr(retention, "FIRST_BATCH", 2)  # several batches of two, however long each takes
    monkeypatch.setattr(retention, "MIN_BATCH", 2)
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
    ltm, *_ = await old_and_new(make_ltm, origin)
    ltm.configure({"retention_days": {"turns": days}})
    before = await rowids(ltm, "ltm_events", "id")
    assert ltm.engine.config.turns_retention_days is None
    await ltm.engine.worker._step()  # the hourly sweep
    assert await rowids(ltm, "ltm_events", "id") == before
    await ltm.engine.stop()
