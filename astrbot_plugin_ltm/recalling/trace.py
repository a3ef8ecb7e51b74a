"""What a read did with its candidates, for the injection preview; the bot's own
reads pass no :class:`Trace` and pay nothing for it."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..enums import MemoryType
from ..i18n import msg
from .rows import EventRow, ItemView

# Where a line of the block comes from.
MEMORY, SUMMARY, TURN, LAST_TIME = "memory", "summary", "turn", "last_time"

# Why a candidate was left out: the codes of the catalogue's texts (i18n/preview.py).
BUDGET = "preview.cut.budget"
MAX_ITEMS = "preview.cut.max_items"
MAX_EVENTS = "preview.cut.max_events"
PER_TYPE = "preview.cut.per_type"
DUPLICATE = "preview.cut.duplicate"
COVERED = "preview.cut.covered"
BOT_SHARE = "preview.cut.bot_share"
FULL = "preview.cut.full"
WITHHELD = "preview.cut.withheld"
UNREVIEWED = "preview.cut.unreviewed"
NOT_ACTIVE = "preview.cut.not_active"
AWAITING_APPROVAL = "preview.cut.awaiting_approval"
LOW_CONFIDENCE = "preview.cut.low_confidence"
EXPIRED = "preview.cut.expired"


@dataclass(frozen=True)
class Line:
    """A line of the block as the bot is given it."""

    text: str
    source: str  # MEMORY, SUMMARY, TURN or LAST_TIME
    id: str  # the memory's id, or the turn's event id
    score: float
    tokens: int  # the line's own tokens (with its line break)


@dataclass(frozen=True)
class Cut:
    """A candidate the block left out, and why (a catalogue code and its values)."""

    text: str
    source: str
    id: str
    score: float
    why_code: str
    why_params: tuple[tuple[str, str], ...] = ()

    @property
    def why(self) -> str:
        """Why, in English (the API renders it in the reader's language)."""
        return str(msg(self.why_code, **dict(self.why_params)))


@dataclass
class Trace:
    lines: list[Line] = field(default_factory=list)
    cut: list[Cut] = field(default_factory=list)

    def take(self, text: str, source: str, id_: str, score: float, tokens: int) -> None:
        self.lines.append(Line(text, source, id_, round(score, 4), tokens))

    def leave_out(self, text: str, source: str, id_: str, score: float, why_code: str, **params: str) -> None:
        self.cut.append(Cut(text, source, id_, round(score, 4), why_code, tuple(sorted(params.items()))))

    def pin(self, text: str, source: str, id_: str, tokens: int) -> None:
        """A pinned candidate's line, first, in place of a line of the same id."""
        self.drop(id_)
        self.lines.insert(0, Line(text, source, id_, 1.0, tokens))

    def drop(self, id_: str) -> Line | None:
        """Take a line back out (a later step moved or removed it)."""
        for n, line in enumerate(self.lines):
            if line.id == id_:
                return self.lines.pop(n)
        return None


def memory_source(item: ItemView) -> str:
    return SUMMARY if item.type == MemoryType.SUMMARY else MEMORY


def candidate_of(memory: ItemView | None, turn: EventRow | None) -> tuple[str, str]:
    """(source, id) of a ranked candidate."""
    if memory is not None:
        return memory_source(memory), memory.memory_id
    assert turn is not None
    return TURN, turn.event_id
