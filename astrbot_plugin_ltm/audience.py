"""Who may hear a memory again: the rule of contextual integrity (docs/privacy.md).

A private chat with P recalls everything kept about P; group G what is kept about
G and what anyone said in G (its *contexts*, ``ltm_item_contexts``); a secret only
P's private chat. The rule is here once, as ``may_recall`` and as SQL, so every
read path asks one of them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .enums import ScopeKind, Visibility
from .scope import Scope

# The memories kept elsewhere that a scope may recall: said in it, and shared.
SAID_IN_SQL = (
    "SELECT c.item_id FROM ltm_item_contexts c JOIN ltm_items s ON s.id = c.item_id "
    f"WHERE c.scope = :kind AND c.scope_id = :id AND s.visibility = '{Visibility.SHARED}'"
)
# A scope's memory namespace: those kept in it (a group's own only when shared) and said in it.
MEMBERS_SQL = (
    "SELECT i.id FROM ltm_items i WHERE i.scope = :kind AND i.scope_id = :id "
    f"AND (i.scope = '{ScopeKind.USER}' OR i.visibility = '{Visibility.SHARED}') UNION ALL {SAID_IN_SQL}"
)


# Whether the memory was said in one of the scopes a read reads (:reading, reading_param's JSON).
SAID_IN_HERE_SQL = (
    "EXISTS (SELECT 1 FROM ltm_item_contexts c, json_each(:reading) r WHERE c.item_id = ltm_items.id "
    "AND c.scope = json_extract(r.value, '$[0]') AND c.scope_id = json_extract(r.value, '$[1]'))"
)


def reading_param(scopes: Sequence[Scope]) -> str:
    """The scopes a read reads, as SAID_IN_HERE_SQL's :reading."""
    return json.dumps([[s.kind, s.id] for s in scopes])


def said_in_sql(n: int) -> str:
    """SAID_IN_SQL with the parameters :kind<n> and :id<n> (a statement over several scopes)."""
    return SAID_IN_SQL.replace(":kind", f":kind{n}").replace(":id", f":id{n}")


def may_recall(kept_in: Scope, visibility: str, said_here: bool, reading: Sequence[Scope]) -> bool:
    """Whether a chat reading ``reading`` may recall a memory kept in ``kept_in``."""
    if kept_in in reading:
        return kept_in.kind == ScopeKind.USER or visibility == Visibility.SHARED
    return visibility == Visibility.SHARED and said_here


def seen_in(kept_in: Scope, visibility: str, said_in: Sequence[Scope]) -> list[Scope]:
    """The chats that may recall a memory kept in ``kept_in`` and said in the groups
    ``said_in`` (a person's scope stands for their private chat); followers aside."""
    if kept_in.kind == ScopeKind.GROUP:
        return [kept_in] if visibility == Visibility.SHARED else []
    if visibility != Visibility.SHARED:
        return [kept_in]
    return [kept_in, *(scope for scope in said_in if scope != kept_in)]


def context_of(where: Scope, kept_in: Scope) -> Scope | None:
    """The group a memory kept elsewhere gains as a context when said in ``where``."""
    return where if where.kind == ScopeKind.GROUP and where != kept_in else None


def stricter(visibility: str, other: str) -> str:
    """The narrower of two visibilities (a secret stays a secret)."""
    order = (Visibility.SHARED, Visibility.PRIVATE, Visibility.SECRET)
    return order[max(order.index(Visibility(visibility)), order.index(Visibility(other)))]
