"""Session summaries, their roll-ups and "last time we talked"."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from astrbot_plugin_ltm.clock import as_utc
from astrbot_plugin_ltm.config import SummariesConfig
from astrbot_plugin_ltm.enums import MemoryType, Method, Status
from astrbot_plugin_ltm.learning import summaries as summaries_module
from astrbot_plugin_ltm.learning.summary_periods import level_of, period_of, summary_key
from astrbot_plugin_ltm.learning.summary_prompt import ROLLUP_MARK, SESSION_MARK
from astrbot_plugin_ltm.storing.tables import MemoryItem

# One summary per conversation: most tests here are about a summary, not about when one is due.
ON = {"write_policy": {"mode": "auto"}, "summaries": {"enable": True, "idle_minutes": 30, "min_events": 1}}


def answer(system: str, prompt: str) -> str:
    """The model: a session summary names the conversation's first line; a
    roll-up counts its parts."""
    if system.startswith(SESSION_MARK):
        first = prompt.splitlines()[1]
        return json.dumps({"summary": f"Session summary: {first}"})
    if system.startswith(ROLLUP_MARK):
        parts = [line for line in prompt.splitlines() if line.startswith("[")]
        return json.dumps({"summary": f"Roll-up of {len(parts)} parts: " + " | ".join(parts)})
    return "[]"


@pytest.fixture
async def sltm(make_ltm, gateway):
    gateway.default = answer
    return await make_ltm(ON)


def summaries(items: list[MemoryItem]) -> list[MemoryItem]:
    return [i for i in items if i.type == MemoryType.SUMMARY]


async def talk(ltm, origin, *lines: str, gap_minutes: float = 1) -> list:
    events = []
    for line in lines:
        events += await ltm.record(origin, line, f"Bot answers about {line} with some advice")
        ltm.clock.advance(minutes=gap_minutes)
    return events


async def test_an_idle_conversation_gets_one_summary_evidenced_by_every_event(sltm, origin):
    alice = origin("alice")
    events = await talk(sltm, alice, "I am reading Dune", "Recommend me a book please")
    assert await sltm.engine.summaries.run_once() == []  # 2 minutes in: the conversation goes on
    assert sltm.gateway.calls == []
    sltm.clock.advance(minutes=30)
    (result,) = await sltm.engine.summaries.run_once()
    assert result.ok and result.events == 4
    (item,) = summaries(await sltm.items())
    assert item.status == Status.ACTIVE and level_of(item.fact_key) == "session"
    assert item.fact.startswith("Session summary:") and "I am reading Dune" in item.fact
    assert item.valid_from == events[0].created_at and item.valid_to == events[-1].created_at
    links = await sltm.links(item)
    assert {e.event_id for e in events} == {link.event_id for link in links}  # the bot's lines too
    assert {link.extraction_method for link in links} == {Method.SUMMARY}
    # once is enough: the next pass finds nothing to do
    assert await sltm.engine.summaries.run_once() == []
    assert len(sltm.gateway.calls) == 1
    # the transcript the model saw names the bot's lines as the bot's
    assert "assistant: Bot answers about Recommend me a book please with some advice" in sltm.gateway.calls[0]["prompt"]


async def test_a_long_conversation_is_summarised_before_it_ends(make_ltm, gateway, origin, monkeypatch):
    gateway.default = answer
    monkeypatch.setattr(SummariesConfig, "max_events", 4)
    ltm = await make_ltm(ON)
    events = await talk(ltm, origin("alice"), "one", "two", "three")  # 6 events, never idle
    results = await ltm.engine.summaries.run_once()
    assert [r.ok for r in results] == [True]
    (item,) = summaries(await ltm.items())
    links = await ltm.links(item)
    assert {link.event_id for link in links} == {e.event_id for e in events[:4]}


async def test_sessions_roll_up_into_days_weeks_and_months(sltm, origin):
    alice = origin("alice")
    at = [datetime(2025, 3, 3, 10, tzinfo=UTC), datetime(2025, 3, 3, 15, tzinfo=UTC),  # Monday, twice
          datetime(2025, 3, 4, 10, tzinfo=UTC),  # Tuesday, the same week
          datetime(2025, 3, 10, 10, tzinfo=UTC),  # the next week
          datetime(2025, 4, 1, 10, tzinfo=UTC)]  # the next month
    recorded = []
    for when in at:
        sltm.clock.now = when
        recorded.append(await talk(sltm, alice, f"talk on {when:%m-%d %H}"))
        sltm.clock.advance(hours=1)
        await sltm.engine.summaries.run_once()
    items = {level_of(i.fact_key): [] for i in summaries(await sltm.items())}
    for i in summaries(await sltm.items()):
        items[level_of(i.fact_key)].append(i)
    assert len(items["session"]) == 5
    (day,) = items["day"]  # Monday had two sessions; Tuesday's one needs no roll-up
    assert day.fact_key == summary_key("day", at[0]) and day.fact.startswith("Roll-up of 2 parts")
    (week,) = items["week"]  # Monday's day summary and Tuesday's session
    assert week.fact.startswith("Roll-up of 2 parts") and "talk on 03-04 10" in week.fact
    (month,) = items["month"]  # March: that week and the session of the next week
    assert month.fact.startswith("Roll-up of 2 parts") and "talk on 03-10 10" in month.fact
    # evidence down to the events: the union of the parts'
    march = {e.event_id for events in recorded[:4] for e in events}
    links = await sltm.links(month)
    assert {link.event_id for link in links} == march
    assert month.valid_from == recorded[0][0].created_at and month.valid_to == recorded[3][-1].created_at
    assert period_of("week", at[2]) == (datetime(2025, 3, 3, tzinfo=UTC), datetime(2025, 3, 10, tzinfo=UTC))


async def test_rolled_up_summaries_retire_into_their_cover_once_old_and_nothing_is_summarised_twice(sltm, origin):
    alice = origin("alice")
    at = [datetime(2025, 3, 3, 10, tzinfo=UTC), datetime(2025, 3, 3, 15, tzinfo=UTC),
          datetime(2025, 3, 4, 10, tzinfo=UTC), datetime(2025, 3, 10, 10, tzinfo=UTC),
          datetime(2025, 4, 1, 10, tzinfo=UTC), datetime(2025, 6, 2, 10, tzinfo=UTC)]
    for when in at:
        sltm.clock.now = when
        await talk(sltm, alice, f"talk on {when:%m-%d %H}")
        sltm.clock.advance(hours=1)
        await sltm.engine.summaries.run_once()
    by_key = {i.fact_key: i for i in summaries(await sltm.items())}
    day, week, month = (by_key[summary_key(level, at[0])] for level in ("day", "week", "month"))
    session = {when: by_key[summary_key("session", when)] for when in at}
    # each closed summary points to the finest roll-up that covers it; its period is kept
    assert (session[at[0]].status, session[at[0]].superseded_by) == (Status.SUPERSEDED, day.memory_id)
    assert (session[at[2]].status, session[at[2]].superseded_by) == (Status.SUPERSEDED, week.memory_id)
    assert (day.status, day.superseded_by) == (Status.SUPERSEDED, week.memory_id)
    assert (week.status, week.superseded_by) == (Status.SUPERSEDED, month.memory_id)
    assert session[at[0]].valid_to is not None and as_utc(session[at[0]].valid_to) < datetime(2025, 3, 4, tzinfo=UTC)
    in_force = {i.fact_key for i in summaries(await sltm.items()) if i.status == Status.ACTIVE}
    assert in_force == {month.fact_key, session[at[4]].fact_key, session[at[5]].fact_key}
    # summarising goes on from the newest session: no call for what is closed
    calls = len(sltm.gateway.calls)
    sltm.clock.advance(days=1)
    await talk(sltm, alice, "talk on the next day")
    sltm.clock.advance(hours=1)
    await sltm.engine.summaries.run_once()
    assert len(sltm.gateway.calls) == calls + 1
    block = await sltm.block(alice, "what did we talk about in March? talk on 03-03")
    shown = {s.memory_id for s in block.items}
    assert month.memory_id in shown
    assert not shown & {day.memory_id, week.memory_id, *(session[when].memory_id for when in at[:4])}
    # the turns a retired summary covers are still shown: its roll-up backs them
    assert any("talk on 03-03" in s.fact for s in block.events)


@pytest.mark.parametrize(("mode", "status", "waiting"), [
    ("shadow", Status.SHADOW, False), ("manual", Status.SHADOW, True), ("auto", Status.ACTIVE, False)])
async def test_summaries_go_through_the_write_policy(make_ltm, gateway, origin, mode, status, waiting):
    gateway.default = answer
    ltm = await make_ltm({**ON, "write_policy": {"mode": mode}})
    await talk(ltm, origin("alice"), "hello there, I moved to Lyon")
    await ltm.engine.summaries.drain()
    (item,) = summaries(await ltm.items())
    assert (item.status, item.awaiting_approval) == (status, waiting)


async def test_no_summary_when_the_type_is_not_allowed(make_ltm, gateway, origin):
    gateway.default = answer
    ltm = await make_ltm({**ON, "write_policy": {"mode": "auto", "allowed_types": ["profile"]}})
    await talk(ltm, origin("alice"), "hello")
    assert await ltm.engine.summaries.drain() == []
    assert gateway.calls == []  # not even asked


async def test_a_failed_call_leaves_the_session_pending_and_is_retried(sltm, origin, gateway):
    await talk(sltm, origin("alice"), "I adopted a cat named Miso")
    sltm.clock.advance(minutes=31)
    gateway.reply(TimeoutError("model down"), "this is not json")
    (first,) = await sltm.engine.summaries.run_once()
    assert not first.ok and "model down" in first.error
    assert summaries(await sltm.items()) == []
    assert await sltm.engine.summaries.run_once() == []  # backing off: no call
    sltm.clock.advance(minutes=5)
    (second,) = await sltm.engine.summaries.run_once()
    assert not second.ok and "not JSON" in second.error
    sltm.clock.advance(minutes=5)
    (third,) = await sltm.engine.summaries.run_once()
    assert third.ok
    (item,) = summaries(await sltm.items())
    assert "Miso" in item.fact
    assert len(gateway.calls) == 3


async def test_a_deleted_summary_is_not_made_again(sltm, origin, gateway):
    await talk(sltm, origin("alice"), "I like jazz")
    await sltm.engine.summaries.drain()
    (item,) = summaries(await sltm.items())
    await sltm.engine.admin.delete(item.memory_id, "operator:test")
    assert await sltm.engine.summaries.drain() == []
    assert summaries(await sltm.items()) == []
    assert len(gateway.calls) == 1
    # a later conversation is summarised as usual
    sltm.clock.advance(hours=2)
    await talk(sltm, origin("alice"), "I like blues too")
    (result,) = await sltm.engine.summaries.drain()
    assert result.ok and "blues" in (await sltm.item(MemoryItem.type == MemoryType.SUMMARY)).fact


async def test_editing_a_summary_keeps_its_period(sltm, origin):
    await talk(sltm, origin("alice"), "we planned a trip to Kyoto")
    await sltm.engine.summaries.drain()
    item = await sltm.item(MemoryItem.type == MemoryType.SUMMARY)
    edited = await sltm.engine.admin.update_item(item.memory_id, {"fact": "Alice plans a trip to Kyoto. " * 20},
                                                 "operator:test")
    assert edited.fact_key == item.fact_key and len(edited.fact) > 300
    assert await sltm.engine.summaries.drain() == []  # still summarised up to its end


async def test_last_time_we_talked_opens_a_new_conversation_within_the_budget(make_ltm, gateway, origin):
    gateway.default = answer
    ltm = await make_ltm({**ON, "read_policy": {"max_tokens": 120}})
    alice = origin("alice")
    await talk(ltm, alice, "You recommended The Little Prince to me")
    await ltm.engine.summaries.drain()
    ongoing = await ltm.block(alice, "what next?")  # a minute after the last turn
    assert "Last time we talked" not in ongoing.text
    ltm.clock.advance(hours=3)
    block = await ltm.block(alice, "hi again")
    assert block.text.splitlines()[2] == f"Last time we talked ({ltm.clock.now:%Y-%m-%d}):"
    assert "Session summary" in block.text.splitlines()[3]
    assert block.tokens <= 120 and block.items[0].type == MemoryType.SUMMARY
    zh = await ltm.block(alice, "你好，还记得我吗")
    assert "上次聊天（" in zh.text


async def test_last_time_stays_out_when_it_cannot_fit(make_ltm, gateway, origin):
    gateway.default = answer
    ltm = await make_ltm({**ON, "read_policy": {"max_tokens": 40}})
    alice = origin("alice")
    await talk(ltm, alice, "A rather long first message about many different things " * 3)
    await ltm.engine.summaries.drain()
    ltm.clock.advance(hours=3)
    block = await ltm.block(alice, "hi")
    assert "Last time" not in block.text and block.tokens <= 40


async def test_extraction_may_not_propose_a_summary(ltm, origin):
    await ltm.turn(origin("alice"), "I like tea", "OK.", {"type": "summary", "fact": "Alice likes tea"})
    assert await ltm.items() == []


async def test_summaries_are_exported_and_imported(sltm, make_ltm, origin):
    from astrbot_plugin_ltm.operating.queries import ItemFilter
    from astrbot_plugin_ltm.operating.transfer import export_items, import_items

    await talk(sltm, origin("alice"), "my sister is called Jane " * 20)
    await sltm.engine.summaries.drain()
    item = await sltm.item(MemoryItem.type == MemoryType.SUMMARY)
    dump = await export_items(sltm.engine.db, ItemFilter())
    other = await make_ltm(ON)
    report = await import_items(other.engine.db, dump, "operator:test", False, max_fact_chars=300)
    assert len(report.added) == 1, report.skipped
    copied = await other.item(MemoryItem.type == MemoryType.SUMMARY)
    assert (copied.fact, copied.fact_key, copied.valid_from) == (item.fact, item.fact_key, item.valid_from)


async def test_a_turn_still_queued_keeps_the_conversation_going(sltm, origin):
    alice = origin("alice")
    await talk(sltm, alice, "I went hiking in the Alps")
    await sltm.engine.summaries.drain()
    sltm.clock.advance(hours=3)
    sltm.engine.record_turn(alice, "hello again", "Hi!")  # not flushed yet
    assert "Last time we talked" not in (await sltm.block(alice, "and another thing")).text


async def test_a_group_conversation_is_summarised_in_the_group_and_read_by_its_members(sltm, origin):
    ann = origin("ann", group="g1")
    await talk(sltm, ann, "our team meets in Berlin on Friday")
    await talk(sltm, origin("ben", group="g1"), "I will book the room")
    (result,) = await sltm.engine.summaries.drain()
    item = await sltm.item(MemoryItem.type == MemoryType.SUMMARY)
    assert (item.scope, item.scope_id) == ("group", "qq:g1") and result.events == 4
    sltm.clock.advance(hours=3)
    block = await sltm.block(ann, "hi all")
    assert "Last time we talked" in block.text and "Berlin" in block.text
    assert "Last time we talked" not in (await sltm.block(origin("ann"), "hi")).text  # her private chat


async def test_a_later_conversation_waits_for_an_earlier_one_that_failed(sltm, origin, gateway):
    alice = origin("alice")
    await talk(sltm, alice, "first talk about Rome")
    sltm.clock.advance(hours=1)
    await talk(sltm, alice, "second talk about Oslo")
    sltm.clock.advance(hours=1)
    gateway.reply(RuntimeError("overloaded"))
    (failed,) = await sltm.engine.summaries.run_once()
    assert not failed.ok
    assert await sltm.engine.summaries.run_once() == []  # Rome backs off, and Oslo waits behind it
    sltm.clock.advance(minutes=5)
    results = await sltm.engine.summaries.run_once()
    assert [r.ok for r in results] == [True, True]
    facts = [i.fact for i in summaries(await sltm.items())]
    assert "Rome" in facts[0] and "Oslo" in facts[1]


async def test_the_stats_count_the_summary_calls(sltm, origin, gateway):
    from astrbot_plugin_ltm.doors.api import MemoryAPI

    await talk(sltm, origin("alice"), "I play the cello")
    gateway.reply(RuntimeError("busy"))
    await sltm.engine.summaries.run_once(ignore_idle=True)
    sltm.clock.advance(minutes=5)
    await sltm.engine.summaries.run_once(ignore_idle=True)
    stats = await MemoryAPI(sltm.engine, lambda: sltm.raw_config, _unused).stats({})
    assert stats["summary_calls"] == {"session": 2, "rollup": 0, "failed": 1}
    assert stats["scopes"][0]["by_type"] == {"summary": 1}


async def _unused(config: dict) -> None:
    raise AssertionError("the stats save no settings")


async def test_short_conversations_are_joined_until_they_hold_min_events(make_ltm, gateway, origin):
    gateway.default = answer
    ltm = await make_ltm({**ON, "summaries": {**ON["summaries"], "min_events": 6}})
    alice = origin("alice")
    first = await talk(ltm, alice, "I am reading Dune", "Recommend me a book")  # 4 events
    ltm.clock.advance(minutes=31)
    assert await ltm.engine.summaries.run_once() == [] and gateway.calls == []  # too short to be worth a call
    second = await talk(ltm, alice, "I finished Dune", "What next?")  # 8 in all
    ltm.clock.advance(minutes=31)
    (result,) = await ltm.engine.summaries.run_once()
    assert result.ok and result.events == 8 and len(gateway.calls) == 1
    (item,) = summaries(await ltm.items())
    assert item.valid_from == first[0].created_at and item.valid_to == second[-1].created_at
    links = await ltm.links(item)
    assert {link.event_id for link in links} == {e.event_id for e in first + second}
    # The next short conversation waits for more, even when drained.
    await talk(ltm, alice, "Thanks")
    ltm.clock.advance(minutes=31)
    assert await ltm.engine.summaries.drain() == [] and len(gateway.calls) == 1


async def test_a_conversation_that_reaches_min_events_alone_is_summarised_alone_once_it_ends(make_ltm, gateway,
                                                                                            origin):
    gateway.default = answer
    ltm = await make_ltm({**ON, "summaries": {**ON["summaries"], "min_events": 4}})
    alice = origin("alice")
    events = await talk(ltm, alice, "I am reading Dune", "Recommend me a book")  # 4 events
    assert await ltm.engine.summaries.run_once() == []  # enough turns, but the conversation goes on
    ltm.clock.advance(minutes=31)
    (result,) = await ltm.engine.summaries.run_once()
    assert result.ok and result.events == len(events) == 4


async def test_the_default_span_keeps_summaries_under_a_fortieth_of_a_call_per_turn(make_ltm, gateway, origin):
    gateway.default = answer
    ltm = await make_ltm({"write_policy": {"mode": "auto"}, "summaries": {"enable": True}})
    alice = origin("alice")
    for n in range(20):  # twenty conversations of 4 turns (the bot's included): 80 turns
        await talk(ltm, alice, f"Day {n}: I walked the dog", f"Day {n}: then I cooked")
        ltm.clock.advance(hours=5)
        await ltm.engine.summaries.run_once()
    sessions = summaries(await ltm.items())
    assert len([i for i in sessions if level_of(i.fact_key) == "session"]) == 80 // 40


async def test_failed_summaries_remembered_are_bounded_and_one_pushed_out_is_only_tried_afresh(
        sltm, origin, gateway, monkeypatch):
    monkeypatch.setattr(summaries_module, "MAX_FAILURES_KEPT", 2)
    for name in ("alice", "bob", "carol"):
        await talk(sltm, origin(name), f"{name} adopted a cat")
    sltm.clock.advance(minutes=31)
    gateway.reply(TimeoutError("model down"), TimeoutError("model down"), TimeoutError("model down"))
    results = await sltm.engine.summaries.run_once()
    assert [r.ok for r in results] == [False, False, False]
    assert len(sltm.engine.summaries._failures) == 2  # the least lately failed is let go
    # The two remembered back off; the one let go is asked again at once.
    (retried,) = await sltm.engine.summaries.run_once()
    assert retried.ok and len(gateway.calls) == 4
    sltm.clock.advance(minutes=5)
    assert [r.ok for r in await sltm.engine.summaries.run_once()] == [True, True]
    assert len(summaries(await sltm.items())) == 3
