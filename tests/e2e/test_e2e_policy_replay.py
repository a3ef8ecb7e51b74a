"""Policy replay against a real AstrBot (write mode auto, the fake model's
rule extraction): a stricter candidate reports fewer active writes and the
replay writes nothing; the review page's replay panel shows the report in
headless Chromium (screenshot in tests/artifacts)."""

from __future__ import annotations

import json
import re
import time

import pytest

# Sibling modules (pytest puts this folder on sys.path): the browser driver and the API helpers.
from review_browser import (  # type: ignore[import-not-found]
    ARTIFACTS,
    open_review_page,
)
from test_e2e_dashboard_api import call, ok  # type: ignore[import-not-found]
from test_e2e_review_page import flatten  # type: ignore[import-not-found]  # the locale files' keys, flat

pytestmark = pytest.mark.e2e

# The fake model's confidences (devtools/fake_openai.py) × 0.8 for extraction:
# a name 0.76, a home city 0.72, a liking 0.68. Auto mode at 0.6 makes all
# three active; a candidate at 0.7 keeps the liking in shadow.
STRICTER = {"write_policy": {"min_confidence": 0.7}}
TABLES = ("ltm_items", "ltm_evidence", "ltm_events", "ltm_audit", "ltm_gate_log", "ltm_holdout", "ltm_tombstones")


@pytest.fixture(scope="module")
def bot(bot_factory):
    with bot_factory("replay", {"write_policy": {"mode": "auto"}}) as b:
        b.chat("My name is Alice and I live in Paris", "alice", "r-1")
        b.chat("I like green tea", "alice", "r-2")
        b.wait_extracted("alice", ["name is Alice", "lives in Paris", "likes green tea"], "active")
        b.chat("I really like green tea", "alice", "r-3")  # the same fact again: a second evidence event
        b.wait_for(lambda: any(i["fact"].endswith("likes green tea") and i["evidence_count"] == 2
                               for i in b.items("alice")), 45, "the liking confirmed")
        # r-3's read injected the liking; its use is counted a few seconds later
        # (recalling/usage.py): settled before the tests compare stored rows.
        b.wait_for(lambda: any(i["fact"].endswith("likes green tea") and i["use_count"] >= 1
                               for i in b.items("alice")), 30, "the liking's use counted")
        yield b


def rows(bot) -> dict[str, list[str]]:
    return {t: sorted(json.dumps(dict(r), sort_keys=True, default=str) for r in bot.query(f'SELECT * FROM "{t}"'))
            for t in TABLES}


def wait_job(bot, job_id: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = ok(bot, "GET", f"policy/replay/{job_id}")
        if job["status"] != "running":
            return job
        assert time.monotonic() < deadline, bot.diag(f"replay {job_id} still running: {job['progress']}")
        time.sleep(0.3)


def test_a_stricter_candidate_reports_fewer_active_writes_and_writes_nothing(bot):
    ok(bot, "POST", "policy/holdout/redraw", {"share": 1.0})
    holdout = ok(bot, "GET", "policy/holdout")
    assert holdout["drawn"] and holdout["size"] == 3, holdout
    before, since = rows(bot), bot.mark()
    started = ok(bot, "POST", "policy/replay", {"policy": STRICTER})
    job = wait_job(bot, started["job_id"])
    assert job["status"] == "done", bot.diag(f"replay failed: {job}")
    report = job["report"]
    current, candidate = report["current"]["writes"]["by_outcome"], report["candidate"]["writes"]["by_outcome"]
    # name, city, liking, liking again: all active now; the candidate keeps the liking (0.68, then 0.748) …
    assert current["active"] == 4, report
    # … in shadow at first: its second candidate (0.748) would then make it active.
    assert candidate["active"] == 3 and candidate["shadow"] == 1, report
    assert candidate["active"] < current["active"]
    assert report["current"]["reads"]["budget_violations"] == report["candidate"]["reads"]["budget_violations"] == 0
    assert report["current"]["self_recall"]["memories"] == 1, report
    assert report["speed"]["events_per_second"] > 0 and report["verdict"]
    assert rows(bot) == before, "the replay changed stored rows"
    # No model call (a read may embed its query, as a live read does).
    assert bot.requests(since, "chat") == bot.requests(since, "extraction") == [], "the replay called the model"
    bot.assert_log_clean()


def test_bad_replay_requests_are_refused(bot):
    status, payload, _ = call(bot, "POST", "policy/replay", {"policy": {"write_policy": {"min_confidence": 7}}})
    assert status == 400 and "min_confidence" in payload["message"], payload
    status, payload, _ = call(bot, "GET", "policy/replay/unknown-job")
    assert status == 404 and payload["status"] == "error", payload
    status, payload, _ = call(bot, "POST", "policy/holdout/redraw", {"share": 2})
    assert status == 400 and "share" in payload["message"], payload


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_review_page_shows_the_replay_report(bot, tab, theme):
    open_review_page(bot, tab, theme=theme)
    tab.click("[data-testid=tab-replay]")
    tab.wait(lambda: tab.frame("document.querySelector('[data-panel=replay]')?.getAttribute('data-ready')"),
             "the replay panel")
    assert tab.frame("document.querySelector('[data-testid=replay-write-policy-min-confidence]').value") == "0.6"
    tab.type("[data-testid=replay-write-policy-min-confidence]", "0.7")
    tab.frame("document.querySelector('[data-testid=replay-set]').value = 'all'; true")
    tab.click("[data-testid=replay-start]")
    verdict = tab.wait(lambda: tab.frame("document.querySelector('[data-testid=replay-verdict]')?.textContent"),
                       "the replay report", timeout=60)
    assert verdict.startswith("Verdict")
    figures = tab.frame(
        "Array.from(document.querySelectorAll('[data-testid=replay-figures] tbody tr'))"
        ".map(tr => Array.from(tr.children).map(td => td.textContent))")
    assert figures[0] == ["Writes: active", "4", "3"], figures
    assert tab.frame("document.querySelectorAll('[data-testid=replay-chart] rect').length") >= 10
    assert "events/second" in tab.frame("document.querySelector('[data-testid=replay-speed]').textContent")
    tab.frame("document.querySelector('[data-testid=replay-report]').scrollIntoView({block: 'start'}); true")
    time.sleep(0.3)  # let the scroll settle before the picture (not an assertion)
    tab.screenshot(ARTIFACTS / f"review_page_replay_{theme}.png")

    # Tuning: its report says what it found (too little history to propose anything here).
    tab.click("[data-testid=replay-tune]")
    outcome = tab.wait(lambda: tab.frame(
        "document.querySelector('[data-testid=replay-tune-outcome]')?.getAttribute('data-outcome')"),
        "the tuning report", timeout=90)
    assert outcome in ("keep", "proposed", "overfitted"), outcome
    scores = tab.frame("Array.from(document.querySelectorAll('[data-testid=replay-tune-scores] tbody tr')).length")
    assert scores == 2
    tab.screenshot(ARTIFACTS / f"review_page_tune_{theme}.png")
    assert not tab.page_errors(), tab.page_errors()


def test_the_replay_panel_has_every_text_in_both_languages_and_writes_no_html():
    repo = ARTIFACTS.parent.parent
    source = (repo / "pages" / "review" / "replay.js").read_text(encoding="utf-8")
    # The panel's texts: the locale files under views.review.replay (app.js's T).
    en, zh = (flatten(json.loads((repo / ".astrbot-plugin" / "i18n" / f"{loc}.json").read_text(encoding="utf-8"))
                      ["views"]["review"]["replay"]) for loc in ("en-US", "zh-CN"))
    assert set(en) == set(zh) and len(en) > 50, set(en) ^ set(zh)
    used = set(re.findall(r'\bT\("([\w.]+)"', source)) - {"outcome.", "set.", "replay."}
    assert used <= set(en), used - set(en)
    assert sum(1 for text in zh.values() if re.search(r"[\u4e00-\u9fff]", text)) > 40
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in source, sink
    assert "http://" not in source.replace('"http://www.w3.org/2000/svg"', "")
