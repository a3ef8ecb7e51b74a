"""Time as the plugin sees it: aware UTC datetimes, from a clock that tests
can replace (every part takes a ``Clock`` instead of calling ``now``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from .logs import log

Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """Aware UTC: SQLite hands datetimes back naive, in UTC."""
    return value.replace(tzinfo=UTC) if value.utcoffset() is None else value


def parse_stored_time(value: datetime | str) -> datetime:
    """A datetime column read without the ORM (SQLite text) as aware UTC."""
    return as_utc(value if isinstance(value, datetime) else datetime.fromisoformat(value))


# A wall clock moving this much more (or less) than the time elapsed has jumped.
JUMP_TOLERANCE = timedelta(minutes=2)


def elapsed() -> float:
    """A clock no one sets that counts suspended sleep (Linux's boot time), so a waking
    laptop is time that passed, not a jump; time.monotonic elsewhere."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    return time.clock_gettime(boottime) if boottime is not None else time.monotonic()


class SteadyClock:
    """A wall clock that never goes back and, after a jump, moves on by the time elapsed
    until a restart: no negative durations, no mass expiry (docs/decisions.md#d93)."""

    def __init__(self, wall: Clock = lambda: datetime.now(UTC),
                 monotonic: Callable[[], float] = elapsed) -> None:
        self._wall = wall
        self._monotonic = monotonic
        self._anchor: tuple[datetime, float] | None = None  # (steady time, monotonic) it was last known at
        self.jump = timedelta(0)

    def __call__(self) -> datetime:
        wall, mono = self._wall(), self._monotonic()
        if self._anchor is None:
            self._anchor = (wall, mono)
            return wall
        anchored, at = self._anchor
        steady = anchored + timedelta(seconds=max(0.0, mono - at))
        off = wall - steady
        if abs(off - self.jump) > JUMP_TOLERANCE:
            log.warning("ltm: the system clock jumped by %s; memory keeps time by the time elapsed until the "
                        "next restart", off)
            self.jump = off
        if abs(off) <= JUMP_TOLERANCE:  # in step (again): follow the wall clock's small corrections
            self.jump = timedelta(0)
            now = max(wall, anchored)
        else:
            now = steady
        self._anchor = (now, mono)
        return now


def steady(clock: Clock) -> Clock:
    """The real wall clock made steady; a clock a test gave stays as it is."""
    return SteadyClock() if clock is utcnow else clock


def signed_span(delta: timedelta) -> str:
    """A jump as a short signed span: "+30.0 d", "-1.0 h", "+5.0 min"."""
    seconds = delta.total_seconds()
    sign, size = ("-" if seconds < 0 else "+"), abs(seconds)
    if size >= 86400:
        return f"{sign}{size / 86400:.1f} d"
    if size >= 3600:
        return f"{sign}{size / 3600:.1f} h"
    return f"{sign}{size / 60:.1f} min"
