"""One group of a year: reads in a scope of a million turns (issue 39).

    python -m bench.big_scope build DIR [--turns 1000000]
    python -m bench.big_scope read DIR [--reads 300] [--json OUT]

``build``: one group scope (200 members) of ``--turns`` members' messages
over a year, one in ten answered by the bot (a long reply), the soak's
texts (``bench.soak.Turns``: a fifth Chinese, some long), written through
the plugin's storage in bulk — events in batches of 5,000 with their
keyword rows (``keyword_rows.index_turns``) and vectors (the soak's
embedder, ``vector_rows.store_vectors``), not through the hook one turn at
a time — plus 200 current memories, 1,800 superseded ones and a summary a
day citing the day's turns, all with vectors. It runs on the plugin of any
checkout (the layout is whatever that checkout writes), so the same
command gives the figures before and after a change.

``read``: the plugin started on the store (no background loops), the
first read (the scope's namespaces loaded cold: timed apart, until every
load has settled), then ``--reads`` reads (``engine.memory_block``) in the
group, each a member's message drawn from the scope's turns (half from its
last weeks, half from any time, every tenth naming a day): p50, p95, max,
the embedder's time apart; RSS after.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import event, insert, text
from sqlalchemy.ext.asyncio import create_async_engine

from astrbot_plugin_ltm.engine import LTMEngine
from astrbot_plugin_ltm.enums import Corpus
from astrbot_plugin_ltm.scope import Origin, Scope
from astrbot_plugin_ltm.storing.keyword_rows import index_turns, rebuild_fact_rows
from astrbot_plugin_ltm.storing.tables import MemoryEvent, MemoryEvidence, MemoryItem
from astrbot_plugin_ltm.storing.turns import turn_passages
from astrbot_plugin_ltm.storing.vector_rows import store_vectors
from astrbot_plugin_ltm.withholding import speaker_of

from .scale import pct, rss_mb
from .soak import SoakEmbedder, Turns, pragmas

GROUP = "bigroup"
PLATFORM = "big"
SCOPE = Scope("group", f"{PLATFORM}:{GROUP}")
UMO = f"{PLATFORM}:GroupMessage:{GROUP}"
START = datetime(2026, 1, 1, tzinfo=UTC)
BATCH = 5000


def _engine(directory: Path, embedder: SoakEmbedder) -> tuple[Any, LTMEngine]:
    db = create_async_engine(f"sqlite+aiosqlite:///{directory / 'data_v4.db'}")
    event.listen(db.sync_engine, "connect", pragmas)
    engine = LTMEngine(db, {"write_policy": {"mode": "auto"}}, embedder=embedder, data_dir=directory / "plugin")
    return db, engine


async def build(directory: Path, turns: int, seed: int = 11) -> dict[str, Any]:
    directory.mkdir(parents=True, exist_ok=True)
    embedder = SoakEmbedder()
    db, engine = _engine(directory, embedder)
    await engine.start(background=False)
    rng = random.Random(seed)
    words = Turns(rng, 200, 0)
    members = words.users[:200]
    step = timedelta(days=365) / turns
    started = time.perf_counter()
    at = START
    day_events: list[str] = []
    days = 0
    n = 0
    while n < turns:
        batch: list[MemoryEvent] = []
        for _ in range(min(BATCH, turns - n)):
            n += 1
            at += step
            uid, name = rng.choice(members)
            batch.append(MemoryEvent(scope=SCOPE.kind, scope_id=SCOPE.id, source_type="message", source_role="user",
                                     content={"text": words.user_text()}, platform_id=PLATFORM, session_id=UMO,
                                     sender_id=uid, sender_name=name, created_at=at, extraction_status="done"))
            if rng.random() < 0.1:  # the bot was asked
                batch.append(MemoryEvent(
                    scope=SCOPE.kind, scope_id=SCOPE.id, source_type="message", source_role="assistant",
                    content={"text": words.reply()}, platform_id=PLATFORM, session_id=UMO,
                    created_at=at + timedelta(seconds=2), extraction_status="done"))
        async with engine.db.write() as session:
            session.add_all(batch)
            await session.flush()
            await index_turns(session, batch, in_thread=True)
        vectors = [embedder.embed_sync(turn_passages(e.source_type, e.content, speaker_of(e))) for e in batch]
        async with engine.db.write() as session:
            await store_vectors(session, Corpus.TURNS, [(e.id or 0, SCOPE) for e in batch], embedder.model_id, vectors,
                                at)
        # a summary a day, citing the day's turns
        for e in batch:
            if e.created_at.date() != (START + timedelta(days=days)).date():
                if day_events:
                    await _summary(engine, embedder, START + timedelta(days=days), day_events)
                days = (e.created_at - START).days
                day_events = []
            day_events.append(e.event_id)
        engine.keyword_index.clear()
        engine.vector_index.clear()
        print(f"{n:,} turns, {time.perf_counter() - started:.0f} s", flush=True)
    if day_events:
        await _summary(engine, embedder, START + timedelta(days=days), day_events)
    await _memories(engine, embedder, members, rng)
    async with engine.db.read() as session:
        events = (await session.execute(text("SELECT count(*) FROM ltm_events"))).scalar_one()
    await engine.stop()
    await db.dispose()
    size = sum(p.stat().st_size for p in directory.glob("data_v4.db*"))
    return {"turns": turns, "events": events, "bytes": size, "seconds": time.perf_counter() - started}


async def _summary(engine: LTMEngine, embedder: SoakEmbedder, day: datetime, event_ids: list[str]) -> None:
    fact = f"The group talked on {day:%Y-%m-%d} about many things"
    async with engine.db.write() as session:
        item = MemoryItem(scope=SCOPE.kind, scope_id=SCOPE.id, type="summary", fact=fact,
                          fact_key=f"summary_day_{day:%Y%m%d}", confidence=0.8, importance=0.5, status="active",
                          created_at=day, updated_at=day, valid_from=day, valid_to=day + timedelta(days=1))
        session.add(item)
        await session.flush()
        try:  # a summary's links: their own table once there is one (storing.evidence), else rows of ltm_evidence
            from astrbot_plugin_ltm.storing.evidence import link_summary

            await link_summary(session, item, event_ids)
        except ImportError:
            await session.execute(insert(MemoryEvidence), [
                {"memory_id": item.memory_id, "event_id": e, "extraction_method": "summary",
                 "extraction_meta": {"level": "day"}, "created_at": day} for e in event_ids])
        await store_vectors(session, Corpus.MEMORIES, [(item.id or 0, SCOPE)], embedder.model_id,
                            [embedder.embed_sync([fact])], day)


async def _memories(engine: LTMEngine, embedder: SoakEmbedder, members: list[tuple[str, str]],
                    rng: random.Random) -> None:
    words = Turns(rng, 10, 0).words
    rows = []
    for n in range(2000):
        uid, name = members[n % len(members)]
        when = START + timedelta(days=rng.random() * 365)
        rows.append(MemoryItem(scope=SCOPE.kind, scope_id=SCOPE.id, type="preference",
                               fact=f"{name} likes {' '.join(words.some(rng.randint(1, 4)))}",
                               fact_key=f"{uid}_likes_{n}", confidence=0.8, importance=round(rng.random(), 2),
                               status="active" if n < 200 else "superseded", created_at=when, updated_at=when))
    async with engine.db.write() as session:
        session.add_all(rows)
        await session.flush()
        await store_vectors(session, Corpus.MEMORIES, [(r.id or 0, SCOPE) for r in rows], embedder.model_id,
                            [embedder.embed_sync([r.fact]) for r in rows], START)
        await rebuild_fact_rows(session)


async def read(directory: Path, reads: int, seed: int = 5) -> dict[str, Any]:
    embedder = SoakEmbedder()
    db, engine = _engine(directory, embedder)
    await engine.start(background=False)
    rng = random.Random(seed)
    async with engine.db.read() as session:
        top = (await session.execute(text("SELECT max(id) FROM ltm_events"))).scalar_one()
        samples = []
        for _ in range(reads + 1):
            recent = rng.random() < 0.5
            rowid = rng.randint(max(1, top - 40_000), top) if recent else rng.randint(1, top)
            row = (await session.execute(text(
                "SELECT content, sender_id, sender_name, created_at FROM ltm_events WHERE id >= :r "
                "AND source_role = 'user' ORDER BY id LIMIT 1"), {"r": rowid})).first()
            if row is not None:
                said = json.loads(row[0]).get("text", "") if isinstance(row[0], str) else row[0].get("text", "")
                samples.append((" ".join(str(said).split()[:8]), row[1], row[2], str(row[3])))
    gc.collect()
    rss_before = rss_mb()

    def origin(uid: str, name: str) -> Origin:
        return Origin(PLATFORM, UMO, uid, name, group_id=GROUP)

    start = time.perf_counter()
    first = samples[0]
    await engine.memory_block(origin(first[1], first[2]), first[0])
    first_read = time.perf_counter() - start
    await engine.loads_settled()
    cold = time.perf_counter() - start
    times: list[float] = []
    embed_calls = embedder.texts
    for n, (said, uid, name, at) in enumerate(samples[1:]):
        query = said
        if n % 10 == 9:  # now and then a message names the day it asks about
            day = datetime.fromisoformat(at)
            query = f"what did we say on {day:%B} {day.day}?"
        t0 = time.perf_counter()
        await engine.memory_block(origin(uid, name), query)
        times.append((time.perf_counter() - t0) * 1000)
    out = {
        "reads": len(times), "first_read_s": first_read, "cold_loads_settled_s": cold,
        "read_ms": {"p50": pct(times, 50), "p95": pct(times, 95), "max": max(times, default=None)},
        "queries_embedded": embedder.texts - embed_calls,
        "rss_before_reads_mb": rss_before, "rss_after_reads_mb": rss_mb(),
        "keyword_mb": engine.keyword_index.held() / 2**20, "vector_mb": engine.vector_index.held() / 2**20,
    }
    await engine.stop()
    await db.dispose()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.big_scope", description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("build", "read"))
    parser.add_argument("dir")
    parser.add_argument("--turns", type=int, default=1_000_000)
    parser.add_argument("--reads", type=int, default=300)
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args(argv)
    directory = Path(args.dir)
    result = asyncio.run(build(directory, args.turns) if args.what == "build" else read(directory, args.reads))
    print(json.dumps(result, indent=1, default=str))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
