"""Raw turns: which ones the model may be shown, how one reads, and what it
is searched by. Used by the keyword rows, the vector fill and the reader
alike, so a turn reads and is found the same way everywhere.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection

from ..enums import RECALLED_ROLES, ExtractionStatus, MemoryType, Role, SourceType, Status
from ..text import _CJK_RUN, _SENTENCE_END, is_cjk, search_tokens, sentences
from .driver_rows import fetch_rows

# -- which turns may be shown: the read path's queries ------------------------------

# A raw turn must not leak a memory operators have not let through: NULL when
# no memory cites the turn, 0 when one is held back, else 1. CROSS JOIN keeps
# SQLite's join order (evidence by its index first, then the item by its key).
# A retired summary still backs its turns (its roll-up cites them too); a
# shadow memory no one is asked to approve neither backs nor hides, so an
# unsure guess does not take a long reply out of reach (docs/decisions.md#d81).
def _backing(alias: str) -> str:
    # 2 stands for "none there" in the smaller of the two parts' minimums.
    verdict = (f"min(CASE WHEN i.status = '{Status.SHADOW}' AND NOT i.awaiting_approval THEN NULL "
               f"ELSE i.status = '{Status.ACTIVE}' OR (i.status = '{Status.SUPERSEDED}' "
               f"AND i.type = '{MemoryType.SUMMARY}') END)")
    facts = (f"(SELECT {verdict} FROM ltm_evidence v CROSS JOIN ltm_items i "
             f"ON i.memory_id = v.memory_id WHERE v.event_id = {alias}.event_id)")
    summaries = (f"(SELECT {verdict} FROM ltm_summary_links sl CROSS JOIN ltm_items i "
                 f"ON i.id = sl.item_id WHERE sl.event_rowid = {alias}.id)")
    return f"nullif(min(coalesce({facts}, 2), coalesce({summaries}, 2)), 2)"


# A reply is shown only when the message it answers (the event just before)
# could be: what was held back must not come back in the bot's words (docs/decisions.md#d57).
_PROMPT_HIDDEN = (
    f"EXISTS (SELECT 1 FROM ltm_events p WHERE p.id = x.id - 1 AND p.session_id IS x.session_id "
    f"AND p.source_role = '{Role.USER}' AND (p.withheld OR coalesce({_backing('p')}, 1) = 0))"
)


def _shown(unbacked: bool) -> str:
    """A turn the model may be shown. ``unbacked``: turns no memory cites
    qualify too — only where facts go live without review (mode auto)."""
    backing = f"coalesce({_backing('x')}, 1) = 1" if unbacked else f"{_backing('x')} = 1"
    roles = ", ".join(f"'{role}'" for role in RECALLED_ROLES)
    return (f"x.source_role IN ({roles}) AND NOT x.withheld AND {backing} "
            f"AND (x.source_role != '{Role.ASSISTANT}' OR NOT {_PROMPT_HIDDEN})")


# Extraction read the turn and no fact cites it (a summary cites every turn of
# its period): small talk, by the extractor's judgement (docs/decisions.md#d73).
_NOTHING_KEPT = (
    f"(x.extraction_status = '{ExtractionStatus.DONE}' AND NOT EXISTS (SELECT 1 FROM ltm_evidence v "
    f"CROSS JOIN ltm_items i ON i.memory_id = v.memory_id WHERE v.event_id = x.event_id "
    f"AND i.type != '{MemoryType.SUMMARY}'))"
)
# In recalling.rows.EventRow's order.
_COLUMNS = (
    "x.id, x.event_id, x.scope, x.scope_id, x.source_type, x.source_role, x.content, x.sender_id, "
    f"x.sender_name, x.created_at, {_NOTHING_KEPT}"
)
_IN_PERIOD = "x.scope = :kind AND x.scope_id = :id AND x.created_at >= :start AND x.created_at < :end"


def shown_turns_among(conn: Connection, rowids: list[int], unbacked: bool) -> list[Any]:
    """The turns among ``rowids`` the model may be shown (``_shown``)."""
    return fetch_rows(conn, f"SELECT {_COLUMNS} FROM ltm_events x "
                            f"WHERE x.id IN (SELECT value FROM json_each(:ids)) AND {_shown(unbacked)}",
                      {"ids": json.dumps(rowids)})


def turns_among(conn: Connection, rowids: set[int]) -> list[Any]:
    """The turns ``rowids``, whether or not they may be shown, each row
    ending in whether it is withheld; by id."""
    return fetch_rows(conn, f"SELECT {_COLUMNS}, x.withheld FROM ltm_events x "
                            "WHERE x.id IN (SELECT value FROM json_each(:ids)) ORDER BY x.id",
                      {"ids": json.dumps(sorted(rowids))})


def shown_turns_in_period(conn: Connection, kind: str, scope_id: str, start: str, end: str, unbacked: bool,
                          limit: int) -> list[Any]:
    """The scope's showable turns said in [start, end) (stored times),
    oldest first, at most ``limit``."""
    return fetch_rows(conn, f"SELECT {_COLUMNS} FROM ltm_events x WHERE {_IN_PERIOD} "
                            f"AND {_shown(unbacked)} ORDER BY x.created_at LIMIT :limit",
                      {"start": start, "end": end, "limit": limit, "kind": kind, "id": scope_id})


def period_turn_terms(conn: Connection, kind: str, scope_id: str, start: str, end: str, limit: int,
                      with_terms: bool) -> list[tuple[int, bytes | None]]:
    """The scope's newest ``limit`` turns in [start, end) as (rowid, terms).
    Without ``with_terms``, every event's rowid with None, read from the
    index alone (a keyword namespace knows which of them it holds)."""
    if with_terms:
        rows = fetch_rows(conn, f"SELECT x.id, t.terms FROM ltm_events x JOIN ltm_turn_terms t ON t.event_rowid = x.id "
                                f"WHERE {_IN_PERIOD} AND NOT x.withheld ORDER BY x.created_at DESC LIMIT :limit",
                          {"start": start, "end": end, "limit": limit, "kind": kind, "id": scope_id})
        return [(int(r[0]), r[1]) for r in rows]
    rows = fetch_rows(conn, f"SELECT x.id FROM ltm_events x WHERE {_IN_PERIOD} ORDER BY x.created_at DESC LIMIT :limit",
                      {"start": start, "end": end, "limit": limit, "kind": kind, "id": scope_id})
    return [(int(r[0]), None) for r in rows]


# A scope's turn namespaces hold its newest TURNS_HELD turns, so a year-old
# group reads as cheaply as a new one; older turns are reached through the
# memories citing them and named periods (docs/decisions.md#d164).
TURNS_HELD = 50_000


def held_since(conn: Connection, kind: str, scope_id: str, held: int | None = None) -> str | None:
    """The stored created_at at and before which a scope's turns are not
    held; None when it has no more than ``held``."""
    rows = fetch_rows(conn, "SELECT created_at FROM ltm_events WHERE scope = :kind AND scope_id = :id "
                            "ORDER BY created_at DESC LIMIT 1 OFFSET :held",
                      {"kind": kind, "id": scope_id, "held": TURNS_HELD if held is None else held})
    return None if not rows else str(rows[0][0])


# -- how a turn reads -----------------------------------------------------------------

def turn_parts(source_type: str, content: dict[str, Any], speaker: str | None) -> tuple[str, str]:
    """Who (or which tool) said it, and what."""
    if source_type == SourceType.TOOL_RESULT:
        return f"tool {content.get('tool', '?')}", str(content.get("result", ""))
    return speaker or "someone", str(content.get("text", ""))


def turn_text(source_type: str, content: dict[str, Any], speaker: str | None) -> str:
    """A turn as one line, who said it first: what the model is shown."""
    who, said = turn_parts(source_type, content, speaker)
    return " ".join(f"{who}: {said}".split())


# A long turn is searched as passages, one vector each, so a detail mid-reply
# is found for a bounded cost (docs/decisions.md#d77). Every LoCoMo turn (at
# most 440 characters) stays one passage; a Chinese word is one or two Han.
PASSAGE_CHARS = 480
MAX_PASSAGES = 6
CJK_WEIGHT = 3
# Keyword rows of another layout are rebuilt at start (storing.keyword_rows.match_turn_passages).
PASSAGE_LAYOUT = f"passages {PASSAGE_CHARS}x{MAX_PASSAGES}, cjk {CJK_WEIGHT}, context once"


def _weight(text: str) -> int:
    return len(text) + (CJK_WEIGHT - 1) * sum(map(len, _CJK_RUN.findall(text)))


def _cut(part: str, size: int) -> list[str]:
    """A sentence heavier than ``size`` in pieces of about ``size`` (a list,
    code, or Chinese written with commas only), at a space where there is one."""
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
    """What a turn's words are searched as: the whole text when short, else
    its sentences in as few even passages as hold them (a sentence goes where
    its middle falls), at most MAX_PASSAGES. Nothing said is left out."""
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
    """What a turn is embedded as: one vector per passage, after who said it.
    A short turn goes sentence by sentence, found by its nearest sentence
    (docs/decisions.md#d07); past MAX_PASSAGES - 1, the whole turn stands for the rest."""
    who, said = turn_parts(source_type, content, speaker)
    parts = passages(said)
    if len(parts) == 1:
        split = sentences(parts[0])
        parts = split if len(split) <= MAX_PASSAGES else [*split[:MAX_PASSAGES - 1], parts[0]]
    return [f"{who}: {part}" for part in parts] or [f"{who}:"]


# -- what a turn is searched by -------------------------------------------------------

# With the first words of the turn before it, if within the hour: "Matt
# Patterson" is found by "who performed" (docs/decisions.md#d08; migration 0005).
CONTEXT_TOKENS = 60
CONTEXT_WINDOW = timedelta(hours=1)


def searched_text(content: dict[str, Any]) -> str:
    if "tool" in content:
        return f"{content.get('tool', '')} {content.get('result', '')}"
    return str(content.get("text", ""))


# Not a word to FTS5, so the operators' search reads the row as one text.
PASSAGE_BREAK = "|"


def turn_tokens(content: dict[str, Any], context: dict[str, Any] | None = None) -> list[str]:
    """A turn's keyword tokens, PASSAGE_BREAK between passages; the turn
    before it (``context``) and a tool's name go into the first passage."""
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
