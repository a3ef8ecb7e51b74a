"""Per-persona memory (``identity.persona_scoped``): a scope id with
``#persona:<name>`` after it, so every index, cap, key and "forget" keeps it apart
with no new column. Who the person is (profile, preference, constraint) stays in
the shared scope whoever the bot plays.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from .config import PERSONA_MARK
from .enums import MemoryType

if TYPE_CHECKING:
    from .scope import Scope

# Facts about the person, shared by every persona (docs/decisions.md#d62).
SHARED_TYPES: frozenset[str] = frozenset({MemoryType.PROFILE, MemoryType.PREFERENCE, MemoryType.CONSTRAINT})
# AstrBot's names for "no persona chosen": memory stays in the shared scope.
NO_PERSONA = frozenset({"", "[%None]", "default", "_chatui_default_"})


def persona_name(value: object) -> str | None:
    """AstrBot's persona id as the core keeps it; None for the defaults."""
    name = str(value or "").strip()
    return None if name in NO_PERSONA else name


def shared_scope(scope: Scope) -> Scope:
    """The scope without its persona (itself when it has none)."""
    base, mark, _ = scope.id.partition(PERSONA_MARK)
    return replace(scope, id=base) if mark else scope


def as_persona_of(scope: Scope, other: Scope) -> Scope:
    """``scope`` with ``other``'s persona part: a fact learnt by a persona in a group stays with it."""
    _, mark, persona = other.id.partition(PERSONA_MARK)
    return replace(scope, id=f"{scope.id}{PERSONA_MARK}{persona}") if mark else scope


def target_scope(scope: Scope, memory_type: str) -> Scope:
    """Where a memory of ``memory_type`` learnt in ``scope`` is kept."""
    return shared_scope(scope) if memory_type in SHARED_TYPES else scope
