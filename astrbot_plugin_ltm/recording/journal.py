"""The recorder's journal: every queued event is appended to a file before
the hook returns, so a turn whose reply went out survives a crash of the
process (docs/decisions.md#d33).

A journal holds what SQLite may not have yet and no more; at start, the
journals nobody holds any longer (their process died) are replayed by event
id and deleted. A returned ``write()`` survives the process being killed,
not a power loss, which would need an fsync per turn (measured in D33).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from pathlib import Path
from typing import IO, Any

from ..enums import ExtractionStatus
from ..logs import log
from ..storing.tables import MemoryEvent

# A line of a newer format (a downgrade) is never guessed at: its file is kept
# for the newer version to replay (docs/decisions.md#d92).
VERSION = 1
KEPT_SUFFIX = ".unreadable"
# What a journal line holds of an event: everything the recorder sets.
FIELDS = ("event_id", "scope", "scope_id", "source_type", "source_role", "content",
          "platform_id", "session_id", "sender_id", "sender_name")


def _not_json(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# One C encoder made once: json.dumps builds one per call, a third of the hook's
# journal cost (docs/decisions.md#d95, #d129). No cycle check: a turn's values hold none.
_chunks: Callable[[dict[str, Any], int], Iterable[str]] = (
    c_make_encoder(None, _not_json, encode_basestring, None, ":", ",", False, False, True)
    if c_make_encoder is not None else
    lambda record, _level: (json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode(record),))


def encode(events: Iterable[MemoryEvent]) -> bytes:
    lines: list[str] = []
    for event in events:
        # The values as the recorder put them, without the ORM's descriptor per field.
        values = event.__dict__
        record: dict[str, Any] = {"v": VERSION}
        for name in FIELDS:
            record[name] = values[name] if name in values else getattr(event, name)
        record["created_at"] = event.created_at.isoformat()
        if event.extraction_status != ExtractionStatus.PENDING:  # said while the scope's writes were off
            record["extraction_status"] = event.extraction_status
        lines.extend(_chunks(record, 0))
        lines.append("\n")
    return "".join(lines).encode()


def decode(line: bytes) -> MemoryEvent:
    """Raises ValueError (or KeyError, TypeError) on a line that is not a
    whole event: the tail of a write cut short by the crash."""
    record = json.loads(line)
    if not isinstance(record, dict):
        raise ValueError("not an event")
    version = record.get("v", VERSION)
    if not isinstance(version, int) or version > VERSION:
        raise NewerFormat(f"a journal line of format {version!r}; this version reads {VERSION}")
    if not isinstance(record.get("content"), dict):
        raise ValueError("not an event")
    values = {name: record[name] for name in FIELDS}
    status = ExtractionStatus.SKIPPED if record.get("extraction_status") == "skipped" else ExtractionStatus.PENDING
    return MemoryEvent(**values, created_at=datetime.fromisoformat(record["created_at"]), extraction_status=status)


class NewerFormat(ValueError):
    """A journal line written by a newer version of the plugin."""


def _try_lock(handle: IO[bytes]) -> bool:
    """An exclusive lock on an open file, without waiting; released when the
    file is closed or its process dies, however it dies."""
    if sys.platform == "win32":
        # No flock: a single AstrBot per data directory is assumed, so any
        # journal but one's own is a dead process's.
        return True
    import fcntl

    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@dataclass
class Orphan:
    """A dead recorder's journal: its events, and what to delete once they
    are in SQLite."""

    events: list[MemoryEvent] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    # Segments with lines this version cannot read (a newer format, damage
    # beyond a last line cut short): renamed, never deleted.
    kept: list[Path] = field(default_factory=list)
    lock: IO[bytes] | None = None  # held until the files are deleted

    def release(self, delete: bool) -> None:
        if delete:
            for path in self.files:
                try:
                    if path in self.kept:
                        path.replace(path.with_name(path.name + KEPT_SUFFIX))
                    else:
                        path.unlink(missing_ok=True)
                except OSError as exc:  # a read-only directory: replayed again (by event id) next start
                    log.warning("ltm: the replayed journal file %s cannot be removed (%s)", path.name, exc)
        if self.lock is not None:
            self.lock.close()
            self.lock = None


class Journal:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.id = f"{os.getpid()}-{time.time_ns()}"
        self._lock: IO[bytes] | None = None
        self._fd: int | None = None  # the open segment
        self._segment = 0
        self._written = False  # anything in the open segment
        self._sealed: list[Path] = []  # sealed segments whose batch has not committed yet

    # -- lifecycle -----------------------------------------------------------

    def open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        lock = open(self.directory / f"{self.id}.lock", "ab")  # noqa: SIM115 (held for the journal's life)
        if not _try_lock(lock):  # a fresh name: cannot happen but by a clash of ids
            lock.close()
            raise RuntimeError(f"ltm: journal {self.id} is held by another process")
        self._lock = lock
        self._open_segment()

    def _segment_path(self, n: int) -> Path:
        return self.directory / f"{self.id}.{n}.jsonl"

    def _open_segment(self) -> None:
        self._segment += 1
        self._fd = os.open(self._segment_path(self._segment), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._written = False

    @property
    def is_open(self) -> bool:
        """Journaling: opened and not closed (its open segment may be
        missing for a while: the next append opens one)."""
        return self._lock is not None

    def close(self, delete: bool) -> None:
        """Stop journaling. ``delete``: everything journaled is in SQLite, so
        remove the files; else leave them for the next start to replay."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if delete:
            try:
                for path in [*self._sealed, self._segment_path(self._segment)]:
                    path.unlink(missing_ok=True)
                (self.directory / f"{self.id}.lock").unlink(missing_ok=True)
            except OSError as exc:  # replayed (and found written) at the next start
                log.warning("ltm: the journal %s cannot be removed (%s)", self.id, exc)
            self._sealed = []
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    # -- the hot path ----------------------------------------------------------

    def append(self, events: list[MemoryEvent]) -> None:
        """One ``write()`` of the events' lines (a turn's two events land
        together or not at all). Raises OSError."""
        if self._lock is None:
            raise OSError("the journal is not open")
        if self._fd is None:  # a new segment could not be opened at the last seal (a full disk)
            self._open_segment()
        fd = self._fd
        assert fd is not None  # opened, or _open_segment raised
        data = encode(events)
        written = os.write(fd, data)
        if written != len(data):  # a short write to a regular file: the disk is full
            raise OSError(f"journal write cut short ({written} of {len(data)} bytes)")
        self._written = True

    # -- the flusher -------------------------------------------------------------

    def seal(self) -> None:
        """The queue is being taken: what was journaled belongs to that batch; new events go to a new segment."""
        if self._fd is None or not self._written:
            return
        os.close(self._fd)
        self._fd = None
        self._sealed.append(self._segment_path(self._segment))
        try:
            self._open_segment()
        except OSError as exc:  # never fails the flush: the next append tries again
            log.warning("ltm: a new journal segment cannot be opened (%s)", exc)

    def committed(self) -> None:
        """Every sealed segment's events are in SQLite (or were refused by the
        read-only switch, as they would have been without a journal)."""
        for path in self._sealed:
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:  # what it holds is in SQLite: a replay would find every event there
                log.warning("ltm: the written journal segment %s cannot be removed (%s)", path.name, exc)
        self._sealed = []

    # -- start-up ------------------------------------------------------------------

    def orphans(self) -> list[Orphan]:
        """The journals of recorders that are gone, read and locked: each is
        replayed by one process only."""
        if not self.directory.is_dir():
            return []
        by_id: dict[str, list[Path]] = {}
        # Segments first, then their locks: a recorder takes its lock before
        # its first segment and deletes its segments before its lock.
        for path in sorted(self.directory.glob("*.jsonl")):
            owner = path.name.split(".", 1)[0]
            if owner != self.id:
                by_id.setdefault(owner, []).append(path)
        for lock_path in self.directory.glob("*.lock"):  # a dead recorder's lock with no segments left
            owner = lock_path.name.split(".", 1)[0]
            if owner != self.id:
                by_id.setdefault(owner, [])
        found = []
        for owner, segments in by_id.items():
            lock_path = self.directory / f"{owner}.lock"
            lock: IO[bytes] | None = None
            if lock_path.exists():
                lock = open(lock_path, "ab")  # noqa: SIM115 (handed to the Orphan)
                if not _try_lock(lock):
                    lock.close()
                    continue  # its recorder is alive
            orphan = Orphan(files=[*sorted(segments, key=_segment_number), lock_path], lock=lock)
            for segment in orphan.files[:-1]:
                self._read(segment, orphan)
            found.append(orphan)
        return found

    @staticmethod
    def _read(path: Path, orphan: Orphan) -> None:
        try:
            data = path.read_bytes()
        except FileNotFoundError:  # another process replayed it meanwhile
            return
        lines = data.split(b"\n")
        for n, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                orphan.events.append(decode(line))
            except (ValueError, KeyError, TypeError) as exc:
                # Only the last line, with no newline after it, can be a
                # write the crash cut short; anything else is kept.
                cut_short = n == len(lines) - 1 and not isinstance(exc, NewerFormat)
                if not cut_short and path not in orphan.kept:
                    orphan.kept.append(path)
                log.warning("ltm: skipped an unreadable line in the journal %s (%s): %r%s", path.name,
                            exc, line[:200], "" if cut_short else f"; the file is kept as {path.name}{KEPT_SUFFIX}")


def _segment_number(path: Path) -> int:
    try:
        return int(path.name.split(".")[1])
    except (IndexError, ValueError):
        return 0
