"""The drift monitor: snapshots of each scope kind's memory distribution,
daily and around every policy version, compared with the kind's previous
one (:mod:`.drift`); below ``drift.threshold`` is an alarm.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import Connection, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from ..background import BackgroundTask
from ..clock import Clock, as_utc, utcnow
from ..config import LTMConfig
from ..enums import SCOPE_KINDS, WRITE_ACTIONS, AuditAction, DriftTrigger, Status
from ..extension_points import PolicyVersionSource
from ..i18n import msg
from ..logs import log
from ..storing.audit import audit
from ..storing.database import Database, ReadOnlyError
from ..storing.tables import DriftSnapshot, MemoryAudit, MemoryItem, MemoryVector
from ..storing.vector_rows import memory_vector, whole_memory_vector
from .drift import Features, centroid_bytes, centroid_of, similarity

DAY = timedelta(days=1)
POLL_SECONDS = 600.0  # how often the loop asks whether the daily snapshot is due
# Below this many memories on either side a low similarity is noise (the
# first memories of a new bot), not an alarm (docs/decisions.md#d55).
MIN_ITEMS_FOR_ALARM = 20
CENTROID_BATCH = 2048  # vectors read and summed at a time
HISTORY_PAGE = 50
ALARM_DAYS = 7  # an alarm is shown (stats, the page's banner) this long
ACTOR = "system:drift"


@dataclass(frozen=True)
class Measured:
    features: Features
    centroid: np.ndarray | None


# -- measuring (on a load thread) -------------------------------------------


def _centroid(conn: Connection, kind: str) -> tuple[np.ndarray | None, int, str | None]:
    """The unit mean of the kind's current memories' unit embeddings, of the
    model most of them have; (None, 0, None) without vectors."""
    model, vector, dim = MemoryVector.model, MemoryVector.vector, MemoryVector.dim
    current = (MemoryItem.id == MemoryVector.item_id, MemoryItem.status != Status.SUPERSEDED,
               MemoryVector.scope == kind, whole_memory_vector())
    best = conn.execute(select(model, func.count()).join(MemoryItem, current[0]).where(*current[1:])
                        .group_by(model).order_by(func.count().desc(), model).limit(1)).first()
    if best is None:
        return None, 0, None
    total: np.ndarray | None = None
    count = 0
    result = conn.execute(select(vector, dim).join(MemoryItem, current[0]).where(*current[1:], model == best[0]))
    while batch := result.fetchmany(CENTROID_BATCH):
        size = batch[0][1]
        same = [bytes(v) for v, d in batch if d == size]  # one vector per memory
        if total is not None and size != total.shape[0]:
            continue  # a foreign dimension under the same model name: left out
        if not same:
            continue
        vectors = np.stack([memory_vector(v, size) for v in same])
        part = vectors.astype(np.float64).sum(axis=0)
        total = part if total is None else total + part
        count += len(same)
    if total is None or not np.any(total):
        return None, 0, None
    return total / np.linalg.norm(total), count, str(best[0])


def measure(conn: Connection, now: datetime) -> dict[str, Measured]:
    """Every scope kind's features and centroid at ``now``."""
    current = MemoryItem.status != Status.SUPERSEDED
    by: dict[str, dict[str, dict[str, int]]] = {k: {"type": {}, "status": {}} for k in SCOPE_KINDS}
    for kind, type_, status, n in conn.execute(
            select(MemoryItem.scope, MemoryItem.type, MemoryItem.status, func.count())
            .where(current).group_by(MemoryItem.scope, MemoryItem.type, MemoryItem.status)):
        if kind in by:
            by[kind]["type"][type_] = by[kind]["type"].get(type_, 0) + n
            by[kind]["status"][status] = by[kind]["status"].get(status, 0) + n
    confidence = {kind: (n, float(mean or 0.0)) for kind, n, mean in conn.execute(
        select(MemoryItem.scope, func.count(), func.avg(MemoryItem.confidence)).where(current)
        .group_by(MemoryItem.scope))}
    writes = dict(conn.execute(
        select(MemoryAudit.scope, func.count())
        .where(MemoryAudit.action.in_(WRITE_ACTIONS), MemoryAudit.created_at >= now - DAY,
               MemoryAudit.created_at <= now)
        .group_by(MemoryAudit.scope)).all())
    out: dict[str, Measured] = {}
    for kind in SCOPE_KINDS:
        centroid, vectors, model = _centroid(conn, kind)
        items, mean = confidence.get(kind, (0, 0.0))
        out[kind] = Measured(Features(
            items=items, by_type=by[kind]["type"], by_status=by[kind]["status"],
            writes_per_hour=round(writes.get(kind, 0) / 24, 6), mean_confidence=round(mean, 6),
            vectors=vectors, model=model), centroid)
    return out


# -- the monitor ----------------------------------------------------------------


def snapshot_dict(row: DriftSnapshot) -> dict[str, Any]:
    return {
        "id": row.id, "created_at": as_utc(row.created_at).isoformat(), "scope_kind": row.scope_kind,
        "trigger": row.trigger, "policy_version": row.policy_version, "similarity": row.similarity,
        "previous_id": row.previous_id, "threshold": row.threshold, "alarm": row.alarm,
        "features": row.features,
    }


def daily_due(last_daily: datetime | None, now: datetime) -> bool:
    """A daily snapshot is due when none was taken in the last 24 hours."""
    return last_daily is None or now - as_utc(last_daily) >= DAY


class DriftMonitor:
    def __init__(self, db: Database, config: Callable[[], LTMConfig], clock: Clock = utcnow) -> None:
        self._db = db
        self._config = config
        self._clock = clock
        self.versions: PolicyVersionSource | None = None
        self._rolling_back = False
        # Asks every POLL_SECONDS whether the daily snapshot is due.
        self.task = BackgroundTask("drift", self.tick, every=POLL_SECONDS, run_at_start=True)

    def attach(self, versions: PolicyVersionSource) -> None:
        """Tie snapshots to policy versions: one right before and one right
        after each, and auto rollback through them."""
        self.versions = versions
        versions.add_listener(self.on_policy_change)

    # -- triggers ----------------------------------------------------------------

    async def on_policy_change(self, phase: str, version: int | None) -> None:
        """The policy-version listener. Never raises: a change must not fail
        because its snapshot did."""
        trigger = DriftTrigger.BEFORE if phase == "before" else DriftTrigger.AFTER
        try:
            await self.snapshot(trigger, version, known_version=True)
        except Exception:
            log.exception("ltm: drift snapshot %s the policy change failed", trigger)

    async def tick(self) -> bool:
        """Take the daily snapshot if it is due; True if taken."""
        async with self._db.read() as session:
            last = (await session.execute(select(func.max(DriftSnapshot.created_at))
                                          .where(DriftSnapshot.trigger == DriftTrigger.DAILY))).scalar()
        if not daily_due(last, self._clock()):
            return False
        return bool(await self.snapshot(DriftTrigger.DAILY))

    # -- snapshots ----------------------------------------------------------------

    async def snapshot(self, trigger: DriftTrigger, version: int | None = None,
                       known_version: bool = False) -> list[DriftSnapshot]:
        """One snapshot per scope kind now, each compared with its kind's
        previous one. [] while emergency_read_only is on."""
        if self._db.is_read_only():
            log.info("ltm: no drift snapshot (%s) while emergency_read_only is on", trigger)
            return []
        if not known_version and self.versions is not None:
            version = await self.versions.current_version()
        now = self._clock()
        measured = await self._db.load(lambda conn: measure(conn, now))
        threshold = self._config().drift.threshold
        try:
            async with self._db.write() as session:
                rows = [await self._add(session, kind, m, trigger, version, threshold, now)
                        for kind, m in measured.items()]
        except ReadOnlyError:
            log.info("ltm: no drift snapshot (%s): emergency_read_only switched on", trigger)
            return []
        for row in rows:
            if row.alarm:
                await self._alarm(row)
        return rows

    @staticmethod
    async def _add(session: AsyncSession, kind: str, m: Measured, trigger: DriftTrigger, version: int | None,
                   threshold: float, now: datetime) -> DriftSnapshot:
        previous = (await session.execute(select(DriftSnapshot).where(DriftSnapshot.scope_kind == kind)
                                          .order_by(DriftSnapshot.id.desc()).limit(1))).scalar()
        sim: float | None = None
        alarm = False
        if previous is not None:
            before = Features.from_dict(previous.features)
            sim = round(similarity(before, centroid_of(previous.centroid), m.features, m.centroid), 6)
            alarm = sim < threshold and min(before.items, m.features.items) >= MIN_ITEMS_FOR_ALARM
        row = DriftSnapshot(created_at=now, scope_kind=kind, trigger=trigger, policy_version=version,
                            features=m.features.as_dict(), centroid=centroid_bytes(m.centroid), similarity=sim,
                            previous_id=previous.id if previous else None, threshold=threshold, alarm=alarm)
        session.add(row)
        await session.flush()
        return row

    # -- alarms ---------------------------------------------------------------------

    async def _alarm(self, row: DriftSnapshot) -> None:
        log.warning("ltm: drift alarm: %s memories moved (similarity %.3f < %.3f) since the previous snapshot; "
                    "policy version in force: %s", row.scope_kind, row.similarity or 0.0, row.threshold,
                    row.policy_version if row.policy_version is not None else "unknown")
        if self._config().drift.auto_rollback and self.versions is not None and not self._rolling_back:
            self._rolling_back = True  # the rollback's own snapshots must not roll back again
            try:
                await self._auto_rollback(row)
            except Exception:
                log.exception("ltm: drift auto rollback failed; the policy is unchanged")
            finally:
                self._rolling_back = False

    async def rollback_target(self, alarmed_version: int | None) -> int | None:
        """The newest version older than the alarmed one that no alarm names."""
        assert self.versions is not None
        async with self._db.read() as session:
            alarmed = {v for v in (await session.execute(
                select(DriftSnapshot.policy_version).where(DriftSnapshot.alarm).distinct())).scalars()}
        offset = 0
        while True:
            page = await self.versions.history(offset=offset, limit=HISTORY_PAGE)
            for entry in page:
                version = int(entry["version"])
                if alarmed_version is not None and version >= alarmed_version:
                    continue
                if version not in alarmed:
                    return version
            if len(page) < HISTORY_PAGE:
                return None
            offset += HISTORY_PAGE

    async def _auto_rollback(self, row: DriftSnapshot) -> None:
        assert self.versions is not None
        if row.policy_version is None:
            log.warning("ltm: drift auto rollback skipped: no policy version in force is known")
            return
        target = await self.rollback_target(row.policy_version)
        if target is None:
            log.warning("ltm: drift auto rollback skipped: no earlier policy version without an alarm")
            return
        reason = str(msg("audit.drift_rollback", kind=row.scope_kind, similarity=f"{row.similarity:.3f}",
                         threshold=f"{row.threshold:.3f}", version=row.policy_version))
        result = await self.versions.rollback(target, ACTOR, reason)
        async with self._db.write() as session:
            audit(session, AuditAction.DRIFT_ROLLBACK, ACTOR, reason, now=self._clock(), snapshot_id=row.id,
                  from_version=row.policy_version, to_version=target, result=result)
        log.warning("ltm: drift auto rollback: policy version %s restored (%s)", target, reason)

    # -- reading ---------------------------------------------------------------------

    async def listing(self, kind: str | None, offset: int, limit: int) -> tuple[list[dict[str, Any]], int]:
        """Snapshots newest first, and how many there are."""
        where = [DriftSnapshot.scope_kind == kind] if kind else []
        async with self._db.read() as session:
            total = (await session.execute(select(func.count()).select_from(DriftSnapshot).where(*where))).scalar()
            rows = (await session.execute(select(DriftSnapshot).where(*where).order_by(DriftSnapshot.id.desc())
                                          .offset(offset).limit(limit))).scalars().all()
        return [snapshot_dict(r) for r in rows], int(total or 0)

    async def alarms(self, limit: int = 20, since: datetime | None = None) -> list[dict[str, Any]]:
        """The newest alarms first."""
        where = [DriftSnapshot.created_at >= since] if since is not None else []
        async with self._db.read() as session:
            rows = (await session.execute(select(DriftSnapshot).where(DriftSnapshot.alarm, *where)
                                          .order_by(DriftSnapshot.id.desc()).limit(limit))).scalars().all()
        return [snapshot_dict(r) for r in rows]

    async def status(self) -> dict[str, Any]:
        """For the stats route: the settings and the latest alarm of the last ALARM_DAYS, if any."""
        latest = await self.alarms(1, since=self._clock() - timedelta(days=ALARM_DAYS))
        cfg = self._config().drift
        return {"threshold": cfg.threshold, "auto_rollback": cfg.auto_rollback,
                "versions": self.versions is not None, "latest_alarm": latest[0] if latest else None}
