"""Which language a chat command is answered in.

In order: a Chinese subcommand (``/ltm 状态``: its alias) → Chinese; else
the command's own words (``/ltm remember 我养了一只猫``); else the language
the sender last wrote in (kept in memory, see :class:`SenderLanguages`);
else the ``reply_language`` setting, whose ``auto`` is the chat client's
language when it sends one (AstrBot's web chat does), else English.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field

from ..i18n import HAN, Lang, lang_of, written_language
from ..scope import Origin

# Their argument is a person's own words, in the language they write in; other
# arguments (ids, targets, keywords) only count when they are Chinese.
FREE_TEXT_SUBCOMMANDS = frozenset({"remember", "记住"})
# Enough of a message to tell its language; the rest costs time on the hot path.
SAMPLE_CHARS = 200
MAX_SENDERS = 10_000
# Messages kept per sender until a command asks: the newest saying a language wins.
KEPT_SAMPLES = 3


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
    """The language each sender last wrote in, never stored. Noted on the hot
    path, so judged only when a command asks: most senders never send one."""

    def __init__(self, limit: int = MAX_SENDERS) -> None:
        self.limit = limit
        self._by_sender: OrderedDict[tuple[str, str], _Said] = OrderedDict()

    @staticmethod
    def _key(origin: Origin) -> tuple[str, str]:
        return origin.platform_id, origin.sender_id

    def note(self, origin: Origin, text: str) -> None:
        said = self._said(origin)
        said.samples.append((text or "")[:SAMPLE_CHARS])

    def set(self, origin: Origin, lang: Lang) -> None:
        said = self._said(origin)
        said.judged = lang
        said.samples.clear()

    def last(self, origin: Origin) -> Lang | None:
        said = self._by_sender.get(self._key(origin))
        if said is None:
            return None
        # The newest message that says a language; none does: the one judged before.
        for sample in reversed(said.samples):
            lang = written_in(sample)
            if lang is not None:
                said.judged = lang
                break
        said.samples.clear()
        return said.judged

    def samples_kept(self, origin: Origin) -> tuple[str, ...]:
        said = self._by_sender.get(self._key(origin))
        return tuple(said.samples) if said is not None else ()

    def _said(self, origin: Origin) -> _Said:
        key = self._key(origin)
        said = self._by_sender.get(key)
        if said is None:
            said = self._by_sender[key] = _Said()
            if len(self._by_sender) > self.limit:
                self._by_sender.popitem(last=False)
        else:
            self._by_sender.move_to_end(key)
        return said

    def __len__(self) -> int:
        return len(self._by_sender)


@dataclass
class _Said:
    """A sender's language as last judged, and the starts of the messages
    noted since (a message saying nothing, "123 :)", keeps the older one)."""

    judged: Lang | None = None
    samples: deque[str] = field(default_factory=lambda: deque(maxlen=KEPT_SAMPLES))
