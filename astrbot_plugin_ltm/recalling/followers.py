"""A member's profile facts that follow them into a group, when the operator allows
(``groups.profiles_follow_members``): marked as private to them; a secret never follows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy import Connection

from ..config import ReadPolicy
from ..enums import MemoryType, Status, Visibility
from ..scope import Scope
from ..storing.driver_rows import fetch_rows
from .rows import ItemRow, usable

FOLLOWING = 5  # a person's profile facts that follow them, most important first: a name, a form of address


@dataclass(frozen=True)
class Follower:
    """The speaker whose profile facts follow them into this group."""

    scope: Scope  # their own (shared) scope
    name: str  # how the block names them


def load_followers(conn: Connection, follower: Follower, policy: ReadPolicy, now: datetime) -> list[ItemRow]:
    rows = fetch_rows(
        conn, f"SELECT {ItemRow.COLUMNS} FROM ltm_items WHERE scope = :kind AND scope_id = :id AND type = :type "
              "AND status = :active AND visibility != :secret AND +confidence >= :min_confidence "
              "ORDER BY importance DESC LIMIT :n",
        {"kind": follower.scope.kind, "id": follower.scope.id, "type": MemoryType.PROFILE, "active": Status.ACTIVE,
         "secret": Visibility.SECRET, "min_confidence": policy.min_confidence, "n": FOLLOWING})
    return [replace(item, private_to=follower.name) for item in map(ItemRow.of, rows) if usable(item, policy, now)]
