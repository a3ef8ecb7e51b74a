"""The injection preview in a real AstrBot: ``POST preview`` through AstrBot's
web layer answers the very block the model is then given when that user
sends that message, and writes nothing; ``GET items?q=<one character>``
finds the facts holding it."""

from __future__ import annotations

import json
import urllib.parse

import pytest

from devtools.astrbot_home import Client

pytestmark = pytest.mark.e2e
MAIN = Client.plugin_api()
LEGACY = "/api/plug/astrbot_plugin_ltm"


def call(bot, method: str, route: str, body=None, prefix: str = MAIN) -> tuple[int, dict]:
    """(HTTP status, JSON body) of one API call with the dashboard login."""
    route = urllib.parse.quote(route, safe="/?&=:,%")
    with bot.client.request(method, f"{prefix}/{route}", body, auth="jwt", raw=True) as resp:
        status, text = resp.status, resp.read().decode()
    assert "Traceback" not in text, text[:2000]
    return status, json.loads(text)


def ok(bot, method: str, route: str, body=None) -> dict:
    status, payload = call(bot, method, route, body)
    assert status == 200 and payload.get("status") == "ok", bot.diag(f"{method} {route}: {status} {payload}")
    return payload["data"]


@pytest.fixture(scope="module")
def bot(bot_factory):
    config = {"write_policy": {"mode": "auto"}, "extraction": {"timeout_seconds": 1.0}}
    with bot_factory("preview", config) as b:
        b.chat("My name is Alice and I live in Paris", "alice", "pv-1")
        b.chat("我叫小明，住在北京", "xiaoming", "pv-2")
        b.wait_extracted("alice", ["name is Alice", "lives in Paris"], "active")
        b.wait_extracted("xiaoming", ["名字是小明", "住在北京"], "active")
        b.wait_for(lambda: b.unembedded() == 0, 20, "every memory and turn to be embedded")
        yield b


def test_the_preview_is_the_block_the_model_is_then_given(bot):
    question = "What do you know about me?"
    before = bot.ltm_counts()
    shown = ok(bot, "POST", "preview", {"scope": "user:webchat:alice", "message": question})
    assert bot.ltm_counts() == before  # nothing written
    assert "lives in Paris" in shown["text"] and shown["tokens"] > 0, shown
    assert {line["source"] for line in shown["lines"]} <= {"memory", "summary", "turn", "last_time"}
    assert any(line["source"] == "memory" and "Paris" in line["text"] for line in shown["lines"]), shown["lines"]

    since = bot.mark()
    assert bot.chat(question, "alice", "pv-new") == f"ECHO: {question}"
    blocks = bot.memory_blocks(bot.turn_request(question, since))
    assert len(blocks) == 1, bot.diag(f"expected one memory block, got {blocks}")
    assert blocks[0]["text"] == shown["text"], bot.diag(f"preview {shown['text']!r}\nsent {blocks[0]['text']!r}")
    bot.assert_log_clean()


def test_a_preview_request_is_refused_clearly_at_every_prefix(bot):
    status, payload = call(bot, "POST", "preview", {"scope": "user:webchat:alice", "message": ""})
    assert status == 400 and payload["status"] == "error" and "message" in payload["message"]
    status, payload = call(bot, "POST", "preview", {"scope": "user:", "message": "hi"}, prefix=LEGACY)
    assert status == 400 and "scope" in payload["message"]
    # alice named as a chat shows her (her id alone) is alice
    status, payload = call(bot, "POST", "preview", {"scope": "alice", "message": "hi"}, prefix=LEGACY)
    assert status == 200 and payload["data"]["scope"] == "user:webchat:alice", payload


def test_one_chinese_character_finds_the_facts_holding_it(bot):
    found = ok(bot, "GET", "items?q=京")
    assert any("北京" in i["fact"] for i in found["items"]), found
