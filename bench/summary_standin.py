"""The dataset's own session summaries standing in for the summary model.

LoCoMo-format files (LoCoMo, MemoryBank-CN) carry a ``session_summary``
written for each session; as ``observation`` stands in for extraction,
these stand in for ``learning/summaries.py``'s model call: given a
session's events, the stand-in answers the summary of the dataset's
session they belong to (found by the conversation, from the event's
``session_id``, and the session's start time). A roll-up, which the data
does not have, is the parts' summaries joined and cut to
``summaries.max_chars``: a crude stand-in that keeps the parts' words.

``python -m bench.locomo --summaries`` installs it for every engine of the
process; at exit it prints the model calls it answered and the calls per
recorded turn (extraction: one call per session, as the replay drains each
session in one batch; plus the summaries).
"""

from __future__ import annotations

import atexit
import bisect
import json
import re
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from astrbot_plugin_ltm.config import SummariesConfig
from astrbot_plugin_ltm.engine import LTMEngine
from astrbot_plugin_ltm.storing.tables import MemoryEvent


class DatasetSummaries:
    """The Summarizer protocol, answering from a LoCoMo-format file."""

    def __init__(self, data: str | Path, max_chars: int = SummariesConfig().max_chars) -> None:
        from .locomo import parse_when  # the replay's own reading of the dates

        samples: list[dict[str, Any]] = json.loads(Path(data).read_text(encoding="utf-8"))
        self._max_chars = max_chars
        # sample id -> session starts, in order, and their summaries
        self._sessions: dict[str, list[tuple[datetime, str]]] = {}
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
            self._sessions[str(sample.get("sample_id", f"conv-{n_sample}"))] = sorted(found)
        self.calls = {"session": 0, "rollup": 0}

    async def session(self, events: Sequence[MemoryEvent]) -> str:
        self.calls["session"] += 1
        sample = (events[0].session_id or "").rsplit(":", 1)[-1]
        sessions = self._sessions.get(sample) or []
        at = bisect.bisect_right([start for start, _ in sessions], events[0].created_at) - 1
        if at < 0:
            raise LookupError(f"no session_summary for {sample} at {events[0].created_at}")
        return sessions[at][1][: self._max_chars]

    async def rollup(self, level: str, start: datetime, end: datetime, summaries: Sequence[str]) -> str:
        self.calls["rollup"] += 1
        return " ".join(summaries)[: self._max_chars]

    def report(self) -> str:
        calls = self.calls["session"] + self.calls["rollup"]
        per_turn = (self.sessions + calls) / self.turns if self.turns else 0.0
        return (f"summary stand-in: {self.calls['session']} session and {self.calls['rollup']} roll-up calls; "
                f"{self.turns} turns, {self.sessions} sessions; LLM calls per turn (extraction + summaries): "
                f"{per_turn:.3f}")


def install(data: str | Path, overrides: list[str]) -> DatasetSummaries:
    """Every engine of this process summarises with the dataset's summaries."""
    standin = DatasetSummaries(data)
    LTMEngine.summarizer_standin = standin
    overrides.append("summaries.enable=true")
    atexit.register(lambda: print(standin.report(), file=sys.stderr))
    return standin
