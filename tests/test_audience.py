"""Said where, recalled where (audience.py, docs/privacy.md): a private
chat recalls everything about its person, a group what was said in it,
and nothing said in private or in another group ever enters a group's
block, a tool's answer or a summary."""

from __future__ import annotations

import json
from dataclasses import replace

from sqlalchemy import select

from astrbot_plugin_ltm.audience import may_recall, seen_in
from astrbot_plugin_ltm.doors.tools import MemoryTools
from astrbot_plugin_ltm.enums import ScopeKind, Visibility
from astrbot_plugin_ltm.scope import Scope
from astrbot_plugin_ltm.storing.tables import MemoryContext, MemoryItem

ALICE, BOB = Scope("user", "qq:alice"), Scope("user", "qq:bob")
G1, G2 = Scope("group", "qq:g1"), Scope("group", "qq:g2")
SECRET = "我的秘密代号是 ZX-4417，别告诉别人。"


def fact(text: str, key: str, **extra) -> dict:
    return {"fact": text, "fact_key": key, "type": "profile", "lines": [1], **extra}


def test_the_rule_recalls_a_persons_memory_where_it_was_said_and_a_secret_only_in_private():
    assert may_recall(ALICE, Visibility.SHARED, False, [ALICE])  # her own chat, wherever she said it
    assert not may_recall(ALICE, Visibility.SHARED, False, [G1])  # said in private: no group
    assert may_recall(ALICE, Visibility.SHARED, True, [G1])  # said in G1: G1 recalls it
    assert not may_recall(ALICE, Visibility.SECRET, True, [G1])  # a secret: never in a group
    assert may_recall(ALICE, Visibility.SECRET, False, [ALICE])
    assert may_recall(G1, Visibility.SHARED, False, [G1]) and not may_recall(G1, Visibility.SHARED, False, [G2])
    assert not may_recall(G1, Visibility.PRIVATE, False, [G1])  # a group memory nothing places
    assert seen_in(ALICE, Visibility.SHARED, [G1]) == [ALICE, G1]
    assert seen_in(ALICE, Visibility.SECRET, [G1]) == [ALICE]


async def test_a_word_said_in_private_never_reaches_a_group_prompt(ltm, origin):
    alice, in_g1, in_g2 = origin("alice", name="阿明"), origin("alice", name="阿明", group="g1"), \
        origin("alice", name="阿明", group="g2")
    await ltm.turn(alice, SECRET, "好的。", fact("阿明的秘密代号是ZX-4417", "alice_secret_code"))
    await ltm.turn(in_g1, "我叫阿明，住在杭州", "你好阿明。", fact("阿明住在杭州", "alice_home_city"))
    for where in (in_g1, in_g2):
        for question in ("我住在哪里？", "我的秘密代号是什么？"):
            block = await ltm.block(where, question)
            assert "ZX-4417" not in block.text, (where.group_id, question, block.text)
    assert "阿明住在杭州" in (await ltm.block(in_g1, "我住在哪里？")).text  # said in G1: G1 recalls it
    assert "杭州" not in (await ltm.block(in_g2, "我住在哪里？")).text  # another group does not
    private = (await ltm.block(alice, "我住在哪里？我的秘密代号？")).text
    assert "阿明住在杭州" in private and "ZX-4417" in private  # her own chat: everything about her


async def test_a_fact_a_member_says_in_a_group_is_kept_with_them_once(ltm, origin):
    alice, in_g1 = origin("alice", name="Alice"), origin("alice", name="Alice", group="g1")
    await ltm.turn(in_g1, "My name is Alice", "Hi.", fact("Alice's name is Alice", "alice_name"))
    await ltm.turn(alice, "My name is Alice", "Hi.", fact("Alice's name is Alice", "alice_name"))
    (kept,) = await ltm.items(MemoryItem.fact_key == "alice_name")
    assert (kept.scope, kept.scope_id, kept.evidence_count) == ("user", "qq:alice", 2)
    said = await ltm.rows(MemoryContext, MemoryContext.item_id == kept.id, order_by=MemoryContext.scope_id)
    assert [(c.scope, c.scope_id) for c in said] == [("group", "qq:g1")]


async def test_a_groups_own_fact_and_what_several_said_stay_the_groups(ltm, origin):
    alice, bob = origin("alice", group="g1"), origin("bob", group="g1")
    await ltm.record(alice, "本群规定：周五晚上不发广告。", "收到。")
    await ltm.turn(bob, "We meet at the lake on Sunday", "Noted.",
                   {"fact": "本群规定：周五晚上不发广告", "fact_key": "group_rule_ads", "type": "constraint",
                    "lines": [1], "about": "group"},
                   {"fact": "The group meets at the lake on Sunday", "fact_key": "meeting", "type": "episode",
                    "lines": [1, 3]})
    kept = {i.fact_key: (i.scope, i.scope_id) for i in await ltm.items()}
    assert kept == {"group_rule_ads": ("group", "qq:g1"), "meeting": ("group", "qq:g1")}
    assert "周五晚上不发广告" in (await ltm.block(origin("carol", group="g1"), "本群有什么规定？")).text
    assert "周五晚上不发广告" not in (await ltm.block(origin("carol", group="g2"), "本群有什么规定？")).text


async def test_a_secret_stays_in_private_even_when_said_again_in_a_group(ltm, origin):
    alice, in_g1 = origin("alice"), origin("alice", group="g1")
    await ltm.turn(alice, "My secret code is ZX-4417, don't tell anyone", "OK.",
                   fact("Alice's secret code is ZX-4417", "alice_code"))
    (code,) = await ltm.items()
    assert code.visibility == Visibility.SECRET  # the model did not mark it; its line asked for it
    await ltm.turn(in_g1, "my code is ZX-4417", "OK.", fact("Alice's secret code is ZX-4417", "alice_code"))
    # Her line in the group is the group's to hear again; the memory is not.
    assert "Alice's secret code" not in (await ltm.block(in_g1, "what is alice's code ZX-4417")).text
    assert "Alice's secret code is ZX-4417" in (await ltm.block(alice, "what is my code")).text


async def test_the_extraction_of_a_group_is_shown_no_fact_said_in_private(ltm, origin):
    alice, in_g1 = origin("alice"), origin("alice", group="g1")
    await ltm.turn(alice, SECRET, "好的。", fact("Alice的秘密代号是ZX-4417", "alice_secret_code"))
    await ltm.turn(alice, "I love opera", "OK.", fact("Alice loves opera", "alice_likes_opera", type="preference"))
    ltm.gateway.calls.clear()
    await ltm.turn(in_g1, "I love opera and my code changed", "OK.")
    prompt = ltm.gateway.calls[-1]["prompt"]
    assert "Chat: a group chat." in prompt
    assert "ZX-4417" not in prompt and "opera" not in prompt.split("Transcript:")[0], prompt


async def test_the_memory_tools_in_a_group_reach_only_what_was_said_there(ltm, origin):
    alice, in_g1 = origin("alice"), origin("alice", group="g1")
    await ltm.turn(alice, "I love opera", "OK.", fact("Alice loves opera", "alice_likes_opera", type="preference"))
    await ltm.turn(in_g1, "I love opera, truly", "OK.", fact("Alice loves opera", "alice_likes_opera",
                                                             type="preference"))
    tools = MemoryTools(ltm.engine)
    assert "Alice loves opera" in await tools.search(in_g1, "opera")
    (item,) = await ltm.items()
    expanded = await tools.expand(in_g1, f"#{item.id}")
    assert "truly" in expanded and "I love opera\n" not in expanded + "\n".replace("truly", "")
    assert all("I love opera, truly" in line or not line.startswith("- [said") for line in expanded.splitlines())
    assert "No memory" in await tools.expand(origin("alice", group="g2"), f"#{item.id}")


async def test_a_members_profile_follows_them_into_a_group_only_where_the_operator_lets_it(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}, "groups": {"profiles_follow_members": ["g1"]}})
    alice = origin("alice", name="阿明")
    await ltm.turn(alice, "我叫阿明，请叫我明哥", "好的。", fact("阿明希望被称为明哥", "alice_address"))
    await ltm.turn(alice, SECRET, "好的。", fact("阿明的秘密代号是ZX-4417", "alice_secret_code"))
    await ltm.turn(alice, "我喜欢游泳", "好的。", fact("阿明喜欢游泳", "alice_likes_swimming", type="preference"))
    followed = (await ltm.block(origin("alice", name="阿明", group="g1"), "你好")).text
    assert "[profile; private to 阿明] 阿明希望被称为明哥" in followed
    assert "ZX-4417" not in followed and "游泳" not in followed  # a secret never; other facts do not follow
    assert "明哥" not in (await ltm.block(origin("alice", name="阿明", group="g2"), "你好")).text
    assert "明哥" not in (await ltm.block(origin("bob", group="g1"), "你好")).text  # only the speaker's own


async def test_the_api_shows_where_each_memory_was_said_and_who_may_see_it(make_api, origin):
    api = await make_api({"write_policy": {"mode": "auto"}})
    await api.ltm.turn(origin("alice", group="g1"), "I live in Paris", "OK.",
                       fact("Alice lives in Paris", "alice_city"))
    listed = (await api.ok("list_items", {"scope": "user", "scope_id": "qq:alice", "lang": "zh"}))["items"]
    (shown,) = listed
    assert shown["said_in"] == ["group:qq:g1"] and shown["seen_in"] == ["user:qq:alice", "group:qq:g1"]
    assert shown["audience"] == "与 qq:alice 的私聊、群 qq:g1" and shown["visibility"] == "shared"


async def test_an_export_carries_where_a_memory_was_said_and_an_import_keeps_it_private(make_api, origin):
    api = await make_api({"write_policy": {"mode": "auto"}})
    await api.ltm.turn(origin("alice", group="g1"), "I live in Paris", "OK.",
                       fact("Alice lives in Paris", "alice_city"))
    exported = await api.ok("export", {})
    (record,) = exported["items"]
    assert record["said_in"] == ["group:qq:g1"] and record["visibility"] == "shared"
    other = await make_api({"write_policy": {"mode": "auto"}})
    await other.ok("import_", json.dumps(exported).encode(), {}, "op")
    assert "Paris" in (await other.ltm.block(origin("carol", group="g1"), "where does Alice live")).text
    assert "Paris" not in (await other.ltm.block(origin("carol", group="g2"), "where does Alice live")).text


async def test_an_operator_forgetting_a_person_takes_their_group_lines_too(ltm, origin):
    from astrbot_plugin_ltm.doors.commands import Commands

    alice, in_g1 = origin("alice"), origin("alice", group="g1")
    await ltm.record(in_g1, "the picnic basket is blue", "OK.")
    commands = Commands(ltm.engine)
    await commands.forget_all(alice)
    await commands.forget_all(alice, "confirm")
    shown = (await ltm.block(origin("bob", group="g1"), "what colour is the picnic basket")).text
    assert "picnic basket is blue" not in shown


def test_a_read_in_a_group_reads_the_group_alone(ltm, origin):
    assert ltm.engine.resolver.read_scopes(origin("alice", group="g1")) == [G1]
    assert ltm.engine.resolver.read_scopes(origin("alice"))[0] == ALICE


async def test_a_context_row_is_kept_only_for_a_group(ltm, origin):
    await ltm.turn(origin("alice"), "I live in Paris", "OK.", fact("Alice lives in Paris", "alice_city"))
    async with ltm.engine.db.read() as session:
        assert not (await session.execute(select(MemoryContext))).all()
    assert replace(origin("alice"), group_id="g1").is_group and ScopeKind.GROUP == "group"


async def test_a_command_answered_in_a_group_never_lists_or_repeats_a_private_memory(ltm, origin):
    from astrbot_plugin_ltm.doors.commands import Commands

    alice, in_g1 = origin("alice"), origin("alice", group="g1")
    await ltm.turn(alice, SECRET, "好的。", fact("Alice的秘密代号是ZX-4417", "alice_secret_code"))
    await ltm.turn(in_g1, "I live in Paris", "OK.", fact("Alice lives in Paris", "alice_city"))
    commands = Commands(ltm.engine)
    listed_here = await commands.list(in_g1)
    assert "Alice lives in Paris" in listed_here and "ZX-4417" not in listed_here
    assert "ZX-4417" in await commands.list(alice)  # her own chat lists everything about her
    assert "ZX-4417" not in await commands.list(origin("root", group="g1", admin=True), "qq:alice")
    (secret,) = await ltm.items(MemoryItem.fact_key == "alice_secret_code")
    reply = await commands.forget(in_g1, secret.memory_id[:8])
    assert "ZX-4417" not in reply and await ltm.items(MemoryItem.fact_key == "alice_secret_code") == []
