"""The memory block is sent to the model but never stored in the
conversation history AstrBot keeps, in both injection positions."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e

TURNS = ["Hello there", "What is my name?", "Where do I live?", "Thanks, bye"]


@pytest.fixture(scope="module", params=["context_message", "system_prompt"])
def bot(bot_factory, request):
    config = {"write_policy": {"mode": "auto"}, "read_policy": {"injection_position": request.param}}
    with bot_factory(f"history-{request.param}", config) as b:
        b.position = request.param
        yield b


def test_history_never_stores_the_memory_block_in_either_position(bot):
    assert bot.get_plugin_config()["read_policy"]["injection_position"] == bot.position
    said = "My name is Dora and I live in Rome"
    assert bot.chat(said, "dora", "t9-seed") == f"ECHO: {said}"
    name, city = bot.wait_extracted("dora", ["name is Dora", "lives in Rome"], "active")

    session = "t9-history"
    for n, text in enumerate(TURNS, start=1):
        since = bot.mark()
        assert bot.chat(text, "dora", session) == f"ECHO: {text}"
        body = bot.turn_request(text, since)
        messages = body["messages"]
        # Earlier turns of this session are replayed: 1 system + 2 per turn + this one.
        assert len(messages) == 2 * n, [m["role"] for m in messages]
        blocks = bot.memory_blocks(body)
        assert len(blocks) == 1, bot.diag(f"turn {n}: expected exactly one memory block, got {len(blocks)}")
        block = blocks[0]
        assert {f.get("fact") for f in block["facts"]} >= {name["fact"], city["fact"]}, block["text"]
        if bot.position == "system_prompt":
            assert block["message_index"] == 0 and block["role"] == "system" and block["starts_part"], block
        else:
            assert block["message_index"] == len(messages) - 1 and block["role"] == "user", block
            assert block["part_index"] == 0 and block["starts_part"], block
            assert bot.last_user_text(body) == text

    history = bot.history("dora", session)
    assert [m["role"] for m in history] == ["user", "assistant"] * len(TURNS), history
    dumped = json.dumps(history, ensure_ascii=False)
    for marker in (bot.HEADER, bot.FOOTER, name["fact"], city["fact"], "(confidence:"):
        assert marker not in dumped, bot.diag(f"{marker!r} leaked into the stored history: {dumped}")
    users = [m["content"] if isinstance(m["content"], str) else " ".join(p.get("text", "") for p in m["content"])
             for m in history if m["role"] == "user"]
    assert users == TURNS, users
    bot.assert_log_clean()
