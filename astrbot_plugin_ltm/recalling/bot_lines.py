"""The bot's own replies: how its lines are shown, and which never are.

A line of the bot's reads as the bot's (``BOT_LABEL``), never as something
a person said. Its replies are candidates like anyone's (storing.turns:
RECALLED_ROLES), but a model's replies run longer than what people type,
so they are kept from crowding out what people said: each is cut shorter
than a person's turn, and together they take at most a share of the token
budget (docs/decisions.md#d57). Small talk and echoes are never shown: the
recorder withholds them, with any turn that would steer the bot
(``withhold``), judged once when recorded (docs/decisions.md#d108).
"""

from __future__ import annotations

import re
from typing import Any

from ..enums import RECALLED_ROLES, Role
from ..instructions import instruction_reason
from ..storing.tables import MemoryEvent
from ..storing.turns import turn_text
from ..text import search_tokens

# Who a line of the bot's own reads as: the model it is shown to is the bot
# ("you recommended…"), and no person is ever credited with it.
BOT_LABEL = "bot (you)"

# A line of the bot's is cut to this many characters (a person's to
# block.EVENT_CHARS): what it recommended or promised comes early.
BOT_CHARS = 100
# The bot's lines together take at most this share of read_policy.max_tokens
# when the message asks what the bot said (asks_what_the_bot_said); for any other they
# are context around what people said, and take at most CONTEXT_SHARE
# (half as much: docs/decisions.md#d119).
BOT_SHARE = 0.5
CONTEXT_SHARE = 0.25


def speaker_of(event: Any) -> str | None:
    """The name a turn is said by: the bot's label for its own replies,
    else the sender's nickname or id (a MemoryEvent or a reader's row)."""
    if event.source_role == Role.ASSISTANT:
        return BOT_LABEL
    return event.sender_name or event.sender_id


def is_bot(turn: Any) -> bool:
    """A reply of the bot's own (a MemoryEvent or a reader's row)."""
    return getattr(turn, "source_role", None) == Role.ASSISTANT


class BotAllowance:
    """The tokens the bot's lines of one block may still take."""

    def __init__(self, max_tokens: int, share: float | None = None) -> None:
        self.limit = int(max_tokens * (BOT_SHARE if share is None else share))
        self.used = 0

    def admits(self, cost: int) -> bool:
        return self.used + cost <= self.limit

    def take(self, cost: int) -> None:
        self.used += cost

    def give_back(self, cost: int) -> None:
        self.used = max(0, self.used - cost)


# What the block could show of a reply of the bot's, with a margin.
BOT_JUDGED_CHARS = 300
# A reply of the bot's with fewer search tokens than this in its first
# SMALL_TALK_CHARS ("OK.", "How nice!", "当然了") is small talk: it says
# nothing to remember (a recommendation, advice or a promise never is).
SMALL_TALK_TOKENS = 4
SMALL_TALK_CHARS = 120
# A reply at least this share of whose words are the words of the message
# it answers only says it back ("ECHO: …", "So you live in Paris!"): the
# person's line, or the memory made of it, stands for it.
ECHO_SHARE = 0.8


def small_talk(reply: str) -> bool:
    """Too few words to be a recommendation, advice or a promise."""
    return len(search_tokens(reply[:SMALL_TALK_CHARS])) < SMALL_TALK_TOKENS


def echoes(reply: str, message: str) -> bool:
    """The reply's words are mostly the message's."""
    said = set(search_tokens(reply))
    return bool(said) and len(said & set(search_tokens(message))) / len(said) >= ECHO_SHARE


def withhold(events: list[MemoryEvent]) -> int:
    """Withhold, before they are stored, the turns that must never be shown,
    judged once here rather than on every read (a recorded turn never
    changes). Such a turn is kept in the archive and extracted like any
    other (the write gate holds what it yields), but never indexed or shown:

    - a turn that would steer the bot if shown ("ignore your rules", a
      fake end of the block); a reply of the bot's own is judged on its
      start (BOT_JUDGED_CHARS), what the block could show of it: its code
      and advice further on are not orders;
    - a reply of the bot's that is small talk, or that echoes the person's
      message before it in ``events`` (the recorder writes a turn's message
      and reply in one batch; a reply without its message is not judged an
      echo).

    About 0.1 ms a turn: call it off the event loop. Returns how many were
    withheld."""
    withheld = 0
    previous: dict[str | None, MemoryEvent] = {}  # each conversation's event before this one
    for event in events:
        said_before = previous.get(event.session_id)
        previous[event.session_id] = event
        if event.withheld or event.source_role not in RECALLED_ROLES:
            continue
        content = event.content or {}
        said = turn_text(event.source_type, content, speaker_of(event))
        if event.source_role == Role.ASSISTANT:
            reply = str(content.get("text", ""))
            message = str((said_before.content or {}).get("text", "")) \
                if said_before is not None and said_before.source_role == Role.USER else None
            if small_talk(reply) or (message is not None and echoes(reply, message)):
                event.withheld = True
                withheld += 1
                continue
            said = said[:BOT_JUDGED_CHARS]
        if instruction_reason(said):
            event.withheld = True
            withheld += 1
    return withheld


# Whose words a message asks about: what the bot itself said ("you
# recommended…", "remind me what you suggested", "你给我推荐过哪些…"): its
# lines keep BOT_SHARE; for any other they take CONTEXT_SHARE (docs/decisions.md#d119).
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
