"""The operator API (``astrbot_plugin_ltm/api.py``) and export/import
(``transfer.py``) without AstrBot: an in-process engine per test, the API
called the way the dashboard routes call it (plain query dicts, JSON bodies,
raw bytes for imports) and every answer checked for its HTTP status and
envelope.

What is proven here:

- every method refuses bad input with a 4xx and a readable message (never a
  stack trace), and a refused request writes nothing;
- pagination is exact at its edges (page size 1 and 200, the last page, a
  page beyond the end);
- export → import into a fresh engine reproduces every item field, its
  evidence and its source events; a second import changes nothing; a
  tampered, oversized or malformed file is refused with no row written; a
  dry run writes nothing;
- a policy change takes effect at once (read-only blocks the next write,
  the write mode decides the next memory's status), is saved and audited.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from astrbot_plugin_ltm.doors.commands import Commands
from astrbot_plugin_ltm.doors.requests import MAX_PAGE_SIZE
from astrbot_plugin_ltm.enums import MEMORY_TYPES
from astrbot_plugin_ltm.operating.export_format import MAX_IMPORT_BYTES, MAX_IMPORT_ITEMS, checksum
from astrbot_plugin_ltm.operating.serialize import EVENT_FIELDS, ITEM_FIELDS
from astrbot_plugin_ltm.storing.database import ReadOnlyError
from astrbot_plugin_ltm.storing.tables import MemoryItem
from devtools.exports import like_a_browser, reseal

USER = "root"
ACTOR = f"operator:{USER}"


def as_body(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


PARIS = {"type": "profile", "fact": "Alice lives in Paris", "fact_key": "city", "confidence": 0.9, "importance": 0.7}
JAZZ = {"type": "preference", "fact": "Alice likes jazz", "fact_key": "jazz", "confidence": 0.5, "importance": 0.3}
# Scripted as the group's own fact, so the store has a group scope (a member's
# own facts are kept with them: tests/test_audience.py).
TEA = {"type": "preference", "fact": "Bob喜欢喝茶", "fact_key": "tea", "confidence": 1.0, "importance": 0.9,
       "about": "group"}


async def seed(api, origin) -> dict[str, MemoryItem]:
    """Three memories in two scopes (one Chinese), each with its evidence."""
    ltm = api.ltm
    await ltm.turn(origin("alice"), "I live in Paris", "Nice.", PARIS)
    ltm.clock.advance(minutes=1)
    await ltm.turn(origin("alice"), "Maybe I like jazz", "OK.", JAZZ)
    ltm.clock.advance(minutes=1)
    await ltm.turn(origin("bob", group="g1"), "我喜欢喝茶", "好的", TEA)
    return {i.fact_key: i for i in await ltm.items()}


async def bulk_items(ltm, n: int, scope_id: str = "qq:bulk") -> list[str]:
    """``n`` memories written straight to the table (fast pagination set-up)."""
    ids = []
    async with ltm.engine.db.write() as session:
        for k in range(n):
            item = MemoryItem(
                scope="user", scope_id=scope_id, type="episode", fact=f"bulk fact {k}", fact_key=f"bulk_{k}",
                confidence=0.5, importance=0.5, created_at=ltm.clock(), updated_at=ltm.clock(),
            )
            session.add(item)
            ids.append(item.memory_id)
    return ids


# -- the envelope ---------------------------------------------------------------


async def test_unexpected_errors_become_500_without_a_stack_trace(make_api):
    api = await make_api()

    async def boom():
        raise RuntimeError("secret internals")

    async def closed():
        raise ReadOnlyError("emergency_read_only is on")

    response = await api.api.call(boom)
    assert response.status == 500 and response.body["status"] == "error"
    assert "RuntimeError" in response.body["message"] and "secret internals" not in response.body["message"]
    response = await api.api.call(closed)
    assert response.status == 409 and "read_only" in response.body["message"]


# -- items: listing, search, pagination ---------------------------------------------

BAD_LIST_QUERIES = [
    ({"page": "0"}, "page"),
    ({"page": "-1"}, "page"),
    ({"page": "two"}, "page"),
    ({"page": "1.5"}, "page"),
    ({"page_size": "0"}, "page_size"),
    ({"page_size": str(MAX_PAGE_SIZE + 1)}, "page_size"),
    ({"page_size": "lots"}, "page_size"),
    ({"scope": "channel"}, "scope"),
    ({"type": "hobby"}, "type"),
    ({"status": "deleted"}, "status"),
    ({"sort": "random"}, "sort"),
    ({"min_confidence": "high"}, "min_confidence"),
    ({"min_confidence": "1.5"}, "min_confidence"),
    ({"min_confidence": "-0.1"}, "min_confidence"),
    ({"q": "!!! ???"}, "search"),
]


@pytest.mark.parametrize(("query", "names"), BAD_LIST_QUERIES, ids=[json.dumps(q) for q, _ in BAD_LIST_QUERIES])
async def test_list_items_refuses_bad_queries(make_api, origin, query, names):
    api = await make_api()
    await seed(api, origin)
    message = await api.err(400, "list_items", query)
    assert names in message


async def test_list_items_refuses_an_unknown_sort_when_searching_too(make_api, origin):
    """A text search must validate ``sort`` like a plain listing does."""
    api = await make_api()
    await seed(api, origin)
    message = await api.err(400, "list_items", {"q": "Paris", "sort": "random"})
    assert "sort" in message


async def test_search_honours_scope_id_without_scope(make_api, origin):
    """``scope_id`` alone filters a plain listing; a text search must not drop it."""
    api = await make_api()
    await seed(api, origin)
    assert (await api.ok("list_items", {"scope_id": "qq:g1"}))["total"] == 1
    found = await api.ok("list_items", {"q": "alice", "scope_id": "qq:g1"})
    assert found["items"] == [], [i["fact"] for i in found["items"]]


async def test_list_items_filters_sorts_and_searches(make_api, origin):
    api = await make_api({"write_policy": {"require_approval_types": ["preference"], "mode": "auto"}})
    items = await seed(api, origin)
    facts = lambda data: [i["fact"] for i in data["items"]]  # noqa: E731

    everything = await api.ok("list_items", {})
    assert everything["total"] == 3 and everything["page"] == 1 and everything["page_size"] == 50
    assert facts(everything) == ["Bob喜欢喝茶", "Alice likes jazz", "Alice lives in Paris"]  # newest first
    assert set(everything["items"][0]) >= set(ITEM_FIELDS)

    assert facts(await api.ok("list_items", {"sort": "created"})) == facts(everything)
    assert facts(await api.ok("list_items", {"sort": "importance"})) == [
        "Bob喜欢喝茶", "Alice lives in Paris", "Alice likes jazz"]
    assert facts(await api.ok("list_items", {"sort": "confidence"}))[-1] == "Alice likes jazz"
    assert facts(await api.ok("list_items", {"scope": "group"})) == ["Bob喜欢喝茶"]
    assert facts(await api.ok("list_items", {"scope_id": "qq:alice"})) == ["Alice likes jazz", "Alice lives in Paris"]
    assert facts(await api.ok("list_items", {"type": "profile"})) == ["Alice lives in Paris"]
    assert facts(await api.ok("list_items", {"status": "active"})) == ["Alice lives in Paris"]
    # "pending" = awaiting approval (preferences need it in this config).
    pending = await api.ok("list_items", {"status": "pending"})
    assert sorted(facts(pending)) == ["Alice likes jazz", "Bob喜欢喝茶"]
    assert all(i["awaiting_approval"] and i["status"] == "shadow" for i in pending["items"])
    assert facts(await api.ok("list_items", {"min_confidence": "0.7"})) == ["Bob喜欢喝茶", "Alice lives in Paris"]
    assert (await api.ok("list_items", {"min_confidence": "0.8"}))["total"] == 1  # tea: 1.0 × 0.8 (LLM source)
    assert (await api.ok("list_items", {"min_confidence": "1"}))["total"] == 0
    assert (await api.ok("list_items", {"page": "", "page_size": "", "sort": "", "scope": ""}))["total"] == 3

    # Text search through the keyword index, Chinese included, with filters.
    assert facts(await api.ok("list_items", {"q": "Paris"})) == ["Alice lives in Paris"]
    assert facts(await api.ok("list_items", {"q": "喝茶"})) == ["Bob喜欢喝茶"]
    assert sorted(facts(await api.ok("list_items", {"q": "alice"}))) == ["Alice likes jazz", "Alice lives in Paris"]
    assert facts(await api.ok("list_items", {"q": "alice", "status": "pending"})) == ["Alice likes jazz"]
    assert facts(await api.ok("list_items", {"q": "alice", "type": "profile"})) == ["Alice lives in Paris"]
    assert facts(await api.ok("list_items", {"q": "alice", "scope": "group"})) == []
    assert facts(await api.ok("list_items", {"q": "alice", "scope": "user", "scope_id": "qq:alice",
                                             "min_confidence": "0.7"})) == ["Alice lives in Paris"]
    assert (await api.ok("list_items", {"q": "nothing-like-this"})) == {
        "items": [], "total": 0, "page": 1, "page_size": 50}
    assert items["city"].memory_id in [i["memory_id"] for i in everything["items"]]


async def test_memories_show_their_usage_and_sort_by_it_never_used_first(make_api, origin):
    api = await make_api({"write_policy": {"mode": "auto"}})
    await seed(api, origin)
    ltm = api.ltm
    facts = lambda data: [i["fact"] for i in data["items"]]  # noqa: E731
    for _ in range(2):
        block = await ltm.block(origin("alice"), "Paris")
        assert [s.fact for s in block.items] == ["Alice lives in Paris"]  # jazz is below the read's confidence
        ltm.clock.advance(minutes=1)
    ltm.engine.usage.note(block.items, via="tool")
    await ltm.engine.usage.flush()

    listed = {i["fact"]: i for i in (await api.ok("list_items", {}))["items"]}
    assert {f: (i["injected_count"], i["tool_count"], i["use_count"]) for f, i in listed.items()} == {
        "Alice lives in Paris": (2, 1, 3), "Alice likes jazz": (0, 0, 0), "Bob喜欢喝茶": (0, 0, 0)}
    assert listed["Bob喜欢喝茶"]["last_used_at"] is None
    assert listed["Alice lives in Paris"]["last_used_at"] == ltm.clock().isoformat()
    # never used first (the older first among them), then the least used
    assert facts(await api.ok("list_items", {"sort": "least_used"})) == [
        "Alice likes jazz", "Bob喜欢喝茶", "Alice lives in Paris"]
    assert facts(await api.ok("list_items", {"sort": "most_used"})) == [
        "Alice lives in Paris", "Bob喜欢喝茶", "Alice likes jazz"]
    assert facts(await api.ok("list_items", {"sort": "least_used", "status": "active"})) == [
        "Bob喜欢喝茶", "Alice lives in Paris"]
    detail = await api.ok("get_item", listed["Alice lives in Paris"]["memory_id"])
    assert (detail["injected_count"], detail["tool_count"], detail["use_count"]) == (2, 1, 3)
    # usage is this store's reads, not part of the memory: an export leaves it out
    exported = await api.ok("export", {})
    assert all("use_count" not in item for item in exported["items"])


async def test_pagination_edges(make_api, origin):
    api = await make_api()
    ids = await bulk_items(api.ltm, MAX_PAGE_SIZE + 1)  # 201

    full = await api.ok("list_items", {"page_size": str(MAX_PAGE_SIZE)})
    assert full["total"] == 201 and len(full["items"]) == 200 and full["page_size"] == 200
    second = await api.ok("list_items", {"page_size": "200", "page": "2"})
    assert len(second["items"]) == 1 and second["total"] == 201
    assert {i["memory_id"] for i in full["items"] + second["items"]} == set(ids)
    beyond = await api.ok("list_items", {"page_size": "200", "page": "3"})
    assert beyond == {"items": [], "total": 201, "page": 3, "page_size": 200}
    far = await api.ok("list_items", {"page": str(10**9)})
    assert far["items"] == [] and far["total"] == 201

    one = await api.ok("list_items", {"page_size": "1"})
    assert len(one["items"]) == 1 and one["total"] == 201
    last = await api.ok("list_items", {"page_size": "1", "page": "201"})
    assert len(last["items"]) == 1 and last["items"][0]["memory_id"] != one["items"][0]["memory_id"]
    assert (await api.ok("list_items", {"page_size": "1", "page": "202"}))["items"] == []

    # Walking the pages of 7 visits every item once; the last page is short.
    seen: list[str] = []
    page = 1
    while True:
        data = await api.ok("list_items", {"page_size": "7", "page": str(page), "sort": "created"})
        if not data["items"]:
            break
        seen += [i["memory_id"] for i in data["items"]]
        page += 1
    assert page - 1 == 29 and len(seen) == 201 and set(seen) == set(ids)
    assert len((await api.ok("list_items", {"page_size": "7", "page": "29"}))["items"]) == 201 - 28 * 7

    # Events and the audit log page the same way.
    await seed(api, origin)
    events = await api.ok("list_events", {"page_size": "1"})
    assert len(events["events"]) == 1 and events["total"] == 6
    assert len((await api.ok("list_events", {"page_size": "4", "page": "2"}))["events"]) == 2
    assert (await api.ok("list_events", {"page_size": "4", "page": "3"}))["events"] == []
    audit = await api.ok("audit_log", {"page_size": "200"})
    # the three memories and policy version 1, recorded at the first start
    assert audit["total"] == len(audit["entries"]) == 4
    assert (await api.ok("audit_log", {"page": "2"}))["entries"] == []
    # Search results are paged after ranking.
    assert len((await api.ok("list_items", {"q": "alice", "page_size": "1", "page": "2"}))["items"]) == 1
    assert (await api.ok("list_items", {"q": "alice", "page_size": "1", "page": "3"}))["items"] == []


# -- one item -----------------------------------------------------------------------


async def test_get_item_has_evidence_and_source_events(make_api, origin):
    api = await make_api()
    items = await seed(api, origin)
    data = await api.ok("get_item", items["tea"].memory_id)
    assert data["fact"] == "Bob喜欢喝茶" and data["scope"] == "group"
    (evidence,) = data["evidence"]
    assert evidence["extraction_method"] == "llm_extract"
    assert evidence["event"]["content"] == {"text": "我喜欢喝茶"} and evidence["event"]["sender_id"] == "bob"
    assert evidence["event"]["event_id"] == evidence["event_id"]
    assert "no memory" in await api.err(404, "get_item", "no-such-id")
    assert "4 characters" in await api.err(400, "get_item", "")


BAD_PATCHES = [
    (None, 400), ([], 400), ({}, 400), ("fact", 400), (["importance", 1], 400),
    ({"evidence_count": 2}, 400), ({"memory_id": "x"}, 400), ({"importance": 1.5}, 400),
    ({"importance": "high"}, 400), ({"importance": True}, 400), ({"type": "hobby"}, 400),
    ({"status": "deleted"}, 400), ({"status": "pending"}, 400), ({"ttl_days": -3}, 400),
    ({"ttl_days": "7"}, 400), ({"fact": "   "}, 400), ({"fact": 42}, 400), ({"fact": "x" * 301}, 400),
    # a valid change next to an invalid one: nothing is applied
    ({"importance": 0.1, "type": "hobby"}, 400),
    ({"fact": "JAZZ"}, 409),  # its key is another memory's key in the scope
]


async def test_patch_item_refuses_bad_bodies_and_changes_nothing(make_api, origin):
    api = await make_api()
    items = await seed(api, origin)
    city = items["city"].memory_id
    before = await api.ltm.table_snapshot()
    for body, status in BAD_PATCHES:
        await api.err(status, "patch_item", city, body, USER)
    await api.err(404, "patch_item", "no-such-id", {"importance": 0.1}, USER)
    assert await api.ltm.table_snapshot() == before

    api.ltm.clock.advance(minutes=5)
    data = await api.ok("patch_item", city, {"fact": "Alice  lives in Lyon", "importance": 0.95,
                                             "type": "episode", "ttl_days": 30}, USER)
    assert (data["fact"], data["importance"], data["type"], data["ttl_days"]) == (
        "Alice lives in Lyon", 0.95, "episode", 30)
    assert (await api.ok("list_items", {"q": "Lyon"}))["items"][0]["memory_id"] == city  # re-indexed
    assert (await api.ok("list_items", {"q": "Paris"}))["items"] == []
    (edit,) = [a for a in await api.ltm.audit() if a.action == "edit"]
    assert edit.actor == ACTOR and edit.memory_id == city
    assert edit.detail["changes"]["fact"] == ["Alice lives in Paris", "Alice lives in Lyon"]
    data = await api.ok("patch_item", city, {"status": "disabled", "ttl_days": None}, None)
    assert data["status"] == "disabled" and data["ttl_days"] is None
    assert [a.actor for a in await api.ltm.audit() if a.action == "edit"][-1] == "operator:dashboard"


async def test_delete_item(make_api, origin):
    api = await make_api()
    items = await seed(api, origin)
    await api.err(404, "delete_item", "no-such-id", USER)
    data = await api.ok("delete_item", items["jazz"].memory_id, USER)
    assert data["memory_id"] == items["jazz"].memory_id and data["fact"] == "Alice likes jazz"
    assert [i.fact_key for i in await api.ltm.items()] == ["city", "tea"]
    (tomb,) = await api.ltm.tombstones()
    assert tomb.fact_key == "jazz" and tomb.actor == ACTOR
    assert [a.action for a in await api.ltm.audit()][-1] == "delete"
    await api.err(404, "get_item", items["jazz"].memory_id)
    await api.err(404, "delete_item", items["jazz"].memory_id, USER)


BAD_REVIEWS: list[Any] = [
    None, [], "approve", {}, {"memory_ids": "abc", "decision": "approve"},
    {"memory_ids": [1, 2], "decision": "approve"}, {"memory_ids": [], "decision": "approve"},
    {"memory_ids": ["@ID"], "decision": "maybe"}, {"memory_ids": ["@ID"]},
    {"memory_ids": ["@ID"], "decision": "approve", "reason": 5},
    {"memory_ids": ["x"] * 1001, "decision": "approve"},
]


async def test_review_validates_and_is_all_or_nothing(make_api, origin):
    api = await make_api({"write_policy": {"mode": "manual"}})
    items = await seed(api, origin)
    assert all(i.awaiting_approval and i.status == "shadow" for i in items.values())
    city, jazz, tea = (items[k].memory_id for k in ("city", "jazz", "tea"))
    before = await api.ltm.table_snapshot()
    for body in BAD_REVIEWS:
        if isinstance(body, dict) and body.get("memory_ids") == ["@ID"]:
            body = {**body, "memory_ids": [city]}
        await api.err(400, "review", body, USER)
    # One unknown id: 404, and the known ones are left as they were.
    message = await api.err(404, "review", {"memory_ids": [city, "no-such-id"], "decision": "approve"}, USER)
    assert "no-such-id" in message
    assert await api.ltm.table_snapshot() == before

    data = await api.ok("review", {"memory_ids": [city, tea], "decision": "approve", "reason": "checked"}, USER)
    assert data == {"reviewed": [{"memory_id": city, "decision": "approve"},
                                 {"memory_id": tea, "decision": "approve"}]}
    data = await api.ok("review", {"memory_ids": [jazz], "decision": "reject"}, USER)
    assert data == {"reviewed": [{"memory_id": jazz, "decision": "reject"}]}
    rows = {i.fact_key: i for i in await api.ltm.items()}
    assert set(rows) == {"city", "tea"}
    assert all(i.status == "active" and not i.awaiting_approval for i in rows.values())
    assert [t.fact_key for t in await api.ltm.tombstones()] == ["jazz"]
    reviews = [(a.action, a.memory_id, a.actor, a.reason) for a in await api.ltm.audit()
               if a.action in ("approve", "reject")]
    assert reviews == [("approve", city, ACTOR, "checked"), ("approve", tea, ACTOR, "checked"),
                       ("reject", jazz, ACTOR, "rejected")]
    assert (await api.ok("list_items", {"status": "pending"}))["total"] == 0


# -- events, stats, audit --------------------------------------------------------------


@pytest.mark.parametrize("query", [
    {"page": "0"}, {"page_size": "201"}, {"scope": "room"}, {"status": "stuck"}, {"source_type": "email"},
])
async def test_list_events_refuses_bad_queries(make_api, query):
    api = await make_api()
    await api.err(400, "list_events", query)


async def test_list_events_filters(make_api, origin):
    api = await make_api()
    await seed(api, origin)
    await api.ltm.record(origin("carol"), "hello", "hi")  # not extracted yet
    everything = await api.ok("list_events", {})
    assert everything["total"] == 8 and everything["page_size"] == 50
    assert set(everything["events"][0]) >= set(EVENT_FIELDS) | {"extraction_status"}
    assert (await api.ok("list_events", {"scope": "group"}))["total"] == 2
    assert (await api.ok("list_events", {"scope": "user", "scope_id": "qq:alice"}))["total"] == 4
    pending = await api.ok("list_events", {"status": "pending"})
    assert [e["content"]["text"] for e in pending["events"]] == ["hi", "hello"]
    assert (await api.ok("list_events", {"status": "done"}))["total"] == 6
    assert (await api.ok("list_events", {"source_type": "tool_result"}))["total"] == 0
    assert (await api.ok("list_events", {"session_id": "qq:GroupMessage:g1"}))["total"] == 2


async def test_stats(make_api, origin):
    api = await make_api({"write_policy": {"require_approval_types": ["preference"], "mode": "auto"}})
    await seed(api, origin)
    await api.err(400, "stats", {"scope": "room"})
    data = await api.ok("stats", {})
    assert [(s["scope"], s["scope_id"]) for s in data["scopes"]] == [("group", "qq:g1"), ("user", "qq:alice")]
    alice = data["scopes"][1]
    assert alice["by_status"] == {"active": 1, "shadow": 1} and alice["awaiting_approval"] == 1
    assert alice["by_type"] == {"profile": 1, "preference": 1}
    assert alice["events"]["done"] == 4 and alice["writes_last_hour"] == 2
    assert data["totals"] == {"items": 3, "awaiting_approval": 2, "shadow": 2, "pending_events": 0,
                              "failed_events": 0, "writes_last_hour": 3}
    assert data["emergency_read_only"] is False and data["mode"] == "auto"
    one = await api.ok("stats", {"scope": "user", "scope_id": "qq:alice"})
    assert [s["scope_id"] for s in one["scopes"]] == ["qq:alice"] and one["totals"]["items"] == 2


async def test_stats_scope_filter_without_an_id_keeps_to_that_kind(make_api, origin):
    """``scope=user`` is accepted as a filter, so it must not answer with group scopes."""
    api = await make_api()
    await seed(api, origin)
    data = await api.ok("stats", {"scope": "user"})
    assert {s["scope"] for s in data["scopes"]} == {"user"}, data["scopes"]


async def test_audit_log_filters(make_api, origin):
    api = await make_api()
    items = await seed(api, origin)
    await api.err(400, "audit_log", {"page": "x"})
    await api.err(400, "audit_log", {"page_size": "1000"})
    await api.ok("patch_item", items["city"].memory_id, {"importance": 0.2}, USER)
    everything = await api.ok("audit_log", {})
    # three memories, an edit, and policy version 1 (the first start)
    assert everything["total"] == 5 and everything["entries"][0]["action"] == "edit"  # newest first
    assert set(everything["entries"][0]) >= {"id", "created_at", "action", "memory_id", "scope", "scope_id",
                                             "actor", "reason", "detail"}
    assert (await api.ok("audit_log", {"action": "edit"}))["total"] == 1
    assert (await api.ok("audit_log", {"actor": ACTOR}))["total"] == 1
    assert (await api.ok("audit_log", {"memory_id": items["city"].memory_id}))["total"] == 2
    assert (await api.ok("audit_log", {"scope": "group", "scope_id": "qq:g1"}))["total"] == 1
    assert (await api.ok("audit_log", {"action": "nothing"}))["total"] == 0


# -- policy ---------------------------------------------------------------------------

BAD_POLICIES: list[Any] = [
    None, [], {}, "shadow", {"mode": "auto"}, {"extraction": {"batch_size": 2}}, {"write_policy": "auto"},
    {"write_policy": {"mode": "yolo"}}, {"write_policy": {"min_confidence": 2}},
    {"write_policy": {"min_confidence": "high"}}, {"write_policy": {"max_writes_per_hour": -1}},
    {"write_policy": {"allowed_types": ["hobby"]}}, {"write_policy": {"unknown_limit": 3}},
    {"read_policy": {"max_tokens": -1}}, {"read_policy": {"max_items": 1.5}},
    {"read_policy": {"injection_position": "footer"}}, {"enable": "maybe"}, {"emergency_read_only": 1},
    # one valid and one invalid value: nothing changes
    {"emergency_read_only": True, "write_policy": {"mode": "yolo"}},
]


async def test_put_policy_refuses_bad_input_and_changes_nothing(make_api, origin):
    api = await make_api({"write_policy": {"mode": "shadow"}})
    await seed(api, origin)
    policy = await api.ok("get_policy")
    assert policy["enable"] is True and policy["emergency_read_only"] is False
    assert policy["write_policy"]["mode"] == "shadow" and policy["read_policy"]["max_tokens"] == 800
    assert policy["config_warnings"] == []
    raw, config = copy.deepcopy(api.raw), copy.deepcopy(api.ltm.engine.config)
    before = await api.ltm.table_snapshot()
    for body in BAD_POLICIES:
        message = await api.err(400, "put_policy", body, USER)
        assert "using the default" not in message
    assert api.saved == [] and api.raw == raw and api.ltm.engine.config == config
    assert await api.ltm.table_snapshot() == before
    assert await api.ok("get_policy") == policy


async def test_get_policy_gives_the_page_the_bounds_the_validator_holds_to(make_api):
    api = await make_api({})
    schema = (await api.ok("get_policy"))["schema"]
    assert schema["memory_types"] == list(MEMORY_TYPES) and schema["max_import_bytes"] == MAX_IMPORT_BYTES
    assert schema["fields"]["write_policy.mode"] == {"choices": ["shadow", "auto", "manual"]}
    assert schema["fields"]["write_policy.min_confidence"] == {"min": 0.0, "max": 1.0, "kind": "float"}
    bounded = {path: field for path, field in schema["fields"].items() if "choices" not in field}
    assert len(bounded) >= 13 and all(path.split(".")[0] in ("write_policy", "read_policy") for path in bounded)
    # The page's bounds are the validator's: one step beyond either end is refused.
    for path, field in bounded.items():
        section, name = path.split(".")
        step = 1 if field["kind"] == "int" else 0.01
        for beyond in (field["min"] - step, field["max"] + step):
            await api.err(400, "put_policy", {section: {name: beyond}}, USER)
    assert api.saved == []


async def test_policy_change_is_saved_audited_and_applies_at_once(make_api, origin):
    api = await make_api({"extraction": {"batch_size": 4}})
    alice = origin("alice")
    await api.ltm.turn(alice, "I live in Paris", "Nice.", PARIS)
    assert (await api.ltm.item()).status == "shadow"  # the default mode

    data = await api.ok("put_policy", {"write_policy": {"mode": "auto", "min_confidence": 0.5},
                                       "read_policy": {"max_items": 3}}, USER)
    assert data["write_policy"]["mode"] == "auto" and data["read_policy"]["max_items"] == 3
    # Saved whole: the keys not sent survive, the other sections are kept.
    assert api.saved[-1]["extraction"] == {"batch_size": 4}
    assert api.saved[-1]["write_policy"] == {"mode": "auto", "min_confidence": 0.5}
    assert api.ltm.engine.config.write_policy.mode == "auto"
    (change,) = [a for a in await api.ltm.audit() if a.action == "config" and a.actor == ACTOR]
    assert change.actor == ACTOR
    assert change.detail["changes"]["write_policy"][0]["mode"] == "shadow"
    assert change.detail["changes"]["write_policy"][1]["mode"] == "auto"
    # The next memory is written under the new mode.
    await api.ltm.turn(alice, "I like jazz", "OK.", {**JAZZ, "confidence": 0.9})
    assert (await api.ltm.item(MemoryItem.fact_key == "jazz")).status == "active"

    await api.ok("put_policy", {"write_policy": {"mode": "manual"}}, USER)
    await api.ltm.turn(alice, "我喜欢喝茶", "好的", TEA)
    tea = await api.ltm.item(MemoryItem.fact_key == "tea")
    assert tea.status == "shadow" and tea.awaiting_approval


async def test_emergency_read_only_through_the_api_blocks_writes_immediately(make_api, origin):
    api = await make_api()
    items = await seed(api, origin)
    city = items["city"].memory_id
    data = await api.ok("put_policy", {"emergency_read_only": True}, USER)
    assert data["emergency_read_only"] is True and api.saved[-1]["emergency_read_only"] is True
    # The switch itself is audited (the store's last write).
    (switch,) = [a for a in await api.ltm.audit() if a.action == "config" and a.actor == ACTOR]
    assert switch.detail["changes"]["emergency_read_only"] == [False, True] and switch.actor == ACTOR
    before = await api.ltm.table_snapshot()

    with pytest.raises(ReadOnlyError):
        await api.ltm.engine.remember(origin("alice"), "I like tea")
    assert "read_only" in await api.err(409, "patch_item", city, {"importance": 0.1}, USER)
    await api.err(409, "delete_item", city, USER)
    await api.err(409, "review", {"memory_ids": [city], "decision": "approve"}, USER)
    export = await api.ok("export", {})  # reading goes on
    preview = await api.ok("import_", as_body(export), {"dry_run": "1"}, USER)
    assert preview["skipped"] == 3 and preview["read_only"] is True and "refused" in preview["message"]
    await api.err(409, "import_", as_body(export), {}, USER)
    assert (await api.ok("list_items", {}))["total"] == 3
    assert (await api.ok("stats", {}))["emergency_read_only"] is True
    # Another setting cannot change while read-only: the audit could not record it.
    saved = len(api.saved)
    assert "turn it off" in await api.err(409, "put_policy", {"read_policy": {"max_items": 4}}, USER)
    assert api.ltm.engine.config.read_policy.max_items != 4 and len(api.saved) == saved
    assert await api.ltm.table_snapshot() == before

    # Turning it off with another change applies both and audits both.
    await api.ok("put_policy", {"emergency_read_only": False, "read_policy": {"max_items": 4}}, USER)
    assert api.ltm.engine.config.read_policy.max_items == 4
    await api.ok("patch_item", city, {"importance": 0.1}, USER)
    assert (await api.ltm.item(MemoryItem.memory_id == city)).importance == 0.1
    changes = [a.detail["changes"] for a in await api.ltm.audit() if a.action == "config"]
    assert changes[-1]["emergency_read_only"] == [True, False]


# -- export / import ----------------------------------------------------------------------


async def rich_source(api, origin) -> dict[str, MemoryItem]:
    """Memories in every state the export must carry."""
    items = await seed(api, origin)
    await api.ok("review", {"memory_ids": [items["city"].memory_id], "decision": "approve"}, USER)
    await api.ok("patch_item", items["jazz"].memory_id, {"status": "disabled", "ttl_days": 5}, USER)
    await api.ltm.engine.remember(origin("alice"), "I like green tea")
    return {i.fact_key: i for i in await api.ltm.items()}


def fields_of(export: dict) -> list[dict]:
    return sorted(({k: i[k] for k in ITEM_FIELDS} for i in export["items"]), key=lambda i: i["memory_id"])


def evidence_of(export: dict) -> dict[str, list]:
    return {
        i["memory_id"]: sorted(
            (e["event_id"], e["extraction_method"], json.dumps(e["event"], sort_keys=True, ensure_ascii=False))
            for e in i["evidence"]
        )
        for i in export["items"]
    }


async def test_export_format_and_filters(make_api, origin):
    api = await make_api()
    await rich_source(api, origin)
    for query in ({"status": "pending"}, {"status": "deleted"}, {"type": "hobby"}, {"scope": "room"}):
        await api.err(400, "export", query)
    doc = await api.ok("export", {})
    assert doc["format"] == "astrbot_plugin_ltm.export" and doc["version"] == 1
    assert doc["count"] == len(doc["items"]) == 4 and doc["filters"] == {}
    assert doc["checksum"] == checksum([i["checksum"] for i in doc["items"]])
    for item in doc["items"]:
        assert item["checksum"] == checksum({k: v for k, v in item.items() if k != "checksum"})
        assert item["evidence"] and all(set(e["event"]) >= set(EVENT_FIELDS) for e in item["evidence"])
    assert json.loads(json.dumps(doc)) == doc  # plain JSON
    assert [i["fact"] for i in (await api.ok("export", {"scope": "group"}))["items"]] == ["Bob喜欢喝茶"]
    assert [i["fact"] for i in (await api.ok("export", {"status": "disabled"}))["items"]] == ["Alice likes jazz"]
    only = await api.ok("export", {"scope": "user", "scope_id": "qq:alice", "type": "profile"})
    assert [i["fact"] for i in only["items"]] == ["Alice lives in Paris"]
    assert only["filters"] == {"scope": "user", "scope_id": "qq:alice", "type": "profile"}
    assert (await api.ok("export", {"scope_id": "nobody"}))["items"] == []


async def test_export_import_round_trip_into_a_fresh_engine(make_api, origin):
    source = await make_api()
    await rich_source(source, origin)
    doc = await source.ok("export", {})
    target = await make_api(name="target.db")
    empty = await target.ltm.table_counts()

    preview = await target.ok("import_", as_body(doc), {"dry_run": "1"}, USER)
    assert preview["dry_run"] is True and (preview["added"], preview["merged"], preview["skipped"]) == (4, 0, 0)
    assert sorted(preview["details"]["added"]) == sorted(i["memory_id"] for i in doc["items"])
    assert await target.ltm.table_counts() == empty

    report = await target.ok("import_", as_body(doc), {}, USER)
    assert report["dry_run"] is False and (report["added"], report["merged"], report["skipped"]) == (4, 0, 0)
    copied = await target.ok("export", {})
    assert fields_of(copied) == fields_of(doc)
    assert evidence_of(copied) == evidence_of(doc)
    for item in doc["items"]:
        detail = await target.ok("get_item", item["memory_id"])
        assert detail["evidence"] and all(e["event"] is not None for e in detail["evidence"])
        assert all(e["extraction_meta"].get("imported") is True for e in detail["evidence"])
    # The imported facts and events are searchable and counted like local ones.
    assert [i["fact"] for i in (await target.ok("list_items", {"q": "喝茶"}))["items"]] == ["Bob喜欢喝茶"]
    assert (await target.ok("stats", {}))["totals"]["items"] == 4
    imports = [a for a in await target.ltm.audit() if a.action == "import"]
    assert len(imports) == 4 and all(a.actor == ACTOR for a in imports)

    # Importing the same file again changes nothing at all.
    snapshot = await target.ltm.table_snapshot()
    again = await target.ok("import_", as_body(doc), {}, USER)
    assert (again["added"], again["merged"], again["skipped"]) == (0, 0, 4)
    assert {s["reason"] for s in again["details"]["skipped"]} == {"already present"}
    assert await target.ltm.table_snapshot() == snapshot
    # ... and neither does importing it back into the bot it came from.
    home = await source.ltm.table_snapshot()
    back = await source.ok("import_", as_body(doc), {}, USER)
    assert back["skipped"] == 4 and await source.ltm.table_snapshot() == home


async def test_import_merges_into_the_same_fact_and_respects_deletions(make_api, origin):
    source = await make_api()
    await seed(source, origin)
    doc = await source.ok("export", {})
    target = await make_api(name="target.db")
    # The target knows Alice's city under another id with weaker support,
    # and an operator deleted the jazz memory there.
    await target.ltm.turn(origin("alice"), "Paris, yes", "OK.", {**PARIS, "confidence": 0.5, "importance": 0.2})
    await target.ltm.turn(origin("alice"), "jazz", "OK.", JAZZ)
    jazz = await target.ltm.item(MemoryItem.fact_key == "jazz")
    await target.ok("delete_item", jazz.memory_id, USER)
    local = await target.ltm.item(MemoryItem.fact_key == "city")

    report = await target.ok("import_", as_body({"dry_run": False, "export": doc}), {}, USER)
    assert (report["added"], report["merged"], report["skipped"]) == (1, 1, 1)
    assert report["details"]["skipped"][0]["reason"] == "an operator deleted or rejected it on this bot"
    merged = await target.ltm.item(MemoryItem.fact_key == "city")
    assert merged.memory_id == local.memory_id and merged.evidence_count == 2
    assert merged.importance == PARIS["importance"]
    assert not await target.ltm.items(MemoryItem.fact_key == "jazz")
    snapshot = await target.ltm.table_snapshot()
    again = await target.ok("import_", as_body(doc), {}, USER)
    assert (again["added"], again["merged"]) == (0, 0) and await target.ltm.table_snapshot() == snapshot


def tamperings(doc: dict) -> list[tuple[str, dict]]:
    out = []
    changed = copy.deepcopy(doc)
    changed["items"][1]["fact"] = "Alice lives in Berlin"
    out.append(("a fact changed", changed))
    changed = copy.deepcopy(doc)
    changed["items"][0]["evidence"][0]["event"]["content"] = {"text": "forged"}
    out.append(("an event changed", changed))
    changed = copy.deepcopy(doc)
    changed["checksum"] = "0" * 64
    out.append(("the file checksum changed", changed))
    changed = copy.deepcopy(doc)
    del changed["items"][1]
    changed["count"] -= 1
    out.append(("an item dropped", changed))
    changed = copy.deepcopy(doc)
    changed["items"].reverse()
    out.append(("items reordered", changed))
    changed = copy.deepcopy(doc)
    changed["items"][1]["fact"] = "Alice lives in Berlin"
    changed["items"][1]["checksum"] = checksum({k: v for k, v in changed["items"][1].items() if k != "checksum"})
    out.append(("a fact changed and its item resealed", changed))
    changed = copy.deepcopy(doc)
    changed["items"].append(copy.deepcopy(changed["items"][0]))
    out.append(("a duplicate item, resealed", reseal(changed)))
    for field, value in (("confidence", 5), ("type", "hobby"), ("status", "deleted"), ("scope", "room"),
                         ("fact", " "), ("fact_key", "Not Normalised!"), ("evidence_count", 0),
                         ("ttl_days", -2), ("created_at", "yesterday"), ("evidence", "none")):
        changed = copy.deepcopy(doc)
        changed["items"][-1][field] = value  # the last item: the valid ones come first
        out.append((f"{field}={value!r}, resealed", reseal(changed)))
    changed = copy.deepcopy(doc)
    del changed["items"][-1]["fact_key"]
    out.append(("a field missing, resealed", reseal(changed)))
    changed = copy.deepcopy(doc)
    del changed["items"][-1]["evidence"][0]["event"]["content"]
    out.append(("an event field missing, resealed", reseal(changed)))
    replaced: tuple[tuple[str, Any], ...] = (("format", "other.export"), ("version", 2), ("items", {"a": 1}))
    for key, value in replaced:
        out.append((f"{key}={value!r}", {**copy.deepcopy(doc), key: value}))
    return out


async def test_tampered_or_malformed_imports_are_refused_with_nothing_written(make_api, origin):
    source = await make_api()
    await rich_source(source, origin)
    doc = await source.ok("export", {})
    target = await make_api(name="target.db")
    # The target already holds one memory (the refused imports must not touch it either).
    await target.ltm.turn(origin("zoe"), "I like chess", "OK.", {"fact": "Zoe likes chess", "fact_key": "chess"})
    before = await target.ltm.table_snapshot()

    for what, bad in tamperings(doc):
        for query in ({}, {"dry_run": "1"}):
            message = await target.err(400, "import_", as_body(bad), query, USER)
            assert message, what
        await target.err(400, "import_", as_body({"dry_run": False, "export": bad}), {}, USER)
    assert "checksum" in await target.err(400, "import_", as_body(tamperings(doc)[0][1]), {}, USER)
    for raw in (b"", b"null", b"[]", b'"export"', b"{not json", b"\xff\xfe\x00", b'{"format": 1'):
        await target.err(400, "import_", raw, {}, USER)
    assert "JSON" in await target.err(400, "import_", b"{not json", {}, USER)
    assert await target.ltm.table_snapshot() == before
    # The untouched export still imports.
    assert (await target.ok("import_", as_body(doc), {}, USER))["added"] == 4


async def test_import_size_limits(make_api, origin):
    api = await make_api()
    await seed(api, origin)
    before = await api.ltm.table_snapshot()
    doc = await api.ok("export", {})
    padded = as_body(doc)
    padded += b" " * (MAX_IMPORT_BYTES + 1 - len(padded))  # still valid JSON, one byte too big
    assert len(padded) == MAX_IMPORT_BYTES + 1
    assert "MiB" in await api.err(413, "import_", padded, {}, USER)
    await api.err(413, "import_", padded, {"dry_run": "1"}, USER)
    many = {"format": doc["format"], "version": 1, "items": [{}] * (MAX_IMPORT_ITEMS + 1), "checksum": ""}
    assert "too many" in await api.err(413, "import_", as_body(many), {}, USER)
    assert await api.ltm.table_snapshot() == before
    # Exactly at the limit is accepted.
    exact = as_body(doc)
    exact += b" " * (MAX_IMPORT_BYTES - len(exact))
    assert (await api.ok("import_", exact, {}, USER))["skipped"] == 3


async def test_dry_run_writes_nothing_in_every_form(make_api, origin):
    source = await make_api()
    await rich_source(source, origin)
    doc = await source.ok("export", {})
    target = await make_api(name="target.db")
    before = await target.ltm.table_snapshot()
    forms = [
        (as_body(doc), {"dry_run": "1"}),
        (as_body(doc), {"dry_run": "true"}),
        (as_body({"dry_run": True, "export": doc}), {}),  # what the review page posts
        (as_body({"dry_run": False, "export": doc}), {"dry_run": "yes"}),  # the query wins for safety
        ("\ufeff".encode() + as_body(doc), {"dry_run": "1"}),  # a file saved with a BOM
    ]
    for body, query in forms:
        report = await target.ok("import_", body, query, USER)
        assert report["dry_run"] is True and report["added"] == 4, report
    assert await target.ltm.table_snapshot() == before
    # Without a dry-run flag it is real.
    report = await target.ok("import_", as_body({"dry_run": False, "export": doc}), {"dry_run": "0"}, USER)
    assert report["dry_run"] is False and len(await target.ltm.items()) == 4


# -- the export file, any serialisation of it, the envelope (issue 16) -----------------------------


async def test_export_file_is_the_document_with_a_download_name(make_api, origin):
    api = await make_api()
    await rich_source(api, origin)
    answer = await api.api.export_file({})
    assert answer.status == 200 and answer.file is not None
    assert answer.headers["Content-Type"].startswith("application/json")
    day = api.ltm.clock().date().isoformat()
    assert answer.headers["Content-Disposition"] == f'attachment; filename="ltm-export-{day}.json"'
    document = json.loads(answer.file)
    assert "status" not in document and document["format"] == "astrbot_plugin_ltm.export"
    assert document == await api.ok("export", {})
    # A refused export is an error envelope, not a file.
    refused = await api.api.export_file({"status": "deleted"})
    assert refused.status == 400 and refused.file is None and "status" in refused.body["message"]


async def test_an_export_imports_in_any_serialisation_of_the_same_values(make_api, origin):
    source = await make_api()
    items = await rich_source(source, origin)
    await source.ok("patch_item", items["tea"].memory_id, {"importance": 1}, USER)  # stored as 1.0
    answer = await source.api.export_file({})
    assert answer.file is not None and b'"importance": 1.0' in answer.file
    document = json.loads(answer.file)
    target = await make_api(name="target.db")
    empty = await target.ltm.table_snapshot()
    forms = {
        "the file as downloaded": answer.file,
        "re-sent by a browser (1.0 → 1)": as_body(like_a_browser(document)),
        "ASCII-escaped, keys reversed, indented": json.dumps(
            {k: document[k] for k in reversed(list(document))}, ensure_ascii=True, indent=4).encode(),
        "in AstrBot's envelope": as_body({"status": "ok", "data": document, "message": None}),
        "the envelope, re-sent by a browser": as_body(like_a_browser({"status": "ok", "data": document})),
        "wrapped as the page used to post it": as_body({"dry_run": True, "export": like_a_browser(document)}),
    }
    for what, body in forms.items():
        report = await target.ok("import_", body, {"dry_run": "1"}, USER)
        assert report["added"] == 4, what
    assert await target.ltm.table_snapshot() == empty
    report = await target.ok("import_", as_body(like_a_browser(document)), {}, USER)
    assert report["added"] == 4
    tea = await target.ltm.item(MemoryItem.fact_key == "tea")
    assert tea.importance == 1.0 and isinstance(tea.importance, float)
    assert fields_of(await target.ok("export", {})) == fields_of(document)


async def test_files_checksummed_before_numbers_were_normalised_still_import(make_api, origin):
    import hashlib

    def old_checksum(value: Any) -> str:
        return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False,
                                         separators=(",", ":")).encode()).hexdigest()

    source = await make_api()
    await rich_source(source, origin)
    document = await source.ok("export", {})
    for item in document["items"]:
        item["checksum"] = old_checksum({k: x for k, x in item.items() if k != "checksum"})
    document["checksum"] = old_checksum([i["checksum"] for i in document["items"]])
    target = await make_api(name="target.db")
    assert (await target.ok("import_", as_body(document), {}, USER))["added"] == 4


async def test_import_refuses_what_an_edit_refuses(make_api, origin):
    source = await make_api()
    await rich_source(source, origin)
    document = await source.ok("export", {})
    target = await make_api(name="target.db")
    before = await target.ltm.table_snapshot()
    limit = target.ltm.engine.config.extraction.max_fact_chars
    for field, value, says in (
        ("fact", "x" * (limit + 1), "longer than"),
        ("fact", "x" * 1_000_000, "longer than"),
        ("fact", "Alice\x00likes tea", "control character"),
        ("ttl_days", 10**30, "ttl_days"),
        ("ttl_days", 2.5, "ttl_days"),
        ("confidence", float("1e308") * 10, "JSON"),
        ("importance", True, "importance"),
        ("awaiting_approval", "maybe", "awaiting_approval"),
        ("scope_id", "x" * 300, "scope_id"),
        ("memory_id", "", "memory_id"),
    ):
        changed = copy.deepcopy(document)
        changed["items"][-1][field] = value
        if not (isinstance(value, float) and value == float("inf")):
            reseal(changed)
        message = await target.err(400, "import_", as_body(changed), {}, USER)
        assert says in message and ("items[" in message or says == "JSON"), (field, message)
        assert len(message) < 400, message  # the megabyte is not echoed
    assert await target.ltm.table_snapshot() == before


async def test_deeply_nested_or_non_json_numbers_in_an_import_are_refused(make_api):
    api = await make_api()
    before = await api.ltm.table_snapshot()
    for body in (b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 5000 + b"1" + b"}" * 5000,
                 json.dumps({"format": "astrbot_plugin_ltm.export", "items": [], "deep": [[[[[[[[[[]]]]]]]]]] * 1})
                 .encode().replace(b"[[[[[[[[[[]]]]]]]]]]", b"[" * 80 + b"]" * 80),
                 b'{"format": "astrbot_plugin_ltm.export", "version": NaN}', b'{"x": Infinity}'):
        message = await api.err(400, "import_", body, {}, USER)
        assert "nested" in message or "JSON" in message, message
    assert await api.ltm.table_snapshot() == before


async def test_a_memory_is_named_by_any_unique_prefix_of_its_id(make_api, origin):
    api = await make_api()
    items = await seed(api, origin)
    city = items["city"].memory_id
    assert (await api.ok("get_item", city[:8]))["memory_id"] == city
    assert (await api.ok("patch_item", city[:6], {"importance": 0.25}, USER))["importance"] == 0.25
    await api.ok("review", {"memory_ids": [city[:10]], "decision": "approve"}, USER)
    assert (await api.ltm.item(MemoryItem.memory_id == city)).status == "active"
    # Wildcards are characters: "%" and "_" match nothing here.
    for pattern in (city[:4] + "%", "____", "%%%%", city[:4] + "_" * 4):
        assert "no memory" in await api.err(404, "get_item", pattern)
    assert "4 characters" in await api.err(400, "get_item", city[:3])
    # An ambiguous prefix is refused and names what it matches.
    async with api.ltm.engine.db.write() as session:
        for suffix in ("0", "1"):
            session.add(MemoryItem(memory_id=f"abcd{suffix}-twin", scope="user", scope_id="qq:twins",
                                   type="episode", fact=f"twin {suffix}", fact_key=f"twin_{suffix}",
                                   confidence=0.5, importance=0.5, created_at=api.ltm.clock(),
                                   updated_at=api.ltm.clock()))
    message = await api.err(400, "get_item", "abcd")
    assert "ambiguous" in message and "abcd0-twin" in message and "abcd1-twin" in message
    await api.err(400, "delete_item", "abcd", USER)
    assert (await api.ok("get_item", "abcd1"))["fact"] == "twin 1"


async def test_one_reading_of_yes_and_no_everywhere(make_api, origin):
    api = await make_api()
    await seed(api, origin)
    document = await api.ok("export", {})
    for word in ("yes", "true", "1", "on", "TRUE"):
        assert (await api.ok("import_", as_body(document), {"dry_run": word}, USER))["dry_run"] is True
        assert (await api.ok("import_", as_body({"dry_run": word, "export": document}), {}, USER))["dry_run"]
    for word in ("maybe", "2", "truthy"):
        assert "dry_run" in await api.err(400, "import_", as_body(document), {"dry_run": word}, USER)
    # The settings read them the same way, and save them as JSON booleans.
    policy = await api.ok("put_policy", {"write_policy": {"enable": "no"}, "read_policy": {"enable": "yes"}}, USER)
    assert policy["write_policy"]["enable"] is False and policy["read_policy"]["enable"] is True
    assert api.saved[-1]["write_policy"]["enable"] is False
    assert "emergency_read_only" in await api.err(400, "put_policy", {"emergency_read_only": "sometimes"}, USER)


async def test_ttl_days_is_bounded_and_whole(make_api, origin):
    api = await make_api()
    city = (await seed(api, origin))["city"].memory_id
    before = await api.ltm.table_snapshot()
    for value in (10**30, -1, 36_501, 1.5, "30", True, float("nan")):
        assert "ttl_days" in await api.err(400, "patch_item", city, {"ttl_days": value}, USER)
    assert await api.ltm.table_snapshot() == before
    assert (await api.ok("patch_item", city, {"ttl_days": 30.0}, USER))["ttl_days"] == 30
    assert (await api.ok("patch_item", city, {"ttl_days": None}, USER))["ttl_days"] is None


async def test_an_import_preview_says_a_memory_the_person_forgot_was_their_own_wish(make_api, origin):
    source = await make_api()
    await seed(source, origin)
    doc = await source.ok("export", {})
    target = await make_api(name="target.db")
    await target.ltm.turn(origin("alice"), "jazz", "OK.", JAZZ)
    jazz = await target.ltm.item(MemoryItem.fact_key == "jazz")
    await Commands(target.ltm.engine).forget(origin("alice"), jazz.memory_id[:8])  # the person's own /ltm forget
    report = await target.ok("import_", as_body({"dry_run": True, "export": doc}), {"lang": "zh"}, USER)
    (skipped,) = report["details"]["skipped"]
    assert skipped["reason"] == "本人已要求本机器人忘记它" and skipped["reason_code"] == "import.forgotten_here"
