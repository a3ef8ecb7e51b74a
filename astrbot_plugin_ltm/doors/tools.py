"""The memory tools the model may call in the middle of a turn: text in →
text out over the engine, like the chat commands (main.py registers them
with AstrBot).

Each answers a sentence the model can pass on when it cannot help (off,
read-only, nothing found), and never reaches another person's memory.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from sqlalchemy import and_, or_, select

from ..audience import may_recall
from ..engine import LTMEngine
from ..enums import MEMORY_TYPES, Outcome, Status
from ..instructions import instruction_reason, neutralise
from ..recalling.block import EVENT_CHARS
from ..recalling.read import Only, Read
from ..scope import Origin, Scope
from ..storing.database import ReadOnlyError
from ..storing.evidence import cited_events
from ..storing.tables import MemoryContext, MemoryItem
from ..storing.turns import turn_text
from ..withholding import speaker_of

EXPAND_TURNS = 8  # source turns memory_expand returns at most
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MONTH = re.compile(r"^\d{4}-\d{2}$")
_YEAR = re.compile(r"^\d{4}$")


def parse_period(text: str) -> tuple[datetime | None, datetime | None]:
    """``YYYY-MM-DD``, ``YYYY-MM``, ``YYYY`` or ``START..END`` (either side
    may be empty) as [since, until) in UTC. Raises ValueError."""
    text = text.strip()
    if ".." in text:
        start, _, end = text.partition("..")
        since = parse_period(start)[0] if start.strip() else None
        until = parse_period(end)[1] if end.strip() else None
        return since, until
    try:
        if _DAY.match(text):
            day = datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
            return day, day + timedelta(days=1)
        if _MONTH.match(text):
            first = datetime.strptime(text, "%Y-%m").replace(tzinfo=UTC)
            after = first.replace(year=first.year + 1, month=1) if first.month == 12 else first.replace(
                month=first.month + 1)
            return first, after
        if _YEAR.match(text):
            year = int(text)
            return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
    except ValueError as exc:
        raise ValueError(f"period {text!r} is not a date: {exc}") from exc
    raise ValueError(f"period {text!r}: use YYYY-MM-DD, YYYY-MM, YYYY or START..END")


class MemoryTools:
    def __init__(self, engine: LTMEngine) -> None:
        self.engine = engine

    def _off(self, tool: str) -> str | None:
        cfg = self.engine.config
        switched = {"memory_search": cfg.tools.search, "memory_remember": cfg.tools.remember,
                    "memory_expand": cfg.tools.expand}
        if not cfg.enable or not switched[tool]:
            return f"{tool} is switched off by the operator."
        return None

    async def search(self, origin: Origin, query: str, period: str = "", type: str = "") -> str:
        if (off := self._off("memory_search")) is not None:
            return off
        reader = self.engine.reader
        if reader is None:
            return "Long-term memory is not running."
        only = Only()
        if type.strip():
            if type.strip() not in MEMORY_TYPES:
                return f"type must be one of {', '.join(MEMORY_TYPES)} (or empty for any)."
            only = replace(only, types=(type.strip(),))
        if period.strip():
            try:
                since, until = parse_period(period)
            except ValueError as exc:
                return str(exc)
            only = replace(only, since=since, until=until)
        cfg = self.engine.config
        policy = replace(cfg.read_policy, enable=True, max_tokens=cfg.tools.search_max_tokens)
        block = await reader.read(Read(query, self.engine.resolver.read_scopes(origin), policy, only=only,
                                       ids=cfg.tools.expand, follower=self.engine.follower(origin)))
        self.engine.usage.note(block, via="tool")
        return block.text if block else "Nothing in memory matches that."

    async def remember(self, origin: Origin, fact: str) -> str:
        if (off := self._off("memory_remember")) is not None:
            return off
        try:
            outcome = await self.engine.remember(origin, fact)
        except ReadOnlyError:
            return "Memory is read-only right now (an operator switched writes off): nothing was stored."
        except ValueError as exc:
            return f"Nothing stored: {exc}."
        if outcome.action == Outcome.DROPPED:
            return f"Not stored: {outcome.reason}."
        if outcome.status == Status.ACTIVE:
            return f"Remembered: {outcome.fact}"
        return f"Stored for review, not used until an operator approves it ({outcome.reason}): {outcome.fact}"

    async def _said_in(self, item: MemoryItem, scopes: list[Scope]) -> bool:
        """Whether ``item`` was said in one of ``scopes`` (a group, for a member's memory)."""
        async with self.engine.db.read() as session:
            found = await session.execute(select(MemoryContext.item_id).where(
                MemoryContext.item_id == item.id,
                or_(*(and_(MemoryContext.scope == s.kind, MemoryContext.scope_id == s.id) for s in scopes))))
            return found.first() is not None

    async def expand(self, origin: Origin, memory_id: str) -> str:
        if (off := self._off("memory_expand")) is not None:
            return off
        wanted = memory_id.strip().lstrip("#")
        scopes = self.engine.resolver.read_scopes(origin)
        async with self.engine.db.read() as session:
            item = await session.get(MemoryItem, int(wanted)) if wanted.isdigit() and len(wanted) < 19 else None
        said_here = item is not None and await self._said_in(item, scopes)
        if item is None or not may_recall(Scope(item.scope, item.scope_id), item.visibility, said_here, scopes):
            return f"No memory #{wanted} for you here: give the id its block line ends with, e.g. #42."
        if item.status != Status.ACTIVE:
            return f"Memory #{wanted} is not in use, so its sources are not shown."
        # Only the lines said in this chat: a memory a group may recall may
        # have been said in private too (audience.py).
        async with self.engine.db.read() as session:
            turns = await cited_events(session, item, shown_only=True, limit=EXPAND_TURNS, said_in=scopes)
        if not turns:
            return f"Memory #{wanted} ({neutralise(item.fact)}) has no source turns to show."
        lines = [f"Sources of #{wanted} ({neutralise(item.fact)}):"]
        for event in turns:
            said = turn_text(event.source_type, event.content or {}, speaker_of(event))
            if instruction_reason(said[:EVENT_CHARS * 2]):
                continue  # never shown raw, here as in the block
            lines.append(f"- [said {event.created_at:%Y-%m-%d}] {neutralise(said[:EVENT_CHARS * 2])}")
        return "\n".join(lines)
