"""Numbered, transactional, idempotent schema migrations.

Each runs in its own ``BEGIN IMMEDIATE`` transaction with the row that
records it, so a failed migration leaves the database as it was. They run on
a dedicated ``sqlite3`` connection rather than AstrBot's async engine, whose
pysqlite commits DDL implicitly and would half-apply a migration.
"""

from __future__ import annotations

import importlib.util
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ..clock import utcnow
from ..logs import log

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
_NAME = re.compile(r"^(\d{4})_(\w+)\.py$")


class MigrationError(RuntimeError):
    pass


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path

    def load(self) -> ModuleType:
        spec = importlib.util.spec_from_file_location(f"ltm_migration_{self.version:04d}", self.path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


def discover(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    found = []
    for path in sorted(directory.glob("*.py")):
        match = _NAME.match(path.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), path))
    versions = [m.version for m in found]
    if versions != list(range(1, len(versions) + 1)):
        raise MigrationError(f"migrations in {directory} are not numbered 1..n: {versions}")
    return found


def current_version(conn: sqlite3.Connection) -> int:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS ltm_schema_version ("
        "version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at DATETIME NOT NULL)"
    )
    row = conn.execute("SELECT MAX(version) FROM ltm_schema_version").fetchone()
    return row[0] or 0


def migrate(db_path: str, target: int | None = None, directory: Path = MIGRATIONS_DIR) -> list[int]:
    """Bring the database up to ``target`` (default: latest); the versions applied now."""
    conn = sqlite3.connect(db_path, timeout=30, isolation_level=None)
    try:
        conn.execute("PRAGMA busy_timeout=30000")
        applied: list[int] = []
        for migration in discover(directory):
            if target is not None and migration.version > target:
                break
            conn.execute("BEGIN IMMEDIATE")
            try:
                # Re-read inside the write lock: another process may have
                # migrated between our check and the lock.
                if migration.version <= current_version(conn):
                    conn.execute("ROLLBACK")
                    continue
                migration.load().upgrade(conn)
                conn.execute(
                    "INSERT INTO ltm_schema_version (version, name, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.name, utcnow().isoformat(" ")),
                )
                conn.execute("COMMIT")
            except Exception as exc:
                conn.execute("ROLLBACK")
                raise MigrationError(
                    f"migration {migration.version:04d}_{migration.name} failed and was rolled back: {exc}"
                ) from exc
            applied.append(migration.version)
            log.info("ltm: applied migration %04d_%s", migration.version, migration.name)
        return applied
    finally:
        conn.close()
