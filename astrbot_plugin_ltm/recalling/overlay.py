"""A read as it would be if some memories had another status: a policy replay's
reader, the live reader's retrievers, ranking and budget over an overlay of statuses."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace

from sqlalchemy import Connection

from ..clock import Clock
from ..enums import Status
from ..scope import Scope
from .read import Read
from .reader import MemoryReader
from .rows import BASELINE_POOL, ItemRow, recallable, usable


class OverlayReader(MemoryReader):
    def __init__(self, live: MemoryReader, clock: Clock, overlay: Mapping[str, str], unbacked: bool) -> None:
        super().__init__(live.db, live.retrievers, live.counter, clock, unbacked_turns=lambda: unbacked)
        self.overlay = dict(overlay)  # memory_id → status under the replayed policy

    def _usable(self, conn: Connection, read: Read, hits: set[int]) -> list[ItemRow]:
        if not self.overlay:
            return super()._usable(conn, read, hits)
        rows = (replace(row, status=self.overlay.get(row.memory_id, row.status))
                for row in _load(conn, read.scopes, hits, set(self.overlay)))
        return [row for row in rows if usable(row, read.policy, read.now)]


def _load(conn: Connection, scopes: list[Scope], rowids: set[int], overlaid: set[str]) -> list[ItemRow]:
    """As rows.load_memories, whatever the status: the active and the overlaid."""
    pooled = "(status = :active OR memory_id IN (SELECT value FROM json_each(:overlaid)))"
    return recallable(conn, scopes, rowids, pooled, {"overlaid": json.dumps(sorted(overlaid)), "active": Status.ACTIVE},
                      BASELINE_POOL * 2)
