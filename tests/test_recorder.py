"""The event recorder: the hot path never touches the database; the flusher
writes in batches; long tool results and messages are truncated with a note."""

from __future__ import annotations

import asyncio
import inspect
from contextlib import asynccontextmanager

import pytest

from astrbot_plugin_ltm.config import RecordingConfig
from astrbot_plugin_ltm.learning.extractor import event_line
from astrbot_plugin_ltm.recording.recorder import truncate


class Tripwire:
    """Stands in for the database while the hot path runs."""

    def __init__(self):
        self.touched = []

    def __call__(self, name):
        @asynccontextmanager
        async def refuse(*args, **kwargs):
            self.touched.append(name)
            raise AssertionError(f"the hot path used db.{name}()")
            yield  # pragma: no cover

        return refuse


async def test_record_turn_returns_without_touching_the_database(ltm, origin, monkeypatch):
    assert not inspect.iscoroutinefunction(ltm.engine.record_turn)
    assert not inspect.iscoroutinefunction(ltm.engine.record_tool)
    trip = Tripwire()
    monkeypatch.setattr(ltm.engine.db, "write", trip("write"))
    monkeypatch.setattr(ltm.engine.db, "read", trip("read"))
    monkeypatch.setattr(ltm.engine.db, "sql_engine", None)  # no raw access either

    a = origin("alice")
    events = ltm.engine.record_turn(a, "I live in Paris", "Nice!")
    tool = ltm.engine.record_tool(a, "weather", {"city": "Paris"}, "sunny")
    ltm.engine.record_turn(origin("bob", group="g"), "hello", "hi")
    assert trip.touched == []
    assert [e.source_role for e in events] == ["user", "assistant"]
    assert tool is not None and tool.source_type == "tool_result"
    assert ltm.engine.recorder.queued == 5
    monkeypatch.undo()

    assert await ltm.events() == []  # nothing written yet
    assert await ltm.engine.recorder.flush() == 5
    assert ltm.engine.recorder.queued == 0
    stored = await ltm.events()
    assert len(stored) == 5
    assert [e.event_id for e in stored[:3]] == [events[0].event_id, events[1].event_id, tool.event_id]
    assert await ltm.engine.recorder.flush() == 0


async def test_recorded_fields(ltm, origin):
    a = origin("alice")
    user, assistant = await ltm.record(a, "  I live in Paris  ", "Nice!")
    (u, b) = await ltm.events()
    assert (u.scope, u.scope_id, u.source_type, u.source_role) == ("user", "qq:alice", "message", "user")
    assert u.content == {"text": "I live in Paris"}
    assert (u.platform_id, u.session_id, u.sender_id, u.sender_name) == ("qq", a.unified_msg_origin, "alice", "Alice")
    assert u.created_at == ltm.clock() and u.extraction_status == "pending" and u.attempts == 0
    assert (b.source_role, b.sender_id, b.sender_name, b.content) == ("assistant", None, None, {"text": "Nice!"})


async def test_an_event_built_on_the_hot_path_is_stored_as_one_built_by_its_constructor(ltm):
    # new_event skips __init__'s per-attribute events (docs/decisions.md#d95): the row must not differ.
    from sqlalchemy import select

    from astrbot_plugin_ltm.storing.tables import MemoryEvent, new_event

    values = dict(scope="user", scope_id="qq:alice", source_type="message", source_role="user",
                  content={"text": "I live in Paris"}, platform_id="qq", session_id="qq:FriendMessage:alice",
                  sender_id="alice", sender_name="Alice", created_at=ltm.clock(), extraction_status="skipped")
    built, fast = MemoryEvent(**values), new_event(**values)
    async with ltm.engine.db.write() as session:
        session.add_all([built, fast])
    async with ltm.engine.db.read() as session:
        rows = (await session.execute(select(MemoryEvent).order_by(MemoryEvent.id))).scalars().all()
    columns = [c.key for c in MemoryEvent.__table__.columns if c.key not in ("id", "event_id")]
    assert [[getattr(r, c) for c in columns] for r in rows] == [[getattr(rows[0], c) for c in columns]] * 2
    assert rows[1].event_id == fast.event_id != built.event_id and rows[1].attempts == 0 and not rows[1].withheld


async def test_empty_messages_are_not_recorded(ltm, origin):
    assert ltm.engine.record_turn(origin("alice"), "   ", "") == []
    events = ltm.engine.record_turn(origin("alice"), "", "Hello there")
    assert [e.source_role for e in events] == ["assistant"]
    assert ltm.engine.recorder.queued == 1


async def test_disabled_plugin_records_nothing(make_ltm, origin):
    ltm = await make_ltm({"enable": False})
    assert ltm.engine.record_turn(origin("alice"), "I live in Paris", "Nice") == []
    assert ltm.engine.record_tool(origin("alice"), "t", {}, "r") is None
    assert ltm.engine.recorder.queued == 0


async def test_tool_results_are_truncated_with_a_note(make_ltm, origin, monkeypatch):
    monkeypatch.setattr(RecordingConfig, "tool_result_max_chars", 100)
    ltm = await make_ltm()
    a = origin("alice")
    long_result = "".join(str(n % 10) for n in range(500))
    event = ltm.engine.record_tool(a, "search", {"q": "tea"}, long_result)
    short = ltm.engine.record_tool(a, "search", {"q": "tea"}, "x" * 100)
    await ltm.engine.recorder.flush()
    stored, stored_short = await ltm.events()
    assert stored.event_id == event.event_id
    content = stored.content
    assert content["result"].startswith(long_result[:100])
    assert content["result"] == long_result[:100] + "… [truncated 400 of 500 characters]"
    assert content["truncated"] is True and content["original_chars"] == 500
    assert content["tool"] == "search" and content["args"] == {"q": "tea"}
    assert "(truncated)" in event_line(stored)
    assert stored_short.content == {"tool": "search", "args": {"q": "tea"}, "result": "x" * 100}
    assert short.event_id == stored_short.event_id


async def test_structured_and_odd_tool_payloads(ltm, origin):
    a = origin("alice")
    ltm.engine.record_tool(a, "calendar", {"day": "周五"}, {"events": ["牙医 10:00"]})
    ltm.engine.record_tool(a, "weird", object(), None)
    await ltm.engine.recorder.flush()
    structured, weird = await ltm.events()
    assert structured.content["result"] == '{"events": ["牙医 10:00"]}'
    assert structured.content["args"] == {"day": "周五"}
    assert set(weird.content["args"]) == {"repr"} and weird.content["result"] == "null"
    assert (weird.source_role, weird.sender_id) == ("tool", None)


async def test_long_messages_are_truncated(make_ltm, origin, monkeypatch):
    monkeypatch.setattr(RecordingConfig, "max_message_chars", 100)
    ltm = await make_ltm()
    await ltm.record(origin("alice"), "a" * 150, "b" * 50)
    user, bot = await ltm.events()
    assert user.content["truncated"] is True
    assert user.content["text"] == "a" * 100 + "… [truncated 50 of 150 characters]"
    assert bot.content == {"text": "b" * 50}


def test_truncate():
    assert truncate("abc", 3) == ("abc", False)
    assert truncate("abcd", 3) == ("abc… [truncated 1 of 4 characters]", True)


async def test_a_failed_flush_keeps_the_events_for_the_next_one(ltm, origin, monkeypatch):
    a = origin("alice")
    first = ltm.engine.record_turn(a, "I live in Paris", "Nice!")

    @asynccontextmanager
    async def broken():
        raise OSError("disk I/O error")
        yield  # pragma: no cover

    monkeypatch.setattr(ltm.engine.db, "write", broken)
    with pytest.raises(OSError):
        await ltm.engine.recorder.flush()
    assert ltm.engine.recorder.queued == 2
    second = ltm.engine.record_turn(a, "and I like tea", "OK")
    monkeypatch.undo()
    assert await ltm.engine.recorder.flush() == 4
    assert [e.event_id for e in await ltm.events()] == [e.event_id for e in first + second]


async def test_stop_flushes_what_is_queued(ltm, origin):
    ltm.engine.record_turn(origin("alice"), "I live in Paris", "Nice!")
    await ltm.engine.stop()
    assert len(await ltm.events()) == 2


async def test_background_flusher_writes_soon_after_a_turn(make_ltm, origin):
    ltm = await make_ltm({"extraction": {"idle_seconds": 3600}}, start=False)
    await ltm.engine.start(background=True)
    ltm.engine.record_turn(origin("alice"), "I live in Paris", "Nice!")
    for _ in range(200):
        if len(await ltm.events()) == 2:
            break
        await asyncio.sleep(0.01)
    assert len(await ltm.events()) == 2
    assert ltm.engine.recorder.queued == 0
    await ltm.engine.stop()
