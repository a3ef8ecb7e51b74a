"""A person or group as someone names them: an operator's ``/ltm`` target,
the review page's user and preview boxes, the API's ``scope`` fields.

People are shown in several forms (``用户 · webchat:xiaoming``,
``user:webchat:xiaoming``, ``xiaoming``), each naming the same scope:
:func:`resolve` accepts every form.
"""

from __future__ import annotations

import difflib
import re

from sqlalchemy import select, union

from .. import validators
from ..config import PERSONA_MARK
from ..enums import SCOPE_KINDS, ScopeKind
from ..errors import AdminError
from ..i18n import Message, msg
from ..scope import Scope
from ..storing.database import Database
from ..storing.tables import MemoryEvent, MemoryItem

# The words a kind is shown with (the memory list, the statistics, the
# commands' replies), in both languages.
KIND_WORDS = {
    "user": ScopeKind.USER, "users": ScopeKind.USER, "用户": ScopeKind.USER,
    "group": ScopeKind.GROUP, "groups": ScopeKind.GROUP, "群": ScopeKind.GROUP, "群聊": ScopeKind.GROUP,
    "群组": ScopeKind.GROUP,
}
# "用户 · webchat:xiaoming", "User · qq:1": a scope as the page labels it.
_SHOWN = re.compile(r"^(?P<kind>\S+)\s*[·•]\s*(?P<id>.+)$")
SHOWN_MATCHES = 5  # scopes an ambiguous or unknown name lists
SIMILAR_CUTOFF = 0.75  # difflib ratio of a suggestion for an unknown name


def parse(text: str) -> tuple[str | None, str]:
    """(the kind named, or None; the id). Scope ids hold colons themselves
    (``qq:12345``): only a kind word before the first colon or a "·" is a kind."""
    text = " ".join(str(text).split())
    shown = _SHOWN.match(text)
    if shown and shown.group("kind").lower() in KIND_WORDS:
        return KIND_WORDS[shown.group("kind").lower()], shown.group("id").strip()
    head, colon, rest = text.partition(":")
    if colon and head.strip() in KIND_WORDS:  # as typed: "Group:qq:1" is a user id
        return KIND_WORDS[head.strip()], rest.strip()
    return None, text


def _base(scope_id: str) -> str:
    """A persona's part of a scope (persona.py) belongs to its scope."""
    return scope_id.partition(PERSONA_MARK)[0]


async def known_scopes(db: Database, kinds: tuple[str, ...] = SCOPE_KINDS) -> list[Scope]:
    """Every scope with a memory or a recorded turn, of ``kinds``."""
    query = union(
        select(MemoryItem.scope, MemoryItem.scope_id).where(MemoryItem.scope.in_(kinds)),
        select(MemoryEvent.scope, MemoryEvent.scope_id).where(MemoryEvent.scope.in_(kinds)),
    )
    async with db.read() as session:
        rows = (await session.execute(query)).all()
    return sorted(Scope(kind, scope_id) for kind, scope_id in rows)


async def is_known(db: Database, scope: Scope) -> bool:
    """Whether the store holds a memory or a turn of ``scope`` (by the scope indexes)."""
    async with db.read() as session:
        for table in (MemoryItem, MemoryEvent):
            found = (await session.execute(select(table.id).where(
                table.scope == scope.kind, table.scope_id == scope.id).limit(1))).first()
            if found is not None:
                return True
    return False


def _listed(scopes: list[Scope]) -> str:
    shown = ", ".join(str(s) for s in scopes[:SHOWN_MATCHES])
    return shown + (" …" if len(scopes) > SHOWN_MATCHES else "")


async def resolve(db: Database, text: object, kinds: tuple[str, ...] = SCOPE_KINDS,
                  what: str = "the target's id") -> Scope:
    """The scope ``text`` names: as known, else the one known scope whose id
    ends in the id typed, else as typed. AdminError: no id, or several fit."""
    if not isinstance(text, str):
        raise AdminError(msg("api.scope_text"))
    kind, typed = parse(text)
    if not typed:
        raise AdminError(msg("cmd.no_scope_id", target=msg("cmd.target_syntax")))
    scope_id = validators.scope_id(typed, what)
    wanted = (kind,) if kind else kinds
    known = await known_scopes(db, wanted)
    exact = [s for s in known if s.id == scope_id]
    if len(exact) == 1:
        return exact[0]
    if len(exact) > 1:  # user:x and group:x both known, no kind named
        raise AdminError(msg("target.ambiguous", target=text.strip(), matches=_listed(exact)))
    ending = ":" + scope_id
    fits = sorted({Scope(s.kind, _base(s.id)) for s in known
                   if _base(s.id) == scope_id or _base(s.id).endswith(ending)})
    if len(fits) == 1:
        return fits[0]
    if len(fits) > 1:
        raise AdminError(msg("target.ambiguous", target=text.strip(), matches=_listed(fits)))
    return Scope(kind or (ScopeKind.USER if ScopeKind.USER in wanted else wanted[0]), scope_id)


async def similar(db: Database, scope: Scope) -> list[Scope]:
    """Known scopes whose id reads like ``scope``'s (a typo, another
    platform), nearest first; for an answer that found nothing."""
    known = [s for s in await known_scopes(db) if s != scope]
    by_id: dict[str, list[Scope]] = {}
    for s in known:
        for key in {s.id, s.id.rpartition(":")[2]}:
            by_id.setdefault(key, []).append(s)
    wanted = {scope.id, scope.id.rpartition(":")[2]}
    found: list[Scope] = []
    for key in wanted:
        for close in difflib.get_close_matches(key, list(by_id), n=SHOWN_MATCHES, cutoff=SIMILAR_CUTOFF):
            found.extend(s for s in by_id[close] if s not in found)
    return found[:SHOWN_MATCHES]


def suggestion(scopes: list[Scope]) -> Message:
    """"Did you mean …?", naming ``scopes``."""
    return msg("target.suggest", matches=_listed(scopes))
