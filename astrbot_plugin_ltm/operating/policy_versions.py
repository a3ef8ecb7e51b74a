"""Policy versions: every effective change of the policy becomes a numbered
version in ``ltm_policy_versions``, with an audit row; every change goes
through :meth:`PolicyVersions.change`.

While ``emergency_read_only`` is on the store takes no write, a version
included, so a change that keeps it on is refused; one that turns it off is
applied first and then recorded, one that turns it on is recorded first
(docs/decisions.md#d51).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import func, select

from ..clock import Clock
from ..config import POLICY_KEYS, LTMConfig, parse_config, policy_of
from ..enums import AuditAction, PolicySource
from ..errors import AdminError
from ..extension_points import PolicyListener
from ..i18n import msg
from ..logs import log
from ..storing.audit import audit
from ..storing.database import Database, ReadOnlyError
from ..storing.tables import PolicyVersion
from ..validators import scope_entry
from .policy_change import STORED, Refusals, policy_change

MAX_REASON_CHARS = 500
MAX_HISTORY_PAGE = 200

RawConfig = Callable[[], dict[str, Any]]
SaveConfig = Callable[[dict[str, Any]], Awaitable[None]]


def normalised(policy: dict[str, Any]) -> dict[str, Any]:
    """A stored policy read with today's settings: one stored before a
    setting existed gets its default, so a new setting is no difference."""
    cfg, _ = parse_config({k: policy[k] for k in POLICY_KEYS if k in policy})
    return policy_of(cfg)


def diff(before: dict[str, Any] | None, after: dict[str, Any]) -> list[dict[str, Any]]:
    """What changed, one entry per setting: ``{"path", "from", "to"}``
    (``path`` like ``write_policy.mode``); the first version has none."""
    if before is None:
        return []
    out: list[dict[str, Any]] = []
    for key in POLICY_KEYS:
        old, new = before.get(key), after.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            for name in sorted(set(old) | set(new)):
                if old.get(name) != new.get(name):
                    out.append({"path": f"{key}.{name}", "from": old.get(name), "to": new.get(name)})
        elif old != new:
            out.append({"path": key, "from": old, "to": new})
    return out


def reason_text(reason: Any) -> str:
    if reason is None:
        return ""
    if not isinstance(reason, str):
        raise AdminError(msg("api.reason_text"))
    reason = " ".join(reason.split())
    if len(reason) > MAX_REASON_CHARS:
        raise AdminError(msg("api.reason_long", max=MAX_REASON_CHARS))
    return reason


def scope_name(target: Any) -> str:
    """A validated ``user:<id>`` / ``group:<id>`` for the write switch."""
    if not isinstance(target, str):
        raise AdminError(msg("api.scope_text"))
    return scope_entry(target.strip(), "api.scope_bad", shown_as=target)


def _version_dict(row: PolicyVersion, with_policy: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "version": row.id, "created_at": row.created_at.isoformat(), "actor": row.actor, "source": row.source,
        "reason": row.reason, "diff": row.diff, "rollback_of": row.rollback_of,
    }
    if with_policy:
        out["policy"] = normalised(row.policy)
    return out


class PolicyVersions:
    def __init__(self, db: Database, config: Callable[[], LTMConfig],
                 apply: Callable[[dict[str, Any]], Any], clock: Clock,
                 raw_config: dict[str, Any] | None = None) -> None:
        self._db = db
        self._config = config
        self._apply = apply
        self._clock = clock
        self._listeners: list[PolicyListener] = []
        self._lock = asyncio.Lock()
        # Without AstrBot (tests, tools) the config lives here; the adapter
        # binds AstrBot's plugin config (bind) so changes survive a restart.
        self._own_raw = copy.deepcopy(dict(raw_config or {}))
        self._raw: RawConfig = lambda: self._own_raw
        self._save: SaveConfig = self._save_own

    async def _save_own(self, raw: dict[str, Any]) -> None:
        self._own_raw = copy.deepcopy(raw)

    def bind(self, raw_config: RawConfig, save_config: SaveConfig) -> None:
        """Where the plugin's configuration is read and saved."""
        self._raw, self._save = raw_config, save_config

    def add_listener(self, listener: PolicyListener) -> None:
        """``listener("before", current_version)`` is awaited just before a
        change is applied, ``listener("after", new_version)`` right after it
        is recorded; one that raises is logged and ignored."""
        self._listeners.append(listener)

    async def _notify(self, moment: str, version: int | None) -> None:
        for listener in list(self._listeners):
            try:
                await listener(moment, version)
            except Exception:
                log.exception("ltm: a policy listener failed (%s version %s); ignored", moment, version)

    # -- reading -------------------------------------------------------------

    async def current_version(self) -> int | None:
        async with self._db.read() as session:
            return (await session.execute(select(func.max(PolicyVersion.id)))).scalar()

    async def count(self) -> int:
        async with self._db.read() as session:
            return int((await session.execute(select(func.count()).select_from(PolicyVersion))).scalar() or 0)

    async def history(self, offset: int = 0, limit: int = 20) -> list[dict[str, Any]]:
        """Versions newest first, without their whole policy."""
        offset, limit = max(0, offset), max(0, min(limit, MAX_HISTORY_PAGE))
        async with self._db.read() as session:
            rows = (await session.execute(select(PolicyVersion).order_by(PolicyVersion.id.desc())
                                          .offset(offset).limit(limit))).scalars().all()
        return [_version_dict(r) for r in rows]

    async def get(self, version: int) -> dict[str, Any] | None:
        """One version with its whole policy, or None."""
        async with self._db.read() as session:
            row = await session.get(PolicyVersion, version)
        return None if row is None else _version_dict(row, with_policy=True)

    async def _latest(self) -> PolicyVersion | None:
        async with self._db.read() as session:
            return (await session.execute(select(PolicyVersion).order_by(PolicyVersion.id.desc())
                                          .limit(1))).scalars().first()

    # -- changing ------------------------------------------------------------

    async def change(self, changes: dict[str, Any], actor: str, source: PolicySource, reason: str | None = None,
                     *, replace: bool = False, rollback_of: int | None = None,
                     refusals: Refusals = STORED) -> dict[str, Any]:
        """Apply ``changes`` (a section merged into the current one, or
        replacing it with ``replace``), save, record; nothing when the policy
        would stay the same. Raises AdminError for invalid settings,
        ReadOnlyError while read-only stays on."""
        return await self._change(lambda cfg: changes, actor, source, reason, replace=replace,
                                  rollback_of=rollback_of, refusals=refusals)

    async def _change(self, build: Callable[[LTMConfig], dict[str, Any]], actor: str, source: PolicySource,
                      reason: str | None, *, replace: bool = False,
                      rollback_of: int | None = None, refusals: Refusals = STORED) -> dict[str, Any]:
        reason = reason_text(reason)
        async with self._lock:  # one change at a time: each diff is against the one before
            changes = build(self._config())
            raw, new = policy_change(self._raw(), changes, refusals, replace=replace)
            current = self._config()
            before, after = policy_of(current), policy_of(new)
            if before == after:
                return {"changed": False, "version": await self.current_version(), "policy": before}
            if current.emergency_read_only and new.emergency_read_only:
                raise ReadOnlyError(str(msg("api.read_only_change")))
            for key, value in changes.items():  # saved as parsed: "yes" is stored as true
                if isinstance(value, dict) and not replace:
                    raw[key].update({name: getattr(getattr(new, key), name) for name in value})
                else:
                    raw[key] = after[key]
            await self._notify("before", await self.current_version())
            if current.emergency_read_only:  # the store opens with this change: apply, then record
                await self._save(raw)
                self._apply(raw)
                await self._catch_up(before)
                version = await self._record(after, actor, source, reason, rollback_of)
            else:  # recorded while the store still takes writes (also when this closes it)
                version = await self._record(after, actor, source, reason, rollback_of)
                await self._save(raw)
                self._apply(raw)
            await self._notify("after", version)
            return {"changed": True, "version": version, "policy": after}

    async def _catch_up(self, policy: dict[str, Any]) -> None:
        """Record ``policy`` if not the latest version: a change made in AstrBot's
        config while read-only could not be recorded, so turning read-only off
        would otherwise show no change."""
        latest = await self._latest()
        if latest is not None and normalised(latest.policy) != policy:
            await self._record(policy, "operator:webui", PolicySource.WEBUI_CONFIG, str(msg("policy.caught_up")),
                               None)

    async def _record(self, policy: dict[str, Any], actor: str, source: PolicySource, reason: str,
                      rollback_of: int | None) -> int:
        """A new version of ``policy``; none (the latest's number) when it changes nothing."""
        latest = await self._latest()
        previous = normalised(latest.policy) if latest is not None else None
        changes = diff(previous, policy)
        if latest is not None and not changes:
            assert latest.id is not None
            return latest.id
        async with self._db.write() as session:
            row = PolicyVersion(created_at=self._clock(), actor=actor, source=source, reason=reason,
                                policy=policy, diff=changes, rollback_of=rollback_of)
            session.add(row)
            await session.flush()
            assert row.id is not None
            audit(session, AuditAction.CONFIG, actor,
                  reason or str(msg("policy.version", version=row.id, source=msg(f"policy.source.{source}"))),
                  now=self._clock(), version=row.id, source=str(source), rollback_of=rollback_of, diff=changes,
                  # each changed part whole, before and after (as the audit has always shown it)
                  changes={k: [previous[k], policy[k]] for k in POLICY_KEYS
                           if previous is not None and previous[k] != policy[k]})
        log.info("ltm: policy version %d by %s (%s)%s: %s", row.id, actor, source,
                 f" rollback to {rollback_of}" if rollback_of else "",
                 "; ".join(f"{c['path']} {c['from']!r} → {c['to']!r}" for c in changes) or "first version")
        return row.id

    async def rollback(self, version: int, actor: str, reason: str | None) -> dict[str, Any]:
        """Make version ``version``'s policy current, as a new version that
        says it is a rollback. Returns as :meth:`change` does."""
        target = await self.get(version)
        if target is None:
            raise AdminError(msg("api.no_version", version=version), 404)
        reason = reason_text(reason)
        why = str(msg("policy.rollback_why", version=version, reason=reason) if reason
                  else msg("policy.rollback", version=version))
        try:
            result = await self.change(target["policy"], actor, PolicySource.ROLLBACK, why, replace=True,
                                       rollback_of=version)
        except ReadOnlyError:
            raise ReadOnlyError(str(msg("api.read_only_rollback", version=version))) from None
        return {**result, "rollback_of": version}

    async def set_writes(self, scope: object, on: bool, actor: str, source: PolicySource,
                         reason: str | None = None) -> dict[str, Any]:
        """Switch one scope's writes off (``write_policy.disabled_scopes``) or on."""
        name = scope_name(scope)

        def build(cfg: LTMConfig) -> dict[str, Any]:
            disabled = list(cfg.write_policy.disabled_scopes)
            if on:
                disabled = [s for s in disabled if s != name]
            elif name not in disabled:  # already off: the same list, so no version
                disabled.append(name)
            return {"write_policy": {"disabled_scopes": disabled}}

        why = reason or str(msg("policy.writes_on" if on else "policy.writes_off", scope=name))
        return await self._change(build, actor, source, why)

    # -- at start ---------------------------------------------------------------

    async def record_start(self) -> int | None:
        """At start: version 1 if there is none, or a ``webui-config`` version
        if the loaded policy differs (AstrBot's config page reloads the plugin)."""
        cfg = self._config()
        latest = await self._latest()
        policy = policy_of(cfg)
        if latest is not None and normalised(latest.policy) == policy:
            return latest.id
        if cfg.emergency_read_only:
            log.info("ltm: the policy differs from the last recorded version, but emergency_read_only is on: "
                     "the version is recorded with the next change once it is off")
            return latest.id if latest is not None else None
        await self._notify("before", latest.id if latest is not None else None)
        async with self._lock:
            if latest is None:
                version = await self._record(policy, "system:startup", PolicySource.STARTUP,
                                             str(msg("policy.first_start")), None)
            else:
                version = await self._record(policy, "operator:webui", PolicySource.WEBUI_CONFIG,
                                             str(msg("policy.webui")), None)
        await self._notify("after", version)
        return version
