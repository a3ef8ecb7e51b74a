"""Raw turns: which ones the model may be shown, how one reads, and what it
is searched by.

A turn is a recorded event of a person, a tool or the bot itself
(``RECALLED_ROLES``); the bot's lines read as the bot's (``BOT_LABEL``),
never as something a person said. What is said here is used by the
keyword rows, the vector fill and the reader alike, so a turn reads and is
found the same way everywhere.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ..enums import RECALLED_ROLES, MemoryType, Role, SourceType, Status
from ..instructions import instruction_reason
from ..text import search_tokens, sentences
from .tables import MemoryEvent

# -- which turns may be shown ---------------------------------------------------

# A turn behind no memory that is held back (shadow, awaiting approval,
# disabled, expired): operators decide what the bot knows, and a raw turn
# must not leak a memory they have not let through. The subquery over the
# turn's evidence is NULL when no memory cites it, 0 when one is not
# active, else 1. CROSS JOIN keeps SQLite's join order: evidence by event
# id (ix_ltm_evidence_event), then the item by its unique memory id.
# A summary retired into its roll-up (superseded, learning.summaries) still
# backs its turns: the roll-up that replaced it cites them too. A shadow
# memory no one is asked to approve (below the confidence bar in mode auto,
# or learnt in mode shadow) neither backs nor hides: the turn reads as if
# nothing cited it, so an unsure guess at a long reply does not take the
# reply out of reach (docs/decisions.md#d81).
def _backing(alias: str) -> str:
    return (
        f"(SELECT min(CASE WHEN i.status = '{Status.SHADOW}' AND NOT i.awaiting_approval THEN NULL "
        f"ELSE i.status = '{Status.ACTIVE}' OR (i.status = '{Status.SUPERSEDED}' "
        f"AND i.type = '{MemoryType.SUMMARY}') END) FROM ltm_evidence v CROSS JOIN ltm_items i "
        f"ON i.memory_id = v.memory_id WHERE v.event_id = {alias}.event_id)"
    )


# The bot's reply is part of an exchange: it is shown only when the
# person's message it answers (recorded with it, just before it) could
# be, so that what was taken back or held back does not come back in the
# bot's words (docs/decisions.md#d57).
_PROMPT_HIDDEN = (
    f"EXISTS (SELECT 1 FROM ltm_events p WHERE p.id = x.id - 1 AND p.session_id IS x.session_id "
    f"AND p.source_role = '{Role.USER}' AND (p.withheld OR coalesce({_backing('p')}, 1) = 0))"
)


def shown_turns(unbacked: bool) -> str:
    """SQL over an ``ltm_events`` row aliased ``x``: a turn the model may
    be shown. A person's, a tool's or the bot's, not withheld (a memory it
    backed was deleted or rejected, or its scope forgotten), behind no
    held-back memory; the bot's only when the message it answers may be
    too. ``unbacked``: turns no memory cites qualify too — only where
    facts go live without review (mode auto)."""
    backing = f"coalesce({_backing('x')}, 1) = 1" if unbacked else f"{_backing('x')} = 1"
    roles = ", ".join(f"'{role}'" for role in RECALLED_ROLES)
    return (f"x.source_role IN ({roles}) AND NOT x.withheld AND {backing} "
            f"AND (x.source_role != '{Role.ASSISTANT}' OR NOT {_PROMPT_HIDDEN})")


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


# -- how a turn reads -----------------------------------------------------------------

# Who a line of the bot's own reads as: the model it is shown to is the bot
# ("you recommended…"), and no person is ever credited with it.
BOT_LABEL = "bot (you)"


def speaker_of(event: Any) -> str | None:
    """The name a turn is said by: the bot's label for its own replies,
    else the sender's nickname or id (a MemoryEvent or a reader's row)."""
    if event.source_role == Role.ASSISTANT:
        return BOT_LABEL
    return event.sender_name or event.sender_id



def turn_parts(source_type: str, content: dict[str, Any], speaker: str | None) -> tuple[str, str]:
    """Who (or which tool) said it, and what."""
    if source_type == SourceType.TOOL_RESULT:
        return f"tool {content.get('tool', '?')}", str(content.get("result", ""))
    return speaker or "someone", str(content.get("text", ""))


def turn_text(source_type: str, content: dict[str, Any], speaker: str | None) -> str:
    """A turn as one line, who said it first: what the model is shown."""
    who, said = turn_parts(source_type, content, speaker)
    return " ".join(f"{who}: {said}".split())


def turn_passages(source_type: str, content: dict[str, Any], speaker: str | None) -> list[str]:
    """What a turn is embedded as: each sentence worth searching by
    (text.sentences), after who said it. A turn is found by its nearest
    sentence: one vector of a whole turn blurs its topics together, and
    questions name people (docs/decisions.md#d07)."""
    who, said = turn_parts(source_type, content, speaker)
    return [" ".join(f"{who}: {sentence}".split()) for sentence in sentences(said)] or [f"{who}:"]


# -- what a turn is searched by -------------------------------------------------------

# A turn is keyword-indexed with the first words of the turn before it in
# its conversation, if that came within the hour: "who performed?" — "Matt
# Patterson" is then found by "who performed" (docs/decisions.md#d08).
# Migration 0005 applies the same rule to older turns.
CONTEXT_TOKENS = 60
CONTEXT_WINDOW = timedelta(hours=1)


def searched_text(content: dict[str, Any]) -> str:
    """The words of an event, for its keyword row."""
    if "tool" in content:
        return f"{content.get('tool', '')} {content.get('result', '')}"
    return str(content.get("text", ""))


def turn_tokens(content: dict[str, Any], context: dict[str, Any] | None = None) -> list[str]:
    """A turn's keyword tokens; ``context``: the content of the turn before
    it in its conversation (CONTEXT_TOKENS of it are added)."""
    tokens = search_tokens(searched_text(content))
    if context is not None:
        tokens += search_tokens(searched_text(context))[:CONTEXT_TOKENS]
    return tokens
