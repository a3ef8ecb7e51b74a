"""Who a message is from, and which memory scopes it reads and writes.

AstrBot's ``unified_msg_origin`` names a conversation, not a person (web chat
gives every new conversation a new one), so the user scope is keyed by
platform + sender id. Where a thing was said decides who may hear it again
(audience.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .config import PERSONA_MARK, IdentityConfig
from .enums import ScopeKind


def display_name(sender_id: str | None, sender_name: str | None) -> str:
    """The name to call a person by: the platform's nickname, unless it is
    only their login (the web chat gives the login as both id and name);
    "" when there is none."""
    name = (sender_name or "").strip()
    return "" if name == (sender_id or "").strip() else name


@dataclass(frozen=True)
class Origin:
    """The parts of an AstrBot message event the core needs (see adapter.py)."""

    platform_id: str
    unified_msg_origin: str
    sender_id: str
    sender_name: str = ""
    group_id: str | None = None  # None in a private chat
    is_admin: bool = False
    persona: str | None = None  # the AstrBot persona the bot plays here (persona.persona_name); None: none chosen
    # AstrBot's scheduler (a cron job, a background task's result) runs the
    # agent with a made-up event: no person speaks, the sender id is the session's.
    scheduled: bool = False

    @property
    def is_group(self) -> bool:
        return bool(self.group_id)

    @property
    def speaker(self) -> str:
        """A label for the sender: their name, else their id."""
        return self.sender_name or self.sender_id

    @property
    def display_name(self) -> str:
        return display_name(self.sender_id, self.sender_name)


@dataclass(frozen=True, order=True)
class Scope:
    kind: str  # enums.ScopeKind: a person's memory, or a group chat's
    id: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.id}"

    @property
    def namespace(self) -> str:
        return f"ltm_{self.kind}_{self.id}"


def with_persona(scope: Scope, persona: str) -> Scope:
    """A persona's own scope: the person's (or group's) with the persona
    after it (persona.py says what it keeps)."""
    return replace(scope, id=f"{scope.id}{PERSONA_MARK}{persona}")


class ScopeResolver:
    def __init__(self, identity: IdentityConfig) -> None:
        self.identity = identity
        self._aliases = identity.alias_map()

    def user_scope(self, origin: Origin) -> Scope:
        if self.identity.user_scope_strategy == "unified_msg_origin" and not origin.is_group \
                and f"{origin.platform_id}:{origin.sender_id}" not in self._aliases:
            return Scope(ScopeKind.USER, origin.unified_msg_origin)
        return self.person(origin.platform_id, origin.sender_id)

    def person(self, platform_id: str | None, sender_id: str | None) -> Scope:
        """The scope of the person with this account (their aliases joined):
        where what they say of themselves is kept, wherever they said it."""
        account = f"{platform_id or 'unknown'}:{sender_id or ''}"
        return Scope(ScopeKind.USER, self._aliases.get(account, account))

    def accounts(self, person: Scope) -> list[tuple[str, str]]:
        """The (platform id, sender id) accounts a person's scope is keyed by."""
        base = person.id.partition(PERSONA_MARK)[0]
        named = [account for account, alias in self._aliases.items() if alias == base] or [base]
        out = []
        for account in named:
            parts = account.split(":")
            if len(parts) >= 2:
                out.append((parts[0], parts[-1] if len(parts) >= 3 else parts[1]))
        return out

    def group_scope(self, origin: Origin) -> Scope:
        return Scope(ScopeKind.GROUP, f"{origin.platform_id}:{origin.group_id}")

    def _persona(self, origin: Origin) -> str | None:
        return origin.persona if self.identity.persona_scoped else None

    def write_scope(self, origin: Origin) -> Scope:
        """Where a conversation's events and memories go (with
        identity.persona_scoped, the persona's own scope: persona.py)."""
        scope = self.group_scope(origin) if origin.is_group else self.user_scope(origin)
        persona = self._persona(origin)
        return with_persona(scope, persona) if persona else scope

    def read_scopes(self, origin: Origin) -> list[Scope]:
        """Private chat: the user. Group chat: the group only, never a member's
        private scope. A scope's persona part comes before it."""
        persona = self._persona(origin)
        if persona is None:
            return self._read_scopes(origin)
        scopes: list[Scope] = []
        for scope in self._read_scopes(origin):
            scopes += [with_persona(scope, persona), scope]
        return scopes

    def _read_scopes(self, origin: Origin) -> list[Scope]:
        if origin.is_group:
            return [self.group_scope(origin)]
        scopes = [self.user_scope(origin)]
        if self.identity.include_legacy_umo_on_read:
            # Memories written when user scopes were keyed per conversation.
            legacy = Scope(ScopeKind.USER, origin.unified_msg_origin)
            if legacy not in scopes:
                scopes.append(legacy)
        return scopes
