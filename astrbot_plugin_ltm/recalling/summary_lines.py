"""A summary in the block: its day and the sentence the message is about. Whole,
two or three summaries take half a block, pushing out the other sessions a question
spans (docs/decisions.md#d63); memory_expand shows the rest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from functools import lru_cache

from ..clock import parse_stored_time
from ..text import search_tokens

FOCUS_SENTENCES = 1
ELLIPSIS = "…"
SUMMARY_CACHE = 4096  # summaries whose sentences and tokens are kept (a read focuses a few dozen)
# A sentence ends at . ! ? or … followed by a space, or at a CJK full stop.
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|(?<=[。！？])\s*|\s*\n\s*")


@lru_cache(maxsize=SUMMARY_CACHE)
def _sentences(text: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """``text``'s sentences with their tokens; an edit changes the text, the cache key."""
    return tuple((s, frozenset(search_tokens(s))) for s in (p.strip() for p in _SENTENCE_END.split(text)) if s)


def focus(text: str, query: Iterable[str], keep: int = FOCUS_SENTENCES, fill: bool = False) -> str:
    """At most ``keep`` sentences sharing the most of ``query``'s rarest tokens, in order,
    "…" where left out; none sharing any: the opening one, which sets the scene."""
    if len(_SENTENCE_END.findall(text)) < keep:  # too few to cut: not tokenised (most turns)
        return text
    said = _sentences(text)
    if len(said) <= keep:
        return text
    wanted = set(query)
    spread = {t: sum(1 for _, tokens in said if t in tokens) for t in wanted}
    weight = [sum(1.0 / spread[t] for t in tokens & wanted) for _, tokens in said]
    best = sorted(n for n in sorted(range(len(said)), key=lambda n: -weight[n])[:keep] if weight[n] > 0) or [0]
    if fill:  # up to ``keep``, the opening sentences join those chosen
        best = sorted({*best, *[n for n in range(len(said)) if n not in best][: keep - len(best)]})
    parts: list[str] = []
    for n in best:
        if n > (best[best.index(n) - 1] + 1 if parts else 0):
            parts.append(ELLIPSIS)
        parts.append(said[n][0])
    if best[-1] < len(said) - 1:
        parts.append(ELLIPSIS)
    return " ".join(parts)


def summary_day(valid_from: datetime | str | None, updated_at: datetime) -> str:
    """The day a summary starts (its first event), else the day it was written."""
    return f"{parse_stored_time(valid_from or updated_at):%Y-%m-%d}"
