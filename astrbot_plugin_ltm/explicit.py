"""Rule-based capture of explicit requests: "remember that …", "记住…".

These need no LLM: the user said what to keep. The fact is rewritten from
the first person to the speaker's name, so it reads correctly when it is
injected later (and in a group, says whose it is).
"""

from __future__ import annotations

import re

_REQUEST = re.compile(
    r"^\s*(?:please\s+|pls\s+)?(?:remember|memorize|note)\b(?:\s+that\b)?\s*[:：,，]?\s*(?P<en>.+)$"
    r"|^\s*(?:请|帮我|麻烦)?\s*(?:记住|记一下|记得)\s*[:：,，]?\s*(?P<zh>.+)$",
    re.I | re.S,
)
_RECALL = re.compile(r"^(when|what|how|where|who|why|the time|us|you)\b", re.I)
_NEGATIVE = re.compile(r"\b(never|don't|do not|avoid|stop)\b|不要|别|禁止|不许", re.I)
_LIKING = re.compile(r"\b(like|love|prefer|enjoy|hate|dislike|favou?rite)s?\b|喜欢|偏好|爱|讨厌|最爱", re.I)

_FIRST_PERSON = [
    (re.compile(r"\bI am\b|\bI'm\b", re.I), "{name} is"),
    (re.compile(r"\bmy\b", re.I), "{name}'s"),
    (re.compile(r"\bmine\b", re.I), "{name}'s"),
    (re.compile(r"\bme\b", re.I), "{name}"),
    (re.compile(r"\bI\b"), "{name}"),
    # "我们" is "we" and "自我" is "self": neither is the speaker alone.
    (re.compile("(?<!自)我的"), "{name}的"),
    (re.compile("(?<!自)我(?!们)"), "{name}"),
]


def explicit_fact(message: str) -> str | None:
    """The fact in an explicit request, or None when the message is not one."""
    match = _REQUEST.match(message.strip())
    if not match:
        return None
    fact = (match.group("en") or match.group("zh") or "").strip().rstrip("。.!！")
    # "Remember when we…?" is reminiscing and "记住了" an acknowledgement,
    # not requests.
    if (len(fact) < 2 or fact.lower() in ("that", "this", "it") or "?" in fact or "？" in fact
            or fact.endswith("吗") or _RECALL.match(fact) or fact[0] in "了啦喽哦吧"):
        return None
    return fact


def attribute(fact: str, speaker: str) -> str:
    if not speaker:
        return fact
    for pattern, replacement in _FIRST_PERSON:
        text = replacement.format(name=speaker)
        fact = pattern.sub(lambda _, text=text: text, fact)  # a name is literal text
    return fact


def guess_type(fact: str) -> str:
    if _NEGATIVE.search(fact):
        return "constraint"
    if _LIKING.search(fact):
        return "preference"
    return "profile"
