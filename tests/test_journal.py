"""The recorder's journal: a recorded turn survives the process dying
before the flusher wrote it; the replay at start writes each event once; the
journal holds only what SQLite may lack; a live process's journal is left
alone; a broken journal never breaks a hook or a start."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from astrbot_plugin_ltm.recording.journal import Journal, _try_lock
from astrbot_plugin_ltm.storing.tables import MemoryEvent
from tests.helpers import START

REPO = Path(__file__).resolve().parent.parent


def journal_of(ltm):
    journal = ltm.engine.recorder._journal
    assert journal is not None
    return journal


def crash(ltm) -> None:
    """What a SIGKILL leaves: the journal's files and no lock on them; the
    queue and anything not committed gone."""
    journal_of(ltm).close(delete=False)
    ltm.engine.recorder._queue.clear()


def files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


@pytest.fixture
def data_dir(tmp_path) -> Path:
    return tmp_path / "plugin-data"


@pytest.fixture
def make_journaled(make_ltm, data_dir):
    async def make(overrides=None, **kwargs):
        return await make_ltm({"write_policy": {"mode": "auto"}, **(overrides or {})}, name="shared.db",
                              data_dir=data_dir, **kwargs)

    return make


async def test_a_turn_recorded_before_a_crash_is_written_at_the_next_start(make_journaled, origin, data_dir):
    first = await make_journaled()
    a = origin("alice")
    turn = first.engine.record_turn(a, "I live in Paris", "Nice!")
    tool = first.engine.record_tool(a, "weather", {"city": "Paris"}, "sunny")
    assert await first.events() == []  # the flusher never ran
    crash(first)

    second = await make_journaled()
    stored = await second.events()
    assert [e.event_id for e in stored] == [turn[0].event_id, turn[1].event_id, tool.event_id]
    assert [(e.source_role, e.content) for e in stored] == [
        ("user", {"text": "I live in Paris"}), ("assistant", {"text": "Nice!"}),
        ("tool", {"tool": "weather", "args": {"city": "Paris"}, "result": "sunny"}),
    ]
    assert (stored[0].sender_id, stored[0].sender_name, stored[0].session_id) == ("alice", "Alice",
                                                                                 a.unified_msg_origin)
    assert stored[0].created_at == turn[0].created_at
    assert second.engine.recorder.replayed == 3
    # Replayed turns are searchable like any other: the keyword rows came too.
    block = await second.block(a, "Where do I live? Paris")
    assert "I live in Paris" in block.text
    # The dead journal is gone; only the new one's lock and open segment remain.
    assert [n for n in files(data_dir / "journal") if not n.startswith(journal_of(second).id)] == []


async def test_replay_writes_each_event_once_when_the_crash_came_after_the_commit(
        make_journaled, origin, monkeypatch):
    first = await make_journaled()
    events = first.engine.record_turn(origin("alice"), "I like green tea", "Try the tea house on Elm Street")
    # The commit happened, the segment's deletion did not.
    monkeypatch.setattr(journal_of(first), "committed", lambda: None)
    assert await first.engine.recorder.flush() == 2
    crash(first)
    monkeypatch.undo()

    second = await make_journaled()
    assert [e.event_id for e in await second.events()] == [e.event_id for e in events]
    assert second.engine.recorder.replayed == 0
    # the user's turn and the reply, indexed once
    assert await second.sql("SELECT count(*) FROM ltm_turn_terms") == [(2,)]


async def test_the_journal_holds_only_what_is_not_written_yet(make_journaled, origin, data_dir):
    ltm = await make_journaled()
    journal = journal_of(ltm)
    ltm.engine.record_turn(origin("alice"), "one", "1")
    ltm.engine.record_turn(origin("bob"), "two", "2")
    segment = data_dir / "journal" / f"{journal.id}.1.jsonl"
    lines = [json.loads(line) for line in segment.read_text().splitlines()]
    assert [line["content"]["text"] for line in lines] == ["one", "1", "two", "2"]

    assert await ltm.engine.recorder.flush() == 4
    assert files(data_dir / "journal") == [f"{journal.id}.2.jsonl", f"{journal.id}.lock"]
    assert (data_dir / "journal" / f"{journal.id}.2.jsonl").read_bytes() == b""

    ltm.engine.record_turn(origin("alice"), "three", "3")
    await ltm.engine.stop()  # the last flush, then nothing left to replay
    assert files(data_dir / "journal") == []
    assert len(await ltm.events()) == 6


async def test_events_of_a_failed_flush_stay_journaled_until_a_flush_commits(
        make_journaled, origin, monkeypatch, data_dir):
    first = await make_journaled()
    a = origin("alice")
    before = first.engine.record_turn(a, "I live in Paris", "Nice!")

    async def broken(session, batch):
        raise OSError("disk I/O error")

    monkeypatch.setattr(first.engine.recorder, "_insert", broken)
    with pytest.raises(OSError):
        await first.engine.recorder.flush()
    after = first.engine.record_turn(a, "and I like tea", "OK")
    with pytest.raises(OSError):
        await first.engine.recorder.flush()
    crash(first)
    monkeypatch.undo()

    second = await make_journaled()
    assert [e.event_id for e in await second.events()] == [e.event_id for e in before + after]


async def test_a_live_process_journal_is_not_replayed(make_journaled, data_dir):
    # Another process's recorder: its lock held, its turn not written yet.
    other = Journal(data_dir / "journal")
    other.open()
    other.append([MemoryEvent(scope="user", scope_id="qq:bob", source_type="message", source_role=role,
                              content={"text": text}, created_at=START) for role, text in
                  (("user", "hello"), ("assistant", "hi"))])

    second = await make_journaled()
    assert await second.events() == []
    assert (data_dir / "journal" / f"{other.id}.1.jsonl").exists()

    other.close(delete=False)  # it died
    third = await make_journaled()
    assert [e.content["text"] for e in await third.events()] == ["hello", "hi"]


def test_a_journal_lock_excludes_another_holder(tmp_path):
    path = tmp_path / "x.lock"
    with open(path, "ab") as held, open(path, "ab") as other:
        assert _try_lock(held)
        assert not _try_lock(other)
    with open(path, "ab") as after:
        assert _try_lock(after)


async def test_a_line_cut_short_by_the_crash_is_skipped_and_the_rest_replayed(
        make_journaled, origin, data_dir, caplog):
    first = await make_journaled()
    events = first.engine.record_turn(origin("alice"), "I live in Paris", "Nice!")
    segment = data_dir / "journal" / f"{journal_of(first).id}.1.jsonl"
    crash(first)
    with open(segment, "ab") as f:
        f.write(b'{"event_id":"cut-sh')

    second = await make_journaled()
    assert [e.event_id for e in await second.events()] == [e.event_id for e in events]
    assert "unreadable line in the journal" in caplog.text


async def test_a_journal_is_kept_while_emergency_read_only_is_on(make_journaled, origin):
    first = await make_journaled()
    events = first.engine.record_turn(origin("alice"), "I live in Paris", "Nice!")
    crash(first)

    read_only = await make_journaled({"emergency_read_only": True})
    assert await read_only.events() == []
    assert read_only.engine.recorder.replayed == 0
    await read_only.engine.stop()

    writable = await make_journaled()
    assert [e.event_id for e in await writable.events()] == [e.event_id for e in events]


async def test_a_failing_journal_never_fails_the_hook(make_journaled, origin, monkeypatch, caplog):
    ltm = await make_journaled()

    def full(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    events = ltm.engine.record_turn(origin("alice"), "I live in Paris", "Nice!")
    monkeypatch.undo()
    assert ltm.engine.recorder.journal_failures == 1
    assert "not journaled" in caplog.text
    assert await ltm.engine.recorder.flush() == 2  # recorded all the same
    assert [e.event_id for e in await ltm.events()] == [e.event_id for e in events]


async def test_an_explicit_request_journaled_before_a_crash_becomes_a_memory(make_journaled, origin):
    first = await make_journaled()
    first.engine.record_turn(origin("alice"), "Remember that I am allergic to peanuts", "I will.")
    crash(first)

    second = await make_journaled()
    (item,) = await second.items()
    assert "allergic to peanuts" in item.fact and item.status == "active"


async def test_without_a_data_directory_nothing_is_journaled(ltm, origin):
    assert ltm.engine.recorder._journal is None
    ltm.engine.record_turn(origin("alice"), "hello", "hi")
    assert await ltm.engine.recorder.flush() == 2


CHILD = textwrap.dedent("""
    import asyncio, os, signal, sys
    from sqlalchemy.ext.asyncio import create_async_engine
    from astrbot_plugin_ltm import LTMEngine, Origin

    async def main(db, data, n):
        engine = LTMEngine(create_async_engine(f"sqlite+aiosqlite:///{db}"), {}, data_dir=data)
        await engine.start(background=True)
        for i in range(n):
            user = f"user{i % 10}"
            origin = Origin("qq", f"qq:FriendMessage:{user}", user, user)
            engine.record_turn(origin, f"turn {i} from {user}", f"reply {i}")
            print(i, flush=True)  # acknowledged: the hook has returned
            if i % 7 == 0:
                await asyncio.sleep(0.002)  # let the flusher write some of them
        os.kill(os.getpid(), signal.SIGKILL)

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
""")


async def test_turns_acknowledged_before_a_sigkill_are_all_written_at_the_next_start(make_journaled, tmp_path,
                                                                                     data_dir):
    db = tmp_path / "shared.db"
    setup = await make_journaled()  # the schema
    await setup.engine.stop()
    child = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", CHILD, str(db), str(data_dir), "200"],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr
    acknowledged = [int(line) for line in child.stdout.split()]
    assert len(acknowledged) == 200

    after = await make_journaled()
    stored = [e.content["text"] for e in await after.events()]
    expected = [text for i in acknowledged for text in (f"turn {i} from user{i % 10}", f"reply {i}")]
    assert sorted(stored) == sorted(expected)  # every one, none twice
    assert after.engine.recorder.replayed >= 2  # the last turn at least: no await came after it
