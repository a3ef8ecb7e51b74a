"""A real AstrBot whose extraction model answers like a smaller model:
prose and a code fence around the JSON, and never an ``updates`` mark
(the fake model's ``unmarked`` mode). A changed fact must still leave only
its new value in the next prompt, and one the words cannot confirm reaches
the operator on the review page (docs/decisions.md#d74, #d89, #d90)."""

from __future__ import annotations

import pytest

# A sibling helper module (pytest puts this folder on sys.path; mypy does not know it).
from review_browser import open_review_page, screenshot_on_failure  # type: ignore[import-not-found]

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def bot(bot_factory):
    with bot_factory("unmarked", {"write_policy": {"mode": "auto"}}) as b:
        b.control(extraction="unmarked")
        yield b


def test_a_move_the_model_does_not_mark_leaves_only_the_new_city_in_the_next_prompt(bot):
    user = "xm"
    said = "我叫小明，住在上海"
    assert bot.chat(said, user, "u1-first") == f"ECHO: {said}"
    bot.wait_extracted(user, ["住在上海"], "active")

    moved = "I moved to Berlin last month"
    since = bot.mark()
    assert bot.chat(moved, user, "u1-moved") == f"ECHO: {moved}"
    bot.wait_extracted(user, ["lives in Berlin"], "active")
    # The model saw Shanghai as a known fact and still marked nothing: the writer decided alone.
    (asked,) = bot.extraction_requests(since, containing=moved)
    assert "住在上海" in str(asked["messages"]), asked
    cities = [i for i in bot.items(user) if i["fact_key"].endswith("home_city")]
    assert [(c["fact"], c["status"]) for c in cities] == [("小明住在上海", "superseded"),
                                                         ("小明 lives in Berlin", "active")], cities
    assert cities[0]["superseded_by"] == cities[1]["memory_id"], cities

    since = bot.mark()
    question = "Where do I live now?"
    assert bot.chat(question, user, "u1-new") == f"ECHO: {question}"
    (block,) = bot.memory_blocks(bot.turn_request(question, since))
    assert "Berlin" in block["text"], bot.diag(block["text"])
    assert "上海" not in block["text"], bot.diag(block["text"])
    bot.assert_log_clean()


def test_an_update_the_words_cannot_confirm_is_listed_for_review_on_the_page(bot, tab, tmp_path):
    # One fact in English, one in Chinese, sharing only the name: the words cannot tell
    # whether the value changed.
    user = "ann"
    for n, said in enumerate(["My name is Ann and I live in Paris", "我住在上海"]):
        assert bot.chat(said, user, f"u2-{n}") == f"ECHO: {said}"
        bot.wait_said_and_extracted(user, said)
    cities = [i for i in bot.items(user) if i["fact_key"].endswith("home_city")]
    assert [(c["fact"], c["status"]) for c in cities] == [("Ann lives in Paris", "superseded"),
                                                         ("Ann住在上海", "active")], cities  # the newest shown
    with screenshot_on_failure(tab, "review_page_flagged_failure.png"):
        open_review_page(bot, tab)
        tab.click("[data-testid=tab-audit]")
        tab.click("[data-testid=audit-flagged]")
        tab.click("#audit-form button[type=submit]")
        rows = "Array.from(document.querySelectorAll('[data-testid=audit-row]'))"
        tab.wait(lambda: tab.frame(f"{rows}.length === 1 && {rows}[0].dataset.action === 'supersede'"),
                 "only the flagged update in the audit log")
        text = tab.frame(f"{rows}[0].textContent")
        assert "Ann住在上海" in text and "Flagged for review" in text, text
        tab.screenshot(tmp_path / "flagged.png")
        assert tab.page_errors() == []
    bot.assert_log_clean()
