"""The OneBot harness proves itself: a real AstrBot on its real ``aiocqhttp``
platform (OneBot v11, reverse WebSocket), QQ's side played by the fake
client of ``onebot.py``, the model by the fake of ``devtools.fake_openai``.

One bot for the module, with ``unique_session`` on (each member of a group
has their own conversation, as operators set it for real groups) and the
event probe fixture plugin, which logs what AstrBot tells plugins about
each event that reaches the model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devtools import fake_openai

pytestmark = pytest.mark.e2e

EVENT_PROBE_PLUGIN = Path(__file__).resolve().parent / "fixture_plugins" / "ltm_test_event_probe"
ALICE, BOB, CAROL = 10001, 10002, 10003
HIKERS = 20001  # a group


@pytest.fixture(scope="module")
def qq(onebot_factory):
    with onebot_factory("onebot", {"write_policy": {"mode": "auto"}}, unique_session=True,
                        extra_plugins=(EVENT_PROBE_PLUGIN,)) as qq:
        yield qq


@pytest.fixture
def bot(qq):
    return qq.bot


def probe_of(bot, since: int, text: str) -> dict:
    """What the probe plugin saw of the turn whose text is ``text``."""
    found = [p for p in bot.event_probes(since) if p["message_str"] == text]
    assert len(found) == 1, bot.diag(f"expected one probe for {text!r}, got {bot.event_probes(since)}")
    return found[0]


def history_texts(body: dict) -> list[str]:
    """The user and assistant turns a request carries before the new one."""
    turns = [m for m in body["messages"] if m.get("role") in ("user", "assistant")][:-1]
    return [json.dumps(m.get("content"), ensure_ascii=False) for m in turns]


def test_a_private_message_is_answered_through_send_private_msg_and_reaches_the_model(qq, bot):
    since, log, calls = bot.mark(), bot.log_size(), qq.onebot.mark()
    text = "hello from a private chat"
    assert qq.onebot.private(ALICE, text, nickname="Alice") == f"ECHO: {text}"
    sent = qq.onebot.sent(calls)
    assert [(c.action, c.params["user_id"]) for c in sent] == [("send_private_msg", ALICE)], sent
    assert bot.last_user_text(bot.turn_request(text, since)) == text
    seen = probe_of(bot, log, text)
    assert seen["unified_msg_origin"] == qq.private_umo(ALICE) == f"{qq.platform_id}:FriendMessage:{ALICE}"
    assert (seen["platform_name"], seen["platform_id"]) == ("aiocqhttp", qq.platform_id)
    assert (seen["sender_id"], seen["sender_name"], seen["group_id"]) == (str(ALICE), "Alice", ""), seen
    assert seen["self_id"] == str(qq.onebot.self_id), seen
    bot.assert_log_clean()


def test_a_group_message_that_ats_the_bot_is_answered_through_send_group_msg(qq, bot):
    since, log, calls = bot.mark(), bot.log_size(), qq.onebot.mark()
    text = "hello everyone in the group"
    assert qq.onebot.group(HIKERS, BOB, text, nickname="Bob", card="Bobby") == f"ECHO: {text}"
    sent = qq.onebot.sent(calls)
    assert [(c.action, c.params["group_id"]) for c in sent] == [("send_group_msg", HIKERS)], sent
    # AstrBot looked up whom the @ names (the bot) through the fake's API.
    looked_up = qq.onebot.calls("get_group_member_info", since=calls)
    assert [c.params["user_id"] for c in looked_up] == [qq.onebot.self_id], looked_up
    # The model is given the words without the @ of the bot.
    assert bot.last_user_text(bot.turn_request(text, since)) == text
    seen = probe_of(bot, log, text)
    assert seen["unified_msg_origin"] == qq.group_umo(HIKERS, BOB) == f"{qq.platform_id}:GroupMessage:{BOB}_{HIKERS}"
    # A member's group card is their name in the group.
    assert (seen["sender_id"], seen["sender_name"], seen["group_id"]) == (str(BOB), "Bobby", str(HIKERS)), seen
    bot.assert_log_clean()


def test_a_group_message_without_the_at_gets_no_reply_and_no_model_request(qq, bot):
    since, log, calls = bot.mark(), bot.log_size(), qq.onebot.mark()
    text = "just chatting among ourselves"
    qq.onebot.push_group(HIKERS, CAROL, text, at_bot=False, nickname="Carol")
    qq.wait_received(CAROL, text, log)
    qq.onebot.assert_no_reply(since=calls, seconds=2.0)
    assert bot.chat_requests(since) == [], bot.diag("a message without the @ reached the model")
    bot.assert_log_clean()


def test_with_unique_session_two_members_of_a_group_get_separate_conversations(qq, bot):
    alice_first, bob_first = "Alice's first words to the group", "Bob's first words to the group"
    qq.onebot.group(HIKERS, ALICE, alice_first, nickname="Alice")
    qq.onebot.group(HIKERS, BOB, bob_first, nickname="Bob")
    since = bot.mark()
    qq.onebot.group(HIKERS, ALICE, "Alice again", nickname="Alice")
    qq.onebot.group(HIKERS, BOB, "Bob again", nickname="Bob")
    # The history each member's turn carries is theirs alone ...
    alice_turns = history_texts(bot.turn_request("Alice again", since))
    bob_turns = history_texts(bot.turn_request("Bob again", since))
    assert any(alice_first in t for t in alice_turns), alice_turns
    assert not any(bob_first in t for t in alice_turns), alice_turns
    assert any(bob_first in t for t in bob_turns), bob_turns
    assert not any(alice_first in t for t in bob_turns), bob_turns
    # ... as AstrBot stored it: one conversation per member.
    alice_history = json.dumps(qq.history(qq.group_umo(HIKERS, ALICE)), ensure_ascii=False)
    bob_history = json.dumps(qq.history(qq.group_umo(HIKERS, BOB)), ensure_ascii=False)
    assert alice_first in alice_history and bob_first not in alice_history, alice_history
    assert bob_first in bob_history and alice_first not in bob_history, bob_history
    bot.assert_log_clean()


def cron_probe(bot, since: int) -> dict:
    found = [p for p in bot.event_probes(since) if p["event_class"] == "CronMessageEvent"]
    assert len(found) == 1, bot.diag(f"expected one cron run's probe, got {found}")
    return found[0]


def test_a_cron_job_for_a_private_session_runs_the_agent_and_speaks_through_onebot(qq, bot):
    log = bot.log_size()
    session = qq.private_umo(ALICE)
    run = qq.run_cron(session, "remind Alice to water the plants")
    assert run.sent.action == "send_private_msg" and run.sent.params["user_id"] == ALICE, run.sent
    # AstrBot woke the agent for that session (the fake model read the job from its prompt) ...
    assert run.requests[0]["tools"] and fake_openai.cron_job(run.requests[0]["messages"])["session"] == session
    # ... with a synthetic event of the "cron" platform, bound for the session.
    seen = cron_probe(bot, log)
    assert (seen["unified_msg_origin"], seen["platform_id"], seen["platform_name"]) == (session, qq.platform_id,
                                                                                         "cron"), seen
    assert (seen["sender_name"], seen["message_str"]) == ("Scheduler", "remind Alice to water the plants"), seen
    bot.assert_log_clean()


def test_a_cron_job_for_a_group_members_session_speaks_in_the_group(qq, bot):
    log = bot.log_size()
    session = qq.group_umo(HIKERS, ALICE)
    run = qq.run_cron(session, "remind the group about the hike")
    assert run.sent.action == "send_group_msg" and run.sent.params["group_id"] == HIKERS, run.sent
    seen = cron_probe(bot, log)
    assert (seen["unified_msg_origin"], seen["message_type"]) == (session, "GroupMessage"), seen
    bot.assert_log_clean()


def test_the_client_reconnects_after_its_connection_drops(qq, bot):
    before = qq.onebot.drop()
    assert qq.onebot.wait_connected(after=before) == before + 1
    text = "still there after the reconnect?"
    assert qq.onebot.private(BOB, text, nickname="Bob") == f"ECHO: {text}"
    bot.assert_log_clean()
