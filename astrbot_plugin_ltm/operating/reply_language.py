"""Which language a chat command is answered in.

In order: a Chinese subcommand (``/ltm 状态``: its alias) → Chinese; else
the command's own words (``/ltm remember 我养了一只猫``); else the language
the sender last wrote in (kept in memory, see :class:`SenderLanguages`);
else the ``reply_language`` setting, whose ``auto`` is the chat client's
language when it sends one (AstrBot's web chat does), else English.
"""

from __future__ import annotations

from collections import OrderedDict

from ..i18n import HAN, Lang, lang_of, written_language
from ..scope import Origin

# Subcommands whose argument is a person's own words: they say which
# language the person writes in. Other arguments are ids, targets and
# keywords ("confirm", "history"), which only count when they are Chinese.
FREE_TEXT_SUBCOMMANDS = frozenset({"remember", "记住"})
# Enough of a message to tell its language; the rest costs time on the hot path.
SAMPLE_CHARS = 200
MAX_SENDERS = 10_000


def written_in(text: str) -> Lang | None:
    """The language ``text`` is written in, judged on its start (it runs on
    every message), or None when it does not say."""
    return written_language(text[:SAMPLE_CHARS])


def command_words(said: str) -> tuple[str, str]:
    """A command as sent (``event.message_str``: "ltm 记住 …", maybe with
    its wake prefix) → (subcommand, the rest)."""
    words = said.strip().lstrip("/").split(maxsplit=1)
    if words and words[0].lower() == "ltm":
        words = words[1].split(maxsplit=1) if len(words) > 1 else []
    return (words[0], words[1] if len(words) > 1 else "") if words else ("", "")


def said_in(said: str) -> Lang | None:
    """The language a command's own text asks for: its subcommand's alias,
    then its words; None when it does not say."""
    sub, rest = command_words(said)
    if HAN.search(sub):
        return "zh"
    if sub.lower() in FREE_TEXT_SUBCOMMANDS:
        return written_in(rest)
    return "zh" if HAN.search(rest) else None


def reply_language(said: str = "", *, last: Lang | None = None, locale: str | None = None,
                   setting: str = "auto") -> Lang:
    """The language to answer a command in (the rules at the top)."""
    asked = said_in(said) if said else None
    if asked:
        return asked
    if last:
        return last
    if setting in ("zh", "en"):
        return lang_of(setting)
    return lang_of(locale, "en")


class SenderLanguages:
    """The language each sender last wrote in, in memory only (never
    stored), the most recent ``limit`` senders. Noted on the hot path:
    a few regex scans of the message's start and a dict update."""

    def __init__(self, limit: int = MAX_SENDERS) -> None:
        self.limit = limit
        self._by_sender: OrderedDict[tuple[str, str], Lang] = OrderedDict()

    @staticmethod
    def _key(origin: Origin) -> tuple[str, str]:
        return origin.platform_id, origin.sender_id

    def note(self, origin: Origin, text: str) -> None:
        lang = written_in(text or "")
        if lang is not None:
            self.set(origin, lang)

    def set(self, origin: Origin, lang: Lang) -> None:
        key = self._key(origin)
        self._by_sender[key] = lang
        self._by_sender.move_to_end(key)
        if len(self._by_sender) > self.limit:
            self._by_sender.popitem(last=False)

    def last(self, origin: Origin) -> Lang | None:
        return self._by_sender.get(self._key(origin))

    def __len__(self) -> int:
        return len(self._by_sender)
