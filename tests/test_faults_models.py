"""The chat model misbehaving (issue 29, docs/faults.md): timing out,
answering non-JSON, rate-limiting (429), answering an empty list for ever.
Events stay pending with a growing backoff (no tight retry loop: the
worker runs as in AstrBot, polling every 50 ms), nothing is lost, and the
operator sees why in /ltm status, the stats API and the events API."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

from astrbot_plugin_ltm.clock import as_utc
from astrbot_plugin_ltm.doors.commands import Commands


class RateLimited(Exception):
    """What an OpenAI-compatible client raises on HTTP 429."""

    def __init__(self) -> None:
        super().__init__("Error code: 429 - {'error': {'message': 'Rate limit reached for requests'}}")


FAULTS = {
    "timeout": (lambda gw: gw.slow(5), "TimeoutError"),
    "non-JSON": (lambda gw: gw.reply("Sure! Alice is a nurse, I will remember that."), ""),
    "429": (lambda gw: gw.reply(RateLimited()), "429"),
}
BACKOFF = 30.0


async def settle(seconds: float) -> None:
    await asyncio.sleep(seconds)


async def wait_for(condition, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_a_failing_chat_model_leaves_events_pending_with_a_growing_backoff_and_says_why(
        make_ltm, origin, api_of, fault):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}, "extraction": {
        "idle_seconds": 0, "timeout_seconds": 1, "backoff_seconds": BACKOFF}})
    script, said = FAULTS[fault]
    a = origin("alice")
    events = await ltm.record(a, "I am a nurse in Lyon", "Nice!")
    api = api_of(ltm)
    ltm.engine.worker.task.start()  # the loop, as in AstrBot
    retry_times = []
    for attempt in (1, 2, 3):
        if attempt > 1:  # the backoff has passed
            ltm.clock.advance(seconds=BACKOFF * 2 ** (attempt - 2) + 1)
        script(ltm.gateway)
        ltm.engine.worker.task.wake()
        await _until_attempts(ltm, attempt)
        await settle(0.5)  # ten polls: no call until the backoff has passed
        assert len(ltm.gateway.calls) == attempt
        (event, _) = await ltm.events()
        assert event.extraction_status == "pending" and event.attempts == attempt
        assert said in (event.last_error or "")
        retry_times.append(as_utc(event.next_attempt_at) - ltm.clock())
    assert retry_times == [timedelta(seconds=BACKOFF * 2 ** n) for n in range(3)]  # 30 s, 60 s, 120 s

    status = await Commands(ltm.engine).status(origin("root", admin=True))
    assert "Learning from conversations fails" in status and "stay pending" in status
    stats = await api.ok("stats", {"lang": "zh"})
    (notice,) = [n for n in stats["notices"] if n["code"] == "fault.extraction"]
    assert "从对话中学习失败" in notice["message"]
    assert stats["totals"]["pending_events"] == 2
    listed = await api.ok("list_events", {})
    assert {e["attempts"] for e in listed["events"]} == {3} and said in listed["events"][0]["last_error"]

    # The model recovers: the same events are learned from, nothing was lost.
    ltm.gateway.facts({"fact": "Alice is a nurse", "type": "profile", "fact_key": "job"})
    ltm.clock.advance(seconds=4 * BACKOFF + 1)
    ltm.engine.worker.task.wake()
    await _until(ltm, lambda items: [i.fact for i in items] == ["Alice is a nurse"])
    assert [(e.event_id, e.extraction_status) for e in await ltm.events()] == [
        (e.event_id, "done") for e in events]
    assert "fault.extraction" not in [n.code for n in ltm.engine.notices()]


async def test_a_model_that_answers_an_empty_list_for_ever_is_asked_once_per_batch_and_loses_nothing(
        make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto"},
                          "extraction": {"idle_seconds": 0}})
    ltm.gateway.default = "[]"
    a = origin("alice")
    said = []
    ltm.engine.worker.task.start()
    for n in range(3):
        said += await ltm.record(a, f"I am a nurse in Lyon, day {n}", "Nice!")
        ltm.engine.worker.task.wake()
        await _until_calls(ltm, n + 1)
    await settle(0.5)  # ten polls
    assert len(ltm.gateway.calls) == 3  # one per batch, never again
    stored = await ltm.events()
    assert [(e.event_id, e.extraction_status, e.content) for e in stored] == [
        (e.event_id, "done", e.content) for e in said]  # every turn kept, searchable
    assert "nurse in Lyon, day 2" in (await ltm.block(a, "nurse Lyon day 2")).text
    assert not [n for n in ltm.engine.notices() if n.code.startswith("fault.")]


async def _until_attempts(ltm, attempts: int) -> None:
    deadline = time.monotonic() + 15
    while True:
        rows = await ltm.events()
        if len(ltm.gateway.calls) >= attempts and rows and rows[0].attempts >= attempts:
            return
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def _until_calls(ltm, calls: int) -> None:
    await wait_for(lambda: len(ltm.gateway.calls) >= calls, 15)
    await asyncio.sleep(0.1)


async def _until(ltm, check) -> None:
    deadline = time.monotonic() + 15
    while not check(await ltm.items()):
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)
