"""One AstrBot with the plugin in ``auto`` mode (and a
fixture plugin offering the ``get_weather`` tool)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e

WEATHER_RESULT = "FIXTURE-WEATHER: sunny, 21 degrees, light breeze"  # tests/e2e/fixture_plugins/ltm_test_tools


@pytest.fixture(scope="module")
def bot(bot_factory):
    config = {"write_policy": {"mode": "auto"}, "extraction": {"timeout_seconds": 1.0}}
    with bot_factory("auto", config, tools_plugin=True) as b:
        yield b


def test_auto_mode_injects_in_a_new_session_only_for_the_same_user(bot):
    said = "My name is Alice and I live in Paris"
    assert bot.chat(said, "alice", "t1-first") == f"ECHO: {said}"
    name, city = bot.wait_extracted("alice", ["name is Alice", "lives in Paris"], "active")
    assert name["type"] == city["type"] == "profile"

    # A NEW session of the same user: the request AstrBot sent carries the facts.
    since = bot.mark()
    question = "What do you know about me?"
    assert bot.chat(question, "alice", "t1-second") == f"ECHO: {question}"
    body = bot.turn_request(question, since)
    blocks = bot.memory_blocks(body)
    assert len(blocks) == 1, bot.diag(f"expected one memory block, got {blocks}")
    assert blocks[0]["note"], blocks[0]["text"]  # the block says what it is
    facts = {f.get("fact") for f in blocks[0]["facts"]}
    assert name["fact"] in facts and city["fact"] in facts, bot.diag(f"block lacks the facts: {blocks[0]['text']}")
    assert all(f.get("type") == "profile" for f in blocks[0]["facts"]), blocks[0]["text"]
    # The new session has no history: the memory block is the only way the facts got there.
    assert [m["role"] for m in body["messages"]] == ["system", "user"], body["messages"]

    # A different user's session gets nothing of Alice's.
    since = bot.mark()
    assert bot.chat(question, "bob", "t1-bob") == f"ECHO: {question}"
    bob_body = bot.turn_request(question, since)
    assert bot.memory_blocks(bob_body) == [], bot.diag(f"bob got a memory block: {bot.memory_blocks(bob_body)}")
    dumped = json.dumps(bob_body, ensure_ascii=False)
    assert "Paris" not in dumped and "Alice" not in dumped and bot.HEADER not in dumped
    bot.assert_log_clean()


def test_a_tool_result_is_recorded_as_a_tool_result_event(bot):
    question = "What's the weather like in Paris today?"
    since = bot.mark()
    reply = bot.chat(question, "wendy", "t6")
    assert reply == f"The tool said: {WEATHER_RESULT}", bot.diag(f"unexpected reply {reply!r}")
    # The model really called the fixture plugin's tool (a second call got its result).
    chats = bot.chat_requests(since)
    tool_messages = [m for b in chats for m in b["messages"] if m.get("role") == "tool"]
    assert any(WEATHER_RESULT in json.dumps(m.get("content"), ensure_ascii=False) for m in tool_messages), chats

    umo = bot.umo("wendy", "t6")
    tool_events = bot.wait_for(
        lambda: [e for e in bot.events(session_umo=umo) if e["source_type"] == "tool_result"],
        10, "a tool_result event")
    assert len(tool_events) == 1, bot.diag(f"expected one tool_result event, got {tool_events}")
    event = tool_events[0]
    assert event["source_role"] == "tool"
    assert event["content"]["tool"] == "get_weather", event
    assert event["content"]["args"] == {"city": "Paris"}, event
    assert event["content"]["result"] == WEATHER_RESULT, event
    assert event["scope"] == "user" and event["scope_id"] == "webchat:wendy", event
    # The whole turn: the user's message, the tool result, the answer (the turn's two messages are
    # recorded after the reply, the tool result as it comes: wait for the recorder's flush).
    whole = [("message", "assistant"), ("message", "user"), ("tool_result", "tool")]
    bot.wait_for(lambda: sorted((e["source_type"], e["source_role"]) for e in bot.events(session_umo=umo)) == whole,
                 10, "the turn's messages beside its tool result")
    kinds = sorted((e["source_type"], e["source_role"]) for e in bot.events(session_umo=umo))
    assert kinds == whole, kinds
    bot.assert_log_clean()


def _assert_failed_extraction_keeps_events_pending(bot, user: str, said: str, error_hint: str) -> None:
    since = bot.mark()
    assert bot.chat(said, user, f"t7-{user}-1") == f"ECHO: {said}"

    def failed_once():
        events = [e for e in bot.events(user) if e["source_role"] == "user"]
        return events if events and all(e["attempts"] >= 1 for e in events) else None

    events = bot.wait_for(failed_once, 20, f"a failed extraction attempt for {user}")
    for e in bot.events(user):
        assert e["extraction_status"] == "pending", e
    for e in events:
        assert e["last_error"] and error_hint in e["last_error"], e
        assert e["next_attempt_at"], e
    assert bot.extraction_requests(since, containing=said), "the extraction was never even tried"
    assert bot.items(user) == []

    # The chat itself keeps working while extraction fails.
    again = "Are you still there?"
    assert bot.chat(again, user, f"t7-{user}-2") == f"ECHO: {again}"
    assert bot.items(user) == []


def test_an_extraction_error_keeps_events_pending_then_retries(bot):
    # A 4xx error: AstrBot does not retry it itself, so the plugin sees the
    # provider's error (a 5xx is retried by AstrBot for ~15 s and reaches the
    # plugin as a timeout, the case of the next test).
    bot.control(extraction="error", error_status=400)
    try:
        _assert_failed_extraction_keeps_events_pending(
            bot, "carol", "My name is Carol and I live in Rome", "fake outage")
    finally:
        bot.control(extraction="rules", error_status=500)
    # A later run extracts them: the worker retries after its backoff.
    bot.wait_extracted("carol", ["name is Carol", "lives in Rome"], "active", timeout=30)
    assert all(e["extraction_status"] == "done" for e in bot.events("carol"))
    assert max(e["attempts"] for e in bot.events("carol")) >= 1
    bot.assert_log_clean()


def test_an_extraction_timeout_keeps_events_pending_then_retries(bot):
    # The fake answers after 4 s; the plugin gives up after extraction.timeout_seconds (1 s).
    bot.control(extraction="timeout", timeout_seconds=4)
    try:
        _assert_failed_extraction_keeps_events_pending(
            bot, "dave", "My name is Dave and I live in Cairo", "Timeout")
    finally:
        bot.control(extraction="rules")
    bot.wait_extracted("dave", ["name is Dave", "lives in Cairo"], "active", timeout=30)
    assert all(e["extraction_status"] == "done" for e in bot.events("dave"))
    bot.assert_log_clean()


def test_a_chinese_conversation_is_remembered_and_injected(bot):
    said = "我叫小明，住在上海"
    assert bot.chat(said, "xiaoming", "t8-first") == f"ECHO: {said}"
    name, city = bot.wait_extracted("xiaoming", ["名字是小明", "住在上海"], "active")

    since = bot.mark()
    question = "你还记得我吗？"
    assert bot.chat(question, "xiaoming", "t8-second") == f"ECHO: {question}"
    body = bot.turn_request(question, since)
    blocks = bot.memory_blocks(body)
    assert len(blocks) == 1, bot.diag(f"expected one memory block, got {blocks}")
    facts = {f.get("fact") for f in blocks[0]["facts"]}
    assert name["fact"] in facts and city["fact"] in facts, bot.diag(f"block lacks the facts: {blocks[0]['text']}")
    assert "小明" in blocks[0]["text"] and "上海" in blocks[0]["text"]
    bot.assert_log_clean()


def test_a_changed_fact_supersedes_across_languages_and_the_person_is_named_not_the_login(bot):
    # The web chat gives the login ("ming") as the sender's id and name: not a name.
    for n, said in enumerate(["我叫小明，住在上海", "My name is Alice and I live in Paris", "I live in Berlin"]):
        assert bot.chat(said, "ming", f"t9-{n}") == f"ECHO: {said}"
        bot.wait_said_and_extracted("ming", said)
    items = bot.items("ming")
    current = [i for i in items if i["status"] != "superseded"]
    cities = [i for i in items if i["fact_key"].endswith("home_city")]
    assert [c["fact"] for c in cities] == ["小明住在上海", "Alice lives in Paris", "Alice lives in Berlin"], items
    # the old values are history, each closed by the next; only Berlin is current
    assert [c["status"] for c in cities] == ["superseded", "superseded", "active"], cities
    assert cities[0]["superseded_by"] == cities[1]["memory_id"] and cities[1]["superseded_by"] == cities[2]["memory_id"]
    assert cities[2]["supersedes"] == cities[1]["memory_id"] and cities[0]["valid_to"] and not cities[2]["valid_to"]
    assert not any("ming" in i["fact"] for i in items), [i["fact"] for i in items]
    assert any(i["fact"] == "Alice's name is Alice" for i in current), [i["fact"] for i in current]

    since = bot.mark()
    question = "Where do I live?"
    assert bot.chat(question, "ming", "t9-new") == f"ECHO: {question}"
    (block,) = bot.memory_blocks(bot.turn_request(question, since))
    assert "Berlin" in block["text"], bot.diag(block["text"])
    assert "上海" not in block["text"] and "Paris" not in block["text"], bot.diag(block["text"])
    bot.assert_log_clean()
