"""Replay speed: how many recorded events a policy replay goes through per
second, on a history written by the real pipeline.

    python -m bench.replay_speed [--users 60] [--turns 10] [--vectors]

``--users`` private chats of ``--turns`` turns each are recorded and
extracted (a scripted extractor: one candidate per user message, a third of
them restating a fact the user said before, confidences spread over
0.6–1.0), in write mode auto. Then one replay (set ``all``, the candidate:
``write_policy.min_confidence`` 0.75) and one tuning run (the default
grid) are timed; the figures are printed, never asserted, and every ltm_
table is compared before and after (a difference is an error, exit 1).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import create_async_engine

from astrbot_plugin_ltm.doors.replay_api import candidate_config
from astrbot_plugin_ltm.engine import LTMEngine
from astrbot_plugin_ltm.learning.candidates import Candidate, ExtractionResult
from astrbot_plugin_ltm.operating.jobs import Job
from astrbot_plugin_ltm.operating.replay import Selection, compare, load
from astrbot_plugin_ltm.operating.tuning import TUNE_READS, tune
from astrbot_plugin_ltm.scope import Origin

from .embedders import HashEmbedder

TOPICS = ["green tea", "jazz", "Berlin", "climbing", "chess", "rust", "sushi", "hiking", "piano", "cats",
          "the sea", "old films", "bread baking", "running", "Go", "tennis"]


class Scripted:
    """One candidate per user message: '<name> likes <topic>', keyed by topic."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    async def extract(self, events: Any, known: Any = ()) -> ExtractionResult:
        out = []
        for e in events:
            if e.source_role != "user":
                continue
            topic = e.content["text"].rsplit(" ", 2)[-2:]
            fact = f"{e.sender_name} likes {' '.join(topic)}"
            out.append(Candidate(type="preference", fact=fact, fact_key=" ".join(topic),
                                 confidence=round(0.75 + 0.25 * self.rng.random(), 2), importance=0.5,
                                 event_ids=[e.event_id], session_id=e.session_id))
        return ExtractionResult(out)


async def counts(engine: LTMEngine) -> dict[str, str]:
    async with engine.db.read() as session:
        names = [r[0] for r in await session.execute(sql(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'ltm\\_%' ESCAPE '\\'"))]
        out = {}
        for name in names:
            rows = (await session.execute(sql(f'SELECT * FROM "{name}"'))).all()
            out[name] = str(hash(tuple(sorted(map(repr, rows)))))
        return out


async def run(users: int, turns: int, vectors: bool) -> int:
    rng = random.Random(7)
    now = [datetime(2026, 11, 1, tzinfo=UTC)]

    def clock() -> datetime:
        return now[0]

    with tempfile.TemporaryDirectory() as tmp:
        sa = create_async_engine(f"sqlite+aiosqlite:///{Path(tmp) / 'replay.db'}")
        scripted = Scripted(rng)

        async def extractor_for(_session_id: str | None) -> Scripted:
            return scripted

        raw = {"write_policy": {"mode": "auto", "max_writes_per_session": 1000, "max_writes_per_hour": 10000}}
        engine = LTMEngine(sa, raw, extractor_for=extractor_for, clock=clock, data_dir=Path(tmp),
                           embedder=HashEmbedder() if vectors else None)
        await engine.start(background=False)
        started = time.perf_counter()
        for u in range(users):
            name = f"user{u:03d}"
            origin = Origin("qq", f"qq:FriendMessage:{name}", name, name.capitalize(), None, False)
            for t in range(turns):
                topic = TOPICS[rng.randrange(len(TOPICS))] if t % 3 else TOPICS[u % len(TOPICS)]
                engine.record_turn(origin, f"I really like {topic}", "Nice.")
                now[0] += timedelta(minutes=3)
            await engine.recorder.flush()
            await engine.worker.drain()
        if vectors:
            await engine.vector_fill.fill_all()
        fill_s = time.perf_counter() - started
        before = await counts(engine)
        assert engine.reader is not None
        current = engine.config
        candidate = candidate_config(raw, {"write_policy": {"min_confidence": 0.75}})

        job = Job("bench", "replay", clock())
        started = time.perf_counter()
        data = await load(engine.db, Selection("all"), resolver=engine.resolver)
        report = await compare(engine.reader, clock, data, current, candidate, lambda d, t: job.step(d, t))
        replay_s = time.perf_counter() - started

        started = time.perf_counter()
        users_ids = [f"qq:FriendMessage:user{u:03d}" for u in range(users)]
        holdout = tuple(users_ids[: max(1, users // 5)])
        fitting = await load(engine.db, Selection("fitting", holdout), TUNE_READS, TUNE_READS, engine.resolver)
        held = await load(engine.db, Selection("holdout", holdout), TUNE_READS, TUNE_READS, engine.resolver)
        tuned = await tune(engine.reader, clock, fitting, held, current, lambda d, t: None)
        tune_s = time.perf_counter() - started
        after = await counts(engine)
        await engine.stop()
        await sa.dispose()

    figures = {
        "users": users, "turns_per_user": turns, "vectors": vectors, "fill_s": round(fill_s, 2),
        "replay": {"seconds": round(replay_s, 3), **report["events"], **report["speed"],
                   "current_active": report["current"]["writes"]["by_outcome"]["active"],
                   "candidate_active": report["candidate"]["writes"]["by_outcome"]["active"],
                   "read_latency_p95_ms": report["current"]["reads"]["latency_p95_ms"],
                   "self_recall": [report["current"]["self_recall"]["share"],
                                   report["candidate"]["self_recall"]["share"]],
                   "verdict": report["verdict"]},
        "tune": {"seconds": round(tune_s, 2), "outcome": tuned["outcome"], "candidate": tuned["candidate"],
                 "scores": tuned["scores"]},
        "rows_unchanged": before == after,
    }
    print(json.dumps(figures, indent=2, ensure_ascii=False))
    return 0 if before == after else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replay_speed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=60)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--vectors", action="store_true", help="a HashEmbedder (no model) for the vector index")
    args = parser.parse_args(argv)
    return asyncio.run(run(args.users, args.turns, args.vectors))


if __name__ == "__main__":
    sys.exit(main())
