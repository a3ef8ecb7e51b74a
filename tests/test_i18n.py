"""The message catalogue: every text in both languages, the same values in
each, stored English texts shown in Chinese."""

from __future__ import annotations

import re

import pytest

from astrbot_plugin_ltm import i18n
from astrbot_plugin_ltm.errors import AdminError
from astrbot_plugin_ltm.i18n import CATALOGUE, language_of, msg, say, translate

PLACEHOLDER = re.compile(r"\{(\w+)\}")
HAN = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.parametrize("code", sorted(CATALOGUE))
def test_every_text_has_english_and_chinese_with_the_same_values(code: str) -> None:
    text = CATALOGUE[code]
    assert text.en.strip() and text.zh.strip(), code
    assert sorted(PLACEHOLDER.findall(text.en)) == sorted(PLACEHOLDER.findall(text.zh)), code
    # A Chinese entry that is the English one copied is no translation
    # (a text of only values, ids or commands is allowed to be the same).
    if re.search(r"[A-Za-z]{3,}", PLACEHOLDER.sub("", text.en).replace("/ltm", "")):
        assert HAN.search(text.zh), f"{code}: the Chinese text has no Chinese"


def test_a_message_renders_in_the_language_asked_and_english_as_its_string() -> None:
    m = msg("common.failed", error="boom")
    assert str(m) == "Sorry, that failed: boom"
    assert m.render("zh") == "抱歉，操作失败：boom"


def test_an_unknown_code_is_refused_when_built() -> None:
    with pytest.raises(KeyError):
        msg("no.such.text")


def test_stored_english_is_translated_with_its_values_and_unknown_text_kept() -> None:
    assert translate("Sorry, that failed: boom", "zh") == "抱歉，操作失败：boom"
    assert translate("an operator's own words", "zh") == "an operator's own words"
    assert translate("Sorry, that failed: boom", "en") == "Sorry, that failed: boom"
    assert i18n.code_of("Sorry, that failed: boom") == "common.failed"


def test_values_that_are_catalogue_texts_are_translated_too() -> None:
    inner = say("common.not_running", "en")
    assert translate(say("common.failed", "en", error=inner), "zh") == say(
        "common.failed", "zh", error=say("common.not_running", "zh"))


def test_an_admin_error_with_a_message_answers_in_the_readers_language() -> None:
    exc = AdminError(msg("common.failed", error="x"), 409)
    assert exc.code == "common.failed" and exc.status == 409
    assert str(exc) == "Sorry, that failed: x" and exc.message("zh") == "抱歉，操作失败：x"
    assert AdminError("plain words").message("zh") == "plain words"


@pytest.mark.parametrize(("text", "lang"), [
    ("我住在上海", "zh"), ("I live in Berlin", "en"), ("/ltm status", "en"),
    ("记住我喜欢 Python", "zh"), ("12345", "en"), ("", "en"),
])
def test_the_language_of_a_message(text: str, lang: str) -> None:
    assert language_of(text, "en") == lang


def test_no_two_texts_share_an_english_template() -> None:
    # A stored English text must lead back to one code, or its translation is a guess.
    by_english: dict[str, list[str]] = {}
    for code, text in CATALOGUE.items():
        by_english.setdefault(text.en, []).append(code)
    assert {en: codes for en, codes in by_english.items() if len(codes) > 1} == {}
