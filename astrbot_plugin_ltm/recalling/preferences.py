"""A read stage: a message asking for suggestions ranks the person's turns that state a
preference or habit ("I'm really into jazz", "我一般不吃辣"), what suggestions are answered
from (docs/decisions.md#d85); a wish for help ("I'd like to know…") is not one.
"""

from __future__ import annotations

import re

from ..enums import Role
from .asking import asks_for_suggestions
from .ranking import fuse, turn_rankings
from .read import Read

_EN = re.compile(
    # "I (really/also/…) prefer/love/like/enjoy/hate…", not "I'd like" / "I would like"
    r"\bI(?! would)(?! 'd)(?:\s+(?:really|also|just|do|still|absolutely|totally|generally|usually|always|"
    r"especially|definitely|personally|kind of|much|mostly|don't|do not|never))*\s+"
    r"(?:prefer|love|like|enjoy|adore|hate|dislike|avoid|can't stand|cannot stand)s?\b"
    # "I'm into / a fan of / passionate about / allergic to / vegetarian"
    r"|\bI(?:'m| am)\s+(?:(?:really|also|quite|very|a|an|big|huge|such)\s+)*"
    r"(?:into|fan of|passionate about|fond of|allergic to|vegetarian|vegan|not a fan)\b"
    # "my favourite…", "my go-to…", habits: "I usually / always / tend to / never…"
    r"|\bmy (?:favou?rites?|go-to)\b|\bI (?:usually|always|often|tend to|never|normally|typically)\b",
    re.I)
_ZH = re.compile(
    r"我(?:很|最|更|比较|特别|非常|超|挺|还是|一直|也|真的|不太|不|就|向来|从小)?"
    r"(?:喜欢|爱吃|爱喝|爱看|爱听|爱玩|偏爱|偏好|讨厌|习惯|热衷|迷上|钟爱|受不了|不吃|不喝|吃素|对.{1,8}过敏)"
    r"|我(?:的)?最爱|我(?:平时|一般|通常|每天|总是)")


def states_preference(text: str) -> bool:
    """Whether ``text`` states what the person likes, dislikes or usually does."""
    return _EN.search(text) is not None or _ZH.search(text) is not None


async def rank_stated_preferences(read: Read) -> None:
    """A stage: a message asking for suggestions ranks the candidate turns that state a
    preference or habit, in the other rankings' order, however the question is worded."""
    if not asks_for_suggestions(read.question):
        return
    fused = fuse(turn_rankings(read))
    liked = [rowid for rowid, turn in read.turns.items()
             if turn.source_role == Role.USER and states_preference(str(turn.content.get("text", "")))]
    read.added.append(sorted(liked, key=lambda rowid: (-fused.get(rowid, 0.0), rowid)))
