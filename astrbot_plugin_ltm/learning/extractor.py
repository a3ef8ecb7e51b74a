"""Extraction by a chat model, strictly validated: each fact cites its numbered lines,
so the bot never remembers its own words as a user's (but its own acts, bot_side.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from typing import Any

from ..enums import FACT_TYPES, SHOWN_ROLES, CandidateSource, Role, ScopeKind, SourceType
from ..extension_points import Complete
from ..logs import log
from ..scope import display_name
from ..secrecy import asks_secrecy
from ..storing.tables import MemoryEvent
from ..text import normalize_fact_key, replace_literally
from .bot_side import BY_BOT, check_bot_episode
from .candidates import Candidate, ExtractionResult, KnownFact, Rejection
from .model_answer import MalformedOutput, read_answer

__all__ = ["LLMExtractor", "MalformedOutput", "validate"]

SYSTEM_PROMPT = """You extract long-term memory from a chat transcript.
Each transcript line is numbered and names its speaker. "Known facts", when given, are what is
already remembered about these people, each with an id and its key.
Return ONLY a JSON array (no prose, no code fence). Each element:
{"type": "profile|preference|task_state|constraint|episode",
 "fact": "one concise statement, naming the person it is about",
 "fact_key": "short stable key for what the fact is about, e.g. alice_home_city",
 "confidence": 0.0-1.0, "importance": 0.0-1.0, "lines": [line numbers],
 "updates": "id of the known fact whose value this changes (optional)",
 "same_as": "id of the known fact this only repeats or rewords (optional)",
 "secret": true (only if the speaker asked to keep it secret: "别告诉别人", "保密", "don't tell anyone"),
 "about": "group" (only in a group chat, for a fact about the group itself: its rules, plans, events),
 "by": "bot" (only for what the assistant did, below)}
Rules:
- Only durable, useful facts stated by a human speaker or a tool result; never facts the assistant said about itself.
- Except: what the assistant recommended, advised, promised or agreed to do for a person is an "episode" with
  "by": "bot", citing the assistant's line, written as the assistant's act with the concrete names
  ("the bot recommended 《小王子》 to Alice", "the bot promised Alice to remind her on Friday"), never as
  something the person said. The assistant's opinions, greetings and small talk are not memories.
- Name the person by the name shown for the speaker; if none is shown, by the name they gave for themselves
  (in the transcript or the known facts); write "the user" only if there is neither.
- Write the fact in the language the speaker used.
- "lines" lists the transcript lines the fact comes from.
- If a fact gives a known fact a new value (moved, new job, renamed, a new age, changed their mind, a plan
  cancelled or changed), set "updates" to that known fact's id, use its key, and state the new value in full.
- If a fact only repeats or rewords a known fact, set "same_as" to its id and use its key.
- Output [] if nothing is worth remembering."""

_GENERIC_USER = [
    (re.compile(r"\b[Tt]he user's\b"), "{name}'s"),
    (re.compile(r"\b[Tt]he user\b"), "{name}"),
    (re.compile(r"\bUser's\b"), "{name}'s"),
    (re.compile(r"\bUser\b"), "{name}"),
    (re.compile("用户"), "{name}"),
]


def event_line(event: MemoryEvent) -> str:
    """How one event reads in a transcript."""
    content = event.content or {}
    if event.source_type == SourceType.TOOL_RESULT:
        note = " (truncated)" if content.get("truncated") else ""
        return (
            f"tool {content.get('tool', '?')}({json.dumps(content.get('args', {}), ensure_ascii=False)})"
            f" returned{note}: {content.get('result', '')}"
        )
    if event.source_role == Role.ASSISTANT:
        return f"assistant: {content.get('text', '')}"
    # A login is not a name ("astrbot" in the web chat): the model names the person by what they said.
    who = display_name(event.sender_id, event.sender_name) or UNNAMED
    return f"{who} (user id {event.sender_id}): {content.get('text', '')}"


UNNAMED = "unnamed user"


def known_ref(n: int) -> str:
    return f"K{n}"


def build_transcript(events: Sequence[MemoryEvent]) -> str:
    return "\n".join(f"[{n}] {event_line(e)}" for n, e in enumerate(events, start=1))


def build_prompt(events: Sequence[MemoryEvent], known: Sequence[KnownFact]) -> str:
    lines = ["Chat: a group chat." if events and events[0].scope == ScopeKind.GROUP else "Chat: a private chat."]
    if known:
        lines.append("Known facts:")
        for n, k in enumerate(known, start=1):
            since = f" (since {k.since:%Y-%m-%d})" if k.since else ""
            lines.append(f"[{known_ref(n)}] key={k.key}: {k.fact}{since}")
    lines.append("Transcript:")
    lines.append(build_transcript(events))
    return "\n".join(lines)


def _unit_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and 0.0 <= value <= 1.0 else None


def validate(
    payload: Any, events: Sequence[MemoryEvent], max_fact_chars: int, known: Sequence[KnownFact] = ()
) -> tuple[list[Candidate], list[Rejection]]:
    """Check every candidate; keep the valid ones, give a reason for each other."""
    if isinstance(payload, dict) and isinstance(payload.get("facts"), list):
        payload = payload["facts"]
    if not isinstance(payload, list):
        return [], [Rejection(payload, "output is not a JSON array of facts")]
    accepted: list[Candidate] = []
    rejected: list[Rejection] = []
    humans = {e.sender_id: e for e in events if e.source_role == Role.USER}
    refs = {known_ref(n): k.memory_id for n, k in enumerate(known, start=1)}
    # A model may name a known fact by its key; a key shown twice names neither.
    keys = [normalize_fact_key(k.key) for k in known]
    refs.update({key: k.memory_id for key, k in zip(keys, known, strict=True) if keys.count(key) == 1})
    for raw in payload:
        reason, candidate = _check(raw, events, humans, max_fact_chars)
        if candidate is None:
            rejected.append(Rejection(raw, reason))
        else:
            candidate.updates, candidate.restates = _relation(raw, refs)
            accepted.append(candidate)
    return accepted, rejected


def _relation(raw: dict[str, Any], refs: dict[str, str]) -> tuple[str | None, str | None]:
    """The known fact a candidate updates or repeats; a made-up id, or both at once, is neither."""
    updated, repeated = _known_id(raw.get("updates"), refs), _known_id(raw.get("same_as"), refs)
    if updated and repeated:
        return None, None
    return updated, repeated


def _known_id(ref: Any, refs: dict[str, str]) -> str | None:
    """The memory ``ref`` names: "K2", "[K2]", "k2" or a shown key."""
    if not isinstance(ref, str):
        return None
    ref = ref.strip().strip("[]").strip()
    return refs.get(ref.upper()) or refs.get(normalize_fact_key(ref))


def _check(raw: Any, events: Sequence[MemoryEvent], humans: dict[str | None, MemoryEvent],
           max_fact_chars: int) -> tuple[str, Candidate | None]:
    if not isinstance(raw, dict):
        return "not an object", None
    mtype = raw.get("type")
    if mtype not in FACT_TYPES:
        return f"unknown type {mtype!r}", None
    fact = raw.get("fact")
    if not isinstance(fact, str) or not fact.strip():
        return "missing or empty fact", None
    fact = " ".join(fact.split())
    if len(fact) > max_fact_chars:
        return f"fact longer than {max_fact_chars} characters", None
    conf = _unit_number(raw.get("confidence"))
    if conf is None:
        return f"confidence {raw.get('confidence')!r} is not a number in 0..1", None
    importance = _unit_number(raw.get("importance", 0.5))
    if importance is None:
        return f"importance {raw.get('importance')!r} is not a number in 0..1", None
    key_raw = raw.get("fact_key") or fact
    if not isinstance(key_raw, str):
        return f"fact_key {key_raw!r} is not text", None
    key = normalize_fact_key(key_raw)
    if not key:
        return "fact_key is empty after normalisation", None

    lines = raw.get("lines")
    if raw.get("by") == BY_BOT:
        reason, bot_lines = check_bot_episode(mtype, fact, lines, events)
        if not bot_lines:
            return reason, None
        return "", Candidate(type=mtype, fact=_named(fact, humans), fact_key=key, confidence=conf,
                             importance=importance, event_ids=[e.event_id for e in bot_lines],
                             source=CandidateSource.BOT_SIDE)
    if lines is None:
        # No line numbers: acceptable only when one person could have said it.
        sources = [e for e in events if e.source_role in SHOWN_ROLES]
        if len(humans) > 1:
            return "no lines given and several people spoke: cannot attribute", None
    else:
        if not isinstance(lines, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= len(events) for n in lines
        ):
            return f"lines {lines!r} do not refer to transcript lines", None
        sources = [events[n - 1] for n in dict.fromkeys(lines)]
        sources = [e for e in sources if e.source_role in SHOWN_ROLES]
    if not sources:
        return "only the assistant said this", None

    speakers = {e.sender_id for e in sources if e.source_role == Role.USER}
    if len(speakers) == 1:
        speaker = humans[next(iter(speakers))]
        name = display_name(speaker.sender_id, speaker.sender_name)
        for pattern, replacement in _GENERIC_USER if name else ():
            fact = replace_literally(pattern, replacement.format(name=name), fact)
    elif any(p.search(fact) for p, _ in _GENERIC_USER):
        return "fact says 'the user' but several people are its source", None
    source = CandidateSource.TOOL_RESULT if all(e.source_role == Role.TOOL for e in sources) \
        else CandidateSource.LLM_EXTRACT
    # A model that forgets the secret mark must not let a secret into a group (audience.py).
    secret = raw.get("secret") is True or any(asks_secrecy(str((e.content or {}).get("text") or ""))
                                              for e in sources if e.source_role == Role.USER)
    return "", Candidate(
        type=mtype,
        fact=fact,
        fact_key=key,
        confidence=conf,
        importance=importance,
        event_ids=[e.event_id for e in sources],
        source=source,
        secret=secret,
        about_group=raw.get("about") == "group" and sources[0].scope == ScopeKind.GROUP and not secret,
    )


def _named(fact: str, humans: dict[str | None, MemoryEvent]) -> str:
    """"the user" in a bot-side episode as the one person who spoke."""
    if len(humans) != 1:
        return fact
    person = next(iter(humans.values()))
    name = display_name(person.sender_id, person.sender_name)
    for pattern, replacement in _GENERIC_USER if name else ():
        fact = replace_literally(pattern, replacement.format(name=name), fact)
    return fact


class LLMExtractor:
    def __init__(self, complete: Complete, model: str = "", max_fact_chars: int = 300) -> None:
        self._complete = complete
        self._model = model
        self._max_fact_chars = max_fact_chars

    async def extract(self, events: Sequence[MemoryEvent], known: Sequence[KnownFact] = ()) -> ExtractionResult:
        prompt = build_prompt(events, known)
        meta = {
            "model": self._model,
            "prompt_hash": hashlib.sha256((SYSTEM_PROMPT + prompt).encode()).hexdigest()[:16],
        }
        # A provider's exception propagates, so the worker retries with backoff.
        text = await self._complete(SYSTEM_PROMPT, prompt)
        # Unreadable: retried like a failed call, not marked done with nothing learnt (docs/decisions.md#d89).
        answer = read_answer(text if isinstance(text, str) else None)
        accepted, rejected = validate(answer.facts, events, self._max_fact_chars, known)
        rejected.extend(Rejection(text[:500], note) for note in answer.notes)
        for r in rejected:
            log.info("ltm: candidate rejected (%s): %.200r", r.reason, r.raw)
        for c in accepted:
            c.meta = meta
        return ExtractionResult(accepted, rejected, meta)
