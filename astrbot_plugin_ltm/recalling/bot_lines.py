"""The bot's own replies: shown as the bot's, never as a person's. A model's replies
run longer than people type, so each is cut shorter and together they take at most a
share of the budget (docs/decisions.md#d57).
"""

from __future__ import annotations

import re

# A line of the bot's is cut to this many characters: what it recommended or promised comes early.
BOT_CHARS = 100
# The bot's lines' share of max_tokens when the message asks what the bot said; else
# they are context, and take CONTEXT_SHARE (docs/decisions.md#d119).
BOT_SHARE = 0.5
CONTEXT_SHARE = 0.25


# A message asking what the bot said ("you recommended…", "你给我推荐过哪些…"; docs/decisions.md#d119).
_EN = re.compile(
    r"\byou(?:\s+\w+){0,3}?\s+(?:said|mentioned|suggested|recommended|gave|told|listed|provided|shared|"
    r"wrote|explained|described|proposed|named|offered|pointed out|referred|talked about|came up with|advised)\b"
    # "what did you tell me…", "which one did you recommend"
    r"|\bdid you\s+(?:say|tell|mention|suggest|recommend|give|list|provide|share|write|explain|describe|"
    r"propose|name|offer|advise)\b"
    r"|\bremind me\b|\byour (?:suggestions?|recommendations?|advice|answer|reply|list|tips|ideas?)\b"
    r"|\b(?:our|the|that) (?:previous|last|earlier|past) (?:conversation|chat|discussion|talk)\b",
    re.I)
# 你 as the one who spoke: not "我和你推荐过" / "我给你推荐" (the person told the bot).
_ZH = re.compile(
    r"(?<![和跟给向对与])你(?:曾经|之前|上次|以前|刚才|那时|那天|还)?(?:给我|跟我|和我|对我|帮我|为我|向我)?"
    r"(?:推荐|建议|告诉|分享|说|讲|提到|提过|介绍|列|教)")


def asks_what_the_bot_said(message: str) -> bool:
    """Whether ``message`` asks about the bot's own words."""
    return _EN.search(message) is not None or _ZH.search(message) is not None


def bot_share(message: str) -> float:
    """The share of the budget the bot's lines may take in the block for ``message``."""
    return BOT_SHARE if asks_what_the_bot_said(message) else CONTEXT_SHARE
