"""Rows a write batch adds and seldom reads back (its audit, gate-log and
evidence rows), inserted together at the batch's end.

Added one ORM object at a time, each such row cost an object, its state
and a unit-of-work flush of its own (the writer's next query autoflushed
it): ~2 of a candidate's ~9 statements, the flushes the largest part of the
writer thread's profile at 10k (docs/decisions.md#d143). In a batch
(:meth:`Database.write_batch <.database.Database.write_batch>`) they are
kept as values and written by one executemany per table before the commit,
in the order they were added, so the rows, their ids and the transaction
are the same. A statement in the batch that reads or deletes such rows is
preceded by :func:`write_rows` (the write counts' audit counts, a memory's
evidence links, a removal). Elsewhere they are added to the session as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Table, insert
from sqlalchemy.ext.asyncio import AsyncSession

_HELD = "ltm_batch_rows"  # session.info key: {table: [values, ...]} while a batch holds rows


def hold_rows(session: AsyncSession) -> None:
    """From now on, :func:`add_row` keeps this session's rows until :func:`write_rows`."""
    session.info[_HELD] = {}


def add_row(session: AsyncSession, table: Table, values: dict[str, Any], make: Callable[..., object]) -> None:
    """A row of ``table`` with ``values`` (every column but the key): held
    when the session holds rows, else ``make(**values)`` added to it."""
    held: dict[Table, list[dict[str, Any]]] | None = session.info.get(_HELD)
    if held is None:
        session.add(make(**values))
    else:
        held.setdefault(table, []).append(values)


async def write_rows(session: AsyncSession) -> None:
    """Insert the rows held so far, one statement per table; called before
    the batch commits and before a statement that reads those tables."""
    held: dict[Table, list[dict[str, Any]]] | None = session.info.get(_HELD)
    if not held:
        return
    session.info[_HELD] = {}
    for table, rows in held.items():
        await session.execute(insert(table), rows)
