"""Time as the plugin sees it: aware UTC datetimes, from a clock that tests
can replace (every part takes a ``Clock`` instead of calling ``now``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """Aware UTC: SQLite hands datetimes back naive, in UTC."""
    return value.replace(tzinfo=UTC) if value.utcoffset() is None else value


def parse_stored_time(value: datetime | str) -> datetime:
    """A datetime column read without the ORM (SQLite text) as aware UTC."""
    return as_utc(value if isinstance(value, datetime) else datetime.fromisoformat(value))
