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
from ..text import _CJK_RUN, _SENTENCE_END, is_cjk, search_tokens, sentences
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


# A long turn is searched as passages of a few sentences each, at most
# MAX_PASSAGES (docs/decisions.md#d77): one vector each, so a detail in the
# middle of a long reply is found by meaning as well as its start, for a
# bounded cost; its keyword row keeps the same passages (scored as one
# document, indexes.keywords). A turn up to PASSAGE_CHARS stays one passage
# (every LoCoMo turn: at most 440 characters). A Han or kana character
# weighs CJK_WEIGHT (a Chinese word is one or two of them).
PASSAGE_CHARS = 480
MAX_PASSAGES = 6
CJK_WEIGHT = 3
# Which passages the keyword rows hold (the ``turn_passages`` row of
# ltm_index_builds): another layout is rebuilt at start
# (storing.keyword_rows.match_turn_passages).
PASSAGE_LAYOUT = f"passages {PASSAGE_CHARS}x{MAX_PASSAGES}, cjk {CJK_WEIGHT}, context once"


def _weight(text: str) -> int:
    return len(text) + (CJK_WEIGHT - 1) * sum(map(len, _CJK_RUN.findall(text)))


def _cut(part: str, size: int) -> list[str]:
    """A sentence heavier than ``size`` in pieces of about ``size``, at a
    space where there is one (a list or code without full stops, a Chinese
    text written with commas only)."""
    pieces: list[str] = []
    while _weight(part) > size:
        at, weight = 0, 0
        while at < len(part) and weight + (step := CJK_WEIGHT if is_cjk(part[at]) else 1) <= size:
            weight += step
            at += 1
        space = part.rfind(" ", 0, at)
        at = space if space > at // 2 else max(at, 1)
        pieces.append(part[:at].strip())
        part = part[at:].strip()
    return [*pieces, part] if part else pieces


def passages(said: str) -> list[str]:
    """What a turn's words are searched as, by keywords and by vectors
    alike: the whole text when it is short, else its sentences in order,
    shared out into as few passages of about PASSAGE_CHARS as hold them
    (a sentence goes to the passage its middle falls in, so passages come
    out even), never more than MAX_PASSAGES: a very long turn has longer
    passages. Nothing said is left out."""
    whole = " ".join(said.split())
    if _weight(whole) <= PASSAGE_CHARS:
        return [whole] if whole else []
    count = min(MAX_PASSAGES, -(-_weight(whole) // PASSAGE_CHARS))
    size = -(-_weight(whole) // count)
    parts = [piece for sentence in _SENTENCE_END.split(said)
             for piece in _cut(" ".join(sentence.split()), size)]
    weights = [_weight(part) + 1 for part in parts]  # and the space after it
    share = sum(weights) / count
    shared: list[list[str]] = [[] for _ in range(count)]
    done = 0
    for part, weight in zip(parts, weights, strict=True):
        shared[min(count - 1, int((done + weight / 2) / share))].append(part)
        done += weight
    return [_joined(group) for group in shared if group]


def _joined(parts: list[str]) -> str:
    """Sentences as one text: Chinese ones need no space between them."""
    text = parts[0]
    for part in parts[1:]:
        text += part if is_cjk(text[-1]) or text[-1] in "。！？；" else f" {part}"
    return text


def turn_passages(source_type: str, content: dict[str, Any], speaker: str | None) -> list[str]:
    """What a turn is embedded as: one vector per passage (``passages``),
    after who said it; never more than MAX_PASSAGES. A short turn, one
    passage, is embedded sentence by sentence as before: a turn is found
    by its nearest sentence, and questions name people
    (docs/decisions.md#d07); past MAX_PASSAGES - 1 sentences, the whole
    turn stands for the rest."""
    who, said = turn_parts(source_type, content, speaker)
    parts = passages(said)
    if len(parts) == 1:
        split = sentences(parts[0])
        parts = split if len(split) <= MAX_PASSAGES else [*split[:MAX_PASSAGES - 1], parts[0]]
    return [f"{who}: {part}" for part in parts] or [f"{who}:"]


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


# Between a turn's passages in its keyword row: not a word to FTS5, so the
# operators' search reads the row as one text; the reader's keyword index
# reads the turn as one document, or each passage as one
# (indexes.keywords.PASSAGE_DOCUMENTS).
PASSAGE_BREAK = "|"


def turn_tokens(content: dict[str, Any], context: dict[str, Any] | None = None) -> list[str]:
    """A turn's keyword tokens, passage by passage (``passages``, with
    PASSAGE_BREAK between them); ``context``: the content of the turn
    before it in its conversation (CONTEXT_TOKENS of it are added to the
    first passage, as is a tool's name: the row without its breaks is the
    turn's tokens as before passages)."""
    tool = "tool" in content
    extra = search_tokens(str(content.get("tool", ""))) if tool else []
    if context is not None:
        extra += search_tokens(searched_text(context))[:CONTEXT_TOKENS]
    said = str(content.get("result" if tool else "text", ""))
    tokens: list[str] = []
    for passage in passages(said) or [""]:
        if not (document := search_tokens(passage) + (extra if not tokens else [])):
            continue  # no word to find it by (emoji, punctuation)
        if tokens:
            tokens.append(PASSAGE_BREAK)
        tokens += document
    return tokens
