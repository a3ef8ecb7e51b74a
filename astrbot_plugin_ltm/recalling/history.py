"""What the request already carries: the conversation history AstrBot
sends with this message, so the block does not recall it a second time.

"Already has" (docs/decisions.md#d74): a recorded turn — a person's message,
the bot's reply or a tool's result, each one line of the block — is in the
history when its text, normalised (NFKC, case-folded, whitespace collapsed),
is one of the history's messages or, from ``MIN_CONTAINED_CHARS`` on, lies
inside one (AstrBot may have stored the message with a quote or a sender
prefix around it; a truncated record is its original's opening). A user
message and the bot's reply are matched each on its own, so a turn whose
reply AstrBot did not keep still shows the reply. Memories and summaries are
never matched: they say what no single message says.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

# Below this many characters a text must be a whole message of the history:
# "ok" or "好的" lies inside almost any message.
MIN_CONTAINED_CHARS = 8
# What the recorder appends to a text it cut (recording.recorder.truncate).
_TRUNCATED = re.compile(r"… \[truncated \d+ of \d+ characters\]$")
# Between the history's messages in the joined text: no normalised text holds it.
_SEPARATOR = "\x00"


def normalised(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


class History:
    """The normalised texts of the request's earlier messages."""

    def __init__(self, texts: Iterable[str]) -> None:
        messages = [n for n in (normalised(t) for t in texts) if n]
        self._whole = frozenset(messages)
        self._joined = _SEPARATOR.join(messages)

    @classmethod
    def of(cls, texts: Iterable[str] | None) -> History | None:
        """None for no history (a new conversation, or an AstrBot that gave none)."""
        history = cls(texts or ())
        return history if history else None

    def __bool__(self) -> bool:
        return bool(self._whole)

    def __len__(self) -> int:
        return len(self._whole)

    def holds(self, text: str) -> bool:
        said = normalised(_TRUNCATED.sub("", text))
        if not said:
            return False
        return said in self._whole or (len(said) >= MIN_CONTAINED_CHARS and said in self._joined)

    def holds_turn(self, content: Mapping[str, Any]) -> bool:
        """Whether a recorded event (its stored content: ``text``, or a
        tool's ``result``) is in the history."""
        said = content.get("result") if "tool" in content else content.get("text")
        return isinstance(said, str) and self.holds(said)
