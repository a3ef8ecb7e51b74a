"""The drift detector against a real AstrBot: the daily snapshot taken at
start, ``GET drift`` at both route prefixes, a policy change framed by a
snapshot before and after it, an alarm when the store's distribution moves,
and the review page's drift chart and banner in headless Chromium (a
screenshot in tests/artifacts, light and dark)."""

from __future__ import annotations

import sqlite3

import pytest

# Sibling modules (pytest puts tests/e2e on sys.path; mypy does not know it): the browser driver, the API helpers.
from review_browser import (  # type: ignore[import-not-found]
    ARTIFACTS,
    open_review_page,
    screenshot_on_failure,
)
from test_e2e_dashboard_api import LEGACY, PREFIXES, ok, refused  # type: ignore[import-not-found]

pytestmark = pytest.mark.e2e

ITEMS = 24  # above the alarm's minimum store (drift_monitor.MIN_ITEMS_FOR_ALARM)


@pytest.fixture(scope="module")
def bot(bot_factory):
    with bot_factory("drift", {}) as b:
        yield b


def drift(bot, prefix: str = PREFIXES[0], query: str = "") -> dict:
    return ok(bot, "GET", f"drift{query}", prefix=prefix)


def change_policy(bot, body: dict) -> dict:
    return ok(bot, "POST", "policy", body, prefix=LEGACY)


def seed(bot, status: str) -> None:
    """Test setup straight into AstrBot's database: a store big enough to alarm."""
    db = sqlite3.connect(bot.db_path, timeout=30)
    try:
        with db:
            db.execute("DELETE FROM ltm_items WHERE memory_id LIKE 'drift-%'")
            db.executemany(
                "INSERT INTO ltm_items (memory_id, scope, scope_id, type, fact, fact_key, confidence, importance, "
                "evidence_count, status, awaiting_approval, created_at, updated_at) VALUES (?, 'user', "
                "'webchat:drift', 'profile', ?, ?, 0.8, 0.5, 1, ?, 0, '2026-11-25 10:00:00', '2026-11-25 10:00:00')",
                [(f"drift-{i}", f"Drift fact {i}", f"drift fact {i}", status) for i in range(ITEMS)])
    finally:
        db.close()


def test_the_daily_snapshot_is_taken_at_start_and_get_drift_answers_at_both_prefixes(bot):
    bot.wait_for(lambda: bot.query("SELECT count(*) AS n FROM ltm_drift_snapshots WHERE trigger='daily'")[0]["n"] == 2,
                 what="the daily snapshot of users and groups")
    for prefix in PREFIXES:
        data = drift(bot, prefix, "?page_size=200")
        daily = [s for s in data["snapshots"] if s["trigger"] == "daily"]
        assert sorted(s["scope_kind"] for s in daily) == ["group", "user"], (prefix, data)
        assert data["threshold"] == 0.9 and data["auto_rollback"] is False and data["alarms"] == []
        # compared with the snapshots around the first start's policy version: nothing changed since
        assert all(s["similarity"] is None or s["similarity"] >= data["threshold"] for s in daily), daily
    assert "scope" in refused(bot, 400, "GET", "drift?scope=planet", prefix=PREFIXES[-1])
    assert bot.client.request("GET", f"{PREFIXES[-1]}/stats")["data"]["drift"]["latest_alarm"] is None
    bot.assert_log_clean()


def test_a_policy_change_is_framed_by_a_snapshot_before_and_after(bot):
    before = drift(bot)["total"]
    change_policy(bot, {"read_policy": {"max_items": 12}})
    data = drift(bot)
    assert data["total"] == before + 4
    assert [s["trigger"] for s in data["snapshots"][:4]] == ["after", "after", "before", "before"]
    change_policy(bot, {"read_policy": {"max_items": 15}})
    bot.assert_log_clean()


def test_a_moved_distribution_raises_an_alarm_shown_as_a_chart_and_banner(bot, tab):
    seed(bot, "shadow")
    change_policy(bot, {"write_policy": {"mode": "auto"}})  # snapshots of the shadow store
    seed(bot, "active")  # as if auto mode had made every memory live
    mark = bot.log_size()
    change_policy(bot, {"write_policy": {"mode": "shadow"}})  # its "before" snapshot sees the change
    data = drift(bot, PREFIXES[-1])
    (alarm,) = data["alarms"]
    assert alarm["scope_kind"] == "user" and alarm["trigger"] == "before"
    assert alarm["similarity"] == pytest.approx(0.75, abs=0.01) and alarm["features"]["items"] == ITEMS
    assert data["latest_alarm"]["id"] == alarm["id"]
    assert bot.client.request("GET", f"{PREFIXES[0]}/stats")["data"]["drift"]["latest_alarm"]["id"] == alarm["id"]
    assert "drift alarm" in bot.log_text(mark)
    with screenshot_on_failure(tab, "review_page_drift_failure.png"):
        for theme in ("light", "dark"):
            open_review_page(bot, tab, theme=theme)
            banner = tab.wait(lambda: tab.frame(
                "(() => { const b = document.querySelector('[data-testid=drift-banner]');"
                " return b && !b.hidden ? b.textContent : null; })()"), "the drift banner")
            assert "Drift alarm" in banner and "similarity 0.750" in banner
            tab.click("[data-testid=tab-drift]")
            tab.wait(lambda: tab.frame("document.querySelector('#panel-drift')?.getAttribute('data-loaded')"),
                     "the drift panel")
            chart = tab.frame(
                "(() => { const c = document.querySelector('[data-testid=drift-chart]');"
                " const th = c.querySelector('[data-testid=drift-threshold]');"
                " const user = c.querySelector('[data-testid=drift-line-user]');"
                " return { points: +c.getAttribute('data-points'), threshold: !!th,"
                " stroke: getComputedStyle(user).stroke, alarms: c.querySelectorAll('.drift-alarm').length,"
                " width: c.getBoundingClientRect().width,"
                " rows: document.querySelectorAll('[data-testid=drift-table] tbody tr').length }; })()")
            compared = sum(1 for s in data["snapshots"] if s["similarity"] is not None)
            assert chart["points"] == compared and chart["threshold"] and chart["alarms"] == 1, chart
            assert chart["width"] > 300 and chart["rows"] >= 8 and chart["stroke"] not in ("", "none"), chart
            tab.screenshot(ARTIFACTS / f"review_page_drift_{theme}.png")
            assert tab.page_errors() == []
    bot.assert_log_clean(since=mark)
