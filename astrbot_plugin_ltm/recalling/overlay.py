"""A read as it would be if some memories had another status: the reader
of a policy replay (operating/replay.py). Same retrievers, ranking and
budget as the live reader; only the memories' statuses are looked up in an
overlay first (a memory a candidate write policy would have made active,
or never stored). Read-only, on the database's read threads."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import replace
from datetime import datetime

from sqlalchemy import Connection

from ..clock import Clock
from ..config import ReadPolicy
from ..enums import Status
from ..extension_points import Found
from ..scope import Scope
from .followers import Follower
from .ranking import leading
from .reader import MemoryReader
from .rows import BASELINE_POOL, ItemRow, ItemView, load_evidence, recallable, usable


class OverlayReader(MemoryReader):
    def __init__(self, live: MemoryReader, clock: Clock, overlay: Mapping[str, str], unbacked: bool) -> None:
        super().__init__(live.db, live.retrievers, live.counter, clock, unbacked_turns=lambda: unbacked)
        self.overlay = dict(overlay)  # memory_id → status under the replayed policy

    # The live reader's step is a static method; this one needs the overlay.
    def _memories(self, conn: Connection, scopes: list[Scope], found: list[Found],  # type: ignore[override]
                  policy: ReadPolicy, now: datetime, turns: Collection[int],
                  follower: Follower | None = None) -> tuple[dict[int, ItemView], dict[str, frozenset[str]]]:
        if not self.overlay:  # (a replay reads no group with followers)
            return MemoryReader._memories(conn, scopes, found, policy, now, turns, follower)
        if policy.max_items <= 0:
            return {}, {}
        hits = leading([f.memories for f in found])
        items: dict[int, ItemView] = {}
        for row in _load(conn, scopes, hits, set(self.overlay)):
            row = replace(row, status=self.overlay.get(row.memory_id, row.status))
            if usable(row, policy, now):
                items[row.id] = row
        return items, load_evidence(conn, [items[r].memory_id for r in hits if r in items], turns)


def _load(conn: Connection, scopes: list[Scope], rowids: set[int], overlaid: set[str]) -> list[ItemRow]:
    """As rows.load_memories, whatever the status: the hits, and each
    scope's most important memories among the active and the overlaid."""
    pooled = "(status = :active OR memory_id IN (SELECT value FROM json_each(:overlaid)))"
    return recallable(conn, scopes, rowids, pooled, {"overlaid": json.dumps(sorted(overlaid)), "active": Status.ACTIVE},
                      BASELINE_POOL * 2)
