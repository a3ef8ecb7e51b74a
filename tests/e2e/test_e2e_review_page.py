"""The operator review page (``pages/review``) in a real browser.

Headless Chromium (Debian's ``chromium``; ``scripts/setup.sh`` installs it)
is driven over the Chrome DevTools Protocol with nothing but the standard
library and ``websockets`` (an AstrBot dependency). The test logs in to a
real AstrBot's dashboard the way the dashboard itself does (its JWT in
``localStorage``), opens ``#/plugin-view/astrbot_plugin_ltm/review``
(``#/plugin-page/…`` before AstrBot 4.29), and works inside the sandboxed
plugin iframe with real mouse clicks.

Also here, without a browser: the page never writes HTML from strings and
loads only its own scripts (its texts: tests/test_page_texts.py).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

# A sibling helper module (pytest puts this folder on sys.path; mypy does not know it).
from review_browser import (  # type: ignore[import-not-found]
    ARTIFACTS,
    PAGE_ENTRY,
    Tab,
    chromium_binary,
    open_review_page,
    screenshot_on_failure,
)
from test_e2e_dashboard_api import ok  # type: ignore[import-not-found]  # a sibling test module

from devtools.astrbot_home import LEGACY_DASHBOARD, Client
from tests.test_page_texts import flatten

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
PAGE_DIR = REPO / "pages" / "review"
I18N_DIR = REPO / ".astrbot-plugin" / "i18n"
SCREENSHOT = ARTIFACTS / "review_page.png"


# -- texts (no browser) ----------------------------------------------------------------


def en_texts() -> dict[str, str]:
    """The page's English: en-US.json's views.review, the one copy."""
    return flatten(json.loads((I18N_DIR / "en-US.json").read_text(encoding="utf-8"))["views"]["review"])


def page_scripts() -> list[str]:
    """The page's scripts in the order index.html loads them (the dashboard's bridge left out)."""
    html = (PAGE_DIR / "index.html").read_text(encoding="utf-8")
    return re.findall(r'<script src="([\w.-]+)"', html)


def test_the_page_opened_without_the_dashboard_says_so_in_both_languages_and_shows_nothing_else():
    # No bridge: no texts and no API, so the page's one notice is all it shows.
    dom = subprocess.run(
        [chromium_binary(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
         "--dump-dom", (PAGE_DIR / "index.html").as_uri()],
        capture_output=True, text=True, timeout=120, check=True).stdout
    notice = re.search(r'<div id="notice"[^>]*>([^<]*)<', dom)
    assert notice and "请从 AstrBot 管理面板打开此页面" in notice.group(1) and "AstrBot dashboard" in notice.group(1)
    assert "hidden" not in re.search(r'<div id="notice"[^>]*>', dom).group(0)
    assert re.search(r'<header class="topbar" hidden', dom) and re.search(r'<nav [^>]*id="tabs" hidden', dom)


def test_the_page_never_writes_html_and_loads_only_its_own_scripts():
    source = "\n".join((PAGE_DIR / name).read_text(encoding="utf-8") for name in page_scripts())
    html = (PAGE_DIR / "index.html").read_text(encoding="utf-8")
    # User text only ever reaches the page as text.
    for name in [*page_scripts(), "index.html"]:
        code = (PAGE_DIR / name).read_text(encoding="utf-8")
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            assert sink not in code, f"{name} uses {sink}"
    # The runtime (window.LTM) and the chart's parts (window.LTMChart) are there before the panels that use
    # them, app.js (which starts the page) after every panel; every script of the folder is loaded.
    scripts = page_scripts()
    assert scripts[0] == "runtime.js" and scripts[-1] == "app.js", scripts
    assert scripts.index("chart.js") < min(scripts.index(name) for name in ("drift.js", "replay.js"))
    assert set(scripts) == {p.name for p in PAGE_DIR.glob("*.js")}, scripts
    # No network beyond the dashboard: no CDN, no absolute URLs.
    assert not re.search(r"""(src|href)=["'](https?:)?//""", html)
    source = source.replace('"http://www.w3.org/2000/svg"', "")  # the SVG namespace (runtime.js's svg) is a name
    assert "http://" not in source and "https://" not in source


# -- the page in the dashboard -----------------------------------------------------------------


@pytest.fixture(scope="module")
def bot(bot_factory):
    with bot_factory("review-page", {}) as b:  # default write mode: shadow
        yield b


def queue(tab: Tab) -> list[dict]:
    return tab.frame(
        "Array.from(document.querySelectorAll('[data-testid=queue-item]')).map(el => ({"
        " id: el.getAttribute('data-memory-id'), fact: el.querySelector('[data-testid=fact]').textContent,"
        " html: el.querySelector('[data-testid=fact]').innerHTML }))"
    )


def memory_rows(tab: Tab) -> list[dict]:
    return tab.frame(
        "Array.from(document.querySelectorAll('[data-testid=memory-row]')).map(el => ({"
        " id: el.getAttribute('data-memory-id'), uses: el.querySelector('[data-testid=memory-uses]').textContent }))"
    )


def db_item(bot, memory_id: str) -> dict | None:
    rows = bot.query("SELECT * FROM ltm_items WHERE memory_id=?", (memory_id,))
    return dict(rows[0]) if rows else None


def test_review_page_approves_a_shadow_memory_in_a_real_browser(bot, tab):
    # Seed shadow memories the normal way: chats, background extraction.
    bot.chat("My name is Alice and I live in Paris", "alice", "page-1")
    bot.chat("I like <b>green</b> tea & jazz", "bob", "page-2")
    name, city = bot.wait_extracted("alice", ["name is Alice", "lives in Paris"], "shadow")
    (tea,) = bot.wait_extracted("bob", ["likes <b>green</b> tea"], "shadow")

    with screenshot_on_failure(tab, "review_page_failure.png"):
        open_review_page(bot, tab)
        assert tab.frame("document.documentElement.getAttribute('data-theme')") == "light"  # AstrBot's default
        assert tab.frame("document.querySelector('#page-title').textContent") == "Memory review"
        assert tab.frame("document.querySelector('#readonly-banner').getAttribute('data-state')") == "off"
        assert tab.frame("document.querySelector('#readonly-toggle').checked") is False
        items = tab.wait(lambda: (q := queue(tab)) and len(q) == 3 and q, "three memories in the review queue")
        by_id = {i["id"]: i for i in items}
        assert set(by_id) == {name["memory_id"], city["memory_id"], tea["memory_id"]}
        # Facts are shown as text, never as markup.
        # "bob" is a login, not a name
        assert by_id[tea["memory_id"]]["fact"] == tea["fact"] == "the user likes <b>green</b> tea & jazz"
        assert "<b>" not in by_id[tea["memory_id"]]["html"]
        assert tab.frame("document.querySelector('[data-testid=summary-shadow] b').textContent") == "3"
        tab.screenshot(SCREENSHOT)

        # Approve one memory with its own button.
        tab.click(f'[data-testid=queue-item][data-memory-id="{name["memory_id"]}"] [data-testid=approve]')
        bot.wait_for(lambda: db_item(bot, name["memory_id"])["status"] == "active", 15, "the approval in the DB")
        approved = db_item(bot, name["memory_id"])
        assert approved["status"] == "active" and not approved["awaiting_approval"]
        audit = bot.query("SELECT action, actor FROM ltm_audit WHERE memory_id=? ORDER BY id", (name["memory_id"],))
        assert [tuple(r) for r in audit][-1] == ("approve", "operator:astrbot")
        tab.wait(lambda: name["memory_id"] not in {i["id"] for i in queue(tab)}, "the card to leave the queue")
        assert "1 approved" in tab.frame(
            "Array.from(document.querySelectorAll('[data-testid=toast]')).map(t => t.textContent).join('|')")

        # Bulk edit: tick both cards, set importance and type for both.
        for memory in (city, tea):
            tab.click(f'[data-testid=queue-item][data-memory-id="{memory["memory_id"]}"] [data-testid=select]')
        assert tab.frame("document.querySelector('#bulk-count').textContent") == "2 selected"
        tab.click("#bulk-edit")
        tab.type("[data-testid=bulk-edit-importance]", "0.35")
        tab.frame("(() => { const s = document.querySelector('[data-testid=bulk-edit-type]');"
                  " s.value = 'episode'; s.dispatchEvent(new Event('change')); return true; })()")
        tab.click("[data-testid=bulk-edit-save]")
        bot.wait_for(lambda: all((db_item(bot, m["memory_id"])["importance"], db_item(bot, m["memory_id"])["type"])
                                 == (0.35, "episode") for m in (city, tea)), 15, "the bulk edit in the DB")
        assert all(db_item(bot, m["memory_id"])["status"] == "shadow" for m in (city, tea))  # still in review
        tab.wait(lambda: tab.frame("document.querySelector('#modal').hidden"), "the dialog to close")

        # Bulk reject: untick Paris, reject the rest through the bulk bar and the confirmation dialog.
        tab.click(f'[data-testid=queue-item][data-memory-id="{city["memory_id"]}"] [data-testid=select]')
        assert tab.frame("document.querySelector('#bulk-count').textContent") == "1 selected"
        tab.click("#bulk-reject")
        tab.wait(lambda: tab.frame("!document.querySelector('#modal').hidden"), "the confirmation dialog")
        tab.click("[data-testid=modal-confirm]")
        bot.wait_for(lambda: db_item(bot, tea["memory_id"]) is None, 15, "the rejection in the DB")
        assert bot.query("SELECT count(*) AS n FROM ltm_tombstones")[0]["n"] == 1
        tab.wait(lambda: [i["id"] for i in queue(tab)] == [city["memory_id"]], "only Paris left in the queue")
        assert db_item(bot, city["memory_id"])["status"] == "shadow"  # untouched

        # Usage: the approved name is injected when Alice asks (counted in the background, written
        # within seconds); the list shows it, and sorted least used, the never-used memory comes first.
        bot.chat("What is my name?", "alice", "page-1")
        bot.wait_for(lambda: db_item(bot, name["memory_id"])["use_count"] >= 1, 20, "the injection counted")
        uses = db_item(bot, name["memory_id"])["use_count"]
        tab.click("[data-testid=tab-memories]")
        tab.frame("(() => { const s = document.querySelector('[data-testid=search-sort]'); s.value = 'least_used';"
                  " s.form.requestSubmit(); return true; })()")
        rows = tab.wait(lambda: (r := memory_rows(tab)) and [x["id"] for x in r] == [
            city["memory_id"], name["memory_id"]] and r, "the memories, least used first")
        assert [x["uses"] for x in rows] == ["0", str(uses)]
        # The fact opens the detail (the scope cell opens the user's view).
        tab.click(f'[data-testid=memory-row][data-memory-id="{name["memory_id"]}"] td.fact')
        shown = tab.wait(lambda: tab.frame("document.querySelector('[data-testid=detail-uses]')?.textContent"),
                         "the detail's usage")
        assert shown.startswith(f"{uses} ({uses} injected")
        assert tab.page_errors() == []
    bot.assert_log_clean()


def test_review_page_follows_the_dashboard_language_and_dark_theme(bot, tab):
    zh = json.loads((I18N_DIR / "zh-CN.json").read_text(encoding="utf-8"))["views"]["review"]
    open_review_page(bot, tab, locale="zh-CN", theme="dark")
    assert tab.frame("document.documentElement.getAttribute('data-theme')") == "dark"
    assert tab.frame("document.documentElement.lang") == "zh-CN"
    assert tab.frame("document.querySelector('#page-title').textContent") == zh["title"]
    assert tab.frame("document.querySelector('#readonly-title').textContent") == zh["ro"]["off_title"]
    assert tab.frame("document.querySelector('#tab-policy').textContent") == zh["tabs"]["policy"]
    background = tab.frame("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(22, 23, 29)", background  # the dark palette is applied
    tab.screenshot(ARTIFACTS / "review_page_dark_zh.png")
    assert tab.page_errors() == []


def test_review_page_shows_english_when_a_text_is_missing(bot, tab):
    """Drop a text from the installed plugin's zh-CN file: the page shows
    en-US.json's for it and the translations for everything else.
    (The bridge re-reads the files each time the page is served.)"""
    installed = bot.home / "data" / "plugins" / "astrbot_plugin_ltm" / ".astrbot-plugin" / "i18n" / "zh-CN.json"
    saved = installed.read_text(encoding="utf-8")
    try:
        data = json.loads(saved)
        del data["views"]["review"]["tabs"]["audit"]
        installed.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        zh = json.loads(saved)["views"]["review"]
        entry = bot.client.request("GET", PAGE_ENTRY, headers={"Accept-Language": "zh-CN"})
        assert entry.get("status") == "ok", entry
        # The view on its own (no dashboard around it): texts come from the
        # bridge's initial context, which is built from the files on disk.
        tab.navigate(bot.url + entry["data"]["content_path"])
        tab.wait(lambda: tab.evaluate("document.querySelector('#tab-policy')?.textContent") == zh["tabs"]["policy"],
                 "the zh-CN texts")
        assert tab.evaluate("document.querySelector('#tab-audit').textContent") == en_texts()["tabs.audit"]
        assert tab.evaluate("document.querySelector('#page-title').textContent") == zh["title"]
        assert tab.evaluate("document.querySelector('#tab-memories').textContent") == zh["tabs"]["memories"]
    finally:
        installed.write_text(saved, encoding="utf-8")


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_review_page_asks_the_plugin_for_its_texts_when_the_dashboard_hands_none(bot, tab, locale):
    """A dashboard whose bridge hands no catalogue: the page asks the
    plugin's texts route, through the real bridge, and shows what it serves;
    until then a text is empty, never its key."""
    expected = en_texts() if locale == "en-US" else zh_texts()
    with screenshot_on_failure(tab, f"review_page_served_texts_{locale}_failure.png"):
        open_review_page(bot, tab, locale=locale)
        shown = tab.frame(
            "(async () => { LTM.bridge.getI18n = () => ({});"
            " document.querySelectorAll('[data-i18n]').forEach((el) => { el.textContent = ''; });"
            " const before = LTM.T('tabs.audit'); await LTM.loadTexts(); LTM.applyI18n();"
            " return [before, document.querySelector('#page-title').textContent,"
            " document.querySelector('#tab-audit').textContent,"
            " LTM.T('common.page', {page: 1, pages: 2, total: 3})]; })()")
        assert shown == ["", expected["title"], expected["tabs.audit"],
                         expected["common.page"].format(page=1, pages=2, total=3)], shown
        # Nothing on the page is left showing a key.
        keys = tab.frame("Array.from(document.querySelectorAll('[data-i18n]'))"
                         ".filter((el) => el.textContent === el.getAttribute('data-i18n')).length")
        assert keys == 0
        tab.screenshot(ARTIFACTS / f"review_page_served_texts_{locale}.png")
        assert tab.page_errors() == []


def downloaded(directory: Path) -> list[Path]:
    return [p for p in directory.iterdir() if p.suffix == ".json"]


def test_the_page_downloads_an_export_file_that_its_upload_imports_into_another_bot(bot, bot_factory, tab, tmp_path):
    # A memory with a whole-number score: a browser writes 1.0 as 1.
    bot.chat("My name is Dana and I live in Oslo", "dana", "page-transfer")
    dana = bot.wait_extracted("dana", ["name is Dana", "lives in Oslo"], "shadow")
    route = f"{Client.plugin_api()}/items/{dana[0]['memory_id']}"
    if LEGACY_DASHBOARD:  # /api/plug takes GET and POST only: the plugin's POST equivalent of PATCH
        answer = bot.client.request("POST", f"{route}/update", {"importance": 1})
    else:
        answer = bot.client.request("PATCH", route, {"importance": 1})
    assert answer["data"]["importance"] == 1.0
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with screenshot_on_failure(tab, "review_page_transfer_failure.png"):
        tab.allow_downloads(downloads)
        open_review_page(bot, tab)
        tab.click("[data-testid=tab-transfer]")
        tab.frame("(() => { const s = document.querySelector('[data-testid=export-scope-id]');"
                  " s.value = 'webchat:dana'; return true; })()")
        tab.click("[data-testid=export-download]")
        (file,) = tab.wait(lambda: downloaded(downloads), "the export to download", timeout=30)
        assert re.fullmatch(r"ltm-export-\d{4}-\d{2}-\d{2}\.json", file.name), file.name
        document = json.loads(file.read_bytes())
        assert "status" not in document and document["format"] == "astrbot_plugin_ltm.export"
        assert sorted(i["memory_id"] for i in document["items"]) == sorted(d["memory_id"] for d in dana)
        assert b'"importance": 1.0' in file.read_bytes()

        with bot_factory("review-page-copy", {}) as copy_bot:
            open_review_page(copy_bot, tab)
            # An empty store: the statistics table's one row spans all of its columns.
            tab.click("[data-testid=tab-stats]")
            spans = tab.wait(lambda: tab.frame(
                "(() => { const td = document.querySelector('[data-testid=stats-empty]'); return td &&"
                " [td.colSpan, td.closest('table').querySelectorAll('thead th').length]; })()"),
                "the empty statistics row")
            assert spans == [8, 8], spans
            tab.click("[data-testid=tab-transfer]")
            tab.click("[data-testid=import-for-review]")  # every memory arrives as shadow, for the review queue
            tab.choose_file("[data-testid=import-file]", file)
            tab.wait(lambda: tab.frame("!document.querySelector('#import-preview').hidden"), "the import preview")
            assert tab.frame("document.querySelector('[data-testid=import-added] b').textContent") == "2"
            # Each memory's fact and the status it will get, not bare ids.
            lines = tab.frame("Array.from(document.querySelectorAll('[data-testid=import-line][data-action=add]'))"
                              ".map(li => [li.querySelector('.import-fact').textContent,"
                              " li.querySelector('[data-testid=import-line-status]').getAttribute('data-status')])")
            assert sorted(lines) == sorted([d["fact"], "shadow"] for d in dana), lines
            assert tab.frame("document.querySelector('[data-testid=import-status-note]').textContent.trim()")
            tab.frame("document.querySelector('#import-preview').scrollIntoView({block: 'center'}); true")
            tab.screenshot(tmp_path / "import_preview.png")
            assert copy_bot.items() == []  # a preview writes nothing
            tab.click("[data-testid=import-confirm]")
            tab.wait(lambda: tab.frame("!document.querySelector('#import-result').hidden"), "the import result")
            assert "2 added" in tab.frame("document.querySelector('#import-result').textContent")
            copied = {i["memory_id"]: i for i in copy_bot.items()}
            assert set(copied) == {d["memory_id"] for d in dana}
            assert copied[dana[0]["memory_id"]]["importance"] == 1.0
            assert {i["status"] for i in copied.values()} == {"shadow"}
            assert tab.page_errors() == []
            copy_bot.assert_log_clean()
    bot.assert_log_clean()


# -- the injection preview, the per-user view, the rollback dialog, the audit details ----------------------


def zh_texts() -> dict[str, str]:
    return flatten(json.loads((I18N_DIR / "zh-CN.json").read_text(encoding="utf-8"))["views"]["review"])


def approve(bot, memories: list[dict]) -> None:
    ok(bot, "POST", "items/review", {"memory_ids": [m["memory_id"] for m in memories], "decision": "approve"})


def set_field(tab: Tab, selector: str, value: str) -> None:
    """Type into a field of the page: its input event fires as a keyboard's would."""
    tab.frame(f"(() => {{ const el = document.querySelector({json.dumps(selector)}); el.value = {json.dumps(value)};"
              " el.dispatchEvent(new Event('input', {bubbles: true})); return true; })()")


def test_the_preview_tab_shows_the_block_a_user_with_a_memory_would_get(bot, tab, tmp_path):
    bot.chat("My name is Erin and I live in Lisbon", "erin", "page-preview")
    memories = bot.wait_extracted("erin", ["name is Erin", "lives in Lisbon"], "shadow")
    approve(bot, memories)
    lisbon = next(m for m in memories if "Lisbon" in m["fact"])
    zh = zh_texts()
    with screenshot_on_failure(tab, "review_page_preview_failure.png"):
        open_review_page(bot, tab, locale="zh-CN")
        assert tab.frame("document.querySelector('#tab-preview').textContent") == zh["tabs.preview"]
        tab.click("[data-testid=tab-preview]")
        tab.wait(lambda: tab.frame("!!document.querySelector('[data-testid=preview-form]')"), "the preview form")
        set_field(tab, "[data-testid=preview-scope]", "user:webchat:erin")
        set_field(tab, "[data-testid=preview-message]", "Where do I live?")
        tab.click("[data-testid=preview-run]")
        block = tab.wait(lambda: tab.frame("document.querySelector('[data-testid=preview-block]')?.textContent"),
                         "the injected block")
        assert "Lisbon" in block, block
        tokens = int(tab.frame("document.querySelector('[data-testid=preview-tokens]').getAttribute('data-tokens')"))
        assert tokens > 0
        lines = tab.frame("Array.from(document.querySelectorAll('[data-testid=preview-line]')).map(r => ({"
                          " source: r.getAttribute('data-source'), id: r.getAttribute('data-id'),"
                          " text: r.querySelector('td.fact').textContent }))")
        assert any(line["source"] == "memory" and line["id"] == lisbon["memory_id"] for line in lines), lines
        assert all(line["text"] in block for line in lines), (lines, block)
        # Each memory line says who may recall it, in the reader's words (docs/privacy.md).
        audience = tab.frame(f"document.querySelector('[data-testid=preview-line][data-id=\"{lisbon['memory_id']}\"] "
                             "[data-testid=preview-line-audience]').textContent")
        assert audience == "与 webchat:erin 的私聊", audience
        tab.screenshot(tmp_path / "preview_zh.png")
        # A preview counts no use and writes nothing.
        assert db_item(bot, lisbon["memory_id"])["use_count"] == 0
        assert tab.page_errors() == []
    bot.assert_log_clean()


def test_the_user_view_shows_a_pause_and_the_operator_lifts_it_with_a_reason(bot, tab, tmp_path):
    bot.chat("My name is Frank", "frank", "page-pause")
    bot.wait_extracted("frank", ["name is Frank"], "shadow")
    bot.chat("/ltm pause", "frank", "page-pause")
    scope = "user:webchat:frank"
    bot.wait_for(lambda: any(p["scope"] == scope for p in ok(bot, "GET", "pauses")["items"]), 15, "frank's pause")
    zh = zh_texts()
    with screenshot_on_failure(tab, "review_page_user_failure.png"):
        open_review_page(bot, tab, locale="zh-CN")
        # Reached by clicking the user in the statistics.
        tab.click("[data-testid=tab-stats]")
        link = f'[data-testid=stats-row] [data-testid=scope-link][data-scope="{scope}"]'
        tab.wait(lambda: tab.frame(f"!!document.querySelector('{link}')"), "frank's row in the statistics")
        tab.click(link)
        tab.wait(lambda: tab.frame("document.querySelector('[data-testid=user-title]')?.getAttribute('data-scope')")
                 == scope, "frank's view")
        assert tab.frame("document.querySelector('[data-testid=user-pause]').getAttribute('data-paused')") == "1"
        assert tab.frame("document.querySelectorAll('[data-testid=user-memory]').length") == 1
        audience = tab.frame("document.querySelector('[data-testid=user-memory-audience]').textContent")
        assert audience == "与 webchat:frank 的私聊", audience  # where it may be recalled (docs/privacy.md)
        assert tab.frame("document.querySelector('[data-testid=user-writes-toggle]').checked") is True
        assert tab.frame("document.querySelector('[data-testid=user-lift]').textContent") == zh["user.lift"]
        tab.screenshot(tmp_path / "user_zh.png")

        # Lifting is explicit: a dialog, a reason, then the API; nothing changes before the confirmation.
        tab.click("[data-testid=user-lift]")
        tab.wait(lambda: tab.frame("!document.querySelector('#modal').hidden"), "the lift dialog")
        assert any(p["scope"] == scope for p in ok(bot, "GET", "pauses")["items"])
        set_field(tab, "[data-testid=user-lift-reason]", "the user asked support to learn again")
        tab.screenshot(tmp_path / "user_lift_dialog_zh.png")
        tab.click("[data-testid=modal-confirm]")
        tab.wait(lambda: tab.frame("document.querySelector('[data-testid=user-pause]')?.getAttribute('data-paused')")
                 == "0", "the view to say learning")
        assert not any(p["scope"] == scope for p in ok(bot, "GET", "pauses")["items"])
        lifted = bot.query("SELECT actor, reason FROM ltm_audit WHERE action='lift' AND scope_id='webchat:frank'")
        assert len(lifted) == 1 and lifted[0]["actor"] == "operator:astrbot", [tuple(r) for r in lifted]
        assert "the user asked support to learn again" in lifted[0]["reason"]
        tab.wait(lambda: tab.frame("!!document.querySelector('[data-testid=user-audit-row][data-action=lift]')"),
                 "the lift in the user's audit trail")
        assert tab.page_errors() == []
    bot.assert_log_clean()


def test_the_rollback_dialog_shows_the_diff_and_warnings_before_anything_changes(bot, tab, tmp_path):
    auto = ok(bot, "POST", "policy", {"write_policy": {"mode": "auto"}, "reason": "try auto"})["version"]
    ok(bot, "POST", "policy", {"write_policy": {"mode": "shadow"}, "reason": "back to shadow"})
    versions = ok(bot, "GET", "policy/history")["total"]
    with screenshot_on_failure(tab, "review_page_rollback_failure.png"):
        open_review_page(bot, tab, locale="zh-CN")
        tab.click("[data-testid=tab-history]")
        row = f'[data-testid=history-row][data-version="{auto}"]'
        tab.wait(lambda: tab.frame(f"!!document.querySelector('{row}')"), "the version with auto mode")
        tab.click(f"{row} [data-testid=history-rollback]")
        tab.wait(lambda: tab.frame("!document.querySelector('#modal').hidden"), "the rollback dialog")
        diff = tab.frame("Array.from(document.querySelectorAll('[data-testid=rollback-diff] li'))"
                         ".map(li => li.textContent)")
        assert "写入模式: 影子 (shadow) → 自动 (auto)" in diff, diff  # the setting's name and values in words
        warnings = tab.frame("Array.from(document.querySelectorAll('[data-testid=rollback-warning]'))"
                             ".map(li => li.textContent)")
        assert warnings and all(re.search(r"[\u4e00-\u9fff]", w) for w in warnings), warnings  # in the page's language
        tab.screenshot(tmp_path / "rollback_dialog_zh.png")
        # The dry run changed nothing.
        assert ok(bot, "GET", "policy/history")["total"] == versions
        assert ok(bot, "GET", "policy")["write_policy"]["mode"] == "shadow"
        tab.click("[data-testid=modal-confirm]")
        bot.wait_for(lambda: ok(bot, "GET", "policy")["write_policy"]["mode"] == "auto", 15, "the rollback")
        assert ok(bot, "GET", "policy/history")["versions"][0]["rollback_of"] == auto
        assert tab.page_errors() == []
    ok(bot, "POST", "policy", {"write_policy": {"mode": "shadow"}, "reason": "the module's default again"})
    bot.assert_log_clean()


def test_a_users_pause_holds_through_a_rollback_made_on_the_page(bot, tab, tmp_path):
    """The privacy bug of a rollback undoing /ltm pause, through the page."""
    before = ok(bot, "GET", "policy/history")["versions"][0]["version"]
    ok(bot, "POST", "policy", {"read_policy": {"max_items": 8}, "reason": "fewer lines"})
    assert "暂停" in bot.chat("/ltm 暂停", "fern", "pp-1")
    with screenshot_on_failure(tab, "review_page_pause_rollback_failure.png"):
        open_review_page(bot, tab, locale="zh-CN")
        tab.click("[data-testid=tab-history]")
        row = f'[data-testid=history-row][data-version="{before}"]'
        tab.wait(lambda: tab.frame(f"!!document.querySelector('{row}')"), "the version before the change")
        tab.click(f"{row} [data-testid=history-rollback]")
        tab.wait(lambda: tab.frame("!document.querySelector('#modal').hidden"), "the rollback dialog")
        tab.click("[data-testid=modal-confirm]")
        bot.wait_for(lambda: ok(bot, "GET", "policy/history")["versions"][0]["rollback_of"] == before, 15,
                     "the rollback")
        assert tab.page_errors() == []
    since = bot.mark()
    bot.chat("My name is Fern and I live in Oslo", "fern", "pp-2")
    bot.chat("My name is Gail and I live in Riga", "gail", "pp-3")
    bot.wait_extracted("gail", ["name is Gail", "lives in Riga"], "shadow")  # said after fern's: fern's is in
    # A pause means forgotten: fern's turn is not recorded at all (docs/privacy.md).
    assert not [e for e in bot.events("fern") if "Oslo" in e["content"].get("text", "")]
    assert bot.items("fern") == [] and bot.extraction_requests(since, containing="Oslo") == []
    assert "已暂停" in bot.chat("/ltm 状态", "fern", "pp-2")  # and it says so, in Chinese
    assert ok(bot, "GET", "user?scope=user:webchat:fern")["paused"]["by"] == "user:fern"
    bot.assert_log_clean()


@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_the_audit_log_shows_details_as_fields_with_the_raw_json_folded(bot, tab, tmp_path, locale):
    ok(bot, "POST", "policy", {"read_policy": {"max_items": 9}, "reason": "fewer memories per turn"})
    with screenshot_on_failure(tab, f"review_page_audit_{locale}_failure.png"):
        open_review_page(bot, tab, locale=locale)
        tab.click("[data-testid=tab-audit]")
        config = '[data-testid=audit-row][data-action=config]'
        tab.wait(lambda: tab.frame(f"!!document.querySelector('{config}')"), "a policy change in the audit log")
        changes = tab.frame(f"Array.from(document.querySelector('{config}')"
                            ".querySelectorAll('[data-testid=audit-diff] li')).map(li => li.textContent)")
        setting = "最多注入条数" if locale == "zh-CN" else "Max memories injected"  # the settings form's name
        assert any(re.fullmatch(setting + r": \d+ → 9", c) for c in changes), changes
        facts = tab.frame("Array.from(document.querySelectorAll('[data-testid=audit-row] [data-field=fact]'))"
                          ".map(li => li.textContent)")
        assert any("Erin" in f for f in facts), facts
        # No cell is a JSON dump; the raw JSON is there, folded.
        assert not tab.frame("Array.from(document.querySelectorAll('[data-testid=audit-fields]'))"
                             ".some(el => el.textContent.trim().startsWith('{'))")
        assert tab.frame("Array.from(document.querySelectorAll('[data-testid=audit-raw]')).every(d => !d.open)")
        tallest = tab.frame("Math.max(...Array.from(document.querySelectorAll('[data-testid=audit-row]'))"
                            ".map(r => r.getBoundingClientRect().height))")
        assert tallest < 400, tallest
        action = tab.frame(f"document.querySelector('{config} .tag').textContent")
        expected = zh_texts()["audit.actions.config"] if locale == "zh-CN" else en_texts()["audit.actions.config"]
        assert action == expected
        tab.screenshot(tmp_path / f"audit_{locale}.png")
        assert tab.page_errors() == []
    bot.assert_log_clean()


# -- what a new operator trips on (issue 40), in both of the dashboard's languages ---------------------


def audit_rows(bot, memory_id: str) -> list[tuple[str, str]]:
    return [(r["action"], r["reason"]) for r in bot.query(
        "SELECT action, reason FROM ltm_audit WHERE memory_id=? ORDER BY id", (memory_id,))]


def frame_text(tab: Tab, selector: str) -> str:
    return tab.frame(f"(document.querySelector({json.dumps(selector)}) || {{}}).textContent || ''")


@pytest.mark.parametrize("locale", ["zh-CN", "en-US"])
def test_a_new_operator_reads_the_page_in_their_language_and_it_does_what_it_shows(bot, tab, locale):
    texts = zh_texts() if locale == "zh-CN" else en_texts()
    user = "hana" if locale == "zh-CN" else "ivan"
    name = user.capitalize()
    bot.chat(f"My name is {name} and I live in Rome", user, f"i40-{user}")
    named, city = bot.wait_extracted(user, [f"name is {name}", "lives in Rome"], "shadow")
    shot = f"issue40_{locale}"
    with screenshot_on_failure(tab, f"{shot}_failure.png"):
        open_review_page(bot, tab, locale=locale)
        # The header's write mode in the page's language, what it does on hover.
        assert frame_text(tab, "[data-testid=summary-mode] b") == texts["modes.shadow"]
        assert tab.frame("document.querySelector('[data-testid=summary-mode]').title") == texts["mode.shadow"]

        # The bulk bar's reason goes with a bulk action, shown in its dialog, and is used once.
        reason = "重复的记录" if locale == "zh-CN" else "a duplicate"
        card = f'[data-testid=queue-item][data-memory-id="{named["memory_id"]}"]'
        tab.wait(lambda: tab.frame(f"!!document.querySelector('{card}')"), "the name's card")
        tab.type("#bulk-reason", reason)
        tab.click(f"{card} [data-testid=select]")
        tab.click("#bulk-reject")
        tab.wait(lambda: tab.frame("!document.querySelector('#modal').hidden"), "the reject dialog")
        assert reason in frame_text(tab, "[data-testid=reject-reason]")
        assert frame_text(tab, "#modal-title") == texts["queue.confirm_reject_title"].replace("{n}", "1")
        tab.screenshot(ARTIFACTS / f"{shot}_reject_dialog.png")
        tab.click("[data-testid=modal-confirm]")
        bot.wait_for(lambda: db_item(bot, named["memory_id"]) is None, 15, "the rejection")
        assert audit_rows(bot, named["memory_id"])[-1] == ("reject", reason)
        tab.wait(lambda: tab.frame("document.querySelector('#bulk-reason').value === ''"), "the reason cleared")
        tab.click(f'[data-testid=queue-item][data-memory-id="{city["memory_id"]}"] [data-testid=approve]')
        bot.wait_for(lambda: db_item(bot, city["memory_id"])["status"] == "active", 15, "the approval")
        assert reason not in audit_rows(bot, city["memory_id"])[-1][1]  # not carried to the next action

        # The audit log's action filter offers the actions by the names the log shows.
        tab.click("[data-testid=tab-audit]")
        options = tab.frame("Array.from(document.querySelectorAll('[data-testid=audit-action] option'))"
                            ".map(o => [o.value, o.textContent])")
        assert ["reject", texts["audit.actions.reject"]] in options and ["", texts["common.any"]] in options
        assert ["delete", texts["audit.actions.delete"]] in options
        tab.frame("(() => { const s = document.querySelector('[data-testid=audit-action]'); s.value = 'reject';"
                  " s.dispatchEvent(new Event('change')); return true; })()")
        shown = tab.wait(lambda: (a := tab.frame("Array.from(document.querySelectorAll('[data-testid=audit-row]'))"
                                                 ".map(r => r.getAttribute('data-action'))")) and set(a) == {"reject"}
                         and a, "only rejections")
        assert shown
        tab.screenshot(ARTIFACTS / f"{shot}_audit_filter.png")

        # The preview: no "null" before a run or after a refused one; the user as the memory list shows them.
        tab.click("[data-testid=tab-preview]")
        tab.wait(lambda: tab.frame("!!document.querySelector('[data-testid=preview-form]')"), "the preview form")
        assert "null" not in frame_text(tab, "#panel-preview")
        set_field(tab, "[data-testid=preview-scope]", "user:")
        set_field(tab, "[data-testid=preview-message]", "Where do I live?")
        tab.click("[data-testid=preview-run]")
        tab.wait(lambda: tab.frame("!document.querySelector('[data-testid=preview-error]').hidden"), "the refusal")
        assert "null" not in frame_text(tab, "#panel-preview")
        set_field(tab, "[data-testid=preview-scope]", f"webchat:{user}")  # as the memory list shows the user
        tab.click("[data-testid=preview-run]")
        block = tab.wait(lambda: frame_text(tab, "[data-testid=preview-block]"), "the block")
        assert "Rome" in block and "null" not in frame_text(tab, "#panel-preview")
        tab.screenshot(ARTIFACTS / f"{shot}_preview.png")

        # The user view, named by the bare id: the events' short columns stay on one line.
        tab.click("[data-testid=tab-user]")
        set_field(tab, "[data-testid=user-scope]", user)
        tab.click("[data-testid=user-show]")
        tab.wait(lambda: tab.frame("document.querySelector('[data-testid=user-title]')?.getAttribute('data-scope')")
                 == f"user:webchat:{user}", "the user's view")
        heights = tab.frame(
            "Array.from(document.querySelectorAll('[data-testid=user-event]')).map(r => ["
            " r.querySelector('[data-testid=user-event-role]').getBoundingClientRect().height,"
            " r.querySelector('[data-testid=user-event-extraction]').getBoundingClientRect().height,"
            " parseFloat(getComputedStyle(r.querySelector('[data-testid=user-event-role]')).lineHeight) || 20])")
        assert heights and all(role < 2 * line + 17 and extraction < 2 * line + 17  # one line and the padding
                               for role, extraction, line in heights), heights
        tab.screenshot(ARTIFACTS / f"{shot}_user_view.png")

        # Read-only on and off on the page: two versions, each naming what changed; no empty one.
        for _ in range(2):
            tab.click("label[for=readonly-toggle] .switch-track")  # the switch as a person clicks it
            tab.wait(lambda: tab.frame("!document.querySelector('#modal').hidden"), "the read-only dialog")
            tab.click("[data-testid=modal-confirm]")
            tab.wait(lambda: tab.frame("document.querySelector('#modal').hidden"), "the dialog to close")
            time.sleep(0.5)
        assert ok(bot, "GET", "policy")["emergency_read_only"] is False
        tab.click("[data-testid=tab-history]")
        setting = "紧急只读" if locale == "zh-CN" else "Emergency read-only"
        diffs = tab.wait(lambda: (d := tab.frame(
            "Array.from(document.querySelectorAll('[data-testid=history-row]')).slice(0, 2)"
            ".map(r => r.querySelector('td:nth-child(5)').textContent)")) and len(d) == 2 and d, "the versions")
        on, off = ("开启", "关闭") if locale == "zh-CN" else ("on", "off")
        assert diffs == [f"{setting}: {on} → {off}", f"{setting}: {off} → {on}"], diffs
        rows = ok(bot, "GET", "policy/history?page_size=200")["versions"]
        assert all(v["diff"] for v in rows if v["source"] != "startup"), rows
        tab.screenshot(ARTIFACTS / f"{shot}_history.png")
        assert tab.page_errors() == []
    bot.assert_log_clean()


@pytest.fixture(scope="module")
def meaning_bot(bot_factory):
    with bot_factory("review-meaning", {"write_policy": {"mode": "auto"}}, real_embeddings=True) as b:
        yield b


@pytest.mark.parametrize("locale", ["zh-CN", "en-US"])
def test_a_search_by_meaning_finds_what_is_near_not_every_memory(meaning_bot, tab, locale):
    bot = meaning_bot
    if not bot.items("mei"):
        for said in ("我叫小梅", "我养了一只猫，叫咪咪", "我是一名程序员", "我住在杭州"):
            bot.chat(said, "mei", "meaning-mei")
        bot.chat("My name is Juan and I live in Madrid", "juan", "meaning-juan")
        bot.wait_extracted("mei", ["猫", "程序员", "杭州"])
        bot.wait_extracted("juan", ["name is Juan", "lives in Madrid"])
    items = {i["fact"] for i in bot.items()}
    # the vectors are filled in the background: wait until the search sees them all
    bot.wait_for(lambda: ok(bot, "GET", "items?q=%E7%8C%AB&search=meaning")["total"] >= 1, 60, "the vectors")
    with screenshot_on_failure(tab, f"review_page_meaning_{locale}_failure.png"):
        open_review_page(bot, tab, locale=locale)
        tab.click("[data-testid=tab-memories]")
        tab.wait(lambda: tab.frame("!document.querySelector('#search-meaning-box').hidden"), "the meaning box")
        set_field(tab, "[data-testid=search-q]", "猫")
        tab.click("[data-testid=search-meaning]")
        tab.click("[data-testid=search-apply]")
        def shown() -> list[str]:
            return tab.frame("Array.from(document.querySelectorAll('[data-testid=memory-row] td.fact'))"
                             ".map(td => td.textContent)")

        # the list first shows every memory; the search's answer replaces it with the ones near 猫 only
        facts = tab.wait(lambda: (f := shown()) and all("猫" in x for x in f) and f, "only the memories near 猫")
        assert len(facts) < len(items), (facts, items)  # not the programmer, Hangzhou or Juan
        tab.screenshot(ARTIFACTS / f"review_page_meaning_{locale}.png")
        assert tab.page_errors() == []
    bot.assert_log_clean()
