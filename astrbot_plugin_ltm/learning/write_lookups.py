"""What the writer reads of memory before it decides, apart from writer.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from ..enums import Status
from ..scope import Scope
from ..storing.tables import NOT_SUPERSEDED, MemoryEvent, MemoryItem, MemoryTombstone
from ..text import normalize_fact_key, related_keys
from .candidates import Candidate

# (scope, fact) -> the row id of the memory the semantic matcher found saying the same, or None.
Matches = dict[tuple[Scope, str], int | None]


@dataclass
class Looked:
    """The batch's tombstones and event times, one statement each for the batch rather
    than per candidate (docs/decisions.md#d144); a revive pops its tombstone here too."""

    tombstones: dict[tuple[Scope, str], MemoryTombstone]
    recorded: dict[str, datetime]
    matches: Matches  # the semantic matcher's answers (MemoryWriter.semantic_matches)

    @classmethod
    async def up(cls, session: AsyncSession, candidates: Sequence[tuple[Scope, Candidate]],
                 matches: Matches) -> Looked:
        keys: dict[Scope, set[str]] = {}
        for scope, c in candidates:
            key = normalize_fact_key(c.fact_key or c.fact)
            if key:
                keys.setdefault(scope, set()).add(key)
        tombstones: dict[tuple[Scope, str], MemoryTombstone] = {}
        for scope, wanted in keys.items():
            for chunk in _chunks(sorted(wanted)):
                for tomb in (await session.execute(select(MemoryTombstone).where(
                        MemoryTombstone.scope == scope.kind, MemoryTombstone.scope_id == scope.id,
                        MemoryTombstone.fact_key.in_(chunk)))).scalars():
                    tombstones[(scope, tomb.fact_key)] = tomb
        recorded: dict[str, datetime] = {}
        for chunk in _chunks(sorted({e for _, c in candidates for e in c.event_ids})):
            rows = await session.execute(select(MemoryEvent.event_id, MemoryEvent.created_at)
                                         .where(MemoryEvent.event_id.in_(chunk)))
            recorded.update((event_id, at) for event_id, at in rows)
        return cls(tombstones, recorded, matches)

    def stated_at(self, event_ids: Sequence[str]) -> datetime | None:
        """When the newest of the events was recorded: the value holds from then."""
        return max((self.recorded[e] for e in event_ids if e in self.recorded), default=None)

    async def matched(self, session: AsyncSession, scope: Scope, fact: str) -> MemoryItem | None:
        """The memory of ``scope`` the matcher found close to ``fact``."""
        row_id = self.matches.get((scope, fact))
        found = await session.get(MemoryItem, row_id) if row_id is not None else None
        # A group's namespace also holds what members said in it, kept with them.
        return found if found is not None and (found.scope, found.scope_id) == (scope.kind, scope.id) else None


def _chunks(values: list[str]) -> list[list[str]]:
    return [values[n:n + 500] for n in range(0, len(values), 500)]


# Built once: building a select and its cache key each time was most of the cost (docs/decisions.md#d145).
_IN_SCOPE = (MemoryItem.scope == bindparam("kind"), MemoryItem.scope_id == bindparam("scope_id"), NOT_SUPERSEDED)
_CURRENT = select(MemoryItem).where(*_IN_SCOPE, MemoryItem.fact_key == bindparam("key"))
_KEYS_FROM = select(MemoryItem.id, MemoryItem.fact_key).where(
    *_IN_SCOPE, MemoryItem.fact_key >= bindparam("low"), MemoryItem.fact_key < bindparam("high"))


async def current_memory(session: AsyncSession, scope: Scope, key: str) -> MemoryItem | None:
    """The scope's current (not superseded) memory under ``key``."""
    return (await session.execute(_CURRENT, {"kind": scope.kind, "scope_id": scope.id, "key": key})
            ).scalar_one_or_none()


async def related_memory(session: AsyncSession, scope: Scope, key: str) -> MemoryItem | None:
    """The one current memory under a key related to ``key``; None for none or several."""
    prefix = key.split("_", 1)[0] + "_"
    keys = (await session.execute(_KEYS_FROM, {"kind": scope.kind, "scope_id": scope.id, "low": prefix,
                                               "high": prefix + "\U0010ffff"})).all()
    found = [row_id for row_id, other in keys if related_keys(other, key)]
    return await session.get(MemoryItem, found[0]) if len(found) == 1 else None


async def named_memory(session: AsyncSession, scope: Scope, memory_id: str | None) -> MemoryItem | None:
    if not memory_id:
        return None
    item = (await session.execute(select(MemoryItem).where(MemoryItem.memory_id == memory_id))).scalar_one_or_none()
    if item is None or (item.scope, item.scope_id) != (scope.kind, scope.id) or item.status == Status.SUPERSEDED:
        return None
    return item

