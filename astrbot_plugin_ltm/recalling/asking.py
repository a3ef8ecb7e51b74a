"""What a message asks for, beyond its words (pure functions). A question that
compares events names each in a part, searched on its own: the whole's best matches
share a few words with every event (docs/decisions.md#d84). A request for
suggestions lifts the turns stating a preference (docs/decisions.md#d85).
"""

from __future__ import annotations

import re

from ..text import query_tokens
from .dates import without_dates

# A question about the order of events or the time between them; not one
# about a duration or a frequency ("how long…", "how many days a week…").
_COMPARES = re.compile(
    r"\b(?:earlier|later|sooner|before|after|since|between|until)\b|\bin what order\b"
    r"|\bfirst\b.*\bor\b|\bor\b.*\bfirst\b"  # "which did I do first, X or Y", not "his first dance"
    r"|先.*还是|还是.*先|后来|之前|之后|以前|以后|哪个早|谁早",
    re.I)
# The frame of such a question, which names no event.
_FRAME = re.compile(
    r"\b(?:first|earlier|later|sooner|before|after|since|between|until)\b|\bin what order\b|先|后来|哪个早|谁早"
    r"|\bhow (?:many|much|long) (?:\w+ ){0,2}?(?:minutes|hours|days|weeks|months|years|time)\b"
    r"|\bhow long\b|\b(?:ago|passed|elapsed|went by|gone by|did it take|had passed)\b"
    r"|多少天|多久|几天|几个月|几年|过了|经过了|隔了", re.I)
# Where a comparing question passes from one event to the next.
_JOINS = re.compile(
    r"[,;:?!，；：？！、]|\s(?:or|and|than|before|after|since|between|until|then|instead of)\s"
    r"|\s(?:did|do|was|were|have|had)(?=\s+(?:I|we)\b)"
    r"|还是|或者|以及|然后|之前|之后|以前|以后|和|跟|与|先|再",
    re.I)
# At most this many parts: a question names two or three events, and what is asked of them.
MAX_PARTS = 4

# A request for suggestions, not a question about one made before ("What
# book did Tim recommend?", "你给我推荐过哪些画家？" ask what was said).
_NOUNS = r"(?:suggestions?|recommendations?|ideas?|tips|advice|thoughts)"
_SUGGESTS = re.compile(
    r"\b(?:can|could|would|will) you (?:\w+ ){0,2}?(?:suggest|recommend|think of)\b"
    r"|\b(?:can|could|would|will) you (?:\w+ ){0,2}?(?:give|offer|share|have) (?:me |us )?(?:some |any |a few )?"
    + _NOUNS + r"|\b(?:any|some|a few|got|have) (?:\w+ )?" + _NOUNS + r"\s*(?:[?.!]|$|on |for |about |to )"
    r"|\bwhat (?:would|do|should) (?:you|I) (?:\w+ )?(?:suggest|recommend|do|try|choose|pick)\b"
    r"|\b(?:suggest|recommend) (?:me |us |some |a |an |any |a few |something|anything|where|what|how)"
    r"|推荐(?![过了的])|建议(?![过了的])|出主意|点子|有什么好|有啥好|选哪|怎么选",
    re.I)


def event_parts(message: str) -> list[str]:
    """The parts of a comparing question that each name an event (two to MAX_PARTS), else none."""
    if _COMPARES.search(message) is None:
        return []
    whole = set(query_tokens(message))
    parts: list[str] = []
    for piece in _JOINS.split(without_dates(message)):
        # The question's frame ("how many days", "first") names no event.
        part = " ".join(_FRAME.sub(" ", piece).split())
        tokens = set(query_tokens(part))
        # A part names an event by a word (not "2023", not one Chinese character).
        if any(len(t) > 1 and not t.isdigit() for t in tokens) and tokens != whole and part not in parts:
            parts.append(part)
    return parts[:MAX_PARTS] if len(parts) >= 2 else []


def asks_for_suggestions(message: str) -> bool:
    """Whether the message asks for suggestions, recommendations or ideas."""
    return _SUGGESTS.search(message) is not None
