"""The benchmarks' conversations: a LoCoMo-format file read into turns,
sessions, facts and questions, and a session as the hook sees it
(exchanges). Shared by bench.locomo, its history and summary stand-ins and
the other replays; it imports none of them, so they import it without a loop.

Data: LoCoMo (Maharana et al., ACL 2024), Snap Research, CC BY-NC 4.0 —
read from the path given, nothing of it copied here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from .metrics import ANSWER_CATEGORIES, answer_words, normalise_evidence


@dataclass
class Turn:
    dia_id: str
    session: int
    speaker: str
    text: str  # with the image caption, as recorded
    at: datetime

    @property
    def line(self) -> str:
        """How a raw turn is injected by the baselines."""
        return f"[{self.at.day} {self.at:%B %Y}] {self.speaker}: {self.text}"

    @property
    def search_text(self) -> str:
        return f"{self.speaker}: {self.text}"


@dataclass
class Fact:
    text: str
    speaker: str
    session: int
    evidence: list[str]  # dialogue ids, normalised
    type: str = "episode"


@dataclass
class Question:
    text: str
    category: int
    evidence: list[str]  # normalised, only ids of turns that exist
    unknown_evidence: list[str] = field(default_factory=list)
    answer: Any = None  # the gold answer (category 5 has none)
    evidence_role: str | None = None  # "user" or "assistant" where the data says whose turns answer it
    # When it was asked, where the data says (LongMemEval's question_date):
    # "last Saturday" means the Saturday before that day (docs/decisions.md#d83).
    asked_at: datetime | None = None

    def answer_words(self, text: str) -> float | None:
        return answer_words(self.answer, text) if self.category in ANSWER_CATEGORIES else None


@dataclass
class Session:
    number: int
    at: datetime
    turns: list[Turn]


@dataclass
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    sessions: list[Session]
    facts: list[Fact]
    questions: list[Question]
    bot_speaker: str | None = None  # that speaker's turns are the bot's replies (MemoryBank-CN)

    @property
    def turns(self) -> list[Turn]:
        return [t for s in self.sessions for t in s.turns]

    @property
    def user(self) -> str:
        """Whose scope the questions are asked in: the first speaker who is not the bot."""
        return next((s for s in self.speakers if s != self.bot_speaker), self.speakers[0])

    @property
    def language(self) -> str:
        """"zh" when the turns are mostly CJK, else "en" (picks the default embedder)."""
        text = "".join(t.text for t in self.turns[:200])
        cjk = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")
        return "zh" if text and cjk / len(text) > 0.2 else "en"

    @property
    def end(self) -> datetime:
        return max(t.at for t in self.turns)

    def full_text(self) -> str:
        """The whole conversation as a model would be given it."""
        parts = []
        for s in self.sessions:
            parts.append(f"Session {s.number} ({s.at.day} {s.at:%B %Y}, {s.at:%H:%M}):")
            parts.extend(f"{t.speaker}: {t.text}" for t in s.turns)
        return "\n".join(parts)


def parse_when(value: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" as an aware UTC datetime."""
    cleaned = " ".join(value.replace(",", ", ").split())
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%H:%M on %d %B, %Y"):
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(f"unreadable LoCoMo date {value!r}")


def parse_question_date(value: Any) -> datetime | None:
    """LongMemEval's "2023/05/30 (Tue) 18:40" as an aware UTC datetime;
    None when absent or unreadable."""
    m = re.fullmatch(r"\s*(\d{4})/(\d{1,2})/(\d{1,2})(?:\s*\(\w+\))?\s*(\d{1,2}):(\d{2})\s*", str(value or ""))
    if m is None:
        return None
    year, month, day, hour, minute = (int(g) for g in m.groups())
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


_PREFERENCE = re.compile(
    r"\b(likes?|loves?|enjoys?|prefers?|hates?|dislikes?|favou?rite|fan of|passionate about)\b", re.I)
_PROFILE = re.compile(
    r"\b(lives in|is from|moved to|works (as|at|for)|is an? [a-z]+ (by profession|student)|"
    r"years old|identif(y|ies) as|is married|has (a|an|two|three|\d+) (kids?|children|sons?|daughters?|"
    r"dogs?|cats?|pets?|brothers?|sisters?|siblings?))\b",
    re.I,
)


def fact_type(fact: str) -> str:
    """A tiny stand-in for the type an extraction model would give."""
    if _PREFERENCE.search(fact):
        return "preference"
    if _PROFILE.search(fact):
        return "profile"
    return "episode"


def _session_numbers(conv: dict[str, Any]) -> list[int]:
    found = []
    for key, value in conv.items():
        m = re.fullmatch(r"session_(\d+)", key)
        if m and isinstance(value, list) and value:
            found.append(int(m.group(1)))
    return sorted(found)


def load_conversations(data: str | Path | list[dict[str, Any]]) -> list[Conversation]:
    """Read a LoCoMo-format file (or its parsed JSON)."""
    samples = json.loads(Path(data).read_text(encoding="utf-8")) if isinstance(data, (str, Path)) else data
    out: list[Conversation] = []
    for sample in samples:
        conv = sample["conversation"]
        sessions = []
        for n in _session_numbers(conv):
            start = parse_when(conv[f"session_{n}_date_time"])
            turns = []
            for i, raw in enumerate(conv[f"session_{n}"]):
                body = str(raw.get("text") or "").strip()
                caption = str(raw.get("blip_caption") or "").strip()
                if caption:
                    body = f"{body} [shares an image: {caption}]".strip()
                dia = normalise_evidence(raw.get("dia_id"))
                dia_id = dia[0] if dia else f"D{n}:{i + 1}"
                turns.append(Turn(dia_id, n, str(raw.get("speaker") or "someone"), body,
                                  start + timedelta(minutes=i)))
            sessions.append(Session(n, start, turns))
        known = {t.dia_id for s in sessions for t in s.turns}
        facts = []
        observations = sample.get("observation") or {}
        for n in _session_numbers(conv):
            per_speaker = observations.get(f"session_{n}_observation") or {}
            for speaker, entries in per_speaker.items():
                for entry in entries:
                    if not isinstance(entry, (list, tuple)) or not entry or not isinstance(entry[0], str):
                        continue
                    fact = " ".join(entry[0].split())
                    evidence = [d for d in normalise_evidence(entry[1:]) if d in known]
                    if fact:
                        facts.append(Fact(fact, speaker, n, evidence, fact_type(fact)))
        questions = []
        for qa in sample.get("qa") or []:
            ids = normalise_evidence(qa.get("evidence"))
            role = qa.get("evidence_role")
            questions.append(Question(
                str(qa["question"]), int(qa.get("category", 0)),
                [d for d in ids if d in known], [d for d in ids if d not in known], qa.get("answer"),
                str(role) if role else None, parse_question_date(qa.get("question_date")),
            ))
        bot = sample.get("bot_speaker")
        out.append(Conversation(
            str(sample.get("sample_id", f"conv-{len(out)}")),
            (str(conv.get("speaker_a", "")), str(conv.get("speaker_b", ""))),
            sessions, facts, questions, str(bot) if bot else None,
        ))
    return out


def exchanges(conv: Conversation, session: Session) -> list[tuple[Turn | None, Turn | None]]:
    """A session as the hook sees it: (a person's turn, the bot's reply to
    it). Without a ``bot_speaker`` every turn is a person's, with no reply;
    with one, each bot turn is the reply to the person's turn just before it
    (a bot turn with none before it is a reply to nothing)."""
    out: list[tuple[Turn | None, Turn | None]] = []
    for turn in session.turns:
        if turn.speaker != conv.bot_speaker:
            out.append((turn, None))
        elif out and out[-1][0] is not None and out[-1][1] is None:
            out[-1] = (out[-1][0], turn)
        else:
            out.append((None, turn))
    return out
