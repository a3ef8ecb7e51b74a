"""Which recorded turns are never shown, judged once, when recorded: kept and
extracted, never indexed or shown (docs/decisions.md#d108). Below both recording/
(which withholds) and recalling/ (which labels the bot's lines).
"""

from __future__ import annotations

from typing import Any

from .enums import RECALLED_ROLES, Role
from .instructions import instruction_reason
from .storing.tables import MemoryEvent
from .storing.turns import turn_text
from .text import search_tokens

# The model it is shown to is the bot ("you recommended…"), and no person is ever credited with it.
BOT_LABEL = "bot (you)"

# What the block could show of a reply of the bot's, with a margin.
BOT_JUDGED_CHARS = 300
# Fewer search tokens in a reply's start: small talk ("OK.", "当然了"), nothing to remember.
SMALL_TALK_TOKENS = 4
SMALL_TALK_CHARS = 120
# A reply this much made of its message's words only says it back: the person's line stands for it.
ECHO_SHARE = 0.8


def speaker_of(event: Any) -> str | None:
    """The bot's label for its own replies, else the sender's nickname or id."""
    if event.source_role == Role.ASSISTANT:
        return BOT_LABEL
    return event.sender_name or event.sender_id


def is_bot(turn: Any) -> bool:
    """A reply of the bot's own (a MemoryEvent or a reader's row)."""
    return getattr(turn, "source_role", None) == Role.ASSISTANT


def small_talk(reply: str) -> bool:
    """Too few words to be a recommendation, advice or a promise."""
    return len(search_tokens(reply[:SMALL_TALK_CHARS])) < SMALL_TALK_TOKENS


def echoes(reply: str, message: str) -> bool:
    """The reply's words are mostly the message's."""
    said = set(search_tokens(reply))
    return bool(said) and len(said & set(search_tokens(message))) / len(said) >= ECHO_SHARE


def withhold(events: list[MemoryEvent]) -> int:
    """Withhold, before they are stored, turns that would steer the bot, and the bot's
    small talk and echoes. A reply is judged on what the block could show (its later
    code and advice are not orders). ~0.1 ms a turn: call it off the event loop."""
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
