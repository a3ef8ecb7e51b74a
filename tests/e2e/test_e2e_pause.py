"""A user's ``/ltm pause`` holds against an operator's policy rollback, in a
real AstrBot (operating/pauses.py).

- the user pauses through the chat API: no policy version is made, the
  pause is listed by ``GET pauses``;
- the operator previews a rollback (``dry_run``) and makes it through the
  plugin API;
- the user's next fact is not even recorded (a pause means forgotten: no
  extraction call sees it, nothing can bring it up) while another user's is
  learnt; ``/ltm status`` says learning is paused;
- ``/ltm resume`` says learning is back on, and the next fact is learned.
"""

from __future__ import annotations

import pytest
from test_e2e_dashboard_api import ok  # type: ignore[import-not-found]  # a sibling test module

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def bot(bot_factory):
    with bot_factory("pause", {"write_policy": {"mode": "auto"}}) as b:
        yield b


def test_a_users_pause_holds_through_an_operators_rollback(bot):
    changed = ok(bot, "PUT", "policy", {"read_policy": {"max_items": 7}, "reason": "fewer lines"})
    assert changed["version"] == 2

    answer = bot.chat("/ltm pause", "dana", "pz-1")
    assert "paused" in answer, answer
    assert ok(bot, "GET", "policy/history")["total"] == 2  # pausing is no policy version
    (listed,) = ok(bot, "GET", "pauses")["items"]
    assert listed["scope"] == "user:webchat:dana" and listed["by"] == "user:dana", listed

    preview = ok(bot, "POST", "policy/rollback", {"version": 1, "dry_run": True})
    assert [{k: c[k] for k in ("path", "from", "to")} for c in preview["diff"]] == [
        {"path": "read_policy.max_items", "from": 7, "to": 15}], preview
    assert ok(bot, "GET", "policy/history")["total"] == 2  # the preview wrote nothing
    rolled = ok(bot, "POST", "policy/rollback", {"version": 1, "reason": "back to the start"})
    assert rolled["changed"] is True and rolled["version"] == 3

    since = bot.mark()
    bot.chat("My name is Dana and I live in Lisbon", "dana", "pz-2")
    bot.chat("My name is Erin and I live in Cork", "erin", "pz-3")
    bot.wait_extracted("erin", ["name is Erin", "lives in Cork"], "active")  # erin's, said after dana's, is in
    assert not [e for e in bot.events("dana") if "Lisbon" in e["content"].get("text", "")]
    assert bot.items("dana") == []
    assert bot.extraction_requests(since, containing="Lisbon") == []
    status = bot.chat("/ltm status", "dana", "pz-2")
    assert "Learning about you is paused (since" in status, status
    view = ok(bot, "GET", "user?scope=user:webchat:dana")
    assert view["paused"]["by"] == "user:dana" and view["memories"]["total"] == 0

    assert "back on" in bot.chat("/ltm resume", "dana", "pz-4")
    bot.chat("I love sourdough bread", "dana", "pz-4")
    bot.wait_extracted("dana", ["sourdough"], "active")
    assert not any("Lisbon" in i["fact"] for i in bot.items("dana"))
    assert ok(bot, "GET", "pauses")["items"] == []
    bot.assert_log_clean()
