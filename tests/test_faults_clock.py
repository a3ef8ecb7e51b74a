"""The system clock jumping (issue 29, docs/faults.md): back an hour,
forward a month. A running process tells a jump of the wall clock from
time elapsed (time.monotonic, clock.SteadyClock): no negative durations,
no mass expiry, summaries and rate limits stay sane; the operator is told
in /ltm status. The wall clock and the monotonic clock are both the
test's, moved by hand."""

from __future__ import annotations

from datetime import timedelta

from astrbot_plugin_ltm.clock import SteadyClock, as_utc, signed_span
from astrbot_plugin_ltm.doors.commands import Commands
from astrbot_plugin_ltm.storing.tables import MemoryItem


class Monotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta).total_seconds()


def test_a_steady_clock_never_goes_back_and_moves_by_the_time_elapsed_after_a_jump(clock):
    mono = Monotonic()
    steady = SteadyClock(clock, mono)
    start = steady()
    clock.advance(seconds=30)
    mono.advance(seconds=30)
    assert steady() - start == timedelta(seconds=30) and steady.jump == timedelta(0)

    clock.advance(hours=-1, seconds=10)  # the wall clock is set back an hour
    mono.advance(seconds=10)
    assert steady() - start == timedelta(seconds=40) and steady.jump == timedelta(hours=-1)
    clock.advance(days=31, hours=1, seconds=10)  # then forward a month
    mono.advance(seconds=10)
    assert steady() - start == timedelta(seconds=50) and steady.jump == timedelta(days=31)
    assert signed_span(steady.jump) == "+31.0 d" and signed_span(timedelta(hours=-1)) == "-1.0 h"

    clock.advance(days=-31, seconds=20)  # put right again: in step with the time elapsed
    mono.advance(seconds=20)
    assert steady() - start == timedelta(seconds=70) and steady.jump == timedelta(0)
    clock.advance(seconds=-1)  # a small correction back is absorbed, never a step back
    mono.advance(seconds=0.5)
    assert steady() - start >= timedelta(seconds=70)


async def test_the_clock_forward_a_month_expires_nothing_until_a_restart_and_the_operator_is_told(
        make_ltm, origin, clock):
    mono = Monotonic()
    ltm = await make_ltm({"write_policy": {"mode": "auto"}}, name="c.db", clock_=SteadyClock(clock, mono))
    a = origin("alice")
    await ltm.turn(a, "I am migrating to API v2", "OK.",
                   {"fact": "Alice is migrating to API v2", "type": "task_state", "fact_key": "migration"})
    assert (await ltm.item()).ttl_days == 7

    clock.advance(days=31)  # the wall clock jumps a month
    mono.advance(hours=1)  # while an hour passes
    assert await ltm.engine.worker.sweep_expired() == 0
    assert (await ltm.item()).status == "active"
    status = await Commands(ltm.engine).status(origin("root", admin=True))
    assert "The system clock jumped by +31.0 d" in status
    events = await ltm.record(a, "still on it", "OK.")
    assert as_utc(events[0].created_at) - as_utc((await ltm.events())[0].created_at) < timedelta(hours=2)
    await ltm.engine.stop()

    # A restart trusts the wall clock: a month has passed, by its word.
    again = await make_ltm({"write_policy": {"mode": "auto"}}, name="c.db", clock_=SteadyClock(clock, mono))
    assert await again.engine.worker.sweep_expired() == 1
    assert "clock" not in " ".join(n.code for n in again.engine.notices())


async def test_the_clock_back_an_hour_makes_no_negative_duration_and_keeps_the_rate_limit(make_ltm, origin, clock):
    mono = Monotonic()
    ltm = await make_ltm({"write_policy": {"mode": "auto", "max_writes_per_hour": 2, "max_writes_per_session": 99},
                          "extraction": {"idle_seconds": 60}}, clock_=SteadyClock(clock, mono))
    a = origin("alice")
    facts = [{"fact": f"Alice likes fruit number {n}", "fact_key": f"fruit_{n}"} for n in range(2)]
    first, _ = await ltm.turn(a, "I like fruits", "OK.", *facts)

    clock.advance(hours=-1)
    mono.advance(minutes=1)
    second = await ltm.record(a, "and kiwis", "OK.")
    assert as_utc(second[0].created_at) >= as_utc(first[-1].created_at)  # turns keep their order
    # The conversation is not quiet yet: a minute passed, not minus an hour.
    assert await ltm.engine.worker.ready_scopes() == []
    mono.advance(minutes=2)
    clock.advance(minutes=2)
    assert await ltm.engine.worker.ready_scopes() == [ltm.engine.resolver.write_scope(a)]
    ltm.gateway.facts({"fact": "Alice likes kiwis", "fact_key": "kiwi"})
    await ltm.engine.worker.drain()
    assert len(await ltm.items(MemoryItem.status == "active")) == 2  # still within the hour: limited
    assert "-1.0 h" in " ".join(n.render() for n in ltm.engine.notices())

    clock.advance(days=31)  # forward a month: the hour's writes still count
    mono.advance(minutes=1)
    await ltm.turn(a, "and plums", "OK.", {"fact": "Alice likes plums", "fact_key": "plum"})
    assert len(await ltm.items(MemoryItem.status == "active")) == 2
