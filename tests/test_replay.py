"""Policy replay, the holdout set and tuning, on a fixture history written
by the real pipeline (scripted extraction, write mode auto). The expected
figures are worked out by hand in the comments."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from astrbot_plugin_ltm.config import WritePolicy
from astrbot_plugin_ltm.doors.replay_api import ReplayAPI
from astrbot_plugin_ltm.enums import Method
from astrbot_plugin_ltm.errors import AdminError
from astrbot_plugin_ltm.learning.candidates import Candidate
from astrbot_plugin_ltm.learning.gate_log import REFUSED
from astrbot_plugin_ltm.learning.replay_gate import ACTIVE, SHADOW, LoggedCandidate, Switches, replay_gate
from astrbot_plugin_ltm.operating.replay import Selection, load, read_scopes
from astrbot_plugin_ltm.operating.tuning import tune
from astrbot_plugin_ltm.recalling.read import Read
from astrbot_plugin_ltm.storing.database import ReadOnlyError
from astrbot_plugin_ltm.storing.tables import GateLogEntry, MemoryItem

NOVEMBER_1 = datetime(2026, 11, 1, tzinfo=UTC)
TEA = {"type": "preference", "fact": "Alice loves green tea", "fact_key": "tea", "confidence": 0.9}
CITY = {"type": "profile", "fact": "Alice lives in Berlin", "fact_key": "city", "confidence": 0.8}
CLIMB = {"type": "preference", "fact": "Alice might try climbing", "fact_key": "climbing", "confidence": 0.7}


async def alice_history(ltm, origin) -> None:
    """Four candidates, weighted by 0.8 (llm_extract), min_confidence 0.6:
    tea 0.72 created active; tea again: (0.72 + 0.72) / 2 × 1.1 = 0.792,
    confirmed (2 evidence); city 0.64 active; climbing 0.56 shadow."""
    a = origin("alice")
    await ltm.turn(a, "I love green tea", "Nice.", TEA)
    ltm.clock.advance(minutes=5)
    await ltm.turn(a, "Green tea is my favourite drink", "Noted.", TEA)
    ltm.clock.advance(minutes=5)
    await ltm.turn(a, "I live in Berlin", "Cool.", CITY)
    ltm.clock.advance(minutes=5)
    await ltm.turn(a, "I might try climbing", "Fun.", CLIMB)


async def run_job(api: ReplayAPI, started: dict) -> dict:
    job = api.engine.jobs.get(started["job_id"])
    assert job.task is not None
    await job.task
    answer = await api.job(started["job_id"])
    assert answer["status"] == "done", answer["error"]
    return answer


def replay_api(ltm) -> ReplayAPI:
    return ReplayAPI(ltm.engine, lambda: ltm.raw_config)


async def test_every_candidate_at_the_gate_is_logged_with_its_inputs(ltm, origin):
    await alice_history(ltm, origin)
    rows = await ltm.rows(GateLogEntry)
    assert [(r.fact_key, r.action, r.status, r.evidence_count, r.is_new, round(r.confidence, 3)) for r in rows] == [
        ("tea", "create", "active", 1, True, 0.72),
        ("tea", "confirm", "active", 2, False, 0.792),
        ("city", "create", "active", 1, True, 0.64),
        ("climbing", "create", "shadow", 1, True, 0.56),
    ]
    tea = await ltm.item(MemoryItem.fact_key == "tea")
    assert rows[0].memory_id == rows[1].memory_id == tea.memory_id


async def test_a_refused_candidate_is_logged_without_a_memory(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto", "allowed_types": ["profile"]}})
    await ltm.turn(origin("alice"), "I love green tea", "Nice.", TEA)
    (row,) = await ltm.rows(GateLogEntry)
    assert (row.status, row.memory_id, row.reason) == (REFUSED, None, "type 'preference' not in allowed_types")


async def test_forgetting_a_scope_deletes_its_gate_log(ltm, origin):
    await alice_history(ltm, origin)
    scope = ltm.engine.resolver.write_scope(origin("alice"))
    await ltm.engine.admin.forget_scope(scope, "operator:test")
    assert await ltm.rows(GateLogEntry) == []


async def test_replay_of_a_stricter_candidate_counts_writes_by_hand(ltm, origin):
    await alice_history(ltm, origin)
    api = replay_api(ltm)
    report = (await run_job(api, await api.start_replay(
        {"policy": {"write_policy": {"min_confidence": 0.7}}, "set": "all"})))["report"]
    # current: tea ×2 and city active, climbing shadow.
    assert report["current"]["writes"]["by_outcome_and_type"] == {
        "active": {"preference": 2, "profile": 1}, "shadow": {"preference": 1},
        "awaiting_approval": {}, "refused": {}}
    # 0.7: city (0.64) falls to shadow; tea (0.72, then 0.792) stays active.
    assert report["candidate"]["writes"]["by_outcome"] == {
        "active": 2, "shadow": 2, "awaiting_approval": 0, "refused": 0}
    differs = report["status_differs"]
    assert differs["count"] == 1
    assert differs["examples"][0]["fact"] == "Alice lives in Berlin"
    assert (differs["examples"][0]["current"], differs["examples"][0]["candidate"]) == (ACTIVE, SHADOW)
    assert report["events"]["candidates"] == 4 and report["events"]["reads"] == 4
    # self-recall: only tea has two evidence events; "Green tea is my favourite drink" brings it.
    assert report["current"]["self_recall"] == {"memories": 1, "recalled": 1, "share": 1.0}
    assert report["candidate"]["self_recall"]["share"] == 1.0
    assert report["current"]["reads"]["budget_violations"] == 0
    assert report["candidate"]["reads"]["budget_violations"] == 0
    assert report["speed"]["events_per_second"] > 0
    assert report["verdict"]


async def test_replay_reads_match_the_live_reader_for_the_current_policy(ltm, origin):
    await alice_history(ltm, origin)
    scopes = ltm.engine.resolver.read_scopes(origin("alice"))  # what a live read of her messages reads
    queries = ["I love green tea", "Green tea is my favourite drink", "I live in Berlin", "I might try climbing"]
    blocks = [await ltm.engine.reader.read(Read(q, scopes, ltm.engine.config.read_policy)) for q in queries]
    api = replay_api(ltm)
    report = (await run_job(api, await api.start_replay(
        {"policy": {"read_policy": {"max_items": 0, "max_events": 0}}, "set": "all"})))["report"]
    reads = report["current"]["reads"]
    assert reads["tokens_per_turn_mean"] == round(sum(b.tokens for b in blocks) / 4, 2)
    assert reads["memories_per_block"] == round(sum(len(b.items) for b in blocks) / 4, 3)
    assert reads["tokens_per_turn_p95"] == max(b.tokens for b in blocks)  # nearest rank of 4 is the 4th
    # A candidate that injects nothing: no tokens, and the tea memory is not recalled.
    assert report["candidate"]["reads"]["tokens_per_turn_mean"] == 0
    assert report["candidate"]["self_recall"] == {"memories": 1, "recalled": 0, "share": 0.0}
    assert report["candidate"]["score"] < report["current"]["score"]
    assert "worse" in report["verdict"]


async def test_a_memory_the_candidate_would_not_make_active_is_not_recalled(ltm, origin):
    await alice_history(ltm, origin)
    api = replay_api(ltm)
    # min_evidence_count 2: tea's first candidate is shadow, its second (2 evidence) makes it active:
    # still recalled. min_confidence 0.8: tea (0.72 / 0.792) never active: not recalled.
    report = (await run_job(api, await api.start_replay(
        {"policy": {"write_policy": {"min_confidence": 0.8}}, "set": "all"})))["report"]
    assert report["candidate"]["writes"]["by_outcome"]["active"] == 0
    assert report["candidate"]["self_recall"]["share"] == 0.0
    assert report["current"]["self_recall"]["share"] == 1.0
    report = (await run_job(api, await api.start_replay(
        {"policy": {"write_policy": {"min_evidence_count": 2}}, "set": "all"})))["report"]
    assert report["candidate"]["writes"]["by_outcome"] == {"active": 1, "shadow": 3, "awaiting_approval": 0,
                                                           "refused": 0}
    assert report["candidate"]["self_recall"]["share"] == 1.0


async def test_a_replay_writes_nothing(ltm, origin):
    await alice_history(ltm, origin)
    api = replay_api(ltm)
    await api.draw_holdout({"share": 1.0})
    before = await ltm.table_snapshot()
    await run_job(api, await api.start_replay({"policy": {"write_policy": {"mode": "shadow"}}}))
    await run_job(api, await api.start_tune({}))
    assert await ltm.table_snapshot() == before


async def test_the_holdout_set_is_frozen_until_redrawn(ltm, origin):
    for name in ("ann", "ben", "cat", "dan", "eve"):
        await ltm.record(origin(name), f"hello from {name}")
    api = replay_api(ltm)
    assert (await api.get_holdout())["drawn"] is False
    first = await api.draw_holdout({"share": 0.4, "seed": 7})
    assert first["size"] == 2 and first["recorded_sessions"] == 5
    await ltm.record(origin("fay"), "a new session")
    assert (await api.get_holdout())["sessions"] == first["sessions"]  # new sessions do not join
    picked = await api.draw_holdout({"scopes": ["user:qq:ben", "user:qq:eve"]})
    assert picked["sessions"] == ["qq:FriendMessage:ben", "qq:FriendMessage:eve"]
    assert (await api.get_holdout())["rule"]["scopes"] == ["user:qq:ben", "user:qq:eve"]


@pytest.mark.parametrize("body, message", [
    ({"policy": {"write_policy": {"min_confidence": 3}}}, "outside the allowed range"),
    ({"policy": {"extraction": {"batch_size": 2}}}, "cannot set"),
    ({"policy": {}}, "send"),
    ({"policy": {"enable": True}, "set": "some"}, "set"),
    ({"policy": {"enable": True}, "since": "yesterday"}, "ISO date"),
    ({"policy": {"enable": True}, "scopes": ["bob"]}, "not a scope"),
    # read as write_policy.disabled_scopes reads a scope: an id with spaces around it matches nothing
    ({"policy": {"enable": True}, "scopes": ["user: qq:bob"]}, "spaces around it"),
    ({"policy": {"enable": True}, "extra": 1}, "unknown field"),
])
async def test_a_bad_replay_request_is_refused_clearly(ltm, body, message):
    with pytest.raises(AdminError, match=message):
        await replay_api(ltm).start_replay(body)
    assert ltm.engine.jobs.running() is None


async def test_one_job_at_a_time_and_a_cancel_ends_it(ltm, origin):
    await alice_history(ltm, origin)
    api = replay_api(ltm)
    started = await api.start_replay({"policy": {"enable": True}, "set": "all"})
    with pytest.raises(AdminError, match="running"):
        await api.start_tune({})
    await api.cancel(started["job_id"])
    job = ltm.engine.jobs.get(started["job_id"])
    await job.task
    assert (await api.job(started["job_id"]))["status"] == "cancelled"
    with pytest.raises(AdminError, match="no job"):
        await api.job("nope")


# -- tuning ----------------------------------------------------------------------------

PLANTED = {"write_policy.min_confidence": (0.5, 0.95)}


async def tuning_history(ltm, origin, *, poisoned_holdout: bool) -> tuple:
    """The current policy (min_confidence 0.9) keeps every memory shadow.
    Fitting sessions (ann, ben): a fact said twice (0.72, then 0.792): at
    min_confidence 0.5 it goes live and is recalled; at 0.95 it is not.
    Holdout session (cat): a fact said twice as well, or (poisoned) a
    candidate citing only another scope's event, which 0.5 would put live."""
    for name in ("ann", "ben", "cat"):
        who = origin(name)
        fact = {"type": "preference", "fact": f"{name.capitalize()} loves green tea", "fact_key": "tea",
                "confidence": 0.9}
        if name == "cat" and poisoned_holdout:
            other = (await ltm.record(origin("dan"), "I love green tea"))[0]
            await ltm.record(who, "I love green tea")
            scope = ltm.engine.resolver.write_scope(who)
            async with ltm.engine.db.write() as session:
                await ltm.engine.writer.apply(session, scope, [Candidate(
                    type="preference", fact="Cat loves green tea", fact_key="tea", confidence=0.9, importance=0.5,
                    event_ids=[other.event_id], session_id=who.unified_msg_origin)],
                    method=Method.LLM_EXTRACT, actor="system:extractor")
            continue
        await ltm.turn(who, "I love green tea", "Nice.", fact)
        ltm.clock.advance(minutes=5)
        await ltm.turn(who, "Green tea is what I drink every day", "Noted.", fact)
    api = replay_api(ltm)
    holdout = await api.draw_holdout({"scopes": ["user:qq:cat"]})
    return api, holdout


async def run_tuning(ltm, api, holdout) -> dict:
    sessions = tuple(holdout["sessions"])
    fitting = await load(ltm.engine.db, Selection("fitting", sessions), resolver=ltm.engine.resolver)
    held = await load(ltm.engine.db, Selection("holdout", sessions), resolver=ltm.engine.resolver)
    return await tune(ltm.engine.reader, ltm.clock, fitting, held, ltm.engine.config, lambda d, t: None, PLANTED)


async def test_tuning_finds_the_better_of_two_planted_settings(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto", "min_confidence": 0.9}})
    api, holdout = await tuning_history(ltm, origin, poisoned_holdout=False)
    report = await run_tuning(ltm, api, holdout)
    assert report["candidate"] == {"write_policy.min_confidence": 0.5}
    assert report["scores"]["fitting"]["candidate"] > report["scores"]["fitting"]["current"]
    assert report["holdout_report"]["candidate"]["self_recall"]["share"] == 1.0
    assert report["outcome"] == "proposed"
    assert report["proposal"] == {"write_policy": {"min_confidence": 0.5}}
    assert ltm.engine.config.write_policy.min_confidence == 0.9  # nothing applied


async def test_tuning_flags_a_best_that_is_worse_on_the_holdout_set_as_overfitted(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto", "min_confidence": 0.9}})
    api, holdout = await tuning_history(ltm, origin, poisoned_holdout=True)
    report = await run_tuning(ltm, api, holdout)
    assert report["candidate"] == {"write_policy.min_confidence": 0.5}
    assert report["holdout_report"]["candidate"]["safety"]["cross_scope_live"] == 1
    assert report["scores"]["holdout"]["candidate"] < report["scores"]["holdout"]["current"]
    assert report["outcome"] == "overfitted", (report["scores"], report["holdout_report"])
    assert report["proposal"] is None


def test_a_replayed_group_message_reads_what_a_live_read_would(ltm, origin):
    member = origin("alice", group="g1")
    resolver = ltm.engine.resolver
    group = resolver.write_scope(member)
    assert read_scopes(resolver, group.kind, group.id, "qq", member.unified_msg_origin, "alice") == \
        tuple(resolver.read_scopes(member))
    assert read_scopes(None, group.kind, group.id, "qq", member.unified_msg_origin, "alice") == (group,)


def logged(n, key, confidence, minutes, session="s1", memory_id=None):
    return LoggedCandidate(id=n, created_at=NOVEMBER_1 + timedelta(minutes=minutes), scope="user", scope_id="qq:a",
                           session_id=session, memory_id=memory_id, fact_key=key, type="preference",
                           fact=f"A likes {key}", confidence=confidence, explicit=False, instruction=None,
                           event_ids=(f"e{n}",))


def test_the_replayed_gate_counts_its_own_writes_against_the_rate_limits():
    # Three new memories in one conversation within the hour; the third repeats the first's memory.
    history = [logged(1, "tea", 0.7, 0, memory_id="m1"), logged(2, "jazz", 0.7, 1, memory_id="m2"),
               logged(3, "tea", 0.8, 2, memory_id="m1"), logged(4, "chess", 0.7, 90, memory_id="m3")]
    policy = WritePolicy(mode="auto", min_confidence=0.6, max_writes_per_session=10, max_writes_per_hour=1)
    replay = replay_gate(history, Switches(policy))
    # per hour 1: tea is new (active); jazz is the hour's second new memory (refused); tea again only
    # adds evidence (no new memory: allowed); chess, 90 minutes later, is in a new hour.
    assert [replay.outcomes[i] for i in (1, 2, 3, 4)] == [ACTIVE, REFUSED, ACTIVE, ACTIVE]
    assert replay.final == {"m1": ACTIVE, "m2": REFUSED, "m3": ACTIVE}
    # A stricter threshold refuses tea's first candidate; its second one (0.8) then makes the memory.
    strict = replay_gate(history, Switches(WritePolicy(mode="auto", min_confidence=0.75)))
    assert [strict.outcomes[i] for i in (1, 3)] == [SHADOW, ACTIVE]
    off = replay_gate(history, Switches(policy, read_only=True))
    assert set(off.outcomes.values()) == {REFUSED} and off.reasons[1] == "emergency_read_only"


async def test_while_read_only_a_replay_of_all_history_runs_and_the_holdout_is_not_drawn(ltm, origin):
    await alice_history(ltm, origin)
    ltm.configure({"emergency_read_only": True})
    api = replay_api(ltm)
    with pytest.raises(AdminError, match="holdout set has not been drawn"):
        await api.start_replay({"policy": {"emergency_read_only": False}})
    with pytest.raises(ReadOnlyError):
        await api.draw_holdout({})
    report = (await run_job(api, await api.start_replay({"policy": {"emergency_read_only": False},
                                                         "set": "all"})))["report"]
    # Read-only now, so the current policy writes nothing; the candidate would.
    assert report["current"]["writes"]["by_outcome"]["refused"] == 4
    assert report["candidate"]["writes"]["by_outcome"]["active"] == 3


async def test_stopping_the_engine_cancels_a_running_job(ltm, origin):
    await alice_history(ltm, origin)
    api = replay_api(ltm)
    started = await api.start_replay({"policy": {"enable": True}, "set": "all"})
    await ltm.engine.jobs.stop()
    assert ltm.engine.jobs.get(started["job_id"]).status == "cancelled"
