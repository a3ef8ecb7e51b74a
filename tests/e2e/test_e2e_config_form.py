"""AstrBot's own form for the plugin's settings, in a real browser: the gear
on the plugin's card opens it, AstrBot draws it from ``_conf_schema.json``
with the texts of ``.astrbot-plugin/i18n/<locale>.json`` in the dashboard's
language, and what an operator types and saves there reaches the plugin;
a value out of range is refused with a message in AstrBot's log, in English
and Chinese.

(The unit test ``test_every_setting_has_its_english_and_chinese_texts_in_the_form``
checks the files; this one checks what AstrBot makes of them.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

# A sibling helper module (pytest puts this folder on sys.path; mypy does not know it).
from review_browser import ARTIFACTS, Tab, log_in, screenshot_on_failure  # type: ignore[import-not-found]

from devtools.astrbot_home import LEGACY_DASHBOARD

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
I18N_DIR = REPO / ".astrbot-plugin" / "i18n"
# The installed plugins' cards: a page of their own from 4.29 on.
PLUGINS = "/#/extension" if LEGACY_DASHBOARD else "/#/extension/plugins"
DIALOG = "document.querySelector('.v-overlay--active .v-card')"
SAVE = {"en-US": "Save And Close", "zh-CN": "保存并关闭"}


@pytest.fixture(scope="module")
def bot(bot_factory):
    with bot_factory("config-form", {}) as b:
        yield b


def normalised(text: str) -> str:
    return " ".join(text.split())


def form_texts(locale: str) -> list[str]:
    """Every section's and setting's name and explanation in ``locale``."""
    out: list[str] = []

    def walk(node: dict) -> None:
        for value in node.values():
            if isinstance(value, dict):
                out.extend(value[field] for field in ("description", "hint") if isinstance(value.get(field), str))
                walk(value)

    walk(json.loads((I18N_DIR / f"{locale}.json").read_text(encoding="utf-8"))["config"])
    return out


def open_settings_form(bot, tab: Tab, locale: str) -> None:
    log_in(bot, tab, locale)
    tab.navigate(bot.url + PLUGINS)
    card = ("[...document.querySelectorAll('.v-card')]"
            ".find(c => c.innerText.includes('(LTM)') && c.querySelector('.mdi-cog'))")
    tab.wait(lambda: tab.evaluate(f"!!{card}"), "the plugin's card", timeout=30)
    tab.click_in_page(f"{card}.querySelector('.mdi-cog').closest('button')", "the gear on the plugin's card")
    tab.wait(lambda: tab.evaluate(f"!!{DIALOG} && {DIALOG}.innerText.length > 1000"), "the settings form")


def setting_input(description: str) -> str:
    """The form's field beside the setting named ``description`` (before
    4.29 the name is followed by the setting's key, in an element of its own)."""
    return (f"(() => {{ let row = [...{DIALOG}.querySelectorAll('*')].find(e => [...e.childNodes]"
            f".some(n => n.nodeType === Node.TEXT_NODE && n.textContent.trim() === {json.dumps(description)}));"
            " while (row && !row.querySelector('input')) row = row.parentElement;"
            " return row && row.querySelector('input'); })()")


def save(bot, tab: Tab, locale: str, description: str, value: str) -> int:
    """Types ``value`` into the setting's field and saves the form; the
    log's size before saving."""
    field = setting_input(description)
    tab.click_in_page(field, f"the field of {description!r}")
    tab.evaluate(f"{field}.select(); true")
    tab.send("Input.insertText", {"text": value})
    before = bot.log_size()
    button = (f"[...{DIALOG}.querySelectorAll('button')]"
              f".find(b => b.innerText.trim() === {json.dumps(SAVE[locale])})")
    tab.click_in_page(button, "the form's save button")
    return before


@pytest.mark.parametrize("locale", ["zh-CN", "en-US"])
def test_astrbot_s_form_shows_every_setting_in_the_dashboard_s_language(bot, tab, locale):
    with screenshot_on_failure(tab, f"config_form_{locale}.png"):
        open_settings_form(bot, tab, locale)
        shown = normalised(tab.evaluate(f"{DIALOG}.innerText"))
        wanted = form_texts(locale)
        missing = [text for text in wanted if normalised(text) not in shown]
        assert len(wanted) > 100 and not missing, f"{len(missing)} of {len(wanted)} texts not shown: {missing[:5]}"
        # The memory types' chips by their names in the dashboard's language ("profile +5" in zh-CN before).
        labels = json.loads((I18N_DIR / f"{locale}.json").read_text(encoding="utf-8"))[
            "config"]["write_policy"]["allowed_types"]["labels"]
        chips = tab.evaluate(f"[...{DIALOG}.querySelectorAll('.v-chip')].map(c => c.innerText.trim())")
        assert labels[0] in chips, chips
        if locale == "zh-CN":
            assert "profile" not in chips, chips
        tab.click_in_page(f"[...{DIALOG}.querySelectorAll('.v-chip')][0]", "the first memory type chip")
        tab.screenshot(ARTIFACTS / f"config_form_types_{locale}.png")
        # The rerank section, drawn (for a look: tests/artifacts).
        tab.click_in_page(setting_input(json.loads((I18N_DIR / f"{locale}.json").read_text(encoding="utf-8"))
                                        ["config"]["rerank"]["provider_id"]["description"]), "the rerank provider")
        tab.screenshot(ARTIFACTS / f"config_form_rerank_{locale}.png")


def test_a_setting_saved_in_astrbot_s_form_reaches_the_plugin_and_a_bad_one_is_refused_aloud(bot, tab):
    with screenshot_on_failure(tab, "config_form_save.png"):
        open_settings_form(bot, tab, "en-US")
        save(bot, tab, "en-US", "Query embedding timeout (seconds)", "0.5")
        # (AstrBot 4.25 answers without the config while it reloads the plugin.)
        bot.wait_for(lambda: ((bot.get_plugin_config() or {}).get("vectors") or {}).get("query_timeout_seconds") == 0.5,
                     what="the saved query embedding timeout")
        # Past its range: the plugin says so and keeps its default.
        open_settings_form(bot, tab, "en-US")
        before = save(bot, tab, "en-US", "Query embedding timeout (seconds)", "90")
        refused = re.compile(r"ltm config: vectors\.query_timeout_seconds: 90(\.0)? is outside the allowed range "
                             r"0\.05–60; using the default 2\.0 · "
                             r"vectors\.query_timeout_seconds: 90(\.0)? 超出允许范围 0\.05–60；改用默认值 2\.0")
        bot.wait_for(lambda: refused.search(bot.log_text(before)),
                     what="the plugin's message about the query embedding timeout")
    bot.assert_log_clean()
