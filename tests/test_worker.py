"""Background extraction: validation of the model's output, retries with
backoff on failures and timeouts, attribution in group chats, batching,
idle wait and the retention sweep."""

from __future__ import annotations

import contextlib
import json
from datetime import timedelta

import pytest

from astrbot_plugin_ltm.clock import as_utc
from astrbot_plugin_ltm.config import ExtractionConfig
from astrbot_plugin_ltm.storing.tables import MemoryEvent, MemoryEvidence, MemoryItem


def fact(text, **kw):
    return {"type": "profile", "fact": text, "confidence": 0.9, "importance": 0.5, "lines": [1], **kw}


async def rejections(ltm):
    return [a for a in await ltm.audit() if a.action == "policy" and a.detail.get("decision") == "rejected"]


async def assert_nothing_written(ltm):
    assert await ltm.items() == []
    assert await ltm.evidence() == []
    assert [a for a in await ltm.audit() if a.action != "config"] == []  # policy version 1 is the start's


# -- validation of the model's output ----------------------------------------


async def test_invalid_candidates_are_rejected_one_by_one_and_valid_ones_written(ltm, origin):
    a = origin("alice")
    await ltm.record(a, "I'm Alice, I live in Paris and I love tea", "And I am a robot who lives in a server.")
    reply = [
        fact("Alice lives in Paris", fact_key="city"),
        fact("Alice is a hobbit", type="hobby"),
        fact("Alice is 30", confidence=1.5),
        fact("Alice is 31", confidence=-0.2),
        fact("Alice is 32", confidence="high"),
        fact("Alice is 33", importance=2),
        fact("Alice has a long story " + "blah " * 80),
        fact("The assistant lives in a server", lines=[2]),
        fact("Alice likes line seven", lines=[7]),
        fact("Alice likes line zero", lines=[0]),
        fact("", fact_key="empty"),
        "just a string",
        {"type": "preference", "fact": "Alice loves tea", "confidence": 0.8, "importance": 0.4, "lines": [1]},
    ]
    ltm.gateway.reply(json.dumps(reply))
    (result,) = await ltm.engine.worker.drain()
    assert result.ok

    assert sorted(i.fact for i in await ltm.items()) == ["Alice lives in Paris", "Alice loves tea"]
    rows = await rejections(ltm)
    assert len(rows) == 11
    reasons = [r.reason for r in rows]
    assert all(r.startswith("invalid candidate: ") for r in reasons)
    joined = "\n".join(reasons)
    assert "unknown type 'hobby'" in joined
    assert joined.count("confidence") == 3
    assert "importance 2" in joined
    assert "longer than 300 characters" in joined
    assert "only the assistant said this" in joined
    assert joined.count("do not refer to transcript lines") == 2
    assert "missing or empty fact" in joined
    assert "not an object" in joined
    assert all(r.scope == "user" and r.scope_id == "qq:alice" and r.detail.get("raw") for r in rows)
    # the batch counts as extracted: not retried
    assert {e.extraction_status for e in await ltm.events()} == {"done"}


async def test_a_fact_longer_than_max_fact_chars_is_refused(make_ltm, origin, monkeypatch):
    monkeypatch.setattr(ExtractionConfig, "max_fact_chars", 20)
    ltm = await make_ltm({"write_policy": {"mode": "auto"}})
    await ltm.turn(origin("alice"), "hi", "OK.", fact("Alice lives in Paris"),
                   fact("Alice lives in Paris, France, Europe"))
    assert [i.fact for i in await ltm.items()] == ["Alice lives in Paris"]
    (row,) = await rejections(ltm)
    assert "longer than 20 characters" in row.reason


async def test_accepts_a_fenced_array_and_a_facts_object(ltm, origin):
    a = origin("alice")
    await ltm.record(a, "I live in Paris", "OK.")
    ltm.gateway.reply("```json\n" + json.dumps([fact("Alice lives in Paris")]) + "\n```")
    await ltm.engine.worker.drain()
    await ltm.record(a, "I love tea", "OK.")
    ltm.gateway.reply(json.dumps({"facts": [fact("Alice loves tea", type="preference")]}))
    await ltm.engine.worker.drain()
    assert sorted(i.fact for i in await ltm.items()) == ["Alice lives in Paris", "Alice loves tea"]


async def test_an_empty_answer_marks_the_events_done(ltm, origin):
    await ltm.record(origin("alice"), "hello", "hi")
    ltm.gateway.reply("[]")
    (result,) = await ltm.engine.worker.drain()
    assert result.ok and result.outcomes == []
    assert {e.extraction_status for e in await ltm.events()} == {"done"}
    await assert_nothing_written(ltm)


@pytest.mark.parametrize("bad", ["Sure! Here are the facts: [", "", "42", '"facts"', "null", "{not json}"])
async def test_malformed_output_leaves_events_pending_for_a_retry(make_ltm, origin, bad):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}, "extraction": {"backoff_seconds": 30}})
    await ltm.record(origin("alice"), "I live in Paris", "OK.")
    ltm.gateway.reply(bad)
    (result,) = await ltm.engine.worker.drain()
    assert not result.ok and result.error
    events = await ltm.events()
    assert {e.extraction_status for e in events} == {"pending"}
    assert {e.attempts for e in events} == {1}
    assert {as_utc(e.next_attempt_at) for e in events} == {ltm.clock() + timedelta(seconds=30)}
    assert all(e.last_error for e in events)
    await assert_nothing_written(ltm)


async def test_malformed_output_marks_events_failed_after_max_attempts(make_ltm, origin, monkeypatch):
    monkeypatch.setattr(ExtractionConfig, "max_attempts", 3)
    ltm = await make_ltm({"write_policy": {"mode": "auto"}, "extraction": {"backoff_seconds": 10}})
    await ltm.record(origin("alice"), "I live in Paris", "OK.")
    ltm.gateway.default = "this is not JSON"

    await ltm.engine.worker.drain()
    assert {(e.extraction_status, e.attempts) for e in await ltm.events()} == {("pending", 1)}
    # not due yet: no call
    await ltm.engine.worker.drain()
    assert len(ltm.gateway.calls) == 1

    ltm.clock.advance(seconds=10)
    await ltm.engine.worker.drain()
    events = await ltm.events()
    assert {(e.extraction_status, e.attempts) for e in events} == {("pending", 2)}
    assert {as_utc(e.next_attempt_at) for e in events} == {ltm.clock() + timedelta(seconds=20)}  # doubled

    ltm.clock.advance(seconds=20)
    await ltm.engine.worker.drain()
    events = await ltm.events()
    assert {(e.extraction_status, e.attempts) for e in events} == {("failed", 3)}
    assert all(e.next_attempt_at is None and "malformed" in e.last_error for e in events)

    # failed events are kept, and never picked up again by themselves
    ltm.clock.advance(days=1)
    await ltm.engine.worker.drain()
    assert len(ltm.gateway.calls) == 3
    assert len(events) == 2
    await assert_nothing_written(ltm)


# -- provider failures and timeouts ------------------------------------------


async def test_provider_error_keeps_events_pending_and_retry_succeeds(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}, "extraction": {"backoff_seconds": 30}})
    a = origin("alice")
    await ltm.record(a, "I live in Paris", "OK.")
    ltm.gateway.reply(RuntimeError("provider down"))
    (result,) = await ltm.engine.worker.drain()
    assert not result.ok and "provider down" in result.error
    events = await ltm.events()
    assert {(e.extraction_status, e.attempts) for e in events} == {("pending", 1)}
    assert all("RuntimeError: provider down" in e.last_error for e in events)
    await assert_nothing_written(ltm)

    ltm.gateway.facts(fact("Alice lives in Paris"))
    ltm.clock.advance(seconds=29)
    await ltm.engine.worker.drain()
    assert len(ltm.gateway.calls) == 1  # still backing off
    ltm.clock.advance(seconds=1)
    await ltm.engine.worker.drain()
    assert len(ltm.gateway.calls) == 2
    assert [i.fact for i in await ltm.items()] == ["Alice lives in Paris"]
    events = await ltm.events()
    assert {e.extraction_status for e in events} == {"done"}
    assert all(e.last_error is None and e.next_attempt_at is None for e in events)


async def test_timeout_keeps_events_pending_and_retry_succeeds(make_ltm, origin):
    ltm = await make_ltm(
        {"write_policy": {"mode": "auto"}, "extraction": {"timeout_seconds": 1, "backoff_seconds": 5}}
    )
    a = origin("alice")
    await ltm.record(a, "I live in Paris", "OK.")
    ltm.gateway.slow(30, ltm.gateway.facts_json(fact("Alice lives in Paris")))
    (result,) = await ltm.engine.worker.drain()
    assert not result.ok and "Timeout" in result.error
    events = await ltm.events()
    assert {(e.extraction_status, e.attempts) for e in events} == {("pending", 1)}
    await assert_nothing_written(ltm)

    ltm.clock.advance(seconds=5)
    ltm.gateway.facts(fact("Alice lives in Paris"))
    await ltm.engine.worker.drain()
    assert [i.fact for i in await ltm.items()] == ["Alice lives in Paris"]
    assert {e.extraction_status for e in await ltm.events()} == {"done"}


async def test_a_failing_write_rolls_the_whole_batch_back(ltm, origin):
    class Boom:
        calls = 0

        async def find(self, scope, fact):
            Boom.calls += 1
            if Boom.calls == 2:
                raise RuntimeError("disk full")
            return None

    ltm.engine.writer.matcher = Boom()
    await ltm.record(origin("alice"), "Paris, tea", "OK.")
    ltm.gateway.facts(fact("Alice lives in Paris"), fact("Alice loves tea", type="preference"))
    try:
        await ltm.engine.worker.drain()
    except RuntimeError as exc:  # propagating is one acceptable way to fail
        assert "disk full" in str(exc)
    await assert_nothing_written(ltm)  # the first candidate's item is not left behind
    assert {e.extraction_status for e in await ltm.events()} == {"pending"}


async def test_a_failing_write_neither_blocks_other_scopes_nor_retries_at_once(ltm, origin):
    # One conversation whose batch cannot be written must not stop every
    # other conversation's extraction, nor call the model again at every poll.
    class FailForAlice:
        async def find(self, scope, fact):
            if scope.id == "qq:alice":
                raise RuntimeError("disk full")
            return None

    ltm.engine.writer.matcher = FailForAlice()
    await ltm.record(origin("alice"), "I live in Paris", "OK.")
    await ltm.record(origin("bob"), "I live in Rome", "OK.")
    ltm.gateway.default = ltm.gateway.facts_json(fact("The user lives somewhere", fact_key="home"))
    with contextlib.suppress(RuntimeError):
        await ltm.engine.worker.run_once(ignore_idle=True)
    assert [i.scope_id for i in await ltm.items()] == ["qq:bob"]
    alice = await ltm.events(MemoryEvent.scope_id == "qq:alice")
    assert {(e.extraction_status, e.attempts) for e in alice} == {("pending", 1)}
    assert all(e.next_attempt_at is not None and e.last_error for e in alice)
    calls = len(ltm.gateway.calls)
    with contextlib.suppress(RuntimeError):
        await ltm.engine.worker.run_once(ignore_idle=True)
    assert len(ltm.gateway.calls) == calls  # backing off, like any other failure


async def test_no_provider_means_events_wait_without_using_up_attempts(ltm, origin):
    a = origin("alice")
    ltm.gateway.available = False
    await ltm.record(a, "I live in Paris", "OK.")
    (result,) = await ltm.engine.worker.drain()
    assert not result.ok and "provider" in result.error
    assert {(e.extraction_status, e.attempts) for e in await ltm.events()} == {("pending", 0)}

    ltm.gateway.available = True
    ltm.gateway.facts(fact("Alice lives in Paris"))
    await ltm.engine.worker.drain()
    assert len(await ltm.items()) == 1


async def test_provider_and_session_are_passed_to_the_gateway(make_ltm, origin):
    ltm = await make_ltm({"extraction_provider_id": "openai_main"})
    a = origin("alice")
    await ltm.record(a, "I live in Paris", "OK.")
    await ltm.engine.worker.drain()
    assert ltm.gateway.completer_calls == [("openai_main", a.unified_msg_origin)]
    prompt = ltm.gateway.calls[0]["prompt"]
    assert "[1] Alice (user id alice): I live in Paris" in prompt
    assert "[2] assistant: OK." in prompt
    assert "JSON" in ltm.gateway.calls[0]["system"]


# -- batching and the idle wait ------------------------------------------------


async def test_assistant_only_batches_are_skipped_without_a_model_call(ltm, origin):
    await ltm.record(origin("alice"), "", "Good morning! Anything I can do?")
    (result,) = await ltm.engine.worker.drain()
    assert result.ok
    assert ltm.gateway.calls == []
    assert {e.extraction_status for e in await ltm.events()} == {"skipped"}


async def test_batches_are_at_most_batch_size_events(make_ltm, origin):
    ltm = await make_ltm({"extraction": {"batch_size": 2}})
    a = origin("alice")
    for n in range(3):
        await ltm.record(a, f"message {n}", f"reply {n}")
    results = await ltm.engine.worker.drain()
    assert [r.events for r in results] == [2, 2, 2]
    assert len(ltm.gateway.calls) == 3
    assert "message 0" in ltm.gateway.calls[0]["prompt"] and "message 1" not in ltm.gateway.calls[0]["prompt"]
    assert {e.extraction_status for e in await ltm.events()} == {"done"}


async def test_worker_waits_for_the_conversation_to_go_quiet(make_ltm, origin):
    ltm = await make_ltm({"extraction": {"idle_seconds": 15, "batch_size": 4}})
    a = origin("alice")
    await ltm.record(a, "I live in Paris", "OK.")
    assert await ltm.engine.worker.run_once() == []
    ltm.clock.advance(seconds=10)
    assert await ltm.engine.worker.run_once() == []
    ltm.clock.advance(seconds=5)
    (result,) = await ltm.engine.worker.run_once()
    assert result.ok and len(ltm.gateway.calls) == 1


async def test_a_full_batch_does_not_wait_for_quiet(make_ltm, origin):
    ltm = await make_ltm({"extraction": {"idle_seconds": 15, "batch_size": 4}})
    a = origin("alice")
    await ltm.record(a, "one", "OK.")
    assert await ltm.engine.worker.run_once() == []
    await ltm.record(a, "two", "OK.")
    (result,) = await ltm.engine.worker.run_once()
    assert result.events == 4


# -- group chats ---------------------------------------------------------------


async def test_group_events_carry_the_sender_and_facts_are_attributed(ltm, origin):
    alice = origin("alice", group="g1")
    bob = origin("bob", group="g1")
    await ltm.record(alice, "I live in Paris", "Paris is lovely.")
    await ltm.record(bob, "I'm a teacher and I have a cat", "Nice!")
    events = await ltm.events()
    assert [(e.source_role, e.sender_id, e.sender_name) for e in events] == [
        ("user", "alice", "Alice"), ("assistant", None, None), ("user", "bob", "Bob"), ("assistant", None, None),
    ]
    assert {(e.scope, e.scope_id, e.session_id) for e in events} == {("group", "qq:g1", "qq:GroupMessage:g1")}

    unlined = fact("The user likes dogs", fact_key="unlined")
    del unlined["lines"]
    ltm.gateway.reply(json.dumps([
        fact("The user lives in Paris", fact_key="home", lines=[1]),
        fact("User is a teacher", fact_key="job", lines=[3]),
        fact("The user's cat is called Tom", fact_key="cat", lines=[3, 4]),
        fact("用户喜欢喝茶", fact_key="tea", lines=[3]),
        fact("Alice and Bob are in the same group", fact_key="group", lines=[1, 3]),
        fact("The user likes cats", fact_key="ambiguous", lines=[1, 3]),
        unlined,
        fact("The assistant finds Paris lovely", fact_key="bot", lines=[2, 4]),
    ]))
    await ltm.engine.worker.drain()
    prompt = ltm.gateway.calls[0]["prompt"]
    assert "[1] Alice (user id alice): I live in Paris" in prompt
    assert "[3] Bob (user id bob): I'm a teacher and I have a cat" in prompt

    items = {i.fact_key: i for i in await ltm.items()}
    assert items["home"].fact == "Alice lives in Paris"
    assert items["job"].fact == "Bob is a teacher"
    assert items["cat"].fact == "Bob's cat is called Tom"
    assert items["tea"].fact == "Bob喜欢喝茶"
    assert items["group"].fact == "Alice and Bob are in the same group"
    assert set(items) == {"home", "job", "cat", "tea", "group"}
    # Each person's own facts are kept with them; what both said, with the group (audience.py).
    assert {k: (i.scope, i.scope_id) for k, i in items.items()} == {
        "home": ("user", "qq:alice"), "job": ("user", "qq:bob"), "cat": ("user", "qq:bob"),
        "tea": ("user", "qq:bob"), "group": ("group", "qq:g1")}

    by_id = {e.event_id: e for e in events}

    async def sources(key):
        links = await ltm.evidence(MemoryEvidence.memory_id == items[key].memory_id)
        return sorted(by_id[link.event_id].sender_id for link in links)

    assert await sources("home") == ["alice"]
    assert await sources("job") == ["bob"]
    assert await sources("cat") == ["bob"]  # the assistant line is not evidence
    assert await sources("group") == ["alice", "bob"]

    reasons = "\n".join(r.reason for r in await rejections(ltm))
    assert "several people are its source" in reasons
    assert "several people spoke" in reasons
    assert "only the assistant said this" in reasons
    assert len(await rejections(ltm)) == 3


async def test_speaker_names_are_inserted_literally(ltm, origin):
    name = r"C:\Users\bob \1"
    await ltm.record(origin("bob", name=name, group="g1"), "I live in Paris", "OK.")
    await ltm.record(origin("alice", group="g1"), "hi", "OK.")
    ltm.gateway.facts(fact("The user lives in Paris", lines=[1]))
    (result,) = await ltm.engine.worker.drain()
    assert result.ok, result.error
    assert [i.fact for i in await ltm.items()] == [name + " lives in Paris"]


async def test_a_fact_without_lines_in_a_private_chat_is_attributed(ltm, origin):
    await ltm.record(origin("alice"), "I like tea", "OK.")
    ltm.gateway.reply(json.dumps([{"type": "preference", "fact": "The user likes tea", "confidence": 0.9}]))
    await ltm.engine.worker.drain()
    item = await ltm.item()
    assert item.fact == "Alice likes tea"
    (link,) = await ltm.evidence()
    assert link.event_id == (await ltm.events())[0].event_id


async def test_assistant_lines_never_have_a_sender(ltm, origin):
    for user in ("alice", "bob"):
        ltm.engine.record_turn(origin(user, group="g1"), f"hi from {user}", "hello")
        ltm.engine.record_turn(origin(user), f"hi from {user}", "hello")
    ltm.engine.record_tool(origin("alice"), "search", {"q": "x"}, "result")
    await ltm.engine.recorder.flush()
    for e in await ltm.events():
        if e.source_role == "user":
            assert e.sender_id and e.sender_name
        else:
            assert e.sender_id is None and e.sender_name is None


# -- tool results --------------------------------------------------------------


async def test_a_fact_from_a_tool_result_gets_the_tool_weight(ltm, origin):
    a = origin("alice")
    ltm.engine.record_tool(a, "calendar", {"day": "friday"}, "Alice: dentist appointment Friday 10:00")
    await ltm.record(a, "what's on Friday?", "You have the dentist at 10.")
    ltm.gateway.facts(fact("Alice has a dentist appointment on Friday", type="task_state", lines=[1]))
    await ltm.engine.worker.drain()
    prompt = ltm.gateway.calls[0]["prompt"]
    assert '[1] tool calendar({"day": "friday"}) returned: Alice: dentist appointment Friday 10:00' in prompt
    item = await ltm.item()
    assert item.confidence == pytest.approx(0.9 * 0.7)
    (link,) = await ltm.evidence()
    assert link.extraction_meta["confidence"]["source"] == "tool_result"


# -- retention -----------------------------------------------------------------


async def test_ttl_expiry_by_the_sweep(ltm, origin):
    a = origin("alice")
    await ltm.turn(
        a, "stuff", "OK.",
        fact("Alice is migrating to API v2", type="task_state", fact_key="migration"),  # 7 days
        fact("Alice is a nurse", type="profile", fact_key="job"),  # permanent
    )
    task = await ltm.item(MemoryItem.fact_key == "migration")
    assert task.ttl_days == 7 and (await ltm.item(MemoryItem.fact_key == "job")).ttl_days is None

    ltm.clock.advance(days=6, hours=23)
    assert await ltm.engine.worker.sweep_expired() == 0
    assert len((await ltm.block(a, "migration nurse")).items) == 2

    ltm.clock.advance(hours=2)
    assert await ltm.engine.worker.sweep_expired() == 1
    task = await ltm.item(MemoryItem.fact_key == "migration")
    assert task.status == "expired"
    (expire,) = [r for r in await ltm.audit() if r.action == "expire"]
    assert expire.memory_id == task.memory_id and expire.detail["new"] == "expired" and expire.reason
    block = await ltm.block(a, "migration nurse")
    assert [s.fact for s in block.items] == ["Alice is a nurse"]

    ltm.clock.advance(days=3650)
    assert await ltm.engine.worker.sweep_expired() == 0
    assert (await ltm.item(MemoryItem.fact_key == "job")).status == "active"


async def test_confirmation_restarts_the_retention_clock(ltm, origin):
    a = origin("alice")
    task = fact("Alice is migrating to API v2", type="task_state", fact_key="migration")
    await ltm.turn(a, "migrating", "OK.", task)
    ltm.clock.advance(days=5)
    await ltm.turn(a, "still migrating", "OK.", task)
    ltm.clock.advance(days=5)
    assert await ltm.engine.worker.sweep_expired() == 0
    ltm.clock.advance(days=3)
    assert await ltm.engine.worker.sweep_expired() == 1


async def test_an_expired_fact_confirmed_again_comes_back(ltm, origin):
    a = origin("alice")
    task = fact("Alice is migrating to API v2", type="task_state", fact_key="migration")
    await ltm.turn(a, "migrating", "OK.", task)
    ltm.clock.advance(days=8)
    assert await ltm.engine.worker.sweep_expired() == 1
    await ltm.turn(a, "still migrating!", "OK.", task)
    item = await ltm.item()
    assert item.status == "active" and item.evidence_count == 2 and as_utc(item.updated_at) == ltm.clock()
    assert [s.fact for s in (await ltm.block(a, "migration")).items] == ["Alice is migrating to API v2"]


async def test_retention_days_are_configurable(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}, "retention_days": {"preference": 1}})
    await ltm.turn(origin("alice"), "tea", "OK.", fact("Alice loves tea", type="preference"))
    assert (await ltm.item()).ttl_days == 1
    ltm.clock.advance(days=1, seconds=1)
    assert await ltm.engine.worker.sweep_expired() == 1


async def test_shadow_items_expire_too_and_disabled_ones_are_left_alone(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "shadow"}})
    a = origin("alice")
    await ltm.turn(a, "stuff", "OK.", fact("Alice had soup", type="episode", fact_key="soup"),
                   fact("Alice had bread", type="episode", fact_key="bread"))
    bread = await ltm.item(MemoryItem.fact_key == "bread")
    await ltm.engine.admin.update_item(bread.memory_id, {"status": "disabled"}, "operator:root")
    ltm.clock.advance(days=31)
    assert await ltm.engine.worker.sweep_expired() == 1
    statuses = {i.fact_key: i.status for i in await ltm.items()}
    assert statuses == {"soup": "expired", "bread": "disabled"}


async def test_the_pending_events_of_a_scope_are_found_through_their_index(ltm, origin):
    # The worker asks for a scope's waiting events before every batch. Read
    # through the scope's time index, that walked every event the scope ever
    # had (40–240 ms at 100k); the plan must go straight to the pending ones.
    from sqlalchemy import event

    from astrbot_plugin_ltm.scope import Scope

    await ltm.record(origin("alice"), "I live in Paris", "Nice.")
    seen: list[tuple[str, object]] = []

    def capture(conn, cursor, statement, parameters, context, executemany):
        if "FROM ltm_events" in statement:
            seen.append((statement, parameters))

    # Read on a read-only connection in a thread (docs/decisions.md#d128).
    sync_engines = (ltm.engine.db.sql_engine.sync_engine, ltm.engine.db.read_pool)
    for sync_engine in sync_engines:
        event.listen(sync_engine, "before_cursor_execute", capture)
    try:
        scope = (await ltm.engine.worker.ready_scopes(ignore_idle=True))[0]
        assert isinstance(scope, Scope)
        assert await ltm.engine.worker._pending(scope)
    finally:
        for sync_engine in sync_engines:
            event.remove(sync_engine, "before_cursor_execute", capture)
    statement, parameters = next((s, p) for s, p in seen if "extraction_status" in s and "LIMIT" in s)
    async with ltm.engine.db.sql_engine.connect() as conn:
        plan = " ".join(
            str(row[-1]) for row in (await conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters))
        )
    assert "ix_ltm_events_scope_unfinished" in plan, plan
    assert "TEMP B-TREE" not in plan, plan
