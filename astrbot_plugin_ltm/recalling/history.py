"""What the request already carries, so the block does not recall it again
(docs/decisions.md#d76): a turn matches a history message, one of its lines, or it
with its first or last line off (another plugin may add a sender or a time). No case
or Unicode folding, which cost more than the rest; set look-ups only. Memories are
never matched: they say what no single message says.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# What the recorder appends to a text it cut (recording.recorder.truncate).
_TRUNCATED = re.compile(r"… \[truncated \d+ of \d+ characters\]$")
# A cut record is looked up by this many of its first characters.
OPENING_CHARS = 32
# A history this long (characters) is read into a History on a thread.
INLINE_CHARS = 20_000


def normalised(text: str) -> str:
    return " ".join(text.split())


class History:
    """The normalised texts of the request's earlier messages."""

    def __init__(self, texts: Iterable[str]) -> None:
        whole: set[str] = set()
        for text in texts:
            lines = [n for n in (normalised(line) for line in text.splitlines()) if n]
            whole.update(lines)
            if len(lines) > 1:
                whole.update((" ".join(lines), " ".join(lines[1:]), " ".join(lines[:-1])))
        self._whole = frozenset(whole)
        self._openings: dict[str, list[str]] | None = None  # built for the first cut record

    @classmethod
    def of(cls, texts: Iterable[str] | None) -> History | None:
        """None for no history (a new conversation, or an AstrBot that gave none)."""
        history = cls(texts or ())
        return history if history else None

    @classmethod
    async def read(cls, texts: Sequence[str]) -> History | None:
        """``of``, off the event loop for a long history (a few ms per 100k characters)."""
        if sum(len(t) for t in texts) < INLINE_CHARS:
            return cls.of(texts)
        return await asyncio.to_thread(cls.of, texts)

    def __bool__(self) -> bool:
        return bool(self._whole)

    def __len__(self) -> int:
        return len(self._whole)

    def holds(self, text: str) -> bool:
        cut = _TRUNCATED.search(text)
        said = normalised(text[:cut.start()] if cut else text)
        if not said:
            return False
        if said in self._whole:
            return True
        return cut is not None and any(m.startswith(said) for m in self._opening(said[:OPENING_CHARS]))

    def _opening(self, key: str) -> list[str]:
        if self._openings is None:
            self._openings = {}
            for m in self._whole:
                self._openings.setdefault(m[:OPENING_CHARS], []).append(m)
        return self._openings.get(key, [])

    def holds_turn(self, content: Mapping[str, Any]) -> bool:
        """Whether a recorded event (its ``text``, or a tool's ``result``) is in the history."""
        said = content.get("result") if "tool" in content else content.get("text")
        return isinstance(said, str) and self.holds(said)
