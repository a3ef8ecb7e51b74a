"""A user's own pause (``/ltm pause``): their state, not the operator's policy.

A pause means forgotten: what a paused person says is not recorded at all.
Read-only does not refuse it: it is the person's choice about their data,
not a memory write. The recorder checks a pause on AstrBot's hot path, so
the paused scopes are kept in memory, changed here after each commit.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.dialects.sqlite import insert

from ..clock import Clock
from ..config import PERSONA_MARK, LTMConfig
from ..enums import AuditAction, PolicySource, ScopeKind
from ..i18n import say
from ..logs import log
from ..scope import Scope
from ..storing.audit import audit
from ..storing.database import Database
from ..storing.driver_rows import touched
from ..storing.tables import PolicyVersion, UserPause
from .policy_versions import PolicyVersions

OLD_PAUSE_REASON = "/ltm pause by the user"  # what PolicyVersions.set_writes stored for a /ltm pause


@dataclass(frozen=True)
class Pause:
    scope: str  # "user:<id>"
    since: datetime
    by: str
    reason: str

    @property
    def since_text(self) -> str:
        """When, as a chat reply says it."""
        return self.since.strftime("%Y-%m-%d %H:%M UTC")

    def as_dict(self) -> dict[str, Any]:
        return {"scope": self.scope, "since": self.since.isoformat(), "by": self.by, "reason": self.reason}


def _person(scope: object) -> str:
    """``kind:id`` without a persona part: a person's pause covers their personas' scopes."""
    return str(scope).partition(PERSONA_MARK)[0]


class Pauses:
    def __init__(self, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock
        self._paused: dict[str, Pause] = {}
        self._lock = asyncio.Lock()  # a pause and a resume of one user land in order

    # -- the hot path: no I/O ------------------------------------------------

    def covers(self, scope: object) -> bool:
        """Whether ``scope`` (a user's, or one of their personas') is paused."""
        return bool(self._paused) and _person(scope) in self._paused

    def get(self, scope: object) -> Pause | None:
        return self._paused.get(_person(scope))

    def listing(self) -> list[Pause]:
        """Every pause, newest first."""
        return sorted(self._paused.values(), key=lambda p: (p.since, p.scope), reverse=True)

    # -- loading and changing ---------------------------------------------------

    async def load(self) -> None:
        async with self._db.read() as session:
            rows = (await session.execute(select(UserPause))).scalars().all()
        self._paused = {f"{r.scope}:{r.scope_id}": Pause(f"{r.scope}:{r.scope_id}", r.since, r.actor, r.reason)
                        for r in rows}

    async def pause(self, scope: Scope, actor: str, reason: str) -> Pause | None:
        """Pause learning about ``scope``; None when it was already paused."""
        async with self._lock:
            if str(scope) in self._paused:
                return None
            now = self._clock()
            async with self._db.write(persons_choice=True) as session:
                # Another process may have paused it since we loaded: the row stays, ours is not added.
                added = await session.execute(insert(UserPause).values(
                    scope=scope.kind, scope_id=scope.id, since=now, actor=actor, reason=reason,
                ).on_conflict_do_nothing())
                if touched(added):
                    audit(session, AuditAction.PAUSE, actor, reason, scope=scope, now=now)
            pause = Pause(str(scope), now, actor, reason)
            if touched(added):
                self._paused[str(scope)] = pause
                return pause
            await self.load()
            return None

    async def resume(self, scope: Scope, actor: str, reason: str, *, lifted: bool = False) -> bool:
        """End ``scope``'s pause: the user resumes, or an operator lifts it
        (``lifted``, audited as such). Returns whether there was one."""
        async with self._lock:
            now = self._clock()
            async with self._db.write(persons_choice=True) as session:
                gone = await session.execute(delete(UserPause).where(UserPause.scope == scope.kind,
                                                                     UserPause.scope_id == scope.id))
                if touched(gone):
                    audit(session, AuditAction.LIFT if lifted else AuditAction.RESUME, actor, reason, scope=scope,
                          now=now)
            self._paused.pop(str(scope), None)
            return bool(touched(gone))

    # -- pauses made before they had their own state -------------------------------

    async def adopt_policy_pauses(self, versions: PolicyVersions, config: LTMConfig) -> list[str]:
        """Move the scopes users paused through the policy (``disabled_scopes``,
        before this table) into pause rows, in one policy version; the
        operator's own entries stay. Returns the scopes moved."""
        disabled = list(config.write_policy.disabled_scopes)
        if not disabled or config.emergency_read_only:
            return []
        added_by: dict[str, PolicyVersion] = {}  # scope → the newest version that added it
        async with self._db.read() as session:
            rows = (await session.execute(select(PolicyVersion).order_by(PolicyVersion.id.desc()))).scalars()
            for row in rows:
                for change in row.diff or []:
                    if change.get("path") != "write_policy.disabled_scopes":
                        continue
                    before, after = change.get("from") or [], change.get("to") or []
                    for scope in disabled:
                        if scope not in added_by and scope in after and scope not in before:
                            added_by[scope] = row
                if len(added_by) == len(disabled):
                    break
        moved = [scope for scope, row in added_by.items()
                 if row.source == PolicySource.COMMAND and row.actor.startswith("user:")
                 and row.reason == OLD_PAUSE_REASON and scope.startswith(f"{ScopeKind.USER}:")]
        if not moved:
            return []
        async with self._lock, self._db.write() as session:
            for name in moved:
                row = added_by[name]
                kind, _, scope_id = name.partition(":")
                reason = say("pause.reason.moved", "en", version=row.id)
                added = await session.execute(insert(UserPause).values(
                    scope=kind, scope_id=scope_id, since=row.created_at, actor=row.actor, reason=reason,
                ).on_conflict_do_nothing())
                if touched(added):
                    audit(session, AuditAction.PAUSE, row.actor, reason, scope=Scope(kind, scope_id),
                          now=self._clock(), policy_version=row.id)
        await self.load()
        # The pauses hold on their own now; the policy keeps only the operator's switches.
        await versions.change({"write_policy": {"disabled_scopes": [s for s in disabled if s not in moved]}},
                              "system:startup", PolicySource.PAUSES_MOVED,
                              say("pause.reason.policy_moved", "en", scopes=", ".join(moved)))
        log.info("ltm: %d user pause(s) moved out of write_policy.disabled_scopes into their own state: %s",
                 len(moved), ", ".join(moved))
        return moved
