"""Shared values and builders for the unit tests, imported as
``tests.helpers`` (the fixtures stay in conftest.py, reached as fixtures).

- ``START``: the moment the fake clock (conftest.FakeClock) starts at.
- ``event_row(n, said, ...)``: a reader's row of a raw turn
  (recalling.rows.EventRow), by keyword.
- ``TINY_LOCOMO``: a two-session LoCoMo conversation with its facts and
  questions, for the bench tests (bench/locomo.py).
- ``HashEmbedder``, ``FailingEmbedder``: the fake embedding providers.
- ``old_and_new(make_ltm, origin)``: an archive with old turns a fact, a
  summary or nothing cites, and a recent exchange (retention, compact).
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import text

from astrbot_plugin_ltm.enums import MemoryType, Status
from astrbot_plugin_ltm.recalling.rows import EventRow
from astrbot_plugin_ltm.storing.evidence import link_summary
from astrbot_plugin_ltm.storing.tables import MemoryItem

START = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


def event_row(n: int, said: str = "", *, scope: str = "user", scope_id: str = "x", source_type: str = "message",
              role: str = "user", content: dict[str, Any] | None = None, sender_id: str | None = "alice",
              sender_name: str | None = "Alice", at: datetime = START, nothing_kept: bool = False) -> EventRow:
    """Turn ``n`` (row id n, event id "e{n}"): ``said`` as its text unless
    ``content`` is given."""
    return EventRow(n, f"e{n}", scope, scope_id, source_type, role, content or {"text": said}, sender_id,
                    sender_name, at, nothing_kept)


# Two sessions of Alice and Bob: an image turn, a fact citing two turns, a
# question of each category, an adversarial one and one citing no turn there is.
TINY_LOCOMO: dict[str, Any] = {
    "sample_id": "tiny-1",
    "conversation": {
        "speaker_a": "Alice",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Alice", "dia_id": "D1:1", "text": "I adopted a kitten last week, her name is Miso."},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Cute! I'm training for the city marathon in May."},
            {"speaker": "Bob", "dia_id": "D1:3", "text": "Running every morning before work."},
        ],
        "session_2_date_time": "10:00 am on 3 June, 2023",
        "session_2": [
            {"speaker": "Alice", "dia_id": "D2:1", "text": "Look what I painted this weekend!",
             "img_url": ["http://example.invalid/x.jpg"], "blip_caption": "a painting of a sunset over the sea"},
            {"speaker": "Bob", "dia_id": "D2:2", "text": "Wow, the colours are great."},
            {"speaker": "Alice", "dia_id": "D2:3", "text": "Miso sat next to me the whole time."},
        ],
    },
    "observation": {
        "session_1_observation": {
            "Alice": [["Alice adopted a kitten named Miso.", "D1:1"]],
            "Bob": [["Bob is training for the city marathon in May.", "D1:2"]],
        },
        "session_2_observation": {
            "Alice": [["Alice painted a sunset while her cat Miso sat with her.", "D2:1; D2:3"]],
            "Bob": [],
        },
    },
    "qa": [
        {"question": "What is the name of Alice's kitten?", "answer": "Miso", "evidence": ["D1:1"], "category": 4},
        {"question": "How does Bob prepare for the marathon?", "answer": "runs every morning",
         "evidence": ["D1:2", "D1:3"], "category": 1},
        {"question": "When did Alice paint a sunset?", "answer": "June 2023", "evidence": ["D2:1; D2:3"],
         "category": 2},
        {"question": "What did Bob paint?", "evidence": ["D2:2"], "category": 5, "adversarial_answer": "a sunset"},
        {"question": "Where does Alice live?", "answer": "?", "evidence": ["D9:9"], "category": 4},
    ],
}


# -- an archive with old turns (retention_days.turns, compact) ---------------------------


class HashEmbedder:
    """Deterministic bag-of-words vectors: texts sharing words are close.
    ``texts``: every text it embedded; ``calls``: how many times it was asked."""

    def __init__(self, dim: int = 32, model_id: str | None = None) -> None:
        self.dim = dim
        self.model_id = model_id or f"hash-{dim}"
        self.texts: list[str] = []
        self.calls = 0

    async def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        self.texts += texts
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, said in enumerate(texts):
            for token in re.findall(r"\w+", said.lower()):
                out[i, int(hashlib.md5(token.encode()).hexdigest(), 16) % self.dim] += 1
        return out


class FailingEmbedder:
    """An embedding provider that is down."""

    model_id = "broken"

    async def embed(self, texts: list[str]) -> np.ndarray:
        raise ConnectionError("embedding provider down")


FACT = {"type": "preference", "fact": "Alice keeps bees in Kent", "fact_key": "alice_hobby", "line": 1}


async def old_and_new(make_ltm, origin, days: int = 30, keep: int | None = None):
    """Turns said ``days`` + 5 days ago and a recent exchange; ``keep``:
    retention_days.turns (default ``days``)."""
    retention = {"turns": days if keep is None else keep}
    ltm = await make_ltm({"write_policy": {"mode": "auto"}, "retention_days": retention}, embedder=HashEmbedder())
    alice, bob = origin("alice"), origin("bob")
    cited, _ = await ltm.turn(alice, "I keep bees in Kent", "Lovely.", FACT)  # a fact cites the message
    chat = [await ltm.record(bob, f"the weather on day {n} was grey and windy", "Hm.") for n in range(3)]
    summarised = await ltm.record(bob, "we talked about the lighthouse tour", "Nice.")
    async with ltm.engine.db.write() as session:  # a summary covering that exchange
        summary = MemoryItem(scope="user", scope_id=summarised[0].scope_id, type=MemoryType.SUMMARY,
                             fact="Bob talked about a lighthouse tour", fact_key="summary_session_x",
                             status=Status.ACTIVE, confidence=0.8, created_at=ltm.clock(), updated_at=ltm.clock())
        session.add(summary)
        await session.flush()
        await link_summary(session, summary, [e.event_id for e in summarised])
    await ltm.engine.worker.drain()  # extraction is done with them (no fact: the model answers [])
    await ltm.engine.worker.fill_vectors()
    ltm.clock.advance(days=days + 5)
    recent = await ltm.record(bob, "the weather today is grey and windy too", "Hm.")
    await ltm.engine.worker.fill_vectors()
    return ltm, cited, [e for turn in chat for e in turn], summarised, recent


async def rowids(ltm, table: str, key: str) -> set[int]:
    async with ltm.engine.db.read() as session:
        return set((await session.execute(text(f"SELECT {key} FROM {table}"))).scalars())
