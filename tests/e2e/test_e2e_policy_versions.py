"""Policy versions, rollback and the per-scope write switch against a real
AstrBot (docs/decisions.md#d51, #d52).

- a change saved through AstrBot's plugin config API (what its WebUI's
  config page calls; AstrBot then reloads the plugin) appears in
  ``policy/history`` as a ``webui-config`` version with its diff;
- a rollback restores the exact earlier policy, saved to the plugin's
  config, and the very next turn is served by it (reads off → no block;
  rolled back → the block is back);
- a scope whose writes are off records its turns but learns nothing from
  them while another scope learns as usual; back on, it learns again;
- the review page's history panel rolls back and the statistics rows'
  switch turns a scope's writes off, in headless Chromium (screenshots in
  tests/artifacts).
"""

from __future__ import annotations

import pytest
from review_browser import (  # type: ignore[import-not-found]
    ARTIFACTS,
    open_review_page,
    screenshot_on_failure,
)
from test_e2e_dashboard_api import ok  # type: ignore[import-not-found]  # a sibling test module

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def bot(bot_factory):
    with bot_factory("policy-versions", {"write_policy": {"mode": "auto"}}) as b:
        yield b


def history(bot) -> dict:
    return ok(bot, "GET", "policy/history")


def policy_now(bot) -> dict:
    data = ok(bot, "GET", "policy")
    return {k: data[k] for k in ("enable", "emergency_read_only", "write_policy", "read_policy")}


def blocks_for(bot, question: str, user: str, session: str) -> list[dict]:
    since = bot.mark()
    assert bot.chat(question, user, session) == f"ECHO: {question}"
    return bot.memory_blocks(bot.turn_request(question, since))


def test_a_webui_config_change_is_a_version_and_a_rollback_restores_it_at_once(bot):
    first = history(bot)
    assert first["total"] == 1 and first["current"] == 1, first
    assert first["versions"][0]["source"] == "startup" and first["versions"][0]["diff"] == []

    # The WebUI's config page: the whole config saved, AstrBot reloads the plugin.
    config = bot.get_plugin_config()
    config["read_policy"]["max_items"] = 7
    bot.put_plugin_config(config)
    seen = bot.wait_for(lambda: (h := history(bot))["total"] == 2 and h, 30, "the webui-config version")
    latest = seen["versions"][0]
    assert latest["version"] == 2 and latest["source"] == "webui-config", latest
    assert raw(latest["diff"]) == [{"path": "read_policy.max_items", "from": 15, "to": 7}]
    assert latest["diff"][0]["text"] == "Max memories injected: 15 → 7"  # the settings form's name, in words
    v2 = ok(bot, "GET", "policy/history/2")["policy"]
    assert v2 == policy_now(bot)
    audit = ok(bot, "GET", "audit?action=config")["entries"][0]
    assert audit["detail"]["version"] == 2 and audit["detail"]["source"] == "webui-config"

    bot.chat("My name is Alice and I live in Paris", "alice", "pv-1")
    bot.wait_extracted("alice", ["name is Alice", "lives in Paris"], "active")
    assert len(blocks_for(bot, "Where do I live, do you know?", "alice", "pv-2")) == 1

    # Reads off through the API: the next turn has no block.
    changed = ok(bot, "PUT", "policy", {"read_policy": {"enable": False}, "reason": "testing reads off"})
    assert changed["version"] == 3 and changed["read_policy"]["enable"] is False
    assert blocks_for(bot, "Tell me where I live please", "alice", "pv-3") == []

    # Roll back to version 2: exactly its policy, saved, and in force for the next turn.
    result = ok(bot, "POST", "policy/rollback", {"version": 2, "reason": "reads are needed"})
    assert result["changed"] is True and result["version"] == 4 and result["rollback_of"] == 2
    assert policy_now(bot) == v2
    assert bot.get_plugin_config()["read_policy"]["enable"] is True  # the saved config: survives a restart
    assert len(blocks_for(bot, "Where is my home again?", "alice", "pv-4")) == 1
    (rolled, *_) = history(bot)["versions"]
    assert rolled["source"] == "rollback" and rolled["rollback_of"] == 2 and rolled["actor"] == "operator:astrbot"
    assert rolled["reason"] == "rollback to version 2: reads are needed"
    assert {"path": "read_policy.enable", "from": False, "to": True} in raw(rolled["diff"])
    assert "Policy version 4" in bot.admin_chat("/ltm policy", "pv-admin")
    bot.assert_log_clean()


def test_a_disabled_scope_learns_nothing_while_another_scope_does(bot):
    answer = bot.admin_chat("/ltm writes off webchat:bob", "pv-admin")
    assert "off" in answer, answer
    latest = history(bot)["versions"][0]
    assert latest["source"] == "command" and raw(latest["diff"]) == [
        {"path": "write_policy.disabled_scopes", "from": [], "to": ["user:webchat:bob"]}]
    since = bot.mark()
    bot.chat("My name is Bob and I live in Oslo", "bob", "pv-bob")
    bot.chat("My name is Carol and I live in Rome", "carol", "pv-carol")
    bot.wait_extracted("carol", ["name is Carol", "lives in Rome"], "active")
    events = bot.wait_for(lambda: (e := bot.events("bob")) and len(e) >= 2 and e, 20, "bob's turn recorded")
    assert {e["extraction_status"] for e in events} == {"skipped"}
    assert bot.items("bob") == []
    assert bot.extraction_requests(since, containing="Oslo") == []
    refused = bot.chat("/ltm remember I like coffee", "bob", "pv-bob")
    assert "switched off" in refused, refused
    assert bot.items("bob") == []

    # Back on: what bob says now is learned; what he said while off is not.
    assert "back on" in bot.admin_chat("/ltm writes on webchat:bob", "pv-admin")
    bot.chat("I live in Lima now", "bob", "pv-bob-2")
    bot.wait_extracted("bob", ["lives in Lima"], "active")
    assert not any("Oslo" in i["fact"] for i in bot.items("bob"))
    bot.assert_log_clean()


def test_the_history_panel_rolls_back_and_the_stats_row_switches_writes_in_a_browser(bot, tab):
    before = history(bot)
    v1 = ok(bot, "GET", "policy/history/1")["policy"]
    with screenshot_on_failure(tab, "review_page_policy_failure.png"):
        open_review_page(bot, tab)
        tab.click("[data-testid=tab-history]")
        rows = tab.wait(lambda: tab.frame("document.querySelectorAll('[data-testid=history-row]').length"),
                        "the policy versions")
        assert rows == before["total"]
        current = tab.frame("document.querySelector('[data-testid=history-row][data-current=\"1\"]')"
                            ".getAttribute('data-version')")
        assert current == str(before["current"])
        assert tab.frame("document.querySelector('[data-testid=history-row][data-version=\"2\"] "
                         "[data-testid=history-diff]').textContent") == "Max memories injected: 15 → 7"
        tab.type("#history-reason", "back to the first policy")
        tab.click('[data-testid=history-row][data-version="1"] [data-testid=history-rollback]')
        tab.wait(lambda: tab.frame("!document.querySelector('#modal').hidden"), "the confirmation dialog")
        tab.click("[data-testid=modal-confirm]")
        bot.wait_for(lambda: history(bot)["total"] == before["total"] + 1, 15, "the rollback version")
        assert policy_now(bot) == v1
        newest = history(bot)["versions"][0]
        assert newest["rollback_of"] == 1 and newest["reason"] == "rollback to version 1: back to the first policy"
        tab.wait(lambda: tab.frame("document.querySelector('[data-testid=history-row][data-current=\"1\"]')"
                                   ".getAttribute('data-version')") == str(newest["version"]), "the new current row")
        tab.screenshot(ARTIFACTS / "review_page_policy_history.png")

        # The statistics rows: carol's writes off with the switch.
        tab.click("[data-testid=tab-stats]")
        switch = '[data-testid=writes-switch][data-scope="user:webchat:carol"]'
        tab.wait(lambda: tab.frame(f"!!document.querySelector('{switch}')"), "carol's write switch")
        assert tab.frame(f"document.querySelector('{switch} input').checked") is True
        tab.click(switch)
        bot.wait_for(lambda: "user:webchat:carol" in policy_now(bot)["write_policy"]["disabled_scopes"], 15,
                     "carol's writes off")
        assert history(bot)["versions"][0]["source"] == "page"
        tab.wait(lambda: tab.frame(f"document.querySelector('{switch} [data-testid=writes-label]').textContent")
                 == "off", "the switch to say off")
        tab.screenshot(ARTIFACTS / "review_page_writes_switch.png")

        # Chinese and the dark theme.
        open_review_page(bot, tab, locale="zh-CN", theme="dark")
        assert tab.frame("document.querySelector('#tab-history').textContent") == "策略历史"
        tab.click("[data-testid=tab-history]")
        tab.wait(lambda: tab.frame("document.querySelectorAll('[data-testid=history-row]').length"), "the versions")
        tab.screenshot(ARTIFACTS / "review_page_policy_history_dark_zh.png")
        assert tab.page_errors() == []
    bot.assert_log_clean()


def raw(diff: list[dict]) -> list[dict]:
    """A diff as stored: each change's path and values (the API adds their words)."""
    return [{k: c[k] for k in ("path", "from", "to")} for c in diff]
