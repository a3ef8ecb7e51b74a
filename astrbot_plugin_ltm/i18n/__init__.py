"""One catalogue for every text a person reads, in English and Chinese.

A stable code (``"pause.on"``) names an English and a Chinese template; :func:`msg`
renders late, in the reader's language. Texts stored in English are shown in Chinese
by :func:`translate`, which finds the template they were made from; an operator's own
words are shown as typed. Each area module holds a ``TEXTS`` dict of code → (en, zh).
"""

from __future__ import annotations

import pkgutil
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import import_module
from typing import Any, Literal

Lang = Literal["en", "zh"]
# Between the items of a list in a sentence: "a, b" and "甲、乙".
SEPARATORS: dict[Lang, str] = {"en": ", ", "zh": "、"}
# The area modules whose TEXTS make the catalogue: every module of this package.
AREAS = tuple(sorted(m.name for m in pkgutil.iter_modules(__path__)))

_PLACEHOLDER = re.compile(r"\{(\w+)\}")
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")  # a Han character
_LATIN_WORD = re.compile(r"[A-Za-z]{2,}")


@dataclass(frozen=True)
class Text:
    en: str
    zh: str

    def template(self, lang: Lang) -> str:
        return self.zh if lang == "zh" else self.en


def _load() -> dict[str, Text]:
    catalogue: dict[str, Text] = {}
    for area in AREAS:
        texts: Mapping[str, tuple[str, str]] = import_module(f"{__name__}.{area}").TEXTS
        for code, (en, zh) in texts.items():
            if code in catalogue:
                raise ValueError(f"i18n: text code {code!r} is defined twice")
            catalogue[code] = Text(en, zh)
    return catalogue


CATALOGUE: dict[str, Text] = _load()


def lang_of(value: object, default: Lang = "en") -> Lang:
    """A language setting or locale ("zh", "zh-CN", "zh_Hans", "en-US") as a Lang."""
    text = str(value or "").strip().lower().replace("_", "-")
    if text.startswith(("zh", "cn")):
        return "zh"
    if text.startswith("en"):
        return "en"
    return default


def written_language(text: str) -> Lang | None:
    """The language a person wrote ``text`` in; None for ids, numbers, a bare "/ltm status"."""
    han = len(HAN.findall(text or ""))
    latin = len(_LATIN_WORD.findall(text or ""))
    if han and han * 2 >= latin:
        return "zh"
    return "en" if latin and not han else None


def language_of(text: str, default: Lang = "en") -> Lang:
    """:func:`written_language`, or ``default`` when the text does not say."""
    return written_language(text) or default


@dataclass(frozen=True)
class Message:
    """A catalogue text with its values, rendered in a language when shown.
    ``str()`` is the English text (logs, stored reasons)."""

    code: str
    params: dict[str, Any] = field(default_factory=dict)

    def render(self, lang: Lang = "en") -> str:
        return say(self.code, lang, **self.params)

    def __str__(self) -> str:
        return self.render("en")


def msg(code: str, **params: Any) -> Message:
    if code not in CATALOGUE:
        raise KeyError(f"i18n: no text {code!r} in the catalogue")
    return Message(code, params)


# Placeholders holding a stored word (a status, a type), shown by its catalogue entry,
# so no reason reads "状态为 superseded".
WORDS = {"status": "cmd.state.", "type": "cmd.type.", "mode": "cmd.mode."}


def _value(name: str, value: Any, lang: Lang) -> Any:
    if isinstance(value, Message):
        return value.render(lang)
    if lang != "en" and isinstance(value, str) and name in WORDS and WORDS[name] + value in CATALOGUE:
        return CATALOGUE[WORDS[name] + value].template(lang)
    return value


def say(code: str, lang: Lang = "en", /, **params: Any) -> str:
    """The text ``code`` in ``lang``, its placeholders (Messages, WORDS) rendered in it too."""
    entry = CATALOGUE[code]
    values = {k: _value(k, v, lang) for k, v in params.items()}
    return _PLACEHOLDER.sub(lambda m: str(values.get(m.group(1), m.group(0))), entry.template(lang))


def render(text: str | Message, lang: Lang) -> str:
    """A Message in ``lang``; a plain (stored, English) text translated."""
    return text.render(lang) if isinstance(text, Message) else translate(text, lang)


# -- stored English back to its template -------------------------------------


@dataclass(frozen=True)
class _Pattern:
    code: str
    regex: re.Pattern[str]
    literal: int  # characters of fixed text: the most specific template wins


def _pattern(code: str, template: str) -> _Pattern | None:
    parts, seen, at = [], set(), 0
    for m in _PLACEHOLDER.finditer(template):
        parts.append(re.escape(template[at:m.start()]))
        name = m.group(1)
        parts.append(f"(?P={name})" if name in seen else f"(?P<{name}>.+?)")
        seen.add(name)
        at = m.end()
    parts.append(re.escape(template[at:]))
    literal = len(_PLACEHOLDER.sub("", template).strip())
    if literal < 3:  # "{fact}" alone matches anything
        return None
    return _Pattern(code, re.compile("".join(parts) + r"\Z", re.S), literal)


@lru_cache(maxsize=1)
def _patterns() -> tuple[_Pattern, ...]:
    found = [p for code, text in CATALOGUE.items() if (p := _pattern(code, text.en)) is not None]
    return tuple(sorted(found, key=lambda p: -p.literal))


def parse(text: str) -> Message | None:
    """The catalogue text a stored English ``text`` was made from, with its
    values; None for text no template made (an operator's own words)."""
    for pattern in _patterns():
        m = pattern.regex.match(text)
        if m:
            return Message(pattern.code, m.groupdict())
    return None


@lru_cache(maxsize=4096)
def _translate(text: str, lang: Lang, depth: int) -> str:
    found = parse(text)
    if found is None:
        return text
    params = {k: (_translate(v, lang, depth - 1) if depth > 0 else v) for k, v in found.params.items()}
    return say(found.code, lang, **params)


def translate(text: str, lang: Lang) -> str:
    """A stored English text in ``lang`` (values inside it that are
    catalogue texts too are translated as well); unknown text as it is."""
    if lang == "en" or not text:
        return text
    return _translate(text, lang, 3)


def code_of(text: str) -> str | None:
    """The catalogue code a stored text was made from (the machine-readable
    reason beside the human one), or None."""
    found = parse(text)
    return found.code if found else None


def missing(codes: Iterable[str]) -> list[str]:
    return [c for c in codes if c not in CATALOGUE]
