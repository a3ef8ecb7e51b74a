"""The injection preview (``POST preview``, doors/preview.py): the block
the bot would be given for a user's message, read by the bot's own reader,
with each line's source and the lines cut and why — and nothing written or
counted as used."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from astrbot_plugin_ltm.doors.preview import MAX_MESSAGE_CHARS
from astrbot_plugin_ltm.storing.tables import MemoryItem

PARIS = {"type": "profile", "fact": "Alice lives in Paris", "fact_key": "city", "confidence": 0.9, "importance": 0.7}
JAZZ = {"type": "preference", "fact": "Alice likes jazz music in Paris", "fact_key": "jazz", "confidence": 0.9,
        "importance": 0.3}
CAT = {"type": "profile", "fact": "用户养了一只叫咪咪的猫", "fact_key": "cat", "confidence": 0.9, "importance": 0.6}
GROUP_RULE = {"type": "constraint", "fact": "The group g1 talks about Paris trips only", "fact_key": "g1_rule",
              "confidence": 0.9, "importance": 0.6, "about": "group"}


async def _alice(api, origin) -> None:
    ltm = api.ltm
    await ltm.turn(origin("alice"), "I live in Paris", "Nice.", PARIS)
    ltm.clock.advance(minutes=1)
    await ltm.turn(origin("alice"), "I like jazz in Paris", "Cool.", JAZZ)
    ltm.clock.advance(minutes=1)


async def test_the_preview_is_exactly_the_block_the_bot_is_given(make_api, origin) -> None:
    api = await make_api({"write_policy": {"mode": "auto"}})
    await _alice(api, origin)
    question = "Where do I live, and what music do I like?"
    shown = await api.ok("preview", {"scope": "user:qq:alice", "message": question})
    given = await api.ltm.block(origin("alice"), question)
    assert shown["text"] == given.text and shown["text"].startswith("[Long-term Memory]")
    assert shown["tokens"] == given.tokens
    # Every line the block holds is listed with where it came from.
    memory_ids = {s.memory_id for s in given.items}
    listed = {line["id"]: line for line in shown["lines"]}
    assert memory_ids <= set(listed)
    for line in shown["lines"]:
        assert line["text"] in shown["text"] and line["tokens"] > 0
        assert line["source"] in ("memory", "summary", "turn", "last_time")
    assert any(line["source"] == "memory" and "Paris" in line["text"] for line in shown["lines"])
    assert shown["scope"] == "user:qq:alice" and shown["read_scopes"][0] == "user:qq:alice"


async def test_a_preview_writes_nothing_and_counts_no_memory_as_used(make_api, origin) -> None:
    api = await make_api({"write_policy": {"mode": "auto"}})
    await _alice(api, origin)
    before = await api.ltm.table_snapshot()
    shown = await api.ok("preview", {"scope": "user:qq:alice", "message": "Where do I live?"})
    assert shown["lines"], shown
    assert api.ltm.engine.usage.pending == 0
    assert await api.ltm.engine.usage.flush() == 0
    assert await api.ltm.table_snapshot() == before


async def test_lines_past_the_caps_are_listed_as_cut_with_why(make_api, origin) -> None:
    api = await make_api({"write_policy": {"mode": "auto"}, "read_policy": {"max_items": 1}})
    await _alice(api, origin)
    shown = await api.ok("preview", {"scope": "user:qq:alice", "message": "Paris", "lang": "zh"})
    assert len([line for line in shown["lines"] if line["source"] == "memory"]) == 1
    capped = [c for c in shown["cut"] if c["why_code"] == "preview.cut.max_items"]
    assert capped and capped[0]["source"] == "memory" and "Paris" in capped[0]["text"]
    # in the language asked, the setting by its name in the settings form, not its key
    assert capped[0]["why"] == "记忆块已达到最多注入条数。" and "max_items" not in capped[0]["why"]


async def test_a_memory_awaiting_approval_is_cut_and_says_so(make_api, origin) -> None:
    api = await make_api({"write_policy": {"mode": "manual"}})
    await api.ltm.turn(origin("alice"), "I live in Paris", "Nice.", PARIS)
    shown = await api.ok("preview", {"scope": "user:qq:alice", "message": "Do I live in Paris?"})
    assert "Alice lives in Paris" not in shown["text"]
    (held,) = [c for c in shown["cut"] if "Alice lives in Paris" in c["text"]]
    assert held["why_code"] == "preview.cut.awaiting_approval" and held["source"] == "memory"


async def test_a_preview_in_a_group_reads_the_groups_memory_as_the_bot_would(make_api, origin) -> None:
    api = await make_api({"write_policy": {"mode": "auto"}})
    await _alice(api, origin)
    await api.ltm.turn(origin("alice", group="g1"), "We only talk about Paris trips here", "OK.", GROUP_RULE)
    question = "Any Paris tips?"
    shown = await api.ok("preview", {"scope": "user:qq:alice", "group": "group:qq:g1", "message": question})
    given = await api.ltm.block(origin("alice", group="g1"), question)
    assert shown["text"] == given.text and "Paris trips only" in shown["text"]
    assert shown["read_scopes"] == ["group:qq:g1"]  # never the speaker's own scope (audience.py)
    alone = await api.ok("preview", {"scope": "user:qq:alice", "message": question})
    assert "Paris trips only" not in alone["text"]


async def test_a_chinese_message_previews_the_chinese_block(make_api, origin) -> None:
    api = await make_api({"write_policy": {"mode": "auto"}})
    await api.ltm.turn(origin("alice"), "我养了一只猫叫咪咪", "好可爱", CAT)
    shown = await api.ok("preview", {"scope": "user:qq:alice", "message": "我的猫叫什么名字？"})
    assert "咪咪" in shown["text"] and "仅作背景" in shown["text"]


@pytest.mark.parametrize(("body", "code_word"), [
    (None, "scope"),
    ({}, "scope"),
    ({"scope": "user:qq:alice"}, "message"),
    ({"scope": "user:qq:alice", "message": "   "}, "message"),
    ({"scope": "user:qq:alice", "message": "x" * (MAX_MESSAGE_CHARS + 1)}, "too long"),
    ({"scope": "user:qq:alice", "message": 42}, "message"),
    ({"scope": "alice", "message": "hi"}, "scope"),
    ({"scope": "user:", "message": "hi"}, "scope"),
    ({"scope": "group:qq:g1", "message": "hi"}, "group"),
    ({"scope": ["user:qq:alice"], "message": "hi"}, "scope"),
    ({"scope": "user:qq:alice", "message": "hi", "extra": 1}, "extra"),
])
async def test_a_bad_preview_request_is_refused_with_a_clear_message(make_api, origin, body: Any,
                                                                     code_word: str) -> None:
    api = await make_api({"write_policy": {"mode": "auto"}})
    before = await api.ltm.table_counts()
    message = await api.err(400, "preview", body)
    assert code_word in message
    assert await api.ltm.table_counts() == before


async def test_a_scope_the_bot_would_not_read_for_that_user_is_refused(make_api) -> None:
    api = await make_api({"write_policy": {"mode": "auto"},
                          "identity": {"cross_platform_aliases": ["qq:alice=alice", "tg:al=alice"]}})
    shown = await api.ok("preview", {"scope": "user:alice", "message": "hi"})
    assert shown["read_scopes"][0] == "user:alice"
    # The account an alias joins reads the alias's scope, not its own.
    message = await api.err(400, "preview", {"scope": "user:qq:alice", "message": "hi"})
    assert "user:qq:alice" in message


async def test_a_new_conversation_previews_the_last_time_summary_first(make_api, origin) -> None:
    api = await make_api({"write_policy": {"mode": "auto"}, "summaries": {"enable": True}})
    await _alice(api, origin)
    ltm = api.ltm
    async with ltm.engine.db.write() as session:
        session.add(MemoryItem(
            scope="user", scope_id="qq:alice", type="summary", fact="Alice planned a trip to Lyon by train.",
            fact_key="summary_session_1", confidence=0.9, importance=0.5, status="active", created_at=ltm.clock(),
            updated_at=ltm.clock(), valid_from=ltm.clock(), valid_to=ltm.clock()))
    ltm.clock.advance(hours=3)  # the conversation went quiet: the next message starts a new one
    question = "Any news about my trip?"
    shown = await api.ok("preview", {"scope": "user:qq:alice", "message": question})
    given = await ltm.block(origin("alice"), question)
    assert shown["text"] == given.text and "Lyon" in shown["text"]
    first = shown["lines"][0]
    assert first["source"] == "last_time" and "Lyon" in first["text"] and first["tokens"] > 0
    assert [line["id"] for line in shown["lines"]].count(first["id"]) == 1


async def test_with_reading_off_the_preview_is_empty_and_says_why(make_api, origin) -> None:
    api = await make_api({"write_policy": {"mode": "auto"}})
    await _alice(api, origin)
    api.ltm.configure({"read_policy": {"enable": False}})
    shown = await api.ok("preview", {"scope": "user:qq:alice", "message": "Where do I live?", "lang": "zh"})
    assert shown["text"] == "" and shown["lines"] == [] and shown["tokens"] == 0
    (notice,) = shown["notices"]
    assert notice["code"] == "preview.reading_off" and "记忆读取已关闭" in notice["message"]


async def test_a_persona_previews_its_own_memory_before_the_shared_one(make_api, origin) -> None:
    api = await make_api({"write_policy": {"mode": "auto"}, "identity": {"persona_scoped": True}})
    tutor = replace(origin("alice"), persona="tutor")
    await api.ltm.turn(tutor, "We practised French verbs in Paris today", "Bien!",
                       {"type": "episode", "fact": "Alice practised French verbs with the tutor",
                        "fact_key": "verbs", "confidence": 0.9, "importance": 0.6})
    question = "What did we practise in French?"
    shown = await api.ok("preview", {"scope": "user:qq:alice", "persona": "tutor", "message": question})
    assert shown["read_scopes"][:2] == ["user:qq:alice#persona:tutor", "user:qq:alice"]
    assert shown["text"] == (await api.ltm.block(tutor, question)).text and "French verbs" in shown["text"]
    plain = await api.ok("preview", {"scope": "user:qq:alice", "message": question})
    assert "French verbs" not in plain["text"]
    # The persona's scope as the list shows it names the persona too.
    named = await api.ok("preview", {"scope": "user:qq:alice#persona:tutor", "message": question})
    assert named["text"] == shown["text"]


async def test_the_preview_takes_a_user_as_the_memory_list_shows_them(make_api, origin) -> None:
    """The memory list shows "qq:alice" (用户 · qq:alice), a chat the bare id:
    each names the user the preview reads for; a typo is answered with the
    user it reads like."""
    api = await make_api({"write_policy": {"mode": "auto"}})
    await _alice(api, origin)
    whole = await api.ok("preview", {"scope": "user:qq:alice", "message": "Where do I live?"})
    for named in ("qq:alice", "alice", "用户 · qq:alice"):
        shown = await api.ok("preview", {"scope": named, "message": "Where do I live?"})
        assert shown["scope"] == "user:qq:alice" and shown["text"] == whole["text"], named
    refused = await api.call("preview", {"scope": "qq:alcie", "message": "Where do I live?", "lang": "zh"})
    assert refused.status == 404 and refused.body["message"] == (
        "没有 user:qq:alcie 的任何记录；你是不是要找 user:qq:alice？")
