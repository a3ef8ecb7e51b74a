"""What the SQLite driver gives back: rows straight from its cursor, for the
read path's hot statements (SQLAlchemy's result rows cost ~0.15 ms a
statement there, a third of what the statements take, docs/decisions.md#d72),
and the rows a statement touched."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection


def fetch_rows(conn: Connection, sql: str, params: Mapping[str, Any]) -> list[Any]:
    """The rows of ``sql`` (named ``:parameters``) from the driver's own cursor."""
    return conn.connection.driver_connection.execute(sql, params).fetchall()  # type: ignore[union-attr]


def touched(result: Any) -> int:
    """Rows an INSERT, UPDATE or DELETE touched (a CursorResult's rowcount)."""
    return int(getattr(result, "rowcount", 0) or 0)
