"""What the memory costs on disk, and the compact action (issue 39,
docs/decisions.md#d163).

The compact action frees old uncited turns and unread vector files in
batches that hold the write lock ~50 ms each. The file does not shrink:
SQLite reuses the freed pages (VACUUM would give them back;
docs/operating.md says what that costs).
"""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, text

from .. import validators
from ..clock import Clock, utcnow
from ..errors import AdminError
from ..i18n import Message, msg
from ..indexes.faiss_files import NamespaceFiles
from ..learning.retention import TurnSweep, sweep_turns
from ..logs import log
from ..storing.archive import stored_time
from ..storing.database import Database, ReadOnlyError
from .jobs import Job, Jobs

MAX_AGE = timedelta(minutes=10)  # a report this old is measured again when asked for
NOTICE_DAYS = 30  # the disk fills within this many days at this rate: a notice
WEEK = timedelta(days=7)


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KB' (the same in both languages)."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


@dataclass
class StorageReport:
    measured_at: str
    tables: dict[str, int]  # an ltm_ table (its indexes, an FTS5 table's shadow tables) -> bytes
    tables_bytes: int
    measured_by_table: bool  # False: SQLite has no dbstat here; tables_bytes is then the whole file's used pages
    file_bytes: int  # the database file with its WAL (AstrBot's own tables too)
    free_in_file_bytes: int  # pages freed inside the file, reused by what comes next
    vector_files_bytes: int
    vector_files: int
    journal_bytes: int
    turns: int
    oldest_turn: str | None
    turns_last_week: int
    bytes_per_turn: float | None
    growth_per_day: float  # bytes, at the last seven days' rate
    disk_free_bytes: int | None
    days_until_full: float | None

    @property
    def total_bytes(self) -> int:
        return self.tables_bytes + self.vector_files_bytes + self.journal_bytes

    def notice(self) -> Message | None:
        if self.days_until_full is None or self.days_until_full >= NOTICE_DAYS:
            return None
        return msg("notice.disk_fills", days=max(0, int(self.days_until_full)), free=human_bytes(
            self.disk_free_bytes or 0), growth=human_bytes(self.growth_per_day))

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total_bytes": self.total_bytes}


def _dir_bytes(directory: Path | None) -> tuple[int, int]:
    if directory is None or not directory.is_dir():
        return 0, 0
    sizes = [p.stat().st_size for p in directory.iterdir() if p.is_file()]
    return sum(sizes), len(sizes)


def measure_tables(conn: Connection) -> tuple[dict[str, int], bool]:
    """Each ltm_ table's bytes with its indexes (dbstat), or ({}, False)."""
    try:
        owner = {str(n): str(t) for n, t in conn.execute(text("SELECT name, tbl_name FROM sqlite_master"))}
        pages = conn.execute(text("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")).all()
    except Exception:  # SQLite built without dbstat
        return {}, False
    out: dict[str, int] = {}
    for name, size in pages:
        table = owner.get(str(name), str(name))
        table = next((t for t in ("ltm_events_fts", "ltm_items_fts") if table.startswith(t)), table)
        if table.startswith("ltm"):
            out[table] = out.get(table, 0) + int(size)
    return dict(sorted(out.items(), key=lambda kv: -kv[1])), True


class StorageMeter:
    def __init__(self, db: Database, files: NamespaceFiles, journal: Path | None, clock: Clock = utcnow) -> None:
        self._db = db
        self._files = files
        self._journal = journal
        self._clock = clock
        self.last: StorageReport | None = None
        self._measuring: asyncio.Task[StorageReport] | None = None

    async def report(self) -> StorageReport:
        """The last report if younger than MAX_AGE, else a new one (one
        measurement at a time: a second caller waits for the first's)."""
        last = self.last
        if last is not None and self._clock() - datetime.fromisoformat(last.measured_at) < MAX_AGE:
            return last
        if self._measuring is None or self._measuring.done():
            self._measuring = asyncio.ensure_future(self._measure())
        return await asyncio.shield(self._measuring)

    async def _measure(self) -> StorageReport:
        now = self._clock()
        tables, by_table, turns, oldest, week, used, free = await self._db.load(
            lambda conn: self._read(conn, now))
        path = Path(self._db.path)
        file_bytes = sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file()) \
            if path.exists() else 0
        vector_bytes, vector_files = await asyncio.to_thread(_dir_bytes, self._files.directory)
        journal_bytes, _ = await asyncio.to_thread(_dir_bytes, self._journal)
        tables_bytes = sum(tables.values()) if by_table else used
        per_turn = (tables_bytes + vector_bytes) / turns if turns else None
        growth = (per_turn or 0) * week / 7
        try:
            disk_free: int | None = shutil.disk_usage(path.parent if path.exists() else Path.cwd()).free
        except OSError:
            disk_free = None
        report = StorageReport(
            measured_at=now.isoformat(), tables=tables, tables_bytes=tables_bytes, measured_by_table=by_table,
            file_bytes=file_bytes, free_in_file_bytes=free, vector_files_bytes=vector_bytes,
            vector_files=vector_files, journal_bytes=journal_bytes, turns=turns, oldest_turn=oldest,
            turns_last_week=week, bytes_per_turn=per_turn, growth_per_day=growth, disk_free_bytes=disk_free,
            days_until_full=(disk_free / growth) if disk_free is not None and growth > 0 else None)
        self.last = report
        return report

    @staticmethod
    def _read(conn: Connection, now: datetime) -> tuple[dict[str, int], bool, int, str | None, int, int, int]:
        tables, by_table = measure_tables(conn)
        turns = int(conn.execute(text("SELECT count(*) FROM ltm_events")).scalar_one())
        oldest = conn.execute(text("SELECT min(created_at) FROM ltm_events")).scalar()
        week = int(conn.execute(text("SELECT count(*) FROM ltm_events WHERE created_at >= :since"),
                                {"since": stored_time(now - WEEK)}).scalar_one())
        page = int(conn.execute(text("PRAGMA page_size")).scalar_one())
        used = int(conn.execute(text("PRAGMA page_count")).scalar_one()) * page
        free = int(conn.execute(text("PRAGMA freelist_count")).scalar_one()) * page
        return tables, by_table, turns, None if oldest is None else str(oldest), week, used - free, free


# -- the compact action ------------------------------------------------------------------


def compact_days(requested: Any, configured: int | None) -> int:
    """The age past which turns are freed: the request's, else
    ``retention_days.turns``; a 400 when neither says."""
    if requested not in (None, ""):
        return validators.days_kept(requested)
    if configured is None:
        raise AdminError(msg("api.compact_days"))
    return configured


async def compact_plan(db: Database, files: NamespaceFiles, days: int, now: datetime) -> dict[str, Any]:
    """What compacting would free, nothing written (a dry run)."""
    sweep, _ = await sweep_turns(db, now - timedelta(days=days), "", "", dry_run=True)
    stale = await asyncio.to_thread(files.stale)
    stale_bytes = sum(p.stat().st_size for p in stale if p.exists())
    return {"dry_run": True, "days": days, "cutoff": (now - timedelta(days=days)).isoformat(),
            "turns": sweep.as_dict(), "vector_files": {"files": len(stale), "bytes": stale_bytes},
            "bytes": sweep.bytes + stale_bytes}


def start_compact(jobs: Jobs, db: Database, files: NamespaceFiles, days: int, now: datetime, actor: str,
                  read_only: bool) -> Job:
    """Free it, as an operator job (one at a time, with progress, cancellable)."""
    if read_only:
        raise ReadOnlyError(str(msg("api.read_only")))
    planned: dict[str, int] = {}

    async def run(job: Job) -> dict[str, Any]:
        job.step(0, 0, "counting")
        plan, _ = await sweep_turns(db, now - timedelta(days=days), "", "", dry_run=True)
        planned["turns"] = plan.deleted
        job.step(0, plan.deleted, "freeing")

        def progress(done: TurnSweep) -> None:
            job.step(done.deleted, max(plan.deleted, done.deleted), "freeing")

        sweep, _ = await sweep_turns(db, now - timedelta(days=days), actor, str(msg("audit.compacted", days=days)),
                                     progress=progress)
        gone = await asyncio.to_thread(files.remove_stale)
        log.info("ltm: compacted: %d turns older than %d days (%s), %d vector files", sweep.deleted, days,
                 human_bytes(sweep.bytes), gone)
        return {"days": days, "turns": sweep.as_dict(), "vector_files_removed": gone, "bytes": sweep.bytes}

    return jobs.start("compact", run)


def status_lines(report: StorageReport) -> list[Message]:
    """The report as ``/ltm status`` gives it to an admin."""
    lines = [msg("storage.size", total=human_bytes(report.total_bytes), tables=human_bytes(report.tables_bytes),
                 files=human_bytes(report.vector_files_bytes), file=human_bytes(report.file_bytes)),
             msg("storage.growth", growth=human_bytes(report.growth_per_day), turns=report.turns_last_week)]
    if report.oldest_turn:
        lines.append(msg("storage.oldest", at=report.oldest_turn[:16], turns=report.turns))
    if (notice := report.notice()) is not None:
        lines.append(notice)
    return lines

