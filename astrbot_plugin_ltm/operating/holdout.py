"""The holdout replay set: a stored sample of recorded sessions that policy
replays default to, so that a candidate is judged on sessions it was not
tuned on (operating/tuning.py fits on the others).

Frozen when first drawn: new sessions never join it by themselves (docs/decisions.md#d54).
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, delete, text

from ..clock import Clock, as_utc, parse_stored_time
from ..errors import AdminError
from ..i18n import msg
from ..scope import Scope
from ..storing.database import Database
from ..storing.tables import HoldoutSession
from ..validators import scope_entry

DEFAULT_SHARE = 0.2
RECENT_DAYS = 90
MAX_SCOPES = 100


@dataclass(frozen=True)
class Rule:
    share: float = DEFAULT_SHARE
    scopes: tuple[Scope, ...] = ()  # named scopes: all their recent sessions, share ignored
    seed: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"share": self.share, "scopes": [str(s) for s in self.scopes], "seed": self.seed,
                "recent_days": RECENT_DAYS}


@dataclass
class HoldoutSet:
    sessions: list[str] = field(default_factory=list)
    drawn_at: datetime | None = None
    rule: dict[str, Any] = field(default_factory=dict)
    recorded_sessions: int = 0  # recent sessions recorded when it was read

    def as_dict(self, shown: int = 50) -> dict[str, Any]:
        return {"drawn": self.drawn_at is not None,
                "drawn_at": self.drawn_at.isoformat() if self.drawn_at else None,
                "rule": self.rule, "size": len(self.sessions), "sessions": self.sessions[:shown],
                "recorded_sessions": self.recorded_sessions}


def parse_rule(body: Any) -> Rule:
    """``{"share": 0.2}`` or ``{"scopes": ["user:qq:1", …]}`` (optional ``seed``);
    an empty body is the default rule."""
    if body is None:
        return Rule()
    if not isinstance(body, dict):
        raise AdminError(msg("api.send_share"))
    unknown = set(body) - {"share", "scopes", "seed"}
    if unknown:
        raise AdminError(msg("api.unknown_fields_known", fields=", ".join(sorted(unknown))[:200],
                             known="share, scopes, seed"))
    share = body.get("share", DEFAULT_SHARE)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        raise AdminError(msg("api.share"))
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise AdminError(msg("api.whole_number", name="seed"))
    return Rule(float(share), parse_scopes(body.get("scopes")), seed)


def parse_scopes(raw: Any) -> tuple[Scope, ...]:
    """``["user:<id>", "group:<id>"]`` → scopes; None → none."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(s, str) for s in raw):
        raise AdminError(msg("api.scopes_list"))
    if len(raw) > MAX_SCOPES:
        raise AdminError(msg("api.scopes_max", max=MAX_SCOPES))
    out = []
    for s in raw:
        scope_entry(s, "api.not_scope")  # as write_policy.disabled_scopes: one reading of a scope
        kind, _, scope_id = s.partition(":")
        out.append(Scope(kind, scope_id))
    return tuple(dict.fromkeys(out))


class Holdout:
    def __init__(self, db: Database, clock: Clock) -> None:
        self.db = db
        self._clock = clock

    async def current(self) -> HoldoutSet:
        since = self._clock() - timedelta(days=RECENT_DAYS)
        return await self.db.run(lambda conn: _read(conn, since))

    async def draw(self, rule: Rule) -> HoldoutSet:
        """Draw (or redraw) the set: replaces the stored one."""
        now = self._clock()
        recent = await self.db.run(lambda conn: _recent_sessions(conn, now - timedelta(days=RECENT_DAYS)))
        if rule.scopes:
            wanted = {(s.kind, s.id) for s in rule.scopes}
            chosen = [s for s in recent if (s[1], s[2]) in wanted]
        else:
            k = math.ceil(rule.share * len(recent)) if recent else 0
            chosen = random.Random(rule.seed).sample(recent, k)  # noqa: S311 - a sample, not a secret
        async with self.db.write() as session:
            await session.execute(delete(HoldoutSession))
            for session_id, kind, scope_id in chosen:
                session.add(HoldoutSession(session_id=session_id, scope=kind, scope_id=scope_id, drawn_at=now,
                                           rule=rule.as_dict()))
        return HoldoutSet(sorted(s[0] for s in chosen), now, rule.as_dict(), len(recent))

    async def ensure(self) -> HoldoutSet:
        """The stored set; drawn with the default rule the first time."""
        found = await self.current()
        return found if found.drawn_at is not None else await self.draw(Rule())


def _recent_sessions(conn: Connection, since: datetime) -> list[tuple[str, str, str]]:
    """(session_id, scope kind, scope id) of every session with an event
    since ``since``, in a stable order (the seed then names one draw)."""
    rows = conn.execute(text(
        "SELECT session_id, MIN(scope), MIN(scope_id) FROM ltm_events WHERE session_id IS NOT NULL "
        "AND created_at >= :since GROUP BY session_id ORDER BY session_id"), {"since": stored_time(since)})
    return [(r[0], r[1], r[2]) for r in rows]


def _read(conn: Connection, since: datetime) -> HoldoutSet:
    rows = conn.execute(text("SELECT session_id, drawn_at, rule FROM ltm_holdout ORDER BY session_id")).all()
    recorded = conn.execute(text(
        "SELECT COUNT(DISTINCT session_id) FROM ltm_events WHERE session_id IS NOT NULL AND created_at >= :since"),
        {"since": stored_time(since)}).scalar_one()
    if not rows:
        return HoldoutSet(recorded_sessions=recorded)
    rule = rows[0][2]
    return HoldoutSet([r[0] for r in rows], parse_stored_time(rows[0][1]),
                      json.loads(rule) if isinstance(rule, str) else rule, recorded)


def stored_time(at: datetime) -> str:
    """``at`` as SQLite holds the tables' times (naive UTC text), for raw SQL."""
    return as_utc(at).astimezone(UTC).replace(tzinfo=None).isoformat(" ")
