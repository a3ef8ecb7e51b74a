"""The drift detector: the similarity of two snapshots (figures checked by
hand), what a snapshot holds, alarms below the threshold, the daily
schedule on the test clock, the snapshots around a policy change and the
automatic rollback through a fake policy-version source."""

from __future__ import annotations

import logging
import math
from datetime import timedelta
from typing import Any

import numpy as np
import pytest

from astrbot_plugin_ltm.config import DriftConfig
from astrbot_plugin_ltm.enums import AuditAction, DriftTrigger
from astrbot_plugin_ltm.operating.drift import Features, similarity, writes_scale
from astrbot_plugin_ltm.operating.drift_monitor import MIN_ITEMS_FOR_ALARM, daily_due
from astrbot_plugin_ltm.storing.tables import DriftSnapshot, MemoryAudit

R = 1 / math.sqrt(2)


def features(**kw: Any) -> Features:
    base: dict[str, Any] = {"items": 30, "by_type": {"profile": 30}, "by_status": {"active": 30},
                            "writes_per_hour": 0.0, "mean_confidence": 0.8}
    base.update(kw)
    return Features(**base)


# -- the computation, by hand ------------------------------------------------------


def test_identical_snapshots_are_fully_similar():
    assert similarity(features(), None, features(), None) == pytest.approx(1.0)


def test_a_new_type_beside_the_old_turns_the_type_block_by_45_degrees():
    # type block cosine 1/√2, three blocks unchanged: (0.70711 + 3) / 4
    got = similarity(features(), None, features(by_type={"profile": 15, "preference": 15}), None)
    assert got == pytest.approx((R + 3) / 4) and round(got, 4) == 0.9268


def test_confidence_and_write_rate_are_angles_on_a_quarter_circle():
    # confidence 0.5 → 1.0: cos(π/4); writes 0 → 999/h: x 0 → 1, cos(π/2) = 0
    assert writes_scale(999) == pytest.approx(1.0) and writes_scale(9) == pytest.approx(1 / 3)
    got = similarity(features(mean_confidence=0.5), None,
                     features(mean_confidence=1.0, writes_per_hour=999), None)
    assert got == pytest.approx((1 + 1 + R + 0) / 4)


def test_the_centroid_is_a_fifth_block_only_when_both_have_one_of_the_same_model():
    a, b = features(model="m"), features(model="m")
    x, y = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    assert similarity(a, x, b, y) == pytest.approx(4 / 5)  # orthogonal centroids: one of five blocks lost
    assert similarity(a, x, b, x) == pytest.approx(1.0)
    assert similarity(a, x, features(model="other"), y) == pytest.approx(1.0)  # not comparable: left out
    assert similarity(a, x, b, None) == pytest.approx(1.0)


def test_an_empty_store_against_a_full_one_loses_both_distribution_blocks():
    empty = Features()
    full = features(mean_confidence=0.0)
    # vectors: empty = [0…, 0…, (1,0), (1,0)], full = [type, status, (1,0), (1,0)]: 2 / (√2 · 2)
    assert similarity(empty, None, full, None) == pytest.approx(2 / (math.sqrt(2) * 2))
    assert similarity(empty, None, Features(), None) == pytest.approx(1.0)


# -- snapshots ------------------------------------------------------------------------


async def add_items(ltm, kind: str, n: int, *, type_: str = "profile", status: str = "active",
                    confidence: float = 0.8, start: int = 0) -> list[int]:
    ids = []
    for i in range(start, start + n):
        await ltm.execute(
            "INSERT INTO ltm_items (memory_id, scope, scope_id, type, fact, fact_key, confidence, importance, "
            "evidence_count, status, awaiting_approval, created_at, updated_at) VALUES (:mid, :kind, 'qq:1', :t, "
            ":f, :f, :c, 0.5, 1, :s, 0, '2025-03-01 10:00:00', '2025-03-01 10:00:00')",
            {"mid": f"{kind}-{type_}-{i}", "kind": kind, "t": type_, "f": f"{kind} fact {type_} {i}",
             "c": confidence, "s": status})
        ids.append((await ltm.sql("SELECT max(id) FROM ltm_items"))[0][0])
    return ids


async def add_vector(ltm, item_id: int, kind: str, values: list[float], model: str = "m") -> None:
    await ltm.execute("INSERT INTO ltm_item_vectors (item_id, scope, scope_id, model, dim, vector, updated_at) "
                      "VALUES (:i, :k, 'qq:1', :m, :d, :v, '2025-03-01 10:00:00')",
                      {"i": item_id, "k": kind, "m": model, "d": len(values),
                       "v": np.array(values, dtype=np.float32).tobytes()})


async def forget_start_snapshots(ltm) -> None:
    """The first start records policy version 1, framed by two snapshots per
    kind; tests that count snapshots start from none."""
    await ltm.execute("DELETE FROM ltm_drift_snapshots")


async def add_writes(ltm, kind: str, n: int, hours_ago: float) -> None:
    at = (ltm.clock() - timedelta(hours=hours_ago)).strftime("%Y-%m-%d %H:%M:%S")
    for _ in range(n):
        await ltm.execute("INSERT INTO ltm_audit (created_at, action, scope, scope_id, actor, reason, detail) "
                          "VALUES (:at, 'create', :k, 'qq:1', 'system:extractor', '', '{}')", {"at": at, "k": kind})


async def test_a_snapshot_measures_each_scope_kind_of_the_current_store(make_ltm):
    ltm = await make_ltm()
    profiles = await add_items(ltm, "user", 3, confidence=0.9)
    shadow = await add_items(ltm, "user", 1, type_="preference", status="shadow", confidence=0.5)
    old = await add_items(ltm, "user", 1, status="superseded", confidence=0.1, start=10)
    await add_items(ltm, "group", 2, type_="episode")
    await add_vector(ltm, profiles[0], "user", [3.0, 0.0, 0.0])
    await add_vector(ltm, shadow[0], "user", [0.0, 0.5, 0.0])
    await add_vector(ltm, old[0], "user", [0.0, 0.0, 1.0])  # history: left out
    await add_writes(ltm, "user", 48, hours_ago=2)
    await add_writes(ltm, "user", 5, hours_ago=30)  # older than a day

    # the first start's policy version was photographed before and after, on an empty store
    earlier, _ = await ltm.engine.drift.listing("user", 0, 1)
    rows = {r.scope_kind: r for r in await ltm.engine.drift.snapshot(DriftTrigger.MANUAL)}

    user = rows["user"]
    assert user.features == {"items": 4, "by_type": {"profile": 3, "preference": 1},
                             "by_status": {"active": 3, "shadow": 1}, "writes_per_hour": 2.0,
                             "mean_confidence": pytest.approx(0.8), "vectors": 2, "model": "m"}
    centroid = np.frombuffer(user.centroid, dtype=np.float32)
    assert centroid == pytest.approx([R, R, 0.0], abs=1e-6)  # the mean of unit vectors, made unit
    assert user.previous_id == (earlier[0]["id"] if earlier else None) and not user.alarm
    group = rows["group"]
    assert group.features["by_type"] == {"episode": 2} and group.features["writes_per_hour"] == 0.0
    assert group.centroid is None and group.features["model"] is None


async def test_a_snapshot_below_the_threshold_is_an_alarm_naming_the_version_in_force(make_ltm, caplog):
    ltm = await make_ltm()
    await add_items(ltm, "user", MIN_ITEMS_FOR_ALARM, status="shadow")
    first = await ltm.engine.drift.snapshot(DriftTrigger.MANUAL, version=4, known_version=True)
    await ltm.execute("UPDATE ltm_items SET status = 'active'")  # a switch to auto made everything live
    with caplog.at_level(logging.WARNING, logger="astrbot.plugin.astrbot_plugin_ltm"):
        second = {r.scope_kind: r for r in await ltm.engine.drift.snapshot(DriftTrigger.DAILY, version=5,
                                                                           known_version=True)}
    user = second["user"]
    # the status block turned by 90°: (1 + 0 + 1 + 1) / 4
    assert user.similarity == pytest.approx(0.75) and user.alarm and user.policy_version == 5
    assert user.previous_id == next(r.id for r in first if r.scope_kind == "user")
    assert not second["group"].alarm and second["group"].similarity == pytest.approx(1.0)
    assert any("drift alarm" in r.message and "policy version in force: 5" in r.message for r in caplog.records)
    status = await ltm.engine.drift.status()
    assert status["latest_alarm"]["id"] == user.id and status["threshold"] == 0.9
    ltm.clock.advance(days=8)  # an old alarm is no longer shown
    assert (await ltm.engine.drift.status())["latest_alarm"] is None


async def test_a_small_store_records_its_similarity_but_raises_no_alarm(make_ltm):
    ltm = await make_ltm()
    await add_items(ltm, "user", MIN_ITEMS_FOR_ALARM - 1, status="shadow")
    await ltm.engine.drift.snapshot(DriftTrigger.MANUAL)
    await ltm.execute("UPDATE ltm_items SET status = 'active'")
    (user,) = [r for r in await ltm.engine.drift.snapshot(DriftTrigger.MANUAL) if r.scope_kind == "user"]
    assert user.similarity == pytest.approx(0.75) and not user.alarm


async def test_the_alarm_follows_the_drift_threshold(make_ltm, monkeypatch):
    monkeypatch.setattr(DriftConfig, "threshold", 0.7)
    ltm = await make_ltm()
    await add_items(ltm, "user", MIN_ITEMS_FOR_ALARM, status="shadow")
    await ltm.engine.drift.snapshot(DriftTrigger.MANUAL)
    await ltm.execute("UPDATE ltm_items SET status = 'active'")
    (user,) = [r for r in await ltm.engine.drift.snapshot(DriftTrigger.MANUAL) if r.scope_kind == "user"]
    assert user.similarity == pytest.approx(0.75) and user.threshold == 0.7 and not user.alarm


async def test_no_snapshot_is_taken_while_read_only(make_ltm):
    ltm = await make_ltm({"emergency_read_only": True})
    assert await ltm.engine.drift.snapshot(DriftTrigger.MANUAL) == []
    assert await ltm.rows(DriftSnapshot) == []


# -- the daily schedule ------------------------------------------------------------------


def test_the_daily_snapshot_is_due_24_hours_after_the_last(clock):
    now = clock()
    assert daily_due(None, now)
    assert not daily_due(now - timedelta(hours=23, minutes=59), now)
    assert daily_due(now - timedelta(hours=24), now)


async def test_tick_takes_one_daily_snapshot_per_day_on_the_clock(make_ltm):
    ltm = await make_ltm()
    assert await ltm.engine.drift.tick()
    assert not await ltm.engine.drift.tick()
    await ltm.engine.drift.snapshot(DriftTrigger.MANUAL)  # other snapshots do not reset the day
    ltm.clock.advance(hours=23)
    assert not await ltm.engine.drift.tick()
    ltm.clock.advance(hours=1)
    assert await ltm.engine.drift.tick()
    daily = await ltm.rows(DriftSnapshot, DriftSnapshot.trigger == DriftTrigger.DAILY)
    assert len(daily) == 4  # two days × two scope kinds


# -- policy versions --------------------------------------------------------------------


class FakeVersions:
    """The policy-version source the drift monitor expects, in memory."""

    def __init__(self, versions: list[int]) -> None:
        self.versions = list(versions)
        self.listeners: list[Any] = []
        self.rollbacks: list[tuple[int, str, str]] = []

    def add_listener(self, listener) -> None:
        self.listeners.append(listener)

    async def current_version(self) -> int | None:
        return self.versions[-1] if self.versions else None

    async def history(self, offset: int = 0, limit: int = 20) -> list[dict[str, Any]]:
        newest = list(reversed(self.versions))
        return [{"version": v, "created_at": "2025-03-01T12:00:00+00:00"} for v in newest[offset:offset + limit]]

    async def change(self) -> int:
        for listener in self.listeners:
            await listener("before", await self.current_version())
        self.versions.append(self.versions[-1] + 1)
        for listener in self.listeners:
            await listener("after", self.versions[-1])
        return self.versions[-1]

    async def rollback(self, version: int, actor: str, reason: str) -> dict[str, Any]:
        self.rollbacks.append((version, actor, reason))
        await self.change()
        return {"version": self.versions[-1], "rolled_back_to": version}


async def test_a_policy_version_is_framed_by_a_snapshot_before_and_after(make_ltm):
    ltm = await make_ltm()
    versions = FakeVersions([1, 2, 3])
    ltm.engine.drift.attach(versions)
    started = {r.id for r in await ltm.rows(DriftSnapshot)}  # the first start's version 1, framed
    await versions.change()
    rows = [r for r in await ltm.rows(DriftSnapshot) if r.id not in started]
    assert [(r.trigger, r.policy_version) for r in rows] == [
        ("before", 3), ("before", 3), ("after", 4), ("after", 4)]
    assert await ltm.engine.drift.tick()  # the daily one asks the source for the version
    assert {r.policy_version for r in await ltm.rows(DriftSnapshot, DriftSnapshot.trigger == "daily")} == {4}


async def alarm_under(ltm) -> None:
    """Two snapshots: all shadow, then all active (status block turned by 90°)."""
    await ltm.execute("UPDATE ltm_items SET status = 'shadow'")
    await ltm.engine.drift.snapshot(DriftTrigger.MANUAL)
    await ltm.execute("UPDATE ltm_items SET status = 'active'")
    await ltm.engine.drift.snapshot(DriftTrigger.DAILY)


async def test_auto_rollback_restores_the_last_version_without_an_alarm_and_audits_it(make_ltm):
    ltm = await make_ltm({"drift": {"auto_rollback": True}})
    await add_items(ltm, "user", MIN_ITEMS_FOR_ALARM)
    versions = FakeVersions([1, 2])
    ltm.engine.drift.attach(versions)
    await alarm_under(ltm)  # version 2 had an alarm: rolled back to 1
    assert versions.rollbacks[0][:2] == (1, "system:drift")
    versions.versions.append(4)  # an operator moved on to a version 4
    await ltm.execute("UPDATE ltm_items SET type = 'episode'")  # under which every memory became an episode
    await ltm.engine.drift.snapshot(DriftTrigger.DAILY)
    # 3 (the first rollback) had no alarm: it is the newest version without one
    assert [r[0] for r in versions.rollbacks] == [1, 3]
    audits = await ltm.audit(MemoryAudit.action == AuditAction.DRIFT_ROLLBACK)
    assert [(a.actor, a.detail["from_version"], a.detail["to_version"]) for a in audits] == [
        ("system:drift", 2, 1), ("system:drift", 4, 3)]
    assert "similarity 0.750 < 0.900 under policy version 4" in audits[1].reason


async def test_without_auto_rollback_an_alarm_changes_no_policy(make_ltm):
    ltm = await make_ltm()
    await add_items(ltm, "user", MIN_ITEMS_FOR_ALARM)
    versions = FakeVersions([1, 2])
    ltm.engine.drift.attach(versions)
    await alarm_under(ltm)
    assert versions.rollbacks == [] and versions.versions == [1, 2]
    assert len(await ltm.rows(DriftSnapshot, DriftSnapshot.alarm)) == 1


async def test_with_no_version_source_there_is_nothing_to_roll_back_to(make_ltm):
    ltm = await make_ltm({"drift": {"auto_rollback": True}})
    ltm.engine.drift.versions = None  # a monitor on its own (the engine attaches policy versions)
    await add_items(ltm, "user", MIN_ITEMS_FOR_ALARM)
    await alarm_under(ltm)
    (alarm,) = await ltm.rows(DriftSnapshot, DriftSnapshot.alarm)
    assert alarm.policy_version is None
    assert await ltm.audit(MemoryAudit.action == AuditAction.DRIFT_ROLLBACK) == []


# -- the API -----------------------------------------------------------------------------


async def test_get_drift_pages_snapshots_newest_first_with_the_alarms(make_ltm, api_of):
    ltm = await make_ltm()
    await forget_start_snapshots(ltm)
    await add_items(ltm, "user", MIN_ITEMS_FOR_ALARM)
    await alarm_under(ltm)
    api = api_of(ltm)
    answer = await api.call("drift", {"scope": "user", "page": "1", "page_size": "1"})
    assert answer.status == 200
    data = answer.body["data"]
    assert data["total"] == 2 and len(data["snapshots"]) == 1
    assert data["snapshots"][0]["trigger"] == "daily" and data["snapshots"][0]["alarm"]
    assert [a["scope_kind"] for a in data["alarms"]] == ["user"]
    assert data["latest_alarm"]["id"] == data["snapshots"][0]["id"] and data["threshold"] == 0.9
    assert data["min_items_for_alarm"] == MIN_ITEMS_FOR_ALARM  # the page says it as the server counts it
    stats = (await api.call("stats", {})).body["data"]
    assert stats["drift"]["latest_alarm"]["similarity"] == pytest.approx(0.75)
    for bad in ({"scope": "planet"}, {"page_size": "100000"}, {"page": "x"}):
        refused = await api.call("drift", bad)
        assert refused.status == 400 and refused.body["status"] == "error"


async def test_a_policy_change_through_the_api_is_framed_by_snapshots(make_ltm, api_of):
    ltm = await make_ltm()
    await forget_start_snapshots(ltm)
    api = api_of(ltm)
    answer = await api.call("put_policy", {"write_policy": {"mode": "auto"}}, "root")
    assert answer.status == 200
    assert [r.trigger for r in await ltm.rows(DriftSnapshot)] == ["before", "before", "after", "after"]
    await api.call("put_policy", {"write_policy": {"mode": "auto"}}, "root")  # no change: no snapshot
    assert len(await ltm.rows(DriftSnapshot)) == 4


async def test_a_failed_snapshot_never_fails_the_policy_change(make_ltm, api_of, caplog):
    ltm = await make_ltm()
    await forget_start_snapshots(ltm)

    async def broken(fn):
        raise OSError("disk gone")

    ltm.engine.db.load = broken
    api = api_of(ltm)
    with caplog.at_level(logging.ERROR, logger="astrbot.plugin.astrbot_plugin_ltm"):
        answer = await api.call("put_policy", {"write_policy": {"mode": "manual"}}, "root")
    assert answer.status == 200 and ltm.engine.config.write_policy.mode == "manual"
    assert await ltm.rows(DriftSnapshot) == []
    assert any("drift snapshot before the policy change failed" in r.message for r in caplog.records)
