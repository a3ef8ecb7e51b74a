"""Shared values and builders for the unit tests, imported as
``tests.helpers`` (the fixtures stay in conftest.py, reached as fixtures).

- ``START``: the moment the fake clock (conftest.FakeClock) starts at.
- ``event_row(n, said, ...)``: a reader's row of a raw turn
  (recalling.rows.EventRow), by keyword.
- ``TINY_LOCOMO``: a two-session LoCoMo conversation with its facts and
  questions, for the bench tests (bench/locomo.py).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from astrbot_plugin_ltm.recalling.rows import EventRow

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
