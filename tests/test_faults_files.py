"""Damaged or unwritable files (issue 29, docs/faults.md): a corrupt or
truncated FAISS file, journal or export; a journal from a newer or an
older version; the plugin's data directory read-only. Each is recovered
or refused clearly, and none stops a start."""

from __future__ import annotations

import builtins
import errno
import json
import os
from pathlib import Path

import pytest

from astrbot_plugin_ltm.doors.commands import Commands
from astrbot_plugin_ltm.indexes import faiss_files
from astrbot_plugin_ltm.recording.journal import KEPT_SUFFIX, encode
from tests.helpers import HashEmbedder

# Namespaces of these tests are small: kept in files all the same (conftest.namespace_files).
pytestmark = pytest.mark.usefixtures("namespace_files")


@pytest.fixture
def data_dir(tmp_path) -> Path:
    return tmp_path / "plugin-data"


@pytest.fixture
def make_engine(make_ltm, data_dir):
    async def make(**kwargs):
        return await make_ltm({"write_policy": {"mode": "auto"}}, name="shared.db", data_dir=data_dir,
                              embedder=HashEmbedder(model_id="hash"), **kwargs)  # the files looked for are named by it

    return make


async def status_of(ltm, origin) -> str:
    return await Commands(ltm.engine).status(origin("root", admin=True))


async def by_meaning(ltm, origin, text: str) -> dict[int, float]:
    return (await ltm.engine.embeddings.query([ltm.engine.resolver.user_scope(origin)], text, 5,
                                              )).memories


@pytest.mark.parametrize("damage", ["truncated", "empty", "garbage"])
async def test_a_damaged_faiss_file_is_rebuilt_from_the_database_at_start(make_engine, origin, data_dir, damage):
    first = await make_engine()
    a = origin("alice")
    await first.engine.remember(a, "I enjoy hiking in the mountains")
    await first.engine.worker.fill_vectors()
    expected = await by_meaning(first, a, "mountains hiking")
    await first.engine.stop()
    files = list((data_dir / "vectors").glob("*.faiss"))
    assert files
    for path in files:
        raw = path.read_bytes()
        path.write_bytes({"truncated": raw[: len(raw) // 2], "empty": b"", "garbage": os.urandom(len(raw))}[damage])

    second = await make_engine()
    await second.engine.vector_index.namespace(second.engine.resolver.user_scope(a), "hash")
    assert await by_meaning(second, a, "mountains hiking") == pytest.approx(expected, abs=1e-3)


def orphan_segment(journal: Path, owner: str, lines: list[bytes]) -> Path:
    """A dead process's journal segment (no lock held on it)."""
    journal.mkdir(parents=True, exist_ok=True)
    path = journal / f"{owner}.1.jsonl"
    path.write_bytes(b"".join(lines))
    return path


async def a_turn(ltm, origin, text: str):
    """The events of a turn as the recorder makes them, not recorded."""
    events = ltm.engine.recorder.record_turn(origin("alice"), text, "Nice!")
    ltm.engine.recorder._queue.clear()
    return events


async def test_a_journal_from_a_newer_version_is_kept_aside_and_the_rest_replayed(
        make_engine, origin, data_dir, caplog):
    maker = await make_engine()
    old = await a_turn(maker, origin, "I live in Paris")
    newer = await a_turn(maker, origin, "I moved to Lyon")
    await maker.engine.stop()
    journal = data_dir / "journal"
    for path in journal.iterdir():
        path.unlink()
    ours = orphan_segment(journal, "111-1", [encode(old)])
    # A newer plugin wrote format 2 (a downgrade left it behind): never guessed at.
    lines = [json.dumps({**json.loads(line), "v": 2, "shape": "new"}).encode() + b"\n"
             for line in encode(newer).splitlines()]
    theirs = orphan_segment(journal, "222-2", lines)
    # An older plugin wrote lines with no format number: this format.
    older = await a_turn(maker, origin, "I have a cat")
    unnumbered = [json.dumps({k: v for k, v in json.loads(line).items() if k != "v"}).encode() + b"\n"
                  for line in encode(older).splitlines()]
    before = orphan_segment(journal, "333-3", unnumbered)

    ltm = await make_engine()
    stored = {e.event_id for e in await ltm.events()}
    assert stored == {e.event_id for e in old + older}
    assert not ours.exists() and not before.exists()
    assert not theirs.exists() and theirs.with_name(theirs.name + KEPT_SUFFIX).exists()  # kept for the newer version
    assert "a journal line of format 2" in caplog.text
    assert "1 journal file(s) could not be read by this version" in await status_of(ltm, origin)


async def test_a_garbage_journal_file_is_kept_aside_and_never_stops_a_start(make_engine, origin, data_dir):
    maker = await make_engine()
    await maker.engine.stop()
    journal = data_dir / "journal"
    junk = orphan_segment(journal, "444-4", [os.urandom(300), b"\n", b"{not json}\n", b'{"v":1}\n'])
    ltm = await make_engine()
    assert ltm.engine.started
    assert junk.with_name(junk.name + KEPT_SUFFIX).exists()
    ltm.engine.record_turn(origin("alice"), "I live in Paris", "Nice!")
    assert await ltm.engine.recorder.flush() == 2


@pytest.mark.parametrize("damage", ["truncated", "a changed fact", "not JSON", "empty"])
async def test_a_damaged_export_is_refused_with_a_reason_and_changes_nothing(make_ltm, origin, api_of, damage):
    source = await make_ltm({"write_policy": {"mode": "auto"}})
    await source.engine.remember(origin("alice"), "I enjoy hiking in the mountains")
    exported = (await api_of(source).api.export_file({})).file
    assert exported
    raw = {
        "truncated": exported[: len(exported) * 2 // 3],
        "a changed fact": exported.replace(b"hiking", b"diving"),
        "not JSON": b"\x89PNG\r\n\x1a\n" + os.urandom(64),
        "empty": b"",
    }[damage]
    target = await make_ltm({"write_policy": {"mode": "auto"}})
    before = await target.table_snapshot()
    message = await api_of(target).err(400, "import_", raw, {}, "root")
    assert message and "Traceback" not in message
    assert await target.table_snapshot() == before


class ReadOnly:
    """The plugin's data directory on a read-only filesystem: every file
    the plugin would create or change there fails with EROFS. Injected at
    the calls the plugin writes through, so the test runs as root and in
    CI alike (chmod does not stop root)."""

    def __init__(self, monkeypatch, directory: Path) -> None:
        self.directory = str(directory)
        real_open, real_os_open, real_mkdir = builtins.open, os.open, os.mkdir
        real_write_index, real_replace, real_unlink = faiss_files.faiss.write_index, os.replace, os.unlink

        def refused(path) -> bool:
            return str(path).startswith(self.directory)

        def erofs(path):
            return OSError(errno.EROFS, "Read-only file system", str(path))

        def open_(file, mode="r", *args, **kwargs):
            if refused(file) and any(c in mode for c in "wax+"):
                raise erofs(file)
            return real_open(file, mode, *args, **kwargs)

        def os_open(path, flags, *args, **kwargs):
            if refused(path) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
                raise erofs(path)
            return real_os_open(path, flags, *args, **kwargs)

        def guard(real):
            def call(path, *args, **kwargs):
                if refused(path):
                    raise erofs(path)
                return real(path, *args, **kwargs)
            return call

        monkeypatch.setattr(builtins, "open", open_)
        monkeypatch.setattr(os, "open", os_open)
        monkeypatch.setattr(os, "mkdir", guard(real_mkdir))
        monkeypatch.setattr(os, "replace", guard(real_replace))
        monkeypatch.setattr(os, "unlink", guard(real_unlink))
        monkeypatch.setattr(faiss_files.faiss, "write_index", lambda index, path: real_write_index(
            index, path) if not refused(path) else (_ for _ in ()).throw(erofs(path)))


async def test_a_read_only_plugin_directory_never_stops_a_start_and_memory_works_on(
        make_engine, origin, data_dir, monkeypatch):
    a = origin("alice")
    first = await make_engine()
    said = first.engine.record_turn(a, "I live in Paris", "Nice!")
    first.engine.recorder._journal.close(delete=False)  # a crash left a journal behind
    first.engine.recorder._queue.clear()

    ReadOnly(monkeypatch, data_dir)
    ltm = await make_engine()
    assert ltm.engine.started
    # The crash's journal cannot be locked or removed here: it waits, whole, for a writable start.
    assert not {e.event_id for e in said} & {e.event_id for e in await ltm.events()}
    more = ltm.engine.record_turn(a, "I enjoy hiking in the mountains", "Nice!")  # the hook never raises
    assert await ltm.engine.recorder.flush() == 2
    assert {e.event_id for e in more} <= {e.event_id for e in await ltm.events()}
    await ltm.engine.remember(a, "I enjoy hiking in the mountains")
    await ltm.engine.worker.fill_vectors()
    assert await by_meaning(ltm, a, "mountains hiking")  # held in memory
    status = await status_of(ltm, origin)
    assert "The journal in" in status and "cannot be opened" in status and "Read-only file system" in status
    assert "Vector index files cannot be written" in status
    await ltm.engine.stop()  # never raises

    monkeypatch.undo()
    again = await make_engine()  # writable again: the crash's journal is replayed, nothing twice
    ids = [e.event_id for e in await again.events()]
    assert {e.event_id for e in said + more} <= set(ids) and len(ids) == len(set(ids))
    assert again.engine.recorder.replayed == 2
