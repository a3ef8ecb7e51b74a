"""Said where, recalled where (docs/privacy.md), through AstrBot's real
``aiocqhttp`` adapter: QQ's side is the fake OneBot client (onebot.py),
three members talk in private and in three groups, and every request
AstrBot sends the model is searched for what must not be in it.

Run twice: with ``unique_session`` (one conversation per member in a
group, as operators set real groups) and with AstrBot's default shared
group conversation. Group 20003 learns all its talk
(``groups.learn_all_messages``); the others only what wakes the bot.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

AMING, XIAOHONG, XIAOLI = 10001, 10002, 10003
NAMES = {AMING: "Aming", XIAOHONG: "Xiaohong", XIAOLI: "Xiaoli"}
G1, G2, G3 = 20001, 20002, 20003  # G3 learns all its talk
LEARNS_ALL = G3

# Said in private: must never be in a group's request, by anyone.
SAID_IN_PRIVATE = {
    AMING: ["我的秘密代号是 ZX-4417，别告诉别人。", "I like kabuki"],
    XIAOHONG: ["I like durian"],
}
PRIVATE_MARKERS = ["ZX-4417", "kabuki", "durian"]
# Said in G1: must never be in G2's.
SAID_IN_G1 = {
    AMING: ["My name is Aming and I live in Hangzhou"],
    XIAOHONG: ["I live in Paris"],
    XIAOLI: ["本群规定：周五晚上不发广告。"],
}
G1_MARKERS = ["Hangzhou", "Paris", "不发广告"]


@pytest.fixture(scope="module", params=[True, False], ids=["one-conversation-per-member", "shared-conversation"])
def qq(request, onebot_factory):
    config = {"write_policy": {"mode": "auto"}, "groups": {"learn_all_messages": [str(LEARNS_ALL)]}}
    # AstrBot's own group context on: its recent messages must not be recalled a second time.
    astrbot = {"provider_ltm_settings": {"group_icl_enable": True}}
    with onebot_factory(f"privacy-{request.param}", config, unique_session=request.param,
                        astrbot_config=astrbot) as qq:
        qq.said = False
        yield qq


@pytest.fixture
def bot(qq):
    return qq.bot


def private(qq, user: int, text: str) -> str:
    return qq.onebot.private(user, text, nickname=NAMES[user])


def group(qq, group_id: int, user: int, text: str) -> str:
    return qq.onebot.group(group_id, user, text, nickname=NAMES[user])


def events(bot, where: str = "", params: tuple = ()) -> list[dict]:
    return [dict(r) for r in bot.query(f"SELECT * FROM ltm_events {where} ORDER BY id", params)]


def text_of(event: dict) -> str:
    return str(json.loads(event["content"]).get("text") or "")


def settle(bot) -> None:
    """Until every recorded turn is extracted (nothing pending)."""
    bot.wait_for(lambda: not bot.query("SELECT 1 FROM ltm_events WHERE extraction_status = 'pending'"), 60,
                 "every recorded turn extracted")


def say_everything(qq) -> None:
    """The module's conversation, once per bot: private words, G1's talk."""
    if qq.said:
        return
    for user, lines in SAID_IN_PRIVATE.items():
        for line in lines:
            private(qq, user, line)
    for user, lines in SAID_IN_G1.items():
        for line in lines:
            group(qq, G1, user, line)
    bot = qq.bot
    bot.wait_for(lambda: len(events(bot, "WHERE source_role = 'user'")) >= 6, 30, "the six lines recorded")
    settle(bot)
    qq.said = True


def request_for(qq, where: int | None, user: int, text: str) -> dict:
    """The request AstrBot sent the model for ``text`` (a private chat: ``where`` None)."""
    since = qq.bot.mark()
    if where is None:
        private(qq, user, text)
    else:
        group(qq, where, user, text)
    return qq.bot.turn_request(text, since)


def blocks_text(bot, body: dict) -> str:
    return "\n".join(b["text"] for b in bot.memory_blocks(body))


def leaks(body: dict, markers: list[str]) -> list[str]:
    dumped = json.dumps(body, ensure_ascii=False)
    return [m for m in markers for _ in range(dumped.count(m))]


def test_nothing_said_in_private_reaches_a_group_and_nothing_said_in_g1_reaches_g2(qq, bot):
    say_everything(qq)
    # No question names a marker: any marker in a group's request came from memory.
    asks = [
        (G1, AMING, "where do I live? what is my secret code? what music do I like?"),
        (G1, XIAOLI, "where do Aming and Xiaohong live, and what do they like to eat or hear?"),
        (G2, AMING, "我住在哪里？我的秘密代号是什么？where do I live, what music do I like?"),
        (G2, XIAOHONG, "where do I live? what fruit do I like? what is the group rule?"),
        (G2, XIAOLI, "where do Aming and Xiaohong live? what is the rule about ads?"),
    ]
    found: list[tuple[int, int, str]] = []
    bodies: dict[tuple[int, int], dict[str, Any]] = {}
    for where, user, text in asks:
        body = request_for(qq, where, user, text)
        bodies[(where, user)] = body
        found += [(where, user, m) for m in leaks(body, PRIVATE_MARKERS)]
        if where != G1:
            found += [(where, user, m) for m in leaks(body, G1_MARKERS)]
    # The leak count: 0 is the only pass.
    assert found == [], bot.diag(f"{len(found)} leak(s): {found}")
    # What may be recalled is: each fact where it was said.
    g1_block = blocks_text(bot, bodies[(G1, XIAOLI)])
    assert "Aming lives in Hangzhou" in g1_block and "Xiaohong lives in Paris" in g1_block, bot.diag(g1_block)
    assert "Aming lives in Hangzhou" in blocks_text(bot, bodies[(G1, AMING)])
    # A person's own chat knows everything about them, wherever they said it.
    mine = blocks_text(bot, request_for(qq, None, AMING, "where do I live? my secret code? what do I like?"))
    assert "Hangzhou" in mine and "ZX-4417" in mine and "kabuki" in mine, bot.diag(mine)
    hers = blocks_text(bot, request_for(qq, None, XIAOHONG, "where do I live? what do I like to eat?"))
    assert "Paris" in hers and "durian" in hers and "kabuki" not in hers and "ZX-4417" not in hers, bot.diag(hers)
    bot.assert_log_clean()


def test_a_group_fact_reaches_g1s_members_and_not_g2_and_is_kept_once_per_person(qq, bot):
    say_everything(qq)
    rule = "本群规定：周五晚上不发广告"
    assert rule in blocks_text(bot, request_for(qq, G1, XIAOHONG, "本群有什么规定？发广告可以吗？"))
    assert "广告" not in blocks_text(bot, request_for(qq, G2, XIAOHONG, "本群有什么规定？发广告可以吗？"))
    # Where it is all kept: the group's rule with the group, a member's own facts with the member.
    kept = {r["fact"]: (r["scope"], r["scope_id"]) for r in bot.query("SELECT fact, scope, scope_id FROM ltm_items")}
    p = qq.platform_id
    assert kept[rule] == ("group", f"{p}:{G1}")
    assert kept["Aming lives in Hangzhou"] == ("user", f"{p}:{AMING}")
    said = bot.query("SELECT c.scope_id FROM ltm_item_contexts c JOIN ltm_items i ON i.id = c.item_id "
                     "WHERE i.fact = 'Aming lives in Hangzhou'")
    assert [r["scope_id"] for r in said] == [f"{p}:{G1}"]
    bot.assert_log_clean()


def test_messages_without_an_at_are_learnt_only_where_the_operator_switched_it_on(qq, bot):
    log = bot.log_size()
    qq.onebot.push_group(G1, XIAOHONG, "I like karaoke", at_bot=False, nickname=NAMES[XIAOHONG])
    qq.onebot.push_group(LEARNS_ALL, XIAOHONG, "I like jazz", at_bot=False, nickname=NAMES[XIAOHONG])
    qq.wait_received(XIAOHONG, "I like karaoke", log)
    bot.wait_for(lambda: any(text_of(e) == "I like jazz" for e in events(bot)), 30, "the un-@ line of G3 recorded")
    settle(bot)
    assert not [e for e in events(bot) if "karaoke" in text_of(e)], bot.diag("G1 does not learn all its talk")
    (jazz,) = [e for e in events(bot) if text_of(e) == "I like jazz"]
    assert (jazz["scope_id"], jazz["sender_id"], jazz["source_role"]) == (
        f"{qq.platform_id}:{LEARNS_ALL}", str(XIAOHONG), "user"), jazz
    # Learnt as the speaker's, recalled in the group where it was said, nowhere else.
    asked = "what does Xiaohong like? jazz? karaoke?"
    body = request_for(qq, LEARNS_ALL, XIAOLI, asked)
    block = blocks_text(bot, body)
    assert "Xiaohong likes jazz" in block, bot.diag(block)
    if not qq.unique_session:  # AstrBot's group context is the shared conversation's: it carries her line ...
        assert "I like jazz" in json.dumps(body, ensure_ascii=False).replace(block, "")
        assert "Xiaohong: I like jazz" not in block, bot.diag(block)  # ... and the block never repeats it
    assert "jazz" not in blocks_text(bot, request_for(qq, G2, XIAOLI, asked))
    bot.assert_log_clean()


def test_what_a_paused_person_says_is_never_recalled_in_private_or_in_a_group(qq, bot):
    assert "已暂停" in private(qq, XIAOLI, "/ltm 暂停")
    said_while_paused = [(None, "I like badminton"), (G1, "我的卡号是 6222 0000 1111 2222")]
    for where, text in said_while_paused:
        if where is None:
            private(qq, XIAOLI, text)
        else:
            group(qq, where, XIAOLI, text)
    assert "已恢复" in private(qq, XIAOLI, "/ltm 恢复")
    settle(bot)
    # Not recorded at all: nothing to recall, to search, to expand or to summarise ...
    stored = [e for e in events(bot) if "badminton" in e["content"] or "6222" in e["content"]]
    assert stored == [], bot.diag(f"recorded while paused: {stored}")
    # ... and not in a later prompt's memory, here or in the group.
    for where in (None, G1):
        block = blocks_text(bot, request_for(qq, where, XIAOLI, "我平时喜欢什么运动？badminton? 我的卡号是多少？"))
        assert "badminton" not in block and "6222" not in block, bot.diag(block)
    bot.assert_log_clean()


def test_a_cron_job_leaves_no_turn_attributed_to_a_person(qq, bot):
    for session in (qq.private_umo(XIAOHONG), qq.group_umo(G1, XIAOHONG) if qq.unique_session else
                    qq.group_umo(G1)):
        qq.run_cron(session, "remind them to water the plants")
    settle(bot)
    spoken = [e for e in events(bot) if e["sender_name"] == "Scheduler"
              or (e["source_role"] == "user" and "water the plants" in text_of(e))]
    assert spoken == [], bot.diag(f"the scheduler's words recorded as a person's: {spoken}")
    # A group's job is the group's: never a "user" scope named after the group or session.
    assert not bot.query("SELECT 1 FROM ltm_events WHERE scope = 'user' AND scope_id LIKE ?",
                         (f"%{G1}%",)), bot.diag("a group cron run was recorded in a user scope")
    bot.assert_log_clean()
