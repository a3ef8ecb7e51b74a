"""The dataset's own session summaries standing in for the summary model.

LoCoMo-format files (LoCoMo, MemoryBank-CN) carry a ``session_summary``
written for each session; as ``observation`` stands in for extraction,
these stand in for ``learning/summaries.py``'s model call: given a
session's events, the stand-in answers the summary of the dataset's
session they belong to (found by the conversation, from the event's
``session_id``, and the session's start time). A roll-up, which the data
does not have, is the parts' summaries joined and cut to
``summaries.max_chars``: a crude stand-in that keeps the parts' words.

A file with no ``session_summary`` at all (LongMemEval) gets an
**extractive** stand-in instead, labelled as such in the output: the first
sentence of each of the person's turns (6 evenly spaced over the span when
there are more), then of the bot's, in order, up to the summary prompt's 6
sentences and ``summaries.max_chars`` (a lead-sentence baseline: no model, no
words that the session does not hold). A span of several sessions
(``summaries.min_events``) gets their recorded summaries joined, each cut to
its share of ``max_chars``.

``python -m bench.locomo --summaries`` installs it for the bench's engines
of the process (and of each ``--jobs`` worker), which get it as their
``summarizer_for`` (``LTMEngine(summarizer_for=...)``); the bench prints the model calls it
answered and the calls per recorded turn (extraction: one call per session,
as the replay drains each session in one batch; plus the summaries).
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from astrbot_plugin_ltm.config import SummariesConfig
from astrbot_plugin_ltm.enums import Role
from astrbot_plugin_ltm.storing.tables import MemoryEvent
from astrbot_plugin_ltm.text import search_tokens

from .conversations import exchanges, parse_when  # the replay's own reading of the dates

# The session prompt's "at most 6 sentences" (learning/summary_prompt.py).
EXTRACTIVE_SENTENCES = 6
EXTRACTIVE_LABEL = "extractive stand-in: lead sentences of the session's turns, no model"
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|(?<=[。！？])\s*|\s*\n\s*")
MIN_WORDS = 3  # "Hi!", "好的。" are not what a summary says
# The stand-in this process's bench engines summarise with (install()); None: the engine's own model.
INSTALLED: DatasetSummaries | None = None


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` that says something (else the first)."""
    said = [p.strip() for p in _SENTENCE_END.split(text.strip()) if p.strip()]
    return next((p for p in said if len(search_tokens(p)) >= MIN_WORDS), said[0] if said else "")


class DatasetSummaries:
    """The Summarizer protocol, answering from a LoCoMo-format file."""

    def __init__(self, data: str | Path, max_chars: int = SummariesConfig().max_chars) -> None:
        samples: list[dict[str, Any]] = json.loads(Path(data).read_text(encoding="utf-8"))
        self._max_chars = max_chars
        # sample id -> session starts, in order, and their summaries
        self._sessions: dict[str, list[tuple[datetime, str]]] = {}
        self._extractive: set[str] = set()  # samples with no recorded summary at all
        self.turns = self.sessions = 0
        for n_sample, sample in enumerate(samples):
            conv = sample["conversation"]
            summaries = sample.get("session_summary") or {}
            found = []
            for key, turns in conv.items():
                m = re.fullmatch(r"session_(\d+)", key)
                if not m or not isinstance(turns, list) or not turns:
                    continue
                self.turns += len(turns)
                self.sessions += 1
                text = summaries.get(f"session_{m.group(1)}_summary")
                if isinstance(text, str) and text.strip():
                    found.append((parse_when(conv[f"session_{m.group(1)}_date_time"]), " ".join(text.split())))
            sample_id = str(sample.get("sample_id", f"conv-{n_sample}"))
            self._sessions[sample_id] = sorted(found)
            if not summaries:
                self._extractive.add(sample_id)
        self.calls = {"session": 0, "rollup": 0, "extractive": 0}

    @property
    def extractive(self) -> bool:
        """Whether some sample is summarised by the extractive stand-in."""
        return bool(self._extractive)

    async def session(self, events: Sequence[MemoryEvent]) -> str:
        self.calls["session"] += 1
        sample = (events[0].session_id or "").rsplit(":", 1)[-1]
        if sample in self._extractive:
            self.calls["extractive"] += 1
            return extractive_summary(events, self._max_chars)
        sessions = self._sessions.get(sample) or []
        starts = [start for start, _ in sessions]
        first = bisect.bisect_right(starts, events[0].created_at) - 1
        if first < 0:
            raise LookupError(f"no session_summary for {sample} at {events[0].created_at}")
        # A span of several sessions (summaries.min_events): their summaries,
        # each cut to its share of max_chars, as a model would fit them in one.
        texts = [text for _, text in sessions[first:bisect.bisect_right(starts, events[-1].created_at)]]
        share = self._max_chars // len(texts)
        return " ".join(text[:share] for text in texts)[: self._max_chars]

    async def rollup(self, level: str, start: datetime, end: datetime, summaries: Sequence[str]) -> str:
        self.calls["rollup"] += 1
        return " ".join(summaries)[: self._max_chars]

    def cost(self, conversations: Sequence[Any], calls: dict[str, int]) -> dict[str, Any]:
        """The model calls of a run over ``conversations`` (bench.locomo's):
        extraction one per session, plus the summaries' ``calls`` (added up
        over the worker processes), per recorded turn and per exchange."""
        sessions = sum(len(c.sessions) for c in conversations)
        turns = sum(len(c.turns) for c in conversations)
        exchanged = sum(len(exchanges(c, s)) for c in conversations for s in c.sessions)
        summary = calls.get("session", 0) + calls.get("rollup", 0)
        return {
            "session_calls": calls.get("session", 0), "rollup_calls": calls.get("rollup", 0),
            "extractive_sessions": calls.get("extractive", 0), "sessions": sessions, "turns": turns,
            "exchanges": exchanged,
            "calls_per_turn": (sessions + summary) / turns if turns else 0.0,
            "calls_per_exchange": (sessions + summary) / exchanged if exchanged else 0.0,
            "summaries": EXTRACTIVE_LABEL if calls.get("extractive") else "the dataset's session_summary",
        }


def cost_line(cost: dict[str, Any]) -> str:
    return (f"summary stand-in ({cost['summaries']}): {cost['session_calls']} session and "
            f"{cost['rollup_calls']} roll-up calls; {cost['turns']} turns ({cost['exchanges']} exchanges), "
            f"{cost['sessions']} sessions; LLM calls per turn (extraction + summaries): "
            f"{cost['calls_per_turn']:.3f} (per exchange {cost['calls_per_exchange']:.3f})")


def extractive_summary(events: Sequence[MemoryEvent], max_chars: int) -> str:
    """The first sentence of each of the person's turns (6 evenly spaced
    when there are more), then of the bot's, in order, up to 6 sentences
    and ``max_chars``."""
    def lead(role_is_bot: bool) -> list[str]:
        out = []
        for e in events:
            if (e.source_role == Role.ASSISTANT) != role_is_bot:
                continue
            found = first_sentence(str((e.content or {}).get("text") or ""))
            if found:
                who = "The assistant" if role_is_bot else (e.sender_name or "The user")
                out.append(f"{who}: {found}")
        return out

    said, replied = lead(False), lead(True)
    # Spread over a span of several sessions (summaries.min_events), not its first session's opening.
    picked = (spaced(said, EXTRACTIVE_SENTENCES) + replied)[:EXTRACTIVE_SENTENCES]
    return " ".join(picked)[:max_chars] or "(an empty conversation)"


def spaced(items: list[str], n: int) -> list[str]:
    """``n`` of ``items`` evenly spaced from the first, in order (all when fewer)."""
    if len(items) <= n:
        return items
    return [items[k * len(items) // n] for k in range(n)]


def install(data: str | Path, overrides: list[str] | None = None) -> DatasetSummaries:
    """The bench's engines of this process summarise with the dataset's
    summaries (``overrides``: the settings, which get summaries switched on)."""
    global INSTALLED
    INSTALLED = DatasetSummaries(data)
    if overrides is not None:
        overrides.append("summaries.enable=true")
    return INSTALLED


def summarizer_for() -> Callable[[str | None], Awaitable[DatasetSummaries | None]] | None:
    """The installed stand-in as an engine's ``summarizer_for``; None when none is installed."""
    standin = INSTALLED
    if standin is None:
        return None

    async def answer(session_id: str | None) -> DatasetSummaries:
        return standin

    return answer
