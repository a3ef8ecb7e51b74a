"""The summary model's prompts and the check of its answers: anything but
``{"summary": "..."}`` is a failed call, which leaves the conversation pending.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..extension_points import Complete
from ..storing.tables import MemoryEvent
from .extractor import event_line

# Marks the request so a stand-in model (devtools/fake_openai.py) can tell it from extraction.
SESSION_MARK = "You summarise one past conversation"
ROLLUP_MARK = "You merge summaries of conversations"

SESSION_PROMPT = SESSION_MARK + """ between people and an AI assistant (the bot), for the bot's
long-term memory. Each transcript line names its speaker; lines starting "assistant:" are the bot's.
Return ONLY a JSON object (no prose, no code fence): {"summary": "..."}.
The summary, in at most 6 sentences, in the language the people used, names each person and says:
- the topics; what each person told about themselves; their mood and what they wanted;
- plans, promises and decisions on both sides, saying who made them ("the bot promised Alice to …");
- the concrete names mentioned: titles, places, people, dates.
Attribute what the bot said, recommended or promised to the bot, never to the person.
Do not invent anything; leave out greetings and small talk."""

ROLLUP_PROMPT = ROLLUP_MARK + """ for the bot's long-term memory.
You are given, oldest first, the summaries of the parts of one period (conversations, days or weeks).
Return ONLY a JSON object (no prose, no code fence): {"summary": "..."}: one summary of the whole period,
in at most 8 sentences, in the language of the summaries, that keeps who said or promised what, the plans
and decisions, and the concrete names (titles, places, people, dates). Do not invent anything."""


class MalformedSummary(ValueError):
    """The model's answer is not a summary."""


def session_prompt(events: Sequence[MemoryEvent]) -> str:
    start, end = events[0].created_at, events[-1].created_at
    lines = [f"Conversation from {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC:"]
    lines.extend(f"[{e.created_at:%H:%M}] {event_line(e)}" for e in events)
    return "\n".join(lines)


def rollup_prompt(level: str, start: datetime, end: datetime, summaries: Sequence[str]) -> str:
    lines = [f"The {level} from {start:%Y-%m-%d} to {end:%Y-%m-%d}; its parts:"]
    lines.extend(f"[{n}] {text}" for n, text in enumerate(summaries, start=1))
    return "\n".join(lines)


def check(answer: str, max_chars: int) -> str:
    """The summary in ``answer``, on one line, cut to ``max_chars``."""
    text = answer.strip()
    fence = re.match(r"^```(?:json)?\s*(.*?)\s*```$", text, re.S)
    if fence:
        text = fence.group(1)
    try:
        payload: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedSummary(f"not JSON: {exc}") from exc
    summary = payload.get("summary") if isinstance(payload, dict) else None
    if not isinstance(summary, str) or not summary.strip():
        raise MalformedSummary('no "summary" text in the answer')
    summary = " ".join(summary.split())
    return summary if len(summary) <= max_chars else summary[: max_chars - 1] + "…"


class LLMSummarizer:
    """The Summarizer protocol over a chat model."""

    def __init__(self, complete: Complete, model: str, max_chars: int) -> None:
        self._complete = complete
        self.model = model
        self._max_chars = max_chars

    async def session(self, events: Sequence[MemoryEvent]) -> str:
        return check(await self._complete(SESSION_PROMPT, session_prompt(events)), self._max_chars)

    async def rollup(self, level: str, start: datetime, end: datetime, summaries: Sequence[str]) -> str:
        return check(await self._complete(ROLLUP_PROMPT, rollup_prompt(level, start, end, summaries)),
                     self._max_chars)
