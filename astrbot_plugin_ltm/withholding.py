"""Which recorded turns are never shown, judged once, when recorded.

A turn that would steer the bot if shown, and a reply of the bot's that is
small talk or echoes the person's message, are withheld
(docs/decisions.md#d108): kept and extracted, never indexed or shown. A turn
is judged as it would read, by who said it (``speaker_of``). Below both
recording/ (which withholds) and recalling/ (which labels the bot's lines).
"""

from __future__ import annotations

from typing import Any

from .enums import RECALLED_ROLES, Role
from .instructions import instruction_reason
from .storing.tables import MemoryEvent
from .storing.turns import turn_text
from .text import search_tokens

# Who a line of the bot's own reads as: the model it is shown to is the bot
# ("you recommended…"), and no person is ever credited with it.
BOT_LABEL = "bot (you)"

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


def speaker_of(event: Any) -> str | None:
    """The name a turn is said by: the bot's label for its own replies,
    else the sender's nickname or id (a MemoryEvent or a reader's row)."""
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
    """Withhold, before they are stored, the turns that must never be shown
    (a recorded turn never changes, so it is judged once, here):

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
