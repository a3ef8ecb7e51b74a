"""What an import does to the status of what it brings (operating/transfer.py):
the answer and its preview say which status imported memories get and list
each memory's fact; "import for review" (``"status": "shadow"``) keeps
every imported memory shadow, awaiting approval, until an operator
approves it — and a bot that reviews what it learns is warned when a file
would make memories active unreviewed."""

from __future__ import annotations

import json
from typing import Any

from astrbot_plugin_ltm.enums import Status
from astrbot_plugin_ltm.storing.tables import MemoryItem

USER = "root"
FACTS = ("Alice lives in Paris", "Alice likes jazz", "用户养了一只叫咪咪的猫")


def as_body(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


async def _export(make_api, origin) -> dict:
    """A file of three active memories, from a bot in mode auto."""
    source = await make_api({"write_policy": {"mode": "auto"}}, name="source.db")
    for fact in FACTS:
        await source.ltm.engine.remember(origin("alice"), fact)
    doc = await source.ok("export", {})
    assert {i["status"] for i in doc["items"]} == {"active"} and len(doc["items"]) == 3
    return doc


async def test_import_for_review_leaves_every_memory_shadow_until_approved(make_api, origin) -> None:
    doc = await _export(make_api, origin)
    target = await make_api({"write_policy": {"mode": "shadow"}}, name="target.db")
    before = await target.ltm.table_snapshot()

    preview = await target.ok("import_", as_body({"status": "shadow", "export": doc}), {}, USER, True)
    assert preview["dry_run"] is True and preview["status"] == "shadow"
    assert "awaiting approval" in preview["status_message"]
    assert sorted(m["fact"] for m in preview["memories"]) == sorted(FACTS)
    assert {(m["action"], m["status"], m["awaiting_approval"]) for m in preview["memories"]} == {
        ("add", "shadow", True)}
    assert preview["added_by_status"] == {"shadow": 3} and "warnings" not in preview
    assert await target.ltm.table_snapshot() == before  # a preview writes nothing

    report = await target.ok("import_", as_body(doc), {"status": "shadow"}, USER)
    assert report["status"] == "shadow" and report["added"] == 3
    items = await target.ltm.items()
    assert {(i.status, i.awaiting_approval) for i in items} == {(Status.SHADOW, True)}
    assert {a.reason for a in await target.ltm.audit() if a.action == "import"} == {"imported for review"}
    # Nothing imported is given to the bot until approved; then it is.
    assert "Paris" not in (await target.ltm.block(origin("alice"), "Where do I live? Paris?")).text
    waiting = await target.ok("list_items", {"status": "pending"})
    assert waiting["total"] == 3
    paris = next(i for i in items if i.fact == "Alice lives in Paris")
    await target.ok("review", {"memory_ids": [paris.memory_id], "decision": "approve"}, USER)
    assert (await target.ltm.item(MemoryItem.memory_id == paris.memory_id)).status == Status.ACTIVE
    assert "Alice lives in Paris" in (await target.ltm.block(origin("alice"), "Where do I live? Paris?")).text


async def test_an_import_into_a_reviewing_bot_says_its_memories_would_be_active_at_once(make_api, origin) -> None:
    doc = await _export(make_api, origin)
    target = await make_api({"write_policy": {"mode": "shadow"}}, name="target.db")
    preview = await target.ok("import_", as_body(doc), {"lang": "zh"}, USER, True)
    assert preview["status"] == "as_exported" and preview["added_by_status"] == {"active": 3}
    assert {m["status"] for m in preview["memories"]} == {"active"}
    assert sorted(m["fact"] for m in preview["memories"]) == sorted(FACTS)
    (warning,) = preview["warnings"]
    assert warning["code"] == "import.active_past_review" and "仅记录" in warning["message"]  # the mode in words
    assert "审核" in warning["message"] and "导出时" in preview["status_message"]  # in the language asked
    # In mode auto an active memory is what the bot would make itself: no warning.
    auto = await make_api({"write_policy": {"mode": "auto"}}, name="auto.db")
    assert "warnings" not in await auto.ok("import_", as_body(doc), {}, USER, True)


async def test_a_second_import_lists_each_memory_as_skipped_with_its_fact(make_api, origin) -> None:
    doc = await _export(make_api, origin)
    target = await make_api({"write_policy": {"mode": "shadow"}}, name="target.db")
    await target.ok("import_", as_body(doc), {"status": "shadow"}, USER)
    again = await target.ok("import_", as_body(doc), {}, USER, True)
    assert {(m["fact"], m["action"], m["status"], m["reason"]) for m in again["memories"]} == {
        (fact, "skip", "shadow", "already present") for fact in FACTS}


async def test_an_unknown_import_status_is_refused_and_nothing_is_written(make_api, origin) -> None:
    doc = await _export(make_api, origin)
    target = await make_api({"write_policy": {"mode": "shadow"}}, name="target.db")
    before = await target.ltm.table_counts()
    assert "status" in await target.err(400, "import_", as_body(doc), {"status": "active"}, USER)
    assert "status" in await target.err(400, "import_", as_body({"status": ["x"], "export": doc}), {}, USER)
    assert await target.ltm.table_counts() == before


async def test_import_for_review_may_be_asked_in_the_file_itself(make_api, origin) -> None:
    doc = await _export(make_api, origin)
    target = await make_api({"write_policy": {"mode": "shadow"}}, name="target.db")
    report = await target.ok("import_", as_body({**doc, "status": "shadow"}), {}, USER)
    assert report["status"] == "shadow" and report["added_by_status"] == {"shadow": 3}
    assert {(i.status, i.awaiting_approval) for i in await target.ltm.items()} == {(Status.SHADOW, True)}
