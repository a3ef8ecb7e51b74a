"""Hook benchmark: what making a recorded turn durable costs on_agent_done.

    python -m bench.hook [--turns 2000] [--json OUT]

Each way of recording a turn, on a fresh SQLite file in WAL mode (as
AstrBot's), ``--turns`` turns of 5–30 and 10–60 synthetic words, one after
another, the event loop free between turns (the flusher runs, as in
AstrBot); timed is what the hook would await:

- ``queue``: ``engine.record_turn`` without a journal (before D33);
- ``journal``: ``engine.record_turn`` with the journal (one ``write()``);
- ``journal+fsync``: the same and an ``fsync`` per turn (power-loss safe);
- ``sqlite NORMAL`` / ``sqlite FULL``: ``record_turn`` then the awaited
  flush of that turn (the insert's commit) at ``synchronous`` NORMAL / FULL;
- ``heard``: ``engine.record_heard`` with the journal, a group message that
  did not wake the bot where the group learns all its talk (D156).

Each runs twice: alone, and with a second writer (the extraction worker's
part) committing 50 events every 10 ms through ``Database.write``. Timings
are printed, never asserted.

``--parts``: where the journal way's time goes instead: each step of
``record_turn`` timed alone (best of 5 repeats of ``--part-calls`` calls),
for one turn of two events, and the journal way with Python's cyclic
garbage collector on and off (its collections land inside some hooks).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import sys
import tempfile
import time
import timeit
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import create_async_engine

from astrbot_plugin_ltm.engine import LTMEngine
from astrbot_plugin_ltm.enums import Role, SourceType
from astrbot_plugin_ltm.recording import journal as journal_lines
from astrbot_plugin_ltm.scope import Origin
from astrbot_plugin_ltm.storing.tables import MemoryEvent, new_id

from .scale import Words, pct

WAYS = ("queue", "journal", "journal+fsync", "sqlite NORMAL", "sqlite FULL", "heard")
ORIGIN = Origin("bench", "bench:FriendMessage:u1", "u1", "User")
IN_GROUP = Origin("bench", "bench:GroupMessage:g1", "u1", "User", group_id="g1")


def _pragmas(synchronous: str) -> Callable[[Any, Any], None]:
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute("PRAGMA journal_mode=WAL")
        dbapi_connection.execute(f"PRAGMA synchronous={synchronous}")
        dbapi_connection.execute("PRAGMA busy_timeout=30000")
    return on_connect


async def _other_writer(engine: LTMEngine, stop: asyncio.Event) -> int:
    """Commits like the extraction worker's, holding the write lock."""
    written = 0
    while not stop.is_set():
        async with engine.db.write() as session:
            session.add_all([MemoryEvent(scope="user", scope_id="bench:other", source_type="message",
                                         source_role="user", content={"text": f"other {written + i}"})
                             for i in range(50)])
        written += 50
        await asyncio.sleep(0.01)
    return written


async def run_way(way: str, turns: list[tuple[str, str]], contended: bool,
                  collect: bool = True) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ltm-hook-") as tmp:
        path = Path(tmp)
        sql_engine = create_async_engine(f"sqlite+aiosqlite:///{path / 'ltm.db'}")
        event.listen(sql_engine.sync_engine, "connect", _pragmas("FULL" if way == "sqlite FULL" else "NORMAL"))
        config = {"groups": {"learn_all_messages": ["*"]}} if way == "heard" else {}
        engine = LTMEngine(sql_engine, config, data_dir=path / "data" if way.startswith("journal") or way == "heard"
                           else None)
        await engine.start(background=False)
        engine.recorder.task.start()  # the flusher, as in AstrBot
        if way == "journal+fsync":
            journal = engine.recorder._journal
            assert journal is not None
            plain_append = journal.append

            def append_fsync(events: list[MemoryEvent]) -> None:
                plain_append(events)
                os.fsync(journal._fd)  # type: ignore[arg-type]

            journal.append = append_fsync  # type: ignore[method-assign]
        hook: Callable[[str, str], Awaitable[None]]
        if way.startswith("sqlite"):
            async def hook(user: str, assistant: str) -> None:
                engine.record_turn(ORIGIN, user, assistant)
                await engine.recorder.flush()
        elif way == "heard":
            async def hook(user: str, assistant: str) -> None:
                engine.record_heard(IN_GROUP, user)
        else:
            async def hook(user: str, assistant: str) -> None:
                engine.record_turn(ORIGIN, user, assistant)

        stop = asyncio.Event()
        other = asyncio.create_task(_other_writer(engine, stop)) if contended else None
        us = []
        if not collect:
            gc.disable()
        start_all = time.perf_counter()
        try:
            for user, assistant in turns:
                start = time.perf_counter_ns()
                await hook(user, assistant)
                us.append((time.perf_counter_ns() - start) / 1000)
                await asyncio.sleep(0)  # the loop is AstrBot's: the flusher and the other writer run
        finally:
            gc.enable()
        elapsed = time.perf_counter() - start_all
        stop.set()
        other_written = await other if other is not None else 0
        await engine.stop()
        await sql_engine.dispose()
    return {"way": way, "contended": contended, "gc": collect, "turns": len(turns), "p50_us": pct(us, 50),
            "p95_us": pct(us, 95), "p99_us": pct(us, 99), "max_us": max(us), "mean_us": statistics.fmean(us),
            "seconds": elapsed, "other_events": other_written}


async def time_parts(turn: tuple[str, str], calls: int) -> list[tuple[str, float]]:
    """Each step of ``engine.record_turn`` with the journal, for one turn of
    two events, timed alone: best of 5 repeats of ``calls`` calls, in µs."""
    user, assistant = turn
    with tempfile.TemporaryDirectory(prefix="ltm-hook-") as tmp:
        path = Path(tmp)
        sql_engine = create_async_engine(f"sqlite+aiosqlite:///{path / 'ltm.db'}")
        event.listen(sql_engine.sync_engine, "connect", _pragmas("NORMAL"))
        engine = LTMEngine(sql_engine, {}, data_dir=path / "data")
        await engine.start(background=False)
        recorder = engine.recorder
        journal = recorder._journal
        assert journal is not None and journal._fd is not None
        scope = recorder._resolver().write_scope(ORIGIN)
        events = [recorder._event(scope, ORIGIN, SourceType.MESSAGE, role, {"text": text}, None)
                  for role, text in ((Role.USER, user), (Role.ASSISTANT, assistant))]
        line = journal_lines.encode(events)
        fd = journal._fd

        def best(step: Callable[[], object]) -> float:
            return min(timeit.repeat(step, number=calls, repeat=5)) / calls * 1e6

        def whole() -> None:
            engine.record_turn(ORIGIN, user, assistant)
            recorder._queue.clear()  # the flusher's part, left out

        parts = [
            ("the whole hook (record_turn)", best(whole)),
            ("language noted", best(lambda: engine.languages.note(ORIGIN, user))),
            ("write scope resolved", best(lambda: recorder._resolver().write_scope(ORIGIN))),
            ("2 events built (clock, id, pause checks)",
             best(lambda: [recorder._event(scope, ORIGIN, SourceType.MESSAGE, e.source_role, e.content, None)
                           for e in events])),
            ("  of which 2 clock readings", best(lambda: (recorder._clock(), recorder._clock()))),
            ("  of which 2 ids", best(lambda: (new_id(), new_id()))),
            ("2 journal lines encoded", best(lambda: journal_lines.encode(events))),
            ("  of which 2 timestamps as text", best(lambda: [e.created_at.isoformat() for e in events])),
            ("one write() of both lines", best(lambda: os.write(fd, line))),
        ]
        await engine.stop()
        await sql_engine.dispose()
    return parts


def parts_table(parts: list[tuple[str, float]]) -> str:
    return "\n".join([f"{'step of one turn':<42} {'µs':>8}"] + [f"{name:<42} {us:>8.2f}" for name, us in parts])


def table(results: list[dict[str, Any]]) -> str:
    lines = [f"{'way':<15} {'other writer':<13} {'gc':<4} {'p50 µs':>9} {'p95 µs':>9} {'p99 µs':>9} {'max µs':>9}"]
    for r in results:
        lines.append(f"{r['way']:<15} {'yes' if r['contended'] else 'no':<13} {'on' if r['gc'] else 'off':<4} "
                     f"{r['p50_us']:>9.1f} "
                     f"{r['p95_us']:>9.1f} {r['p99_us']:>9.1f} {r['max_us']:>9.1f}")
    return "\n".join(lines)


def _write_json(path: str, result: dict[str, Any]) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwritten to {out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hook", description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--ways", default=",".join(WAYS))
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", dest="json_out")
    parser.add_argument("--parts", action="store_true",
                        help="time each step of the journal way, and the journal way with the gc on and off")
    parser.add_argument("--part-calls", type=int, default=20000, help="calls per repeat with --parts")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    words = Words(rng)
    turns = [(" ".join(words.some(rng.randint(5, 30))), " ".join(words.some(rng.randint(10, 60))))
             for _ in range(args.turns)]
    if args.parts:
        parts = asyncio.run(time_parts(turns[0], args.part_calls))
        by_gc = [asyncio.run(run_way("journal", turns, False, collect)) for collect in (True, False)]
        print(f"one turn of {len(turns[0][0].split())} + {len(turns[0][1].split())} words, "
              f"best of 5 × {args.part_calls} calls a step")
        print(parts_table(parts))
        print(f"\n{args.turns} turns, the journal way, seed {args.seed}")
        print(table(by_gc))
        if args.json_out:
            _write_json(args.json_out, {"turns": args.turns, "seed": args.seed, "parts_us": dict(parts),
                                        "results": by_gc})
        return 0
    ways = [w.strip() for w in args.ways.split(",") if w.strip()]
    unknown = set(ways) - set(WAYS)
    if unknown:
        raise SystemExit(f"unknown ways {sorted(unknown)}; choose among {', '.join(WAYS)}")
    results = []
    for contended in (False, True):
        for way in ways:
            results.append(asyncio.run(run_way(way, turns, contended)))
            print(f"{way} (other writer: {contended}): {results[-1]['seconds']:.1f} s", file=sys.stderr)
    print(f"{args.turns} turns per way, seed {args.seed}")
    print(table(results))
    if args.json_out:
        _write_json(args.json_out, {"turns": args.turns, "seed": args.seed, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
