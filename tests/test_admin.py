"""Operator operations: validated, audited edits; listing, inspection, stats."""

from __future__ import annotations

import pytest

from astrbot_plugin_ltm.errors import AdminError
from astrbot_plugin_ltm.operating.queries import ItemFilter
from astrbot_plugin_ltm.scope import Scope
from astrbot_plugin_ltm.storing.tables import MemoryItem

OP = "operator:root"


async def seed(ltm, origin):
    a = origin("alice")
    await ltm.engine.remember(a, "I like green tea")
    await ltm.turn(a, "I live in Paris", "Nice.", {"type": "profile", "fact": "Alice lives in Paris",
                                                   "fact_key": "city"})
    await ltm.turn(a, "maybe jazz", "OK.", {"fact": "Alice might like jazz", "fact_key": "jazz", "confidence": 0.5})
    await ltm.engine.remember(origin("bob"), "I like coffee")
    return a


async def test_update_item_is_validated_and_audited(ltm, origin):
    await seed(ltm, origin)
    item = await ltm.item(MemoryItem.fact_key == "city")
    ltm.clock.advance(minutes=5)
    updated = await ltm.engine.admin.update_item(
        item.memory_id, {"importance": 0.9, "ttl_days": 30, "type": "episode", "fact": "Alice lives in Lyon"}, OP
    )
    assert (updated.importance, updated.ttl_days, updated.type, updated.fact) == (0.9, 30, "episode",
                                                                                  "Alice lives in Lyon")
    assert updated.fact_key == "alice_lives_in_lyon"
    (edit,) = [r for r in await ltm.audit() if r.action == "edit"]
    assert edit.actor == OP and edit.memory_id == item.memory_id and edit.reason
    assert edit.detail["changes"]["fact"] == ["Alice lives in Paris", "Alice lives in Lyon"]
    assert edit.detail["changes"]["importance"] == [0.5, 0.9]
    assert "updated_at" not in edit.detail["changes"]

    bad = [
        {"importance": 1.5}, {"importance": "high"}, {"ttl_days": -1}, {"ttl_days": 1.5}, {"ttl_days": True},
        {"type": "hobby"}, {"status": "deleted"}, {"fact": "   "}, {"fact": "x" * 301}, {"evidence_count": 9},
    ]
    for changes in bad:
        with pytest.raises(AdminError):
            await ltm.engine.admin.update_item(item.memory_id, changes, OP)
    assert (await ltm.item(MemoryItem.memory_id == item.memory_id)).fact == "Alice lives in Lyon"
    assert len([r for r in await ltm.audit() if r.action == "edit"]) == 1

    tea = await ltm.item(MemoryItem.fact == "Alice likes green tea")
    with pytest.raises(AdminError) as clash:
        await ltm.engine.admin.update_item(item.memory_id, {"fact": tea.fact}, OP)
    assert clash.value.status == 409
    with pytest.raises(AdminError) as missing:
        await ltm.engine.admin.update_item("nope", {"importance": 0.1}, OP)
    assert missing.value.status == 404


async def test_operator_disable_outranks_new_evidence(ltm, origin):
    a = origin("alice")
    city = {"type": "profile", "fact": "Alice lives in Paris", "fact_key": "city"}
    await ltm.turn(a, "Paris", "OK.", city)
    item = await ltm.item()
    await ltm.engine.admin.update_item(item.memory_id, {"status": "disabled"}, OP)
    assert not await ltm.block(a, "Paris")
    await ltm.turn(a, "Paris!", "OK.", city)
    item = await ltm.item()
    assert item.status == "disabled" and item.evidence_count == 2
    assert not await ltm.block(a, "Paris")


async def test_list_items_filters_and_sorts(ltm, origin):
    await seed(ltm, origin)
    admin = ltm.engine.admin
    items, total = await admin.list_items(ItemFilter())
    assert total == 4 and len(items) == 4
    items, total = await admin.list_items(ItemFilter(scope="user", scope_id="qq:alice"))
    assert total == 3
    items, total = await admin.list_items(ItemFilter(status="shadow"))
    assert [i.fact for i in items] == ["Alice might like jazz"]
    items, total = await admin.list_items(ItemFilter(type="profile"))
    assert [i.fact for i in items] == ["Alice lives in Paris"]
    items, total = await admin.list_items(ItemFilter(query="tea"))
    assert [i.fact for i in items] == ["Alice likes green tea"]
    items, total = await admin.list_items(ItemFilter(min_confidence=0.9))
    assert {i.fact for i in items} == {"Alice likes green tea", "Bob likes coffee"}
    items, total = await admin.list_items(ItemFilter(), sort="confidence", limit=2, offset=1)
    assert total == 4 and len(items) == 2
    assert items[0].confidence >= items[1].confidence
    for bad in (dict(f=ItemFilter(type="hobby")), dict(f=ItemFilter(status="gone")), dict(f=ItemFilter(), sort="x")):
        with pytest.raises(AdminError):
            await admin.list_items(**bad)


async def test_get_item_shows_its_evidence(ltm, origin):
    await seed(ltm, origin)
    item = await ltm.item(MemoryItem.fact_key == "city")
    detail = await ltm.engine.admin.get_item(item.memory_id)
    assert detail["fact"] == "Alice lives in Paris"
    (ev,) = detail["evidence"]
    assert ev["extraction_method"] == "llm_extract"
    assert ev["event"]["content"] == {"text": "I live in Paris"} and ev["event"]["sender_id"] == "alice"


async def test_find_by_prefix(ltm, origin):
    await seed(ltm, origin)
    item = await ltm.item(MemoryItem.fact_key == "city")
    admin = ltm.engine.admin
    assert (await admin.find_by_prefix(item.memory_id[:8])).memory_id == item.memory_id
    with pytest.raises(AdminError):
        await admin.find_by_prefix(item.memory_id[:8], [Scope("user", "qq:bob")])
    with pytest.raises(AdminError):
        await admin.find_by_prefix("abc")


async def test_stats(ltm, origin):
    a = await seed(ltm, origin)
    await ltm.record(a, "pending message", "OK.")
    stats = {(s["scope"], s["scope_id"]): s for s in await ltm.engine.admin.stats()}
    alice = stats[("user", "qq:alice")]
    assert alice["by_status"] == {"active": 2, "shadow": 1}
    assert alice["by_type"] == {"preference": 2, "profile": 1}
    assert alice["events"]["pending"] == 2 and alice["events"]["done"] >= 4
    assert alice["writes_last_hour"] == 3
    assert stats[("user", "qq:bob")]["by_status"] == {"active": 1}
    only_bob = await ltm.engine.admin.stats([Scope("user", "qq:bob")])
    assert [s["scope_id"] for s in only_bob] == ["qq:bob"]
    ltm.clock.advance(hours=2)
    stats = {(s["scope"], s["scope_id"]): s for s in await ltm.engine.admin.stats()}
    assert stats[("user", "qq:alice")]["writes_last_hour"] == 0


async def test_review_validates_its_input(ltm, origin):
    await seed(ltm, origin)
    item = await ltm.item(MemoryItem.fact_key == "city")
    with pytest.raises(AdminError):
        await ltm.engine.admin.review([item.memory_id], "maybe", OP)
    with pytest.raises(AdminError):
        await ltm.engine.admin.review([], "approve", OP)
    with pytest.raises(AdminError):
        await ltm.engine.admin.review([item.memory_id, "missing"], "reject", OP)
    # nothing of a failed batch is applied
    assert (await ltm.item(MemoryItem.fact_key == "city")).status == "active"
    assert await ltm.tombstones() == []


async def test_forget_scope_tombstones_everything(ltm, origin):
    await seed(ltm, origin)
    assert await ltm.engine.admin.forget_scope(Scope("user", "qq:alice"), "user:alice") == 3
    assert [i.scope_id for i in await ltm.items()] == ["qq:bob"]
    assert len(await ltm.tombstones()) == 3
    assert len([r for r in await ltm.audit() if r.action == "delete"]) == 3
    assert await ltm.sql("SELECT count(*) FROM ltm_evidence e JOIN ltm_items i ON i.memory_id = e.memory_id") == [(1,)]
    assert await ltm.sql("SELECT count(*) FROM ltm_evidence") == [(1,)]


async def test_an_edit_cannot_duplicate_another_memory_of_the_scope(ltm, origin):
    # "Alice might like jazz" was keyed "jazz" by the extractor, so comparing
    # normalised keys alone would let another memory take the same text.
    await seed(ltm, origin)
    city = await ltm.item(MemoryItem.fact_key == "city")
    with pytest.raises(AdminError) as refused:
        await ltm.engine.admin.update_item(city.memory_id, {"fact": "Alice might like jazz"}, OP)
    assert refused.value.status == 409
    assert (await ltm.item(MemoryItem.fact_key == "city")).fact == "Alice lives in Paris"
