"""Rule-based capture of explicit requests: "remember that …", "记住…".

These need no LLM: the user said what to keep. The fact is rewritten to the
speaker's name, as extraction would write it, so it reads correctly when
injected later: "记住我的猫叫咪咪" after "我叫小明" keeps "小明的猫叫咪咪".
"""

from __future__ import annotations

import re

from ..text import is_cjk, replace_literally

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
    (re.compile(r"\bI don't\b"), "{name} doesn't"),
    (re.compile(r"\bI've\b"), "{name} has"),
    (re.compile(r"\bI'll\b"), "{name} will"),
    (re.compile(r"\bI'd\b"), "{name} would"),
    (re.compile(r"\bmy\b", re.I), "{name}'s"),
    (re.compile(r"\bmine\b", re.I), "{name}'s"),
    (re.compile(r"\bme\b", re.I), "{name}"),
    (re.compile(r"\bI\b"), "{name}"),
    # "我们" is "we" and "自我" is "self": neither is the speaker alone.
    (re.compile("(?<!自)我的"), "{name}的"),
    (re.compile("(?<!自)我(?!们)"), "{name}"),
]


# After "I" becomes a name the verb has to agree with it ("I like tea" ->
# "Alice likes tea"). Only a present-tense verb changes: modals and past
# forms stay as they are, and adverbs in between are stepped over.
_ADVERBS = (
    "also|still|never|always|often|just|only|now|sometimes|even|already|really|usually|actually|mostly|"
    "generally|normally|totally|absolutely|definitely|rarely|seldom|occasionally|regularly|currently|"
    "mainly|honestly|frequently|kind of|sort of"
)
_SUBJECT_VERB = re.compile(rf"\bI((?:\s+(?:{_ADVERBS}))*)\s+([A-Za-z]+)\b(?!')")
_UNCHANGED = {
    "can", "could", "will", "would", "shall", "should", "may", "might", "must", "am", "was", "were", "had",
    "did", "used", "ought", "went", "got", "made", "saw", "said", "took", "came", "knew", "thought", "felt",
    "left", "met", "bought", "ate", "drank", "wrote", "ran", "began", "found", "gave", "told", "became",
    "kept", "lost", "paid", "sent", "spent", "won", "brought", "built", "caught", "chose", "drove", "fell",
    "flew", "forgot", "grew", "heard", "held", "led", "meant", "rode", "sang", "sat", "slept", "spoke",
    "stood", "swam", "taught", "threw", "understood", "woke", "wore", "broke", "sold", "hung", "fought",
    "has", "does", "is",
}
_PRESENT_ED = {"need", "feed", "seed", "bleed", "speed", "breed", "proceed", "succeed", "exceed", "shed", "wed"}
_THIRD_PERSON = {"have": "has", "do": "does", "go": "goes", "be": "is"}


def _third_person(verb: str) -> str:
    lower = verb.lower()
    if lower in _UNCHANGED or (lower.endswith("ed") and lower not in _PRESENT_ED):
        return verb
    if lower in _THIRD_PERSON:
        return _THIRD_PERSON[lower]
    if lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(lower) > 2 and lower.endswith("y") and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _agree(match: re.Match[str]) -> str:
    return f"I{match.group(1)} {_third_person(match.group(2))}"


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
    """The fact in the third person, about ``speaker``."""
    if not speaker:
        return fact
    fact = _SUBJECT_VERB.sub(_agree, fact)  # while "I" still marks the subject
    for pattern, replacement in _FIRST_PERSON:
        fact = replace_literally(pattern, replacement.format(name=speaker), fact)
    return fact


def unnamed(fact: str) -> str:
    """Who a fact is about when the person has no name to call them by."""
    return "用户" if any(is_cjk(ch) for ch in fact) else "the user"


def guess_type(fact: str) -> str:
    if _NEGATIVE.search(fact):
        return "constraint"
    if _LIKING.search(fact):
        return "preference"
    return "profile"
