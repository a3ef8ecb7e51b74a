"""The background-task mechanism every loop uses (background.py): a failing
step is logged once and retried after a growing pause, never in a tight
loop; a wake runs the step at once; a stop ends a running step cleanly and
runs the owner's last work; a set stops every task even if one fails to."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from astrbot_plugin_ltm import background
from astrbot_plugin_ltm.background import BackgroundTask, Failure, TaskSet

LOGGER = "astrbot.plugin.astrbot_plugin_ltm"


async def until(condition, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.005)


@pytest.fixture
def short_backoff(monkeypatch):
    monkeypatch.setattr(background, "FIRST_BACKOFF", 0.05)
    monkeypatch.setattr(background, "MAX_BACKOFF", 0.2)


async def test_a_failing_step_is_logged_once_and_retried_after_a_growing_back_off(short_backoff, caplog):
    calls: list[float] = []

    async def step() -> None:
        calls.append(time.monotonic())
        if len(calls) <= 4:
            raise OSError("disk I/O error")

    task = BackgroundTask("flaky", step, run_at_start=True)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        task.start()
        await until(lambda: len(calls) == 5)
        await task.stop()
    gaps = [b - a for a, b in zip(calls, calls[1:], strict=False)]
    # 0.05 s, 0.1 s, 0.2 s, 0.2 s (the cap): retried, never in a tight loop
    assert all(gap >= pause * 0.95 for gap, pause in zip(gaps, (0.05, 0.1, 0.2, 0.2), strict=True)), gaps
    failed = [r for r in caplog.records if "flaky task failed" in r.getMessage()]
    assert len(failed) == 1 and failed[0].levelno == logging.ERROR and failed[0].exc_info is not None
    assert task.failures == 4
    assert any(r.getMessage() == "ltm: flaky task works again" for r in caplog.records)


async def test_a_known_failure_is_one_line_without_a_traceback_and_a_new_kind_is_logged_again(short_backoff, caplog):
    errors = [OSError("full"), OSError("full"), ValueError("other")]

    async def step() -> None:
        if errors:
            raise errors.pop(0)

    def explain(exc: Exception) -> Failure | None:
        return Failure("disk_full", "the disk is full", logging.ERROR) if isinstance(exc, OSError) else None

    task = BackgroundTask("writer", step, run_at_start=True, explain=explain)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        task.start()
        await until(lambda: not errors and task.failures == 3)
        await task.stop()
    lines = [r for r in caplog.records if r.getMessage().startswith("ltm: writer task")]
    assert [r.getMessage().split(";")[0] for r in lines] == ["ltm: writer task: the disk is full",
                                                             "ltm: writer task failed"]
    assert lines[0].exc_info is None and lines[1].exc_info is not None


async def test_a_wake_runs_the_step_now_instead_of_after_the_interval():
    calls = 0

    async def step() -> None:
        nonlocal calls
        calls += 1

    task = BackgroundTask("sleepy", step, every=3600.0)
    task.start()
    await asyncio.sleep(0.05)
    assert calls == 0  # waits its interval
    task.wake()
    await until(lambda: calls == 1)
    task.wake()
    await until(lambda: calls == 2)
    await task.stop()


async def test_a_wake_during_the_back_off_does_not_retry_early(monkeypatch):
    monkeypatch.setattr(background, "FIRST_BACKOFF", 0.3)
    calls: list[float] = []

    async def step() -> None:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise OSError("busy")

    task = BackgroundTask("patient", step, run_at_start=True)
    task.start()
    await until(lambda: task.failures == 1)
    for _ in range(5):
        task.wake()
        await asyncio.sleep(0.01)
    await until(lambda: len(calls) >= 2)  # the wakes are kept: the step runs again after the retry
    await task.stop()
    assert calls[1] - calls[0] >= 0.3 * 0.95


async def test_stop_during_a_step_ends_it_cleanly_and_runs_the_last_work(caplog):
    inside = asyncio.Event()
    finished = []

    async def step() -> None:
        inside.set()
        await asyncio.Event().wait()  # a step that would never end by itself

    async def finish() -> None:
        finished.append(True)

    task = BackgroundTask("long", step, run_at_start=True, finish=finish)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        task.start()
        await asyncio.wait_for(inside.wait(), 5)
        await task.stop()
    assert not task.running and finished == [True]
    assert task.failures == 0 and not caplog.records


async def test_stop_runs_the_last_work_of_a_task_never_started():
    finished = []

    async def finish() -> None:
        finished.append(True)

    task = BackgroundTask("idle", lambda: asyncio.sleep(0), finish=finish)
    await task.stop()
    assert finished == [True]


async def test_the_set_stops_every_task_even_if_one_stop_raises(caplog):
    finished: list[str] = []

    def make(name: str, fails: bool = False) -> BackgroundTask:
        async def finish() -> None:
            finished.append(name)
            if fails:
                raise RuntimeError("journal gone")

        return BackgroundTask(name, lambda: asyncio.sleep(0), every=3600.0, finish=finish)

    tasks = TaskSet(make("first"), make("broken", fails=True), make("last"))
    tasks.start()
    assert all(t.running for t in tasks.tasks)
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        await tasks.stop()
    assert finished == ["first", "broken", "last"]  # in the order given
    assert not any(t.running for t in tasks.tasks)
    assert any("stopping the broken task failed" in r.getMessage() for r in caplog.records)


async def test_the_engine_starts_and_stops_its_loops_as_one_set(make_ltm):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}}, start=False)
    await ltm.engine.start(background=True)
    names = [t.name for t in ltm.engine.tasks.tasks]
    assert names == ["relayout", "extraction", "summaries", "recorder", "usage", "drift", "compaction", "storage"]
    assert all(t.running for t in ltm.engine.tasks.tasks)
    await ltm.engine.stop()
    assert not any(t.running for t in ltm.engine.tasks.tasks)
