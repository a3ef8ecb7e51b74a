"""Whether a speaker asked to keep what they said to themselves ("别告诉别人", "don't
tell anyone"), so a model that forgets to mark it cannot let a secret into a group."""

from __future__ import annotations

import re

_ASKS = re.compile(
    r"别告诉(?:别人|其他人|任何人|大家)|不要告诉(?:别人|其他人|任何人|大家)|别跟(?:别人|其他人|任何人)说|"
    r"不要跟(?:别人|其他人|任何人)说|保密|是秘密|我的秘密|替我守|别外传|不要外传|只告诉你|"
    r"\bdon'?t tell (?:any(?:one|body)|others|the others|people)\b|\bdo not tell (?:any(?:one|body)|others)\b|"
    r"\bkeep (?:it|this|that) (?:a )?secret\b|\bkeep (?:it|this|that) (?:between us|to yourself)\b|"
    r"\bbetween (?:you and me|us)\b|\bmy secret\b|\bit'?s a secret\b",
    re.IGNORECASE,
)


def asks_secrecy(text: str) -> bool:
    """Whether ``text`` asks that what it says be kept secret."""
    return bool(_ASKS.search(text or ""))
