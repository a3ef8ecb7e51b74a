"""Background compaction: near-duplicate memories that slipped past the
writer's dedup are merged — evidence united, the other kept as history,
audited — and different facts, other scopes, held memories and a read-only
store are left alone."""

from __future__ import annotations

import numpy as np

from astrbot_plugin_ltm.enums import AuditAction, Status
from astrbot_plugin_ltm.learning.compaction import ITEMS_PER_SCOPE, Row, find_merges
from astrbot_plugin_ltm.storing.tables import MemoryAudit, MemoryEvidence, MemoryItem

TOPICS = ["tea", "paris", "cat", "guitar"]


class TopicEmbedder:
    """A text's vector is its topic (the first topic word in it): texts on
    one topic have cosine 1, others 0, so the tests choose what is close."""

    model_id = "topics-4"

    async def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), len(TOPICS) + 1), np.float32)
        for i, text in enumerate(texts):
            words = text.lower()
            found = [n for n, topic in enumerate(TOPICS) if topic in words]
            out[i, found[0] if found else len(TOPICS)] = 1.0
        return out


async def make(make_ltm, **config):
    return await make_ltm({"write_policy": {"mode": "auto"}, **config}, embedder=TopicEmbedder())


async def remember_all(ltm, origin, *facts: str) -> list[str]:
    """Remembered before any has a vector, so the writer cannot see they are
    the same (as after an import or a model change); then embedded."""
    ids = [(await ltm.engine.remember(origin, fact)).memory_id for fact in facts]
    await ltm.engine.worker.fill_vectors()
    return ids


async def test_near_duplicates_are_merged_with_their_evidence_united_and_audited(make_ltm, origin):
    ltm = await make(make_ltm)
    first, second = await remember_all(ltm, origin(), "I love green tea", "I really love drinking green tea")
    assert len(await ltm.items(MemoryItem.status == Status.ACTIVE)) == 2

    merges = await ltm.engine.compactor.run_once()

    assert len(merges) == 1
    (survivor,) = await ltm.items(MemoryItem.status == Status.ACTIVE)
    (merged,) = await ltm.items(MemoryItem.status == Status.SUPERSEDED)
    assert {survivor.memory_id, merged.memory_id} == {first, second}
    assert merged.superseded_by == survivor.memory_id and merged.valid_to is not None
    # the survivor now cites both statements; the merged one keeps its own link
    events = {e.event_id for e in await ltm.evidence(MemoryEvidence.memory_id == survivor.memory_id)}
    merged_events = {e.event_id for e in await ltm.evidence(MemoryEvidence.memory_id == merged.memory_id)}
    assert len(events) == 2 and merged_events < events
    assert survivor.evidence_count == 2
    rows = await ltm.audit(MemoryAudit.action == AuditAction.COMPACT)
    assert {r.memory_id for r in rows} == {first, second}
    by_memory = {r.memory_id: r for r in rows}
    assert by_memory[survivor.memory_id].detail["merged"] == merged.memory_id
    assert by_memory[merged.memory_id].detail["into"] == survivor.memory_id
    assert by_memory[merged.memory_id].actor == "system:compaction"
    # the review page shows the merged memory in the survivor's history, and the way back
    history = (await ltm.engine.admin.get_item(survivor.memory_id))["history"]
    assert [v["memory_id"] for v in history] == [merged.memory_id, survivor.memory_id]
    back = (await ltm.engine.admin.get_item(merged.memory_id))["history"]
    assert [v["memory_id"] for v in back] == [merged.memory_id, survivor.memory_id]
    # the block now holds the fact once
    block = await ltm.block(origin(), "green tea")
    assert sum("green tea" in item.fact for item in block.items) == 1


async def test_a_second_run_finds_nothing_more_to_merge(make_ltm, origin):
    ltm = await make(make_ltm)
    await remember_all(ltm, origin(), "I love green tea", "I really love drinking green tea",
                       "I love green tea so much")
    first = await ltm.engine.compactor.run_once()
    second = await ltm.engine.compactor.run_once()
    third = await ltm.engine.compactor.run_once()
    assert len(first) == 1 and len(second) == 1 and third == []  # one merge per memory per run
    assert len(await ltm.items(MemoryItem.status == Status.ACTIVE)) == 1
    (survivor,) = await ltm.items(MemoryItem.status == Status.ACTIVE)
    assert len(await ltm.evidence(MemoryEvidence.memory_id == survivor.memory_id)) == 3


async def test_different_facts_on_one_topic_are_left_alone(make_ltm, origin):
    ltm = await make(make_ltm)
    # close by embedding, but sharing too few words, or contradicting
    await remember_all(ltm, origin(), "I live in Paris", "I do not live in Paris",
                       "My sister Claire studies medicine at a big university near Paris")
    assert await ltm.engine.compactor.run_once() == []
    assert len(await ltm.items(MemoryItem.status == Status.ACTIVE)) == 3
    assert await ltm.audit(MemoryAudit.action == AuditAction.COMPACT) == []


async def test_the_same_fact_in_two_peoples_scopes_stays_in_both(make_ltm, origin):
    ltm = await make(make_ltm)
    await remember_all(ltm, origin("alice"), "I play the guitar every evening")
    await remember_all(ltm, origin("bob"), "I play the guitar every evening")
    assert await ltm.engine.compactor.run_once() == []
    assert len(await ltm.items(MemoryItem.status == Status.ACTIVE)) == 2


async def test_a_memory_awaiting_approval_is_not_merged(make_ltm, origin):
    ltm = await make(make_ltm)
    first, second = await remember_all(ltm, origin(), "I love green tea", "I really love drinking green tea")
    await ltm.execute("UPDATE ltm_items SET awaiting_approval = 1, status = 'shadow' WHERE memory_id = :id",
                      {"id": second})
    assert await ltm.engine.compactor.run_once() == []


async def test_nothing_is_written_while_read_only(make_ltm, origin):
    ltm = await make(make_ltm)
    await remember_all(ltm, origin(), "I love green tea", "I really love drinking green tea")
    ltm.configure({"emergency_read_only": True})
    before = await ltm.table_snapshot()
    assert await ltm.engine.compactor.run_once() == []
    assert await ltm.table_snapshot() == before
    ltm.configure({"emergency_read_only": False})
    assert len(await ltm.engine.compactor.run_once()) == 1


async def test_without_an_embedding_model_compaction_does_nothing(ltm, origin):
    await ltm.engine.remember(origin(), "I love green tea")
    await ltm.engine.remember(origin(), "I really love drinking green tea")
    assert await ltm.engine.compactor.run_once() == []


def row(rowid: int, fact: str, vector: list[float], *, evidence: int = 1, confidence: float = 0.9,
        type_: str = "preference", status: str = "active") -> Row:
    return Row(rowid, f"m{rowid}", type_, status, fact, evidence, confidence, np.array(vector, np.float32))


def test_the_survivor_has_more_evidence_then_more_confidence_then_is_older():
    a = row(1, "Alice loves green tea", [1, 0])
    b = row(2, "Alice loves green tea a lot", [1, 0.01], evidence=3)
    (merge,) = find_merges([a, b])
    assert (merge.survivor, merge.merged) == (2, 1)
    c = row(3, "Alice loves green tea", [1, 0], confidence=0.6)
    d = row(4, "Alice loves green tea daily", [1, 0])
    assert (find_merges([c, d])[0].survivor) == 4
    e, f = row(5, "Alice loves green tea", [1, 0]), row(6, "Alice loves green tea daily", [1, 0])
    assert find_merges([f, e])[0].survivor == 5


def test_only_memories_of_one_type_and_status_are_merged():
    a = row(1, "Alice loves green tea", [1, 0])
    assert find_merges([a, row(2, "Alice loves green tea", [1, 0], type_="episode")]) == []
    assert find_merges([a, row(3, "Alice loves green tea", [1, 0], status="shadow")]) == []
    assert find_merges([a, row(4, "Alice loves green tea", [0, 1])]) == []  # not close


def test_a_run_is_bounded():
    rows = [row(n, "Alice loves green tea", [1, 0]) for n in range(1, 21)]
    assert len(find_merges(rows, limit=3)) == 3
    assert len(find_merges(rows)) == 10  # each memory in one merge per run
    assert ITEMS_PER_SCOPE >= 100
