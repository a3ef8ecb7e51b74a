"""The memory tools, called by the (fake) model in a real AstrBot: the
model answers ``call <tool> {json}`` with that tool call, and replies "The
tool said: …" with what the tool returned."""

from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def auto_bot(bot_factory):
    with bot_factory("tools-auto", {"write_policy": {"mode": "auto"}}) as b:
        yield b


@pytest.fixture(scope="module")
def shadow_bot(bot_factory):
    with bot_factory("tools-shadow", {}) as b:  # the default mode: shadow
        yield b


def call(tool: str, **args: str) -> str:
    return f"call {tool} {json.dumps(args, ensure_ascii=False)}"


def test_the_tools_are_offered_to_the_model(auto_bot):
    since = auto_bot.mark()
    auto_bot.chat("hello", "tina", "tools-0")
    offered = {t["function"]["name"] for t in auto_bot.turn_request("hello", since).get("tools") or []}
    assert {"memory_search", "memory_remember", "memory_expand"} <= offered, offered


def test_a_search_finds_what_an_earlier_conversation_stored_and_nothing_of_another_user(auto_bot):
    auto_bot.chat("My name is Alice and I live in Paris", "alice", "tools-1")
    auto_bot.chat("My name is Bob and I live in Rome", "bob", "tools-2")
    auto_bot.wait_extracted("alice", ["lives in Paris"], "active")
    auto_bot.wait_extracted("bob", ["lives in Rome"], "active")

    # a new conversation: the search reaches what the first one stored
    reply = auto_bot.chat(call("memory_search", query="where do I live"), "alice", "tools-3")
    assert reply.startswith("The tool said: "), auto_bot.diag(reply)
    assert "Alice lives in Paris" in reply and "Rome" not in reply and "Bob" not in reply, reply
    assert "[Long-term Memory]" in reply  # the block's format, neutralised lines

    # Bob searching for Alice's city gets only his own
    reply = auto_bot.chat(call("memory_search", query="Alice Paris lives"), "bob", "tools-4")
    assert "Paris" not in reply and "Alice" not in reply, reply

    # the ids on the lines open the turns behind a memory; another user's id opens nothing
    found = re.search(r"Alice lives in Paris \(confidence: [\d.]+\) #(\d+)", reply_of_alice := auto_bot.chat(
        call("memory_search", query="Paris"), "alice", "tools-5"))
    assert found, reply_of_alice
    sources = auto_bot.chat(call("memory_expand", id="#" + found.group(1)), "alice", "tools-6")
    assert "My name is Alice and I live in Paris" in sources, sources
    refused = auto_bot.chat(call("memory_expand", id="#" + found.group(1)), "bob", "tools-7")
    assert "Paris" not in refused and "No memory" in refused, refused
    auto_bot.assert_log_clean()


def test_memory_remember_in_shadow_mode_stores_a_shadow_memory(shadow_bot):
    reply = shadow_bot.chat(call("memory_remember", fact="I am allergic to peanuts"), "carl", "tools-8")
    assert "Stored for review" in reply, shadow_bot.diag(reply)
    (item,) = shadow_bot.wait_for(lambda: shadow_bot.items("carl") or None, 20, "the remembered fact")
    assert item["status"] == "shadow" and "allergic to peanuts" in item["fact"], item
    # shadow memories are never returned by a search
    reply = shadow_bot.chat(call("memory_search", query="peanuts allergy"), "carl", "tools-9")
    assert "allergic" not in reply, reply
    shadow_bot.assert_log_clean()
