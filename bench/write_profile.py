"""Where the hook's, the write pipeline's and a read's time goes, on a copy
of a store ``bench.scale --fill-store`` filled (docs/decisions.md#d94).

    .venv/bin/python -m bench.scale --fill-store 10000 --store-dir /tmp/store10k
    .venv/bin/python -m bench.write_profile /tmp/store10k [--sql] [--profile /tmp/prof] [--no-reads] [--turns-first]

The same steps as ``bench.scale``'s (2,000 hook calls, 400 candidates
drained, reads in the big scope), each timed by the wall clock and by the
process's CPU time (every thread), which a busy machine disturbs less. The
drain is split into extraction (the worker's batches: extractor, writer,
marking the events) and the vector fill. ``--sql`` prints the drain's
statements by total time; ``--profile`` writes cProfile files per step;
``--no-reads`` stops after the drain, so that a sampling profiler run
around the whole process (py-spy) sees the hook and the drain only;
``--turns-first`` embeds the hook step's 4,000 turns before the drain and
times that apart (``bench.scale``'s drain embeds them with its 400
candidates).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import json
import random
import shutil
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import create_async_engine

from astrbot_plugin_ltm.engine import LTMEngine
from bench import scale

Timings = dict[str, list[Any]]


class Statements:
    """Each statement's count and total time, by its text."""

    def __init__(self) -> None:
        self.by_text: Timings = collections.defaultdict(lambda: [0, 0.0])

    def before(self, conn: Any, _cursor: Any, _statement: str, *_: Any) -> None:
        conn.info["ltm_bench_started"] = time.perf_counter()

    def after(self, conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen = self.by_text[statement[:300]]
        seen[0] += 1
        seen[1] += time.perf_counter() - conn.info["ltm_bench_started"]

    def report(self, top: int = 25) -> None:
        total = sum(v[1] for v in self.by_text.values())
        print(f"statements {sum(v[0] for v in self.by_text.values())}, {total:.3f} s", file=sys.stderr)
        for statement, (n, seconds) in sorted(self.by_text.items(), key=lambda kv: -kv[1][1])[:top]:
            print(f"{n:6d} {seconds * 1000:9.1f} ms  {' '.join(statement.split())[:160]}", file=sys.stderr)


async def run(store: Path, with_sql: bool, profile_dir: Path | None, reads: bool = True,
              turns_first: bool = False) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="ltm-write-profile-"))
    shutil.copytree(store, tmp, dirs_exist_ok=True)
    stored = json.loads((tmp / "store.json").read_text())
    words = scale.Words(random.Random(7))
    rng = words.rng = random.Random(8)
    target = scale.Origin(scale.PLATFORM, f"{scale.PLATFORM}:FriendMessage:{scale.TARGET_SENDER}",
                          scale.TARGET_SENDER, "Target")
    extractor = scale.OneFactPerEvent()

    async def extractor_for(_session_id: str | None) -> scale.OneFactPerEvent:
        return extractor

    timed = scale.TimedEmbedder(scale.HashEmbedder())
    db = create_async_engine(f"sqlite+aiosqlite:///{tmp / 'ltm.db'}")
    clock = scale.Clock(scale.NOW)
    engine = LTMEngine(db, scale.config(), clock=clock, extractor_for=extractor_for,
                       **scale.engine_kwargs(timed, tmp / "data", None))
    await engine.start(background=False)
    out: dict[str, Any] = {}

    def profiler(step: str) -> cProfile.Profile | None:
        if profile_dir is None:
            return None
        found = cProfile.Profile()
        found.enable()
        return found

    def done(found: cProfile.Profile | None, step: str) -> None:
        if found is not None and profile_dir is not None:
            found.disable()
            found.dump_stats(str(profile_dir / f"{step}.prof"))

    try:
        messages = [(" ".join(words.some(rng.randint(5, 30))), " ".join(words.some(rng.randint(10, 60))))
                    for _ in range(2000)]
        hook_us = []
        cpu = time.process_time()
        found = profiler("hook")
        for user, assistant in messages:
            start = time.perf_counter_ns()
            engine.record_turn(target, user, assistant)
            hook_us.append((time.perf_counter_ns() - start) / 1000)
        done(found, "hook")
        out["hook_cpu_us"] = (time.process_time() - cpu) / len(messages) * 1e6
        out["hook_p50_us"], out["hook_p95_us"] = scale.pct(hook_us, 50), scale.pct(hook_us, 95)
        await engine.recorder.flush()
        async with engine.db.write() as session:
            await session.execute(sql("UPDATE ltm_events SET extraction_status = 'skipped' "
                                      "WHERE extraction_status = 'pending'"))
        if turns_first:  # the hook's 4,000 turns embedded before the drain, not in it (docs/decisions.md#d145)
            out["hook_turns_fill_s"] = await timed_fill(engine)
        for i in range(400):
            clock.now = scale.NOW + timedelta(seconds=i)
            engine.record_turn(target, f"update {i}: " + " ".join(words.some(rng.randint(5, 20))), "")
        await engine.recorder.flush()
        clock.now = scale.NOW + timedelta(seconds=460)

        statements = Statements()
        # AstrBot's engine, and the plugin's own for write batches (docs/decisions.md#d128)
        batch_engine = getattr(engine.db, "batch_engine", None)
        engines = [db.sync_engine] + ([batch_engine.sync_engine] if batch_engine is not None else [])
        if with_sql:
            for sync_engine in engines:
                event.listen(sync_engine, "before_cursor_execute", statements.before)
                event.listen(sync_engine, "after_cursor_execute", statements.after)
        worker = engine.worker
        found = profiler("write")
        wall, cpu = time.perf_counter(), time.process_time()
        while await worker.run_once(ignore_idle=True):
            pass
        extracted_wall, extracted_cpu = time.perf_counter(), time.process_time()
        await worker.fill_vectors()
        done(found, "write")
        out["extraction_s"] = [round(extracted_wall - wall, 3), round(extracted_cpu - cpu, 3)]  # wall, CPU
        out["fill_s"] = [round(time.perf_counter() - extracted_wall, 3), round(time.process_time() - extracted_cpu, 3)]
        out["write_candidates_per_s"] = extractor.candidates / (time.perf_counter() - wall)
        out["write_cpu_ms_per_candidate"] = (time.process_time() - cpu) * 1000 / max(1, extractor.candidates)
        out["embed_s"] = timed.seconds
        if with_sql:
            for sync_engine in engines:
                event.remove(sync_engine, "before_cursor_execute", statements.before)
                event.remove(sync_engine, "after_cursor_execute", statements.after)
            statements.report()
        if not reads:  # a sampling profiler's samples are then the drain's alone
            return out

        await engine.memory_block(target, words.query(stored["target_facts"]))
        await engine.loads_settled()
        queries = [words.query(stored["target_facts"]) for _ in range(200)]
        for query in queries[:20]:  # warm
            await engine.memory_block(target, query)
        read_ms = []
        found = profiler("read")
        cpu = time.process_time()
        for query in queries[20:]:
            start_read = time.perf_counter()
            await engine.memory_block(target, query)
            read_ms.append((time.perf_counter() - start_read) * 1000)
        done(found, "read")
        out["read_cpu_ms"] = (time.process_time() - cpu) * 1000 / len(read_ms)
        out["read_p50_ms"], out["read_p95_ms"] = scale.pct(read_ms, 50), scale.pct(read_ms, 95)
    finally:
        await engine.stop()
        await db.dispose()
        shutil.rmtree(tmp, ignore_errors=True)
    return out


async def timed_fill(engine: LTMEngine) -> list[float]:
    wall, cpu = time.perf_counter(), time.process_time()
    await engine.worker.fill_vectors()
    return [round(time.perf_counter() - wall, 3), round(time.process_time() - cpu, 3)]  # wall, CPU


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", type=Path, help="a directory bench.scale --fill-store filled")
    parser.add_argument("--sql", action="store_true", help="the drain's statements by total time (stderr)")
    parser.add_argument("--profile", type=Path, default=None, help="write cProfile files here")
    parser.add_argument("--no-reads", action="store_true", help="stop after the drain (for py-spy)")
    parser.add_argument("--turns-first", action="store_true",
                        help="embed the hook step's turns before the drain (timed apart)")
    args = parser.parse_args(argv)
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    print(json.dumps(asyncio.run(run(args.store, args.sql, args.profile, not args.no_reads,
                                       args.turns_first))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
