"""A full disk (issue 29, docs/faults.md): while recording, extracting,
writing vectors and exporting. No hook raises, no acknowledged turn is
lost (the journal holds it until there is space again), the log says it
in a line and ``/ltm status`` and the stats API say it to the operator.

The disk fills without a small filesystem of its own, so the tests run
anywhere (CI may not mount): SQLite's ``PRAGMA max_page_count`` on every
connection the engine writes through gives SQLITE_FULL exactly as a full
disk does, and an ``OSError(ENOSPC)`` is raised where the plugin writes a
file itself (the journal, a FAISS file)."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import sqlite3
import statistics
import time
from pathlib import Path

import pytest
from sqlalchemy import event

from astrbot_plugin_ltm.background import FIRST_BACKOFF
from astrbot_plugin_ltm.config import ExtractionConfig
from astrbot_plugin_ltm.doors.commands import Commands
from astrbot_plugin_ltm.indexes import faiss_files
from devtools.exports import reseal
from tests.helpers import HashEmbedder

# Namespaces of these tests are small: kept in files all the same (conftest.namespace_files).
pytestmark = pytest.mark.usefixtures("namespace_files")

NO_LIMIT = 1073741823  # SQLite's default max_page_count


class DiskLimit:
    """The database file may grow no further while ``full``: SQLite's
    max_page_count, set on each connection as the pool hands it out, on
    AstrBot's engine and on the plugin's own for write batches (a full disk
    is full for every connection)."""

    def __init__(self, ltm) -> None:
        self.path = ltm.path
        self.pages = NO_LIMIT
        event.listen(ltm.engine.db.sql_engine.sync_engine, "checkout", self._apply)
        event.listen(ltm.engine.db.batch_engine.sync_engine, "checkout", self._apply)

    def _apply(self, dbapi_connection, _record, _proxy) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA max_page_count = {self.pages}")
        cursor.close()

    def fill(self) -> None:
        with sqlite3.connect(self.path) as conn:
            # No free page left inside the file either (a migration drops tables): every write needs a new one.
            conn.execute("VACUUM")
            self.pages = conn.execute("PRAGMA page_count").fetchone()[0]

    def free(self) -> None:
        self.pages = NO_LIMIT


def enospc(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def long_turn(n: int) -> str:
    return f"turn {n}: I keep a diary of every walk along the river, " + "step by step " * 150


def segments(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "journal").glob("*.jsonl"))


def journaled_ids(data_dir: Path) -> set[str]:
    return {json.loads(line)["event_id"] for path in segments(data_dir)
            for line in path.read_bytes().splitlines() if line.strip()}


async def status_of(ltm, origin) -> str:
    return await Commands(ltm.engine).status(origin("root", admin=True))


async def test_a_full_disk_while_recording_keeps_every_acknowledged_turn_and_writes_it_once_space_returns(
        make_ltm, origin, tmp_path, api_of, caplog):
    data_dir = tmp_path / "data"
    ltm = await make_ltm({"write_policy": {"mode": "auto"}}, data_dir=data_dir)
    disk = DiskLimit(ltm)
    disk.fill()

    said, hook_us = [], []
    for n in range(60):
        started = time.perf_counter()
        said += ltm.engine.record_turn(origin("alice"), long_turn(n), "Noted.")  # never raises
        hook_us.append((time.perf_counter() - started) * 1e6)
    print(f"\nhook while the disk is full: median {statistics.median(hook_us):.0f} µs, max {max(hook_us):.0f} µs")

    started = time.monotonic()
    ltm.engine.recorder.task.start()  # the flusher, as in AstrBot: it retries with a growing pause
    await _wait(lambda: "the disk is full" in caplog.text, 5)
    await _sleep(1.6)
    attempts = ltm.engine.recorder.task.failures
    print(f"\nflusher tries {attempts} in {time.monotonic() - started:.2f} s")
    # no tight loop: pauses of 0.5 s, 1 s, 2 s … allow at most this many tries in the time that passed
    assert 1 <= attempts <= tries_allowed(time.monotonic() - started), attempts
    assert caplog.text.count("the disk is full;") == 1  # one line while it lasts (docs/decisions.md#d104)
    assert "Traceback" not in caplog.text
    async with ltm.engine.recorder._flushing:  # between two of the flusher's attempts
        assert ltm.engine.recorder.queued == len(said) and await ltm.events() == []
    assert journaled_ids(data_dir) == {e.event_id for e in said}  # crash-safe all the while

    status = await status_of(ltm, origin)
    assert "The disk is full: 120 recorded turn event(s) wait" in status
    stats = await api_of(ltm).ok("stats", {"lang": "zh"})
    assert [n["code"] for n in stats["notices"] if n["code"].startswith("fault.")] == ["fault.disk_full"]
    assert "磁盘已满" in stats["notices"][-1]["message"]

    disk.free()
    await _wait(lambda: ltm.events(), 10)  # written at the flusher's next attempt
    stored = await ltm.events()
    assert [e.event_id for e in stored] == [e.event_id for e in said]  # each once, in order
    assert journaled_ids(data_dir) == set()
    assert "disk is full" not in await status_of(ltm, origin)


async def test_turns_journaled_while_the_disk_was_full_are_written_after_a_crash_and_restart(
        make_ltm, origin, tmp_path):
    data_dir = tmp_path / "data"
    first = await make_ltm({"write_policy": {"mode": "auto"}}, name="shared.db", data_dir=data_dir)
    disk = DiskLimit(first)
    disk.fill()
    said = first.engine.record_turn(origin("alice"), long_turn(1), "Noted.")
    for n in range(2, 40):
        said += first.engine.record_turn(origin("alice"), long_turn(n), "Noted.")
    with pytest.raises(Exception, match="full"):
        await first.engine.recorder.flush()
    # The process dies while the disk is full: what a SIGKILL leaves.
    first.engine.recorder._journal.close(delete=False)
    first.engine.recorder._queue.clear()

    second = await make_ltm({"write_policy": {"mode": "auto"}}, name="shared.db", data_dir=data_dir)
    assert [e.event_id for e in await second.events()] == [e.event_id for e in said]
    assert second.engine.recorder.replayed == len(said)


async def test_a_journal_write_cut_by_a_full_disk_never_fails_the_hook_and_is_shown(
        make_ltm, origin, tmp_path, monkeypatch):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}}, data_dir=tmp_path / "data")
    monkeypatch.setattr(os, "write", enospc)
    events = ltm.engine.record_turn(origin("alice"), "I live in Paris", "Nice!")
    monkeypatch.undo()
    assert "No space left on device" in await status_of(ltm, origin)
    assert await ltm.engine.recorder.flush() == 2
    assert [e.event_id for e in await ltm.events()] == [e.event_id for e in events]
    ltm.engine.record_turn(origin("alice"), "and now in Lyon", "Nice!")  # the journal works again
    assert "journal cannot be written" not in await status_of(ltm, origin)


async def test_a_full_disk_while_extracting_leaves_the_events_pending_and_calls_the_model_no_more(
        make_ltm, origin, api_of, monkeypatch):
    monkeypatch.setattr(ExtractionConfig, "max_fact_chars", 2000)
    ltm = await make_ltm({"write_policy": {"mode": "auto"}, "extraction": {"backoff_seconds": 60}})
    a = origin("alice")
    events = await ltm.record(a, "I am a nurse in Lyon", "Nice!")
    disk = DiskLimit(ltm)
    disk.fill()
    # A long fact: its rows need pages the full file cannot add.
    nurse = {"fact": "Alice is a nurse in Lyon, " + "on the night shift at the children's hospital, " * 30,
             "type": "profile", "fact_key": "job"}
    ltm.gateway.default = ltm.gateway.facts_json(nurse)
    for _ in range(5):
        results = await ltm.engine.worker.drain()  # never raises
        assert not any(r.ok for r in results)
    assert len(ltm.gateway.calls) == 1  # held back for its backoff, not asked every poll
    stored = await ltm.events()
    assert [(e.event_id, e.extraction_status) for e in stored] == [(e.event_id, "pending") for e in events]
    assert await ltm.items() == []
    stats = await api_of(ltm).ok("stats", {})
    (fault,) = [n for n in stats["notices"] if n["code"] == "fault.extraction"]
    assert "full" in fault["message"] and "retried at" in fault["message"]

    disk.free()
    ltm.clock.advance(seconds=61)
    assert any(r.ok for r in await ltm.engine.worker.drain())
    assert [i.fact_key for i in await ltm.items()] == ["job"]
    assert {e.extraction_status for e in await ltm.events()} == {"done"}
    assert not [n for n in (await api_of(ltm).ok("stats", {}))["notices"] if n["code"] == "fault.extraction"]


async def test_a_full_disk_while_writing_vectors_keeps_search_by_meaning_and_fills_in_later(
        make_ltm, origin, tmp_path, monkeypatch):
    data_dir = tmp_path / "data"
    # 4096 dimensions: a vector (int8) takes a page of its own, so a full file cannot hold it
    ltm = await make_ltm({"write_policy": {"mode": "auto"}}, name="v.db", embedder=HashEmbedder(4096),
                         data_dir=data_dir)
    a = origin("alice")
    scope = ltm.engine.resolver.user_scope(a)
    # The FAISS files cannot be written: the namespace lives on in memory.
    write_index = faiss_files.faiss.write_index
    monkeypatch.setattr(faiss_files.faiss, "write_index", enospc)
    await ltm.engine.remember(a, "I enjoy hiking in the mountains")
    assert await ltm.engine.worker.fill_vectors() == 2
    hits = (await ltm.engine.embeddings.query([scope], "mountains hiking", 5)).memories
    assert len(hits) == 1
    assert "Vector index files cannot be written" in await status_of(ltm, origin)
    assert not list((data_dir / "vectors").glob("*.tmp"))  # nothing half-written left behind

    # The database is full too: the fill waits, reads go on by keywords.
    disk = DiskLimit(ltm)
    await ltm.engine.remember(a, "My sister lives by the sea")
    disk.fill()
    assert await ltm.engine.worker.fill_vectors() == 0  # no exception: the fill waits for space
    block = await ltm.block(a, "sister sea")
    assert "Alice's sister lives by the sea" in block.text
    disk.free()
    assert await ltm.engine.worker.fill_vectors() == 2  # the memory and its turn
    hits = (await ltm.engine.embeddings.query([scope], "sister by the sea", 5)).memories
    assert len(hits) == 2
    await ltm.engine.stop()  # a namespace that cannot be written never fails the stop
    monkeypatch.setattr(faiss_files.faiss, "write_index", write_index)

    again = await make_ltm({"write_policy": {"mode": "auto"}}, name="v.db", embedder=HashEmbedder(4096),
                           data_dir=data_dir)
    hits = (await again.engine.embeddings.query([scope], "sister by the sea", 5)).memories
    assert len(hits) == 2  # rebuilt from the database
    assert list((data_dir / "vectors").glob("*.faiss"))


async def test_exporting_on_a_full_disk_works_and_a_write_there_is_refused_clearly(make_ltm, origin, api_of,
                                                                                   monkeypatch):
    monkeypatch.setattr(ExtractionConfig, "max_fact_chars", 2000)
    ltm = await make_ltm({"write_policy": {"mode": "auto"}})
    await ltm.engine.remember(origin("alice"), "I enjoy hiking in the mountains")
    api = api_of(ltm)
    disk = DiskLimit(ltm)
    disk.fill()
    answer = await api.api.export_file({})
    assert answer.status == 200 and b"hiking in the mountains" in answer.file
    before = await ltm.table_snapshot()
    document = (await api.ok("export", {}))["items"][0]
    document = {**document, "memory_id": "0" * 32, "fact": "Alice enjoys sailing on the lake " * 40,
                "fact_key": "sailing"}
    body = json.dumps(reseal({**(await api.ok("export", {})), "items": [document]})).encode()
    message = await api.err(507, "import_", body, {}, "root")
    assert "disk is full" in message and "Traceback" not in message
    assert await ltm.table_snapshot() == before
    commands = Commands(ltm.engine)
    try:  # as main.py's command handler does
        remembered = await commands.remember(origin("alice"), "I grow tomatoes on the balcony " * 50)
    except Exception as exc:
        remembered = commands.failed(exc)
    assert "disk is full" in remembered and "SQL" not in remembered and "sqlite" not in remembered.lower()


async def _wait(condition, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not ((await found) if asyncio.iscoroutine(found := condition()) else found):
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def tries_allowed(elapsed: float) -> int:
    """How many tries a pause doubling from FIRST_BACKOFF leaves room for in ``elapsed`` seconds."""
    tries, at, pause = 1, 0.0, FIRST_BACKOFF
    while at + pause <= elapsed:
        tries, at, pause = tries + 1, at + pause, pause * 2
    return tries


async def _sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


def test_the_disk_limit_is_sqlites_own_full_error(tmp_path):
    """The stand-in is the real error: SQLite answers SQLITE_FULL ("database
    or disk is full") when max_page_count stops the file growing, as it does
    when the filesystem does."""
    path = tmp_path / "x.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x TEXT)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(sqlite3.OperationalError, match="database or disk is full"):
            conn.executemany("INSERT INTO t VALUES (?)", [("x" * 1000,)] * 100)


async def test_a_journal_segment_that_cannot_be_created_at_a_flush_fails_neither_the_flush_nor_a_turn(
        make_ltm, origin, tmp_path, monkeypatch):
    data_dir = tmp_path / "data"
    ltm = await make_ltm({"write_policy": {"mode": "auto"}}, data_dir=data_dir)
    a = origin("alice")
    ltm.engine.record_turn(a, "I live in Paris", "Nice!")
    real_open = os.open

    def no_new_file(path, flags, *args, **kwargs):
        if str(path).endswith(".jsonl"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", no_new_file)
    assert await ltm.engine.recorder.flush() == 2  # the seal could not open the next segment
    ltm.engine.record_turn(a, "I moved to Lyon", "Nice!")  # not journaled, still recorded
    assert ltm.engine.recorder.journal_failures == 1
    monkeypatch.undo()
    third = ltm.engine.record_turn(a, "and then to Nice", "Nice!")  # a segment is opened again
    assert journaled_ids(data_dir) == {e.event_id for e in third}
    assert await ltm.engine.recorder.flush() == 4
    assert len(await ltm.events()) == 6
