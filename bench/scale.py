"""Scale benchmark: the plugin's hot paths against large synthetic stores.

    python -m bench.scale [--sizes 1000,10000,100000] [--scopes 1000] [--json OUT]

For each size N, in a fresh process (so memory and cold-start figures are
its own) and a fresh SQLite file:

1. ``engine.start(background=False)`` migrates an empty database.
2. N active items go into one user scope and ``--other-items`` into each
   of ``--scopes`` other scopes, inserted in bulk through the models on the
   engine's database layer; their vectors (deterministic HashEmbedder, no
   model) are stored in bulk the same way when the engine has vectors.
   Facts are synthetic, Zipf-distributed words, some long, some Chinese.
3. Keyword index rebuild: ``astrbot_plugin_ltm.db.fts_rebuild`` over all
   items (this is also what builds the index for the bulk-inserted items).
4. Cold start: a new LTMEngine on the filled file, the token counter's
   cache cleared, timed through ``start()``; then its first read (which
   loads the scope's vector namespace), then the same again once the
   namespace file exists.
5. Read path: ``engine.memory_block`` for ``--queries`` messages in the big
   scope and in small scopes; the time the embedder spent is subtracted
   (reported apart), and every block is checked against the token budget,
   recounted with the plugin's counter, at several budgets.
6. Hook: ``engine.record_turn`` (what on_agent_done runs) per call, then the
   recorder's flush of those events.
7. Write pipeline: events recorded in the big scope, a fake extractor
   giving one new candidate per user event, ``engine.worker.drain()``
   (extraction batches, writer, policy gate, keyword and vector indexes).
8. Resident memory: current RSS (psutil) and peak (getrusage).

Timings are printed, never asserted; a block over its budget is an error
(exit status 1).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
import json
import math
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import insert, text as sql
from sqlalchemy.ext.asyncio import create_async_engine

from astrbot_plugin_ltm import models
from astrbot_plugin_ltm import tokens as tokens_module
from astrbot_plugin_ltm.candidates import Candidate, ExtractionResult
from astrbot_plugin_ltm.db import fts_rebuild
from astrbot_plugin_ltm.engine import LTMEngine
from astrbot_plugin_ltm.models import MemoryItem
from astrbot_plugin_ltm.policy import MEMORY_TYPES
from astrbot_plugin_ltm.scope import Origin

from .embedders import HashEmbedder, TimedEmbedder

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
PLATFORM = "scale"
TARGET_SENDER = "target"
BUDGETS = (800, 200, 60)  # the default read budget, then tighter ones


# -- synthetic text --------------------------------------------------------------------


class Words:
    """A deterministic pseudo-English vocabulary with Zipf frequencies, and
    a pool of Chinese characters."""

    SYLLABLES = ("ka ro mi ta ne su lo vi an el or is un ber ton mar lin dra pel sor "
                 "qui fen gal hol jun kel mos nar pim rut sel tav wen zor").split()

    def __init__(self, rng: random.Random, size: int = 4000) -> None:
        seen: dict[str, None] = {}
        while len(seen) < size:
            word = "".join(rng.choice(self.SYLLABLES) for _ in range(rng.randint(2, 3)))
            seen.setdefault(word, None)
        self.words = list(seen)
        weights = [1.0 / (rank + 1) for rank in range(size)]
        self.cum = list(np.cumsum(weights))
        self.names = [w.capitalize() for w in self.words[200:400]]
        self.han = [chr(0x4E00 + rng.randrange(3000)) for _ in range(600)]
        self.rng = rng

    def some(self, n: int) -> list[str]:
        return self.rng.choices(self.words, cum_weights=self.cum, k=n)

    def fact(self) -> str:
        r = self.rng.random()
        name = self.rng.choice(self.names)
        if r < 0.08:  # Chinese
            return name + "".join(self.rng.choices(self.han, k=self.rng.randint(8, 40)))
        n = self.rng.randint(30, 55) if r < 0.15 else self.rng.randint(6, 16)  # some long facts
        verb = self.rng.choice(("likes", "lives in", "works on", "visited", "plans", "owns", "said"))
        return f"{name} {verb} " + " ".join(self.some(n))

    def query(self, facts: list[str]) -> str:
        if facts and self.rng.random() < 0.8:
            words = facts[self.rng.randrange(len(facts))].split()
            picked = self.rng.sample(words, min(len(words), self.rng.randint(2, 5)))
            return "what about " + " ".join(picked + self.some(self.rng.randint(0, 4))) + "?"
        return " ".join(self.some(self.rng.randint(3, 10))) + "?"


# -- measuring -------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(values), q)) if values else None


def rss_mb() -> float | None:
    try:
        import psutil

        return psutil.Process().memory_info().rss / 2**20
    except Exception:
        return None


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def engine_kwargs(embedder: Any, data_dir: Path, counter: Any | None) -> dict[str, Any]:
    params = inspect.signature(LTMEngine.__init__).parameters
    kwargs: dict[str, Any] = {}
    if embedder is not None and "embedder" in params:
        kwargs["embedder"] = embedder
    if "data_dir" in params:
        kwargs["data_dir"] = data_dir
    if counter is not None:
        kwargs["counter"] = counter
    return kwargs


def config(max_tokens: int = 800, legacy_scope: bool = True) -> dict[str, Any]:
    """The plugin's defaults but for what a bulk benchmark would trip over:
    write rate limits, the per-scope cap, retention. ``legacy_scope`` is
    identity.include_legacy_umo_on_read (default on: a private chat also
    reads the per-conversation scope of older versions)."""
    return {
        "write_policy": {"mode": "auto", "max_writes_per_session": 100000, "max_writes_per_hour": 1000000,
                         "max_items_per_scope": 10000000},
        "read_policy": {"max_tokens": max_tokens},
        "identity": {"include_legacy_umo_on_read": legacy_scope},
        "retention_days": {t: -1 for t in MEMORY_TYPES},
    }


class OneFactPerEvent:
    """Extractor: one new, evidence-linked candidate per user event."""

    def __init__(self) -> None:
        self.candidates = 0

    async def extract(self, events):
        out = []
        for e in events:
            if e.source_role != "user":
                continue
            fact = f"{e.sender_name} mentioned {e.content.get('text', '')}"[:280]
            out.append(Candidate(type="episode", fact=fact, fact_key=f"w_{e.event_id}", confidence=0.9,
                                 importance=0.5, event_ids=[e.event_id]))
        self.candidates += len(out)
        return ExtractionResult(out)


# -- one size ----------------------------------------------------------------------------


@dataclass
class Store:
    target_facts: list[str]
    other_scopes: list[str]


async def fill(engine: LTMEngine, size: int, scopes: int, per_scope: int, words: Words,
               embedder: HashEmbedder | None, rng: random.Random) -> tuple[Store, dict[str, float]]:
    timings: dict[str, float] = {}
    target_scope = f"{PLATFORM}:{TARGET_SENDER}"
    others = [f"{PLATFORM}:u{n:05d}" for n in range(scopes)]
    plan = [(target_scope, size)] + [(s, per_scope) for s in others]
    target_facts: list[str] = []
    rows: list[dict[str, Any]] = []
    for scope_id, n in plan:
        for i in range(n):
            fact = words.fact()
            if scope_id == target_scope:
                target_facts.append(fact)
            updated = NOW - timedelta(days=rng.random() * 180)
            rows.append({
                "memory_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "scope": "user", "scope_id": scope_id, "type": rng.choice(MEMORY_TYPES), "fact": fact,
                "fact_key": f"k{i}", "confidence": round(0.6 + 0.4 * rng.random(), 3),
                "importance": round(rng.random(), 3), "evidence_count": 1, "ttl_days": None,
                "status": "active", "awaiting_approval": False, "created_at": updated, "updated_at": updated,
            })
    start = time.perf_counter()
    for lo in range(0, len(rows), 5000):
        async with engine.db.write() as session:
            await session.execute(insert(MemoryItem), rows[lo:lo + 5000])
    timings["insert_items_s"] = time.perf_counter() - start

    vector_model = getattr(models, "MemoryVector", None)
    if embedder is not None and vector_model is not None and getattr(engine, "vectors", None) is not None:
        start = time.perf_counter()
        async with engine.db.read() as session:
            ids = [(r[0], r[1], r[2]) for r in await session.execute(
                sql("SELECT id, scope_id, fact FROM ltm_items ORDER BY id"))]
        vec_rows = []
        for lo in range(0, len(ids), 2000):
            chunk = ids[lo:lo + 2000]
            vecs = embedder.embed_sync([f for _, _, f in chunk])
            for (rowid, scope_id, _), vec in zip(chunk, vecs):
                vec_rows.append({"item_id": rowid, "scope": "user", "scope_id": scope_id,
                                 "model": embedder.model_id, "dim": int(vec.shape[0]),
                                 "vector": vec.astype(np.float32).tobytes(), "updated_at": NOW})
        timings["embed_items_s"] = time.perf_counter() - start
        start = time.perf_counter()
        for lo in range(0, len(vec_rows), 5000):
            async with engine.db.write() as session:
                await session.execute(insert(vector_model), vec_rows[lo:lo + 5000])
        timings["insert_vectors_s"] = time.perf_counter() - start
    return Store(target_facts, others), timings


def check_block(block, budget: int, max_items: int, count) -> list[str]:
    problems = []
    if block.tokens > budget:
        problems.append(f"block.tokens {block.tokens} > {budget}")
    if block.text and count(block.text) > budget:
        problems.append(f"recounted {count(block.text)} > {budget}")
    if block.text and count(block.text) != block.tokens:
        problems.append(f"block.tokens {block.tokens} != recount {count(block.text)}")
    if len(block.items) > max_items:
        problems.append(f"{len(block.items)} items > max_items {max_items}")
    return problems


async def timed_reads(engine: LTMEngine, origins: list[Origin], queries: list[str],
                      timed: TimedEmbedder | None, budget: int, count) -> tuple[list[float], list[float], list[str], list[int]]:
    total, embed, problems, used = [], [], [], []
    max_items = engine.config.read_policy.max_items
    for origin, query in zip(origins, queries):
        before = timed.seconds if timed else 0.0
        start = time.perf_counter()
        block = await engine.memory_block(origin, query)
        ms = (time.perf_counter() - start) * 1000
        em = ((timed.seconds - before) * 1000) if timed else 0.0
        total.append(ms - em)
        embed.append(em)
        used.append(block.tokens)
        problems += check_block(block, budget, max_items, count)
    return total, embed, problems, used


async def run_size(size: int, scopes: int, per_scope: int, n_queries: int, n_hooks: int,
                   n_writes: int, vectors: bool, seed: int = 7) -> dict[str, Any]:
    rng = random.Random(seed)
    words = Words(rng)
    out: dict[str, Any] = {"size": size, "scopes": scopes + 1, "items_total": size + scopes * per_scope}
    tmp = tempfile.TemporaryDirectory(prefix=f"ltm-scale-{size}-")
    path = Path(tmp.name)
    base_embedder = HashEmbedder() if vectors else None
    counter = tokens_module.default_counter()
    count = counter.count
    try:
        # -- empty database, bulk fill, keyword index ------------------------------
        db = create_async_engine(f"sqlite+aiosqlite:///{path / 'ltm.db'}")
        clock = Clock(NOW)
        engine = LTMEngine(db, config(), clock=clock, **engine_kwargs(base_embedder, path / "data", counter))
        start = time.perf_counter()
        await engine.start(background=False)
        out["migrate_empty_s"] = time.perf_counter() - start
        out["vectors"] = bool(vectors and "embedder" in inspect.signature(LTMEngine.__init__).parameters)
        store, timings = await fill(engine, size, scopes, per_scope, words,
                                    base_embedder if out["vectors"] else None, rng)
        out.update(timings)
        start = time.perf_counter()
        async with engine.db.write() as session:
            indexed = await fts_rebuild(session)
        out["fts_rebuild_s"] = time.perf_counter() - start
        out["fts_rebuild_rows"] = indexed
        await engine.stop()
        await db.dispose()
        out["db_mb_after_fill"] = (path / "ltm.db").stat().st_size / 2**20

        # -- cold start, twice (second time the vector namespace file exists) --------
        extractor = OneFactPerEvent()

        async def extractor_for(_session_id):
            return extractor

        for attempt in (1, 2):
            gc.collect()
            tokens_module.default_counter.cache_clear()
            db = create_async_engine(f"sqlite+aiosqlite:///{path / 'ltm.db'}")
            clock = Clock(NOW)
            timed = TimedEmbedder(base_embedder) if out["vectors"] else None
            engine = LTMEngine(db, config(), clock=clock, extractor_for=extractor_for,
                               **engine_kwargs(timed, path / "data", None))
            start = time.perf_counter()
            await engine.start(background=False)
            out[f"cold_start_{attempt}_s"] = time.perf_counter() - start
            target = Origin(PLATFORM, f"{PLATFORM}:FriendMessage:{TARGET_SENDER}", TARGET_SENDER, "Target")
            start = time.perf_counter()
            await engine.memory_block(target, words.query(store.target_facts))
            out[f"first_read_{attempt}_ms"] = (time.perf_counter() - start) * 1000
            if attempt == 1:
                await engine.stop()  # writes the vector namespace file
                await db.dispose()
        count = engine.reader.counter.count

        # -- read path --------------------------------------------------------------
        queries = [words.query(store.target_facts) for _ in range(n_queries)]
        origins = [target] * n_queries
        for q in queries[:5]:
            await engine.memory_block(target, q)  # warm
        total, embed, problems, used = await timed_reads(engine, origins, queries, timed, 800, count)
        out["read_p50_ms"], out["read_p95_ms"] = pct(total, 50), pct(total, 95)
        out["read_embed_p50_ms"] = pct(embed, 50)
        out["read_mean_tokens"] = statistics.fmean(used) if used else 0
        small = [Origin(PLATFORM, f"{PLATFORM}:FriendMessage:{s[len(PLATFORM) + 1:]}", s[len(PLATFORM) + 1:])
                 for s in rng.sample(store.other_scopes, min(len(store.other_scopes), n_queries // 2))]
        small_queries = [words.query([]) for _ in small]
        s_total, _, s_problems, _ = await timed_reads(engine, small, small_queries, timed, 800, count)
        out["read_small_scope_p50_ms"], out["read_small_scope_p95_ms"] = pct(s_total, 50), pct(s_total, 95)
        problems += s_problems
        engine.apply_config(config(legacy_scope=False))
        l_total, _, l_problems, _ = await timed_reads(engine, origins, queries, timed, 800, count)
        out["read_no_legacy_p50_ms"], out["read_no_legacy_p95_ms"] = pct(l_total, 50), pct(l_total, 95)
        problems += l_problems
        budget_checks = len(total) + len(s_total) + len(l_total)
        for budget in BUDGETS[1:]:
            engine.apply_config(config(max_tokens=budget))
            _, _, p, _ = await timed_reads(engine, origins[:50], queries[:50], timed, budget, count)
            problems += p
            budget_checks += min(50, len(queries))
        engine.apply_config(config())
        out["budget_checks"] = budget_checks
        out["budget_violations"] = len(problems)
        out["budget_problems"] = problems[:5]

        # -- hook -----------------------------------------------------------------------
        hook_us = []
        speaker = Origin(PLATFORM, f"{PLATFORM}:FriendMessage:{TARGET_SENDER}", TARGET_SENDER, "Target")
        messages = [(" ".join(words.some(rng.randint(5, 30))), " ".join(words.some(rng.randint(10, 60))))
                    for _ in range(n_hooks)]
        for user, assistant in messages:
            start = time.perf_counter_ns()
            engine.record_turn(speaker, user, assistant)
            hook_us.append((time.perf_counter_ns() - start) / 1000)
        out["hook_p50_us"], out["hook_p95_us"] = pct(hook_us, 50), pct(hook_us, 95)
        start = time.perf_counter()
        flushed = await engine.recorder.flush()
        out["flush_events_per_s"] = flushed / (time.perf_counter() - start)
        # these events are not what the write benchmark extracts
        async with engine.db.write() as session:
            await session.execute(sql("UPDATE ltm_events SET extraction_status = 'skipped'"))

        # -- write pipeline ----------------------------------------------------------------
        for i in range(n_writes):
            clock.now = NOW + timedelta(seconds=i)
            engine.record_turn(speaker, f"update {i}: " + " ".join(words.some(rng.randint(5, 20))), "")
        await engine.recorder.flush()
        clock.now = NOW + timedelta(seconds=n_writes + 60)
        embed_before = timed.seconds if timed else 0.0
        start = time.perf_counter()
        results = await engine.worker.drain(max_batches=100000)
        elapsed = time.perf_counter() - start
        created = sum(1 for r in results for o in r.outcomes if o.action == "created")
        out["write_candidates"] = extractor.candidates
        out["write_created"] = created
        out["write_batches"] = len(results)
        out["write_candidates_per_s"] = extractor.candidates / elapsed if elapsed else None
        out["write_embed_s"] = (timed.seconds - embed_before) if timed else 0.0

        out["rss_mb"] = rss_mb()
        out["peak_rss_mb"] = peak_mb()
        await engine.stop()
        await db.dispose()
    finally:
        tmp.cleanup()
    return out


# -- driver ------------------------------------------------------------------------------


def _fmt(v: Any, fmt: str) -> str:
    return "—" if v is None else format(v, fmt)


ROWS = [
    ("items in database", "items_total", ",.0f"),
    ("bulk insert items (s)", "insert_items_s", ".2f"),
    ("bulk insert vectors (s)", "insert_vectors_s", ".2f"),
    ("FTS rebuild (s)", "fts_rebuild_s", ".2f"),
    ("database file (MB)", "db_mb_after_fill", ".0f"),
    ("cold start (s)", "cold_start_1_s", ".3f"),
    ("  first read (ms)", "first_read_1_ms", ".1f"),
    ("cold start again (s)", "cold_start_2_s", ".3f"),
    ("  first read, ns file (ms)", "first_read_2_ms", ".1f"),
    ("read p50 (ms)", "read_p50_ms", ".2f"),
    ("read p95 (ms)", "read_p95_ms", ".2f"),
    ("  query embedding p50 (ms)", "read_embed_p50_ms", ".2f"),
    ("  mean tokens injected", "read_mean_tokens", ".0f"),
    ("read p50, no legacy scope (ms)", "read_no_legacy_p50_ms", ".2f"),
    ("read p95, no legacy scope (ms)", "read_no_legacy_p95_ms", ".2f"),
    ("read small scope p50 (ms)", "read_small_scope_p50_ms", ".2f"),
    ("read small scope p95 (ms)", "read_small_scope_p95_ms", ".2f"),
    ("hook p50 (µs)", "hook_p50_us", ".1f"),
    ("hook p95 (µs)", "hook_p95_us", ".1f"),
    ("recorder flush (events/s)", "flush_events_per_s", ",.0f"),
    ("write pipeline (cand./s)", "write_candidates_per_s", ",.0f"),
    ("  candidates / created", None, ""),
    ("budget violations / checks", None, ""),
    ("RSS (MB)", "rss_mb", ".0f"),
    ("peak RSS (MB)", "peak_rss_mb", ".0f"),
    ("time for this size (s)", "seconds", ".1f"),
]


def table(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    head = f"{'':<32}" + "".join(f"{r['size']:>12,}" for r in results)
    lines = [
        f"scale bench: one scope of N items + {meta['scopes']} other scopes × {meta['other_items']} items; "
        f"vectors: {'HashEmbedder (384-d, fake)' if results and results[0].get('vectors') else 'none (keyword-only)'}; "
        f"{meta['queries']} reads, {meta['hooks']} hooks, {meta['writes']} candidates written per size",
        "read times exclude the embedder's own time; the hook is engine.record_turn; the plugin's default "
        "identity settings read the legacy per-conversation scope too (the 'no legacy scope' rows turn it off)",
        "",
        head,
    ]
    for label, key, fmt in ROWS:
        if key is None and label.startswith("  candidates"):
            cells = [f"{r.get('write_candidates', 0)}/{r.get('write_created', 0)}" for r in results]
        elif key is None:
            cells = [f"{r.get('budget_violations', 0)}/{r.get('budget_checks', 0)}" for r in results]
        else:
            if all(r.get(key) is None for r in results):
                continue
            cells = [_fmt(r.get(key), fmt) for r in results]
        lines.append(f"{label:<32}" + "".join(f"{c:>12}" for c in cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--scopes", type=int, default=1000, help="other scopes in the database")
    parser.add_argument("--other-items", type=int, default=20, help="items in each other scope")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--hooks", type=int, default=2000)
    parser.add_argument("--writes", type=int, default=400, help="candidates through the write pipeline")
    parser.add_argument("--no-vectors", action="store_true", help="keyword-only even if the engine takes an embedder")
    parser.add_argument("--inline", action="store_true", help="run the sizes in this process")
    parser.add_argument("--json", dest="json_out")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # child: run one size, print JSON
    args = parser.parse_args(argv)

    def one(size: int) -> dict[str, Any]:
        start = time.perf_counter()
        result = asyncio.run(run_size(size, args.scopes, args.other_items, args.queries, args.hooks,
                                      args.writes, not args.no_vectors))
        result["seconds"] = time.perf_counter() - start
        return result

    if args.one is not None:
        print(json.dumps(one(args.one)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    results = []
    for size in sizes:
        if args.inline:
            results.append(one(size))
            continue
        cmd = [sys.executable, "-m", "bench.scale", "--one", str(size), "--scopes", str(args.scopes),
               "--other-items", str(args.other_items), "--queries", str(args.queries),
               "--hooks", str(args.hooks), "--writes", str(args.writes)]
        if args.no_vectors:
            cmd.append("--no-vectors")
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            raise SystemExit(f"size {size} failed")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"size {size:,}: {results[-1]['seconds']:.1f} s", file=sys.stderr)
    meta = {"scopes": args.scopes, "other_items": args.other_items, "queries": args.queries,
            "hooks": args.hooks, "writes": args.writes}
    print(table(results, meta))
    if args.json_out:
        out = Path(args.json_out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"settings": meta, "results": results}, indent=2) + "\n")
        print(f"\nwritten to {out}")
    return 1 if any(r.get("budget_violations") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
