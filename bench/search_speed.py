"""The dashboard's text search (``GET items?q=…``) at scale: what a search
costs in a store of ``--size`` memories, for multi-word English and Chinese
queries and for queries shorter than a CJK bigram (one character).

A synthetic store (bench.scale's vocabulary, one tenth of it Chinese, plus
a few facts about a cat) is filled straight into the tables, its keyword
rows rebuilt, then each query is sent ``--repeats`` times through
MemoryAPI.list_items as the dashboard sends it, across every scope and
within the big scope. Prints p50/p95 in milliseconds and the hits; never
asserts (docs/decisions.md#d75)::

    python -m bench.search_speed --size 10000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import create_async_engine

from astrbot_plugin_ltm.doors.api import MemoryAPI
from astrbot_plugin_ltm.engine import LTMEngine
from astrbot_plugin_ltm.enums import MEMORY_TYPES
from astrbot_plugin_ltm.storing.keyword_rows import rebuild_fact_rows
from astrbot_plugin_ltm.storing.tables import MemoryItem

from .scale import Words

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
BIG_SCOPE = "bench:big"
CAT_FACTS = ("用户养了一只叫咪咪的猫", "用户的猫喜欢晒太阳", "Alice adopted a cat named Mimi")
QUERIES = (
    ("multi-word English", "{word} {other} music"),
    ("multi-word Chinese", "咪咪的猫"),
    ("one Chinese character", "猫"),
    ("one rare Chinese character", "{han}"),
    ("one Latin letter", "x"),
)


async def fill(engine: LTMEngine, size: int, rng: random.Random, words: Words) -> None:
    rows: list[dict[str, Any]] = []
    others = max(1, size // 100)
    for n in range(size):
        scope_id = BIG_SCOPE if n < size * 0.8 else f"bench:u{n % others:04d}"
        fact = CAT_FACTS[n // 1000] if n % 1000 == 0 and n // 1000 < len(CAT_FACTS) else words.fact()
        updated = NOW - timedelta(days=rng.random() * 180)
        rows.append({
            "memory_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)), "scope": "user",
            "scope_id": scope_id, "type": rng.choice(MEMORY_TYPES), "fact": fact, "fact_key": f"k{n}",
            "confidence": 0.9, "importance": round(rng.random(), 3), "evidence_count": 1, "ttl_days": None,
            "status": "active", "awaiting_approval": False, "created_at": updated, "updated_at": updated,
        })
    for lo in range(0, len(rows), 5000):
        async with engine.db.write() as session:
            await session.execute(insert(MemoryItem), rows[lo:lo + 5000])
    async with engine.db.write() as session:
        await rebuild_fact_rows(session)


async def run(size: int, repeats: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    words = Words(rng)
    with tempfile.TemporaryDirectory() as tmp:
        sql = create_async_engine(f"sqlite+aiosqlite:///{Path(tmp) / 'search.db'}")
        engine = LTMEngine(sql, {"write_policy": {"mode": "auto"}}, clock=lambda: NOW)
        await engine.start(background=False)
        try:
            await fill(engine, size, rng, words)

            async def save(_raw: dict[str, Any]) -> None:
                return None

            api = MemoryAPI(engine, lambda: {}, save)
            values = {"word": words.words[5], "other": words.words[50], "han": words.han[7]}
            out: dict[str, Any] = {"size": size, "repeats": repeats, "queries": []}
            for name, template in QUERIES:
                q = template.format(**values)
                for where, extra in (("every scope", {}), ("big scope", {"scope": "user", "scope_id": BIG_SCOPE})):
                    times, total = [], 0
                    for _ in range(repeats):
                        start = time.perf_counter()
                        answer = await api.call(api.list_items, {"q": q, **extra})
                        times.append((time.perf_counter() - start) * 1000)
                        total = answer.body.get("data", {}).get("total", -1) if answer.status == 200 else -1
                    times.sort()
                    out["queries"].append({
                        "query": name, "q": q, "where": where, "hits": total,
                        "p50_ms": round(statistics.median(times), 2),
                        "p95_ms": round(times[min(len(times) - 1, int(len(times) * 0.95))], 2),
                    })
            return out
        finally:
            await engine.stop()
            await sql.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.search_speed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    result = asyncio.run(run(args.size, args.repeats, args.seed))
    print(f"{'query':<28} {'where':<12} {'hits':>6} {'p50 ms':>8} {'p95 ms':>8}")
    for r in result["queries"]:
        print(f"{r['query']:<28} {r['where']:<12} {r['hits']:>6} {r['p50_ms']:>8.2f} {r['p95_ms']:>8.2f}")
    print(json.dumps(result, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
