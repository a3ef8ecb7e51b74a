"""One read: what it is given (the question, the scopes, the policy and
the request's extras), then what each stage of the reader finds for the
next (reader.py), and what its block reports of each line it shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

from ..clock import as_utc, utcnow
from ..config import ReadPolicy
from ..extension_points import Found, Query
from ..scope import Scope
from ..text import is_cjk
from .bot_lines import BOT_SHARE
from .dates import Period
from .followers import Follower
from .history import History
from .rows import EventRow, ItemView
from .trace import Trace


@dataclass(frozen=True)
class Only:
    """The memory_search tool's bounds beyond the policy; types mean no turns."""

    types: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None

    def keeps_memory(self, item: ItemView) -> bool:
        return (not self.types or item.type in self.types) and self._within(item.updated_at)

    def keeps_turn(self, turn: EventRow) -> bool:
        return not self.types and self._within(turn.created_at)

    def _within(self, at: datetime) -> bool:
        at = as_utc(at)
        return (self.since is None or at >= self.since) and (self.until is None or at < self.until)


@dataclass(frozen=True)
class Focus:
    """The message's query tokens, and the summaries shown whole (in the period it names)."""

    tokens: frozenset[str]
    whole: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Selected:
    memory_id: str  # the event_id for a raw turn
    type: str  # a memory type, or "event" for a raw turn
    fact: str  # the memory's fact, or the turn's day and line
    confidence: float
    score: float
    scope: str


@dataclass(frozen=True)
class Pinned:
    """A candidate placed right under the block's opening when it fits (last_time.py); a
    ranked line of the same memory gives way to it (docs/decisions.md#d107)."""

    lines: tuple[str, ...]
    selected: Selected
    source: str  # the trace's source of its lines (trace.LAST_TIME)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def language_of(text: str) -> str:
    """zh when the message has at least as many CJK characters as Latin letters, else en."""
    cjk = sum(1 for ch in text if is_cjk(ch))
    latin = sum(1 for ch in text if ch.isascii() and ch.isalpha())
    return "zh" if cjk and cjk >= latin else "en"


@dataclass
class Read:
    question: str
    scopes: list[Scope]
    policy: ReadPolicy
    only: Only | None = None
    ids: bool = False  # each memory line ends in its row id, for the memory_expand tool
    history: History | None = None  # the request's earlier messages: their turns are not recalled again
    trace: Trace | None = None  # filled with the lines taken and those left out, and why
    pinned: Pinned | None = None
    follower: Follower | None = None  # whose profile facts follow them into this group (followers.py)
    now: datetime = field(default_factory=utcnow)
    found: list[Found] = field(default_factory=list)  # the retrievers' rankings
    items: dict[int, ItemView] = field(default_factory=dict)
    evidence: dict[str, frozenset[str]] = field(default_factory=dict)  # a memory's evidence event ids
    turns: dict[int, EventRow] = field(default_factory=dict)
    period: Period | None = None  # the time the message names (dates.py)
    in_period: frozenset[int] = frozenset()  # the memories whose evidence falls in it
    period_turns: list[int] = field(default_factory=list)  # its turns, best match first (periods.py)
    added: list[list[int]] = field(default_factory=list)  # rankings of candidate turns stages added
    focus: Focus | None = None  # None: summaries read whole
    bot_share: float = BOT_SHARE  # of the budget, for the bot's lines

    @cached_property
    def query(self) -> Query:
        return Query.of(self.question)

    @cached_property
    def language(self) -> str:
        return language_of(self.question)
