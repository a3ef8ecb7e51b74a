"""Soak benchmark: the engine as AstrBot drives it, for a long time.

    python -m bench.soak [--turns 200000] [--users 2000] [--groups 60] [--json OUT] [--svg OUT]

One data directory and one SQLite file (WAL, as AstrBot's) for the whole
run; an ``LTMEngine`` started with its background loops (recorder's
flusher, extraction worker with the vector fill and the retention sweep,
summaries, usage counts, drift monitor, compaction) and fed ``--turns``
turns through ``engine.record_turn`` (what on_agent_done runs) as fast as
it takes them: the feed waits while more than ``--max-backlog`` events are
queued or pending extraction, so the flusher and the worker set the pace. Every ``--restart-every``
turns the engine is stopped and a new one opened on the same files (a
plugin reload, an AstrBot restart).

The turns: ``--conversations`` conversations at a time, each of 3–40
turns, private (one of ``--users`` users) or in a group (``--groups``
groups, several of their members speaking); short or long replies (several
paragraphs), some Chinese, now and then a "remember that …". A fake clock
moves ``--seconds-per-turn`` per turn (15 s: 200k turns are ~35 days, so
retention, day/week/month roll-ups and the daily drift snapshots all come
round). Fake models: an extractor that gives a fact for about one user
message in three, many of them new values of a user's earlier facts (so
the writer updates, supersedes and evicts), a summarizer that answers the
session's first sentences, and a deterministic embedder (a seeded random
vector per text: vectors and FAISS files on).

The loops whose period is wall time (summaries: 60 s, drift: 600 s,
compaction: 3600 s) would come round only a few times in a run that moves
the clock this fast, so the feed also triggers them by simulated time
(``--tick-turns``): the summary worker is kicked, the drift monitor asked
for its daily snapshot, a bounded compaction pass run every window.

Every ``--read-every`` turns a read (``engine.memory_block`` with the
conversation's earlier messages, what on_llm_request runs) is timed.

Per window of ``--window`` turns it prints and keeps: resident memory
(RSS), hook latency p50/p95/p99, read latency p50/p95, the queues (the
recorder's queue, journal bytes, events pending extraction, memories and
turns without a vector, turns no session summary covers yet, usage counts
not yet written), the sizes (SQLite file with its WAL, FAISS files,
journal) and the row counts of every table that grows. At the end the
queues are drained (the worker, summaries, vector fill, usage, the
recorder) and checked empty: any left is an error (exit status 1). Timings
are printed, never asserted.

``--inspect DIR`` opens a kept store again and reads once in every scope;
with ``--reads N`` it times the reads of N new conversations instead, each
as it starts and once more (its namespaces loaded): what reads cost in a
store of that age, without feeding it again.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import json
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import event
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from astrbot_plugin_ltm.engine import LTMEngine
from astrbot_plugin_ltm.learning.candidates import Candidate, ExtractionResult
from astrbot_plugin_ltm.scope import Origin
from astrbot_plugin_ltm.storing.tables import MemoryEvent

from .memory_account import account
from .scale import Words, pct, rss_mb

START = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
PLATFORM = "soak"
TABLES = ("ltm_events", "ltm_items", "ltm_evidence", "ltm_audit", "ltm_gate_log", "ltm_tombstones",
          "ltm_item_vectors", "ltm_turn_vectors", "ltm_drift_snapshots", "ltm_policy_versions", "ltm_items_fts")
ATTRIBUTES = ("likes", "lives in", "works on", "plans", "owns", "studies", "listens to", "cooks")


class SoakClock:
    """The fake wall clock: moved by the feed, never by the machine."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class SoakEmbedder:
    """The embedding provider's stand-in: a deterministic unit vector per
    text, drawn from a generator seeded by the text's hash (~30 µs a text).
    AstrBot's provider is a remote call whose cost is not the plugin's; the
    HashEmbedder's pure-Python token hashing took ~40 % of a soak's CPU.
    Vectors carry no meaning here: the soak measures resources, not recall."""

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self.model_id = f"soak-{dim}"
        self.calls = 0
        self.texts = 0

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")
            out[row] = np.random.default_rng(seed).standard_normal(self.dim)
        return out / np.linalg.norm(out, axis=1, keepdims=True).clip(min=1e-9)

    async def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        self.texts += len(texts)
        return self.embed_sync(list(texts))


class SoakExtractor:
    """A fact for about one user message in three; a user's facts are a
    few attributes whose values change, so many are updates."""

    def __init__(self, rng: random.Random, words: Words) -> None:
        self.rng = rng
        self.words = words
        self.calls = 0
        self.candidates = 0

    async def extract(self, events: Sequence[MemoryEvent], known: Sequence[Any] = ()) -> ExtractionResult:
        self.calls += 1
        out = []
        for e in events:
            if e.source_role != "user" or self.rng.random() > 0.33:
                continue
            sender = e.sender_name or e.sender_id or "someone"
            attribute = self.rng.choice(ATTRIBUTES)
            value = " ".join(self.words.some(self.rng.randint(1, 4)))
            kind = "episode" if attribute in ("plans", "cooks") else "preference" if attribute in (
                "likes", "listens to") else "profile"
            out.append(Candidate(type=kind, fact=f"{sender} {attribute} {value}",
                                 fact_key=f"{e.sender_id}_{attribute.replace(' ', '_')}", confidence=0.9,
                                 importance=round(0.3 + 0.5 * self.rng.random(), 2), event_ids=[e.event_id],
                                 session_id=e.session_id))
        self.candidates += len(out)
        return ExtractionResult(out)


class SoakSummarizer:
    """Session: the first sentence of the first few messages; roll-up: the
    parts joined, cut."""

    def __init__(self, max_chars: int = 600) -> None:
        self.max_chars = max_chars
        self.calls = {"session": 0, "rollup": 0}

    async def session(self, events: Sequence[MemoryEvent]) -> str:
        self.calls["session"] += 1
        lines = [str(e.content.get("text", "")).split("\n")[0][:120] for e in events[:6]]
        return (" ".join(f"{e.sender_name or e.source_role}: {line}" for e, line in zip(events, lines, strict=False))
                )[:self.max_chars] or "a short conversation"

    async def rollup(self, level: str, start: datetime, end: datetime, summaries: Sequence[str]) -> str:
        self.calls["rollup"] += 1
        return f"{level} {start:%Y-%m-%d}: " + " / ".join(s[:80] for s in summaries)[:self.max_chars]


# -- the turns -------------------------------------------------------------------------


@dataclass
class Conversation:
    origin_for: list[Origin]  # who may speak (one in a private chat)
    left: int
    history: list[str] = field(default_factory=list)


class Turns:
    def __init__(self, rng: random.Random, users: int, groups: int) -> None:
        self.rng = rng
        self.words = Words(rng)
        self.users = [(f"u{n:05d}", f"{self.words.names[n % len(self.words.names)]}{n}") for n in range(users)]
        self.groups = [(f"g{n:04d}", rng.sample(self.users, min(len(self.users), rng.randint(4, 30))))
                       for n in range(groups)]

    def conversation(self) -> Conversation:
        left = self.rng.randint(3, 40)
        if self.groups and self.rng.random() < 0.3:
            gid, members = self.rng.choice(self.groups)
            speakers = self.rng.sample(members, min(len(members), self.rng.randint(2, 6)))
            return Conversation([Origin(PLATFORM, f"{PLATFORM}:GroupMessage:{gid}", uid, name, group_id=gid)
                                 for uid, name in speakers], left)
        uid, name = self.rng.choice(self.users)
        return Conversation([Origin(PLATFORM, f"{PLATFORM}:FriendMessage:{uid}", uid, name)], left)

    def _sentence(self, lo: int, hi: int) -> str:
        if self.rng.random() < 0.2:
            return "".join(self.rng.choices(self.words.han, k=self.rng.randint(lo, hi * 2))) + "。"
        return " ".join(self.words.some(self.rng.randint(lo, hi))).capitalize() + "."

    def user_text(self) -> str:
        r = self.rng.random()
        if r < 0.01:
            return "remember that I " + self.rng.choice(ATTRIBUTES) + " " + " ".join(self.words.some(3))
        if r < 0.15:  # a long message
            return "\n\n".join(" ".join(self._sentence(6, 18) for _ in range(self.rng.randint(2, 4)))
                               for _ in range(self.rng.randint(2, 3)))
        return self._sentence(2, 15)

    def reply(self) -> str:
        if self.rng.random() < 0.4:
            return self._sentence(4, 20)
        return "\n\n".join(" ".join(self._sentence(8, 20) for _ in range(self.rng.randint(2, 4)))
                           for _ in range(self.rng.randint(2, 5)))


# -- measuring -------------------------------------------------------------------------


def pragmas(dbapi_connection: Any, _record: Any) -> None:
    """AstrBot's SQLite: WAL."""
    dbapi_connection.execute("PRAGMA journal_mode=WAL")
    dbapi_connection.execute("PRAGMA synchronous=NORMAL")
    dbapi_connection.execute("PRAGMA busy_timeout=30000")


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def db_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


async def scalar(engine: LTMEngine, statement: str) -> int:
    async with engine.db.read() as session:
        return int((await session.execute(sql(statement))).scalar() or 0)


async def queues(engine: LTMEngine, model: str) -> dict[str, int]:
    """What waits: each a count, 0 when drained."""
    return {
        "recorder_queue": engine.recorder.queued,
        "pending_events": await scalar(engine, "SELECT count(*) FROM ltm_events WHERE extraction_status = 'pending'"),
        "failed_events": await scalar(engine, "SELECT count(*) FROM ltm_events WHERE extraction_status = 'failed'"),
        "items_without_vector": await scalar(engine, (
            "SELECT count(*) FROM ltm_items i WHERE NOT EXISTS (SELECT 1 FROM ltm_item_vectors v "
            f"WHERE v.item_id = i.id AND v.model = '{model}')")),
        "turns_without_vector": await scalar(engine, (
            "SELECT count(*) FROM ltm_events e WHERE e.withheld = 0 AND e.source_role IN ('user', 'tool', "
            "'assistant') AND NOT EXISTS (SELECT 1 FROM ltm_turn_vectors v JOIN ltm_vector_spaces s "
            f"ON s.id = v.space WHERE v.event_rowid = e.id AND s.model = '{model}')")),
        # Turns after their scope's newest session summary (the summary worker's watermark), in scopes
        # holding min_events of them: a shorter tail waits by design (docs/decisions.md#d113). The
        # watermarks are grouped first: a subquery per turn made this count quadratic (40 min at 40k turns).
        "turns_unsummarised": await scalar(engine, (
            "WITH marks AS (SELECT scope, scope_id, max(valid_to) AS mark FROM ltm_items WHERE type = 'summary' "
            "AND fact_key LIKE 'summary_session_%' GROUP BY scope, scope_id) "
            "SELECT coalesce(sum(n), 0) FROM (SELECT count(*) AS n FROM ltm_events e LEFT JOIN marks m "
            "ON m.scope = e.scope AND m.scope_id = e.scope_id WHERE e.withheld = 0 "
            "AND e.source_role IN ('user', 'assistant') AND e.created_at > coalesce(m.mark, '') "
            f"GROUP BY e.scope, e.scope_id HAVING count(*) >= {int(engine.config.summaries.min_events)})")),
        "usage_pending": engine.usage.pending,
    }


async def rows(engine: LTMEngine) -> dict[str, int]:
    counts = {t: await scalar(engine, f"SELECT count(*) FROM {t}") for t in TABLES}
    counts["ltm_items_active"] = await scalar(engine, "SELECT count(*) FROM ltm_items WHERE status = 'active'")
    counts["ltm_items_summary"] = await scalar(engine, "SELECT count(*) FROM ltm_items WHERE type = 'summary'")
    return counts


async def storage(engine: LTMEngine, faiss_bytes: int) -> dict[str, Any]:
    """Where the memory's bytes are: SQLite's pages (dbstat) per table, each
    with its indexes and (FTS5) shadow tables, the FAISS files, and both per
    recorded event. Only the plugin's ``ltm_`` objects count."""
    async with engine.db.read() as session:
        owner = {str(name): str(table) for name, table in await session.execute(sql(
            "SELECT name, tbl_name FROM sqlite_master WHERE name LIKE 'ltm%' OR tbl_name LIKE 'ltm%'"))}
        pages = {str(name): int(size) for name, size in await session.execute(sql(
            "SELECT name, sum(pgsize) FROM dbstat GROUP BY name"))}
        events = int((await session.execute(sql("SELECT count(*) FROM ltm_events"))).scalar() or 0)
    tables: dict[str, int] = {}
    objects: dict[str, int] = {}
    for name, size in pages.items():
        table = owner.get(name) or (name if name.startswith("ltm") else None)
        if table is None:
            continue
        group = next((t for t in ("ltm_events_fts", "ltm_items_fts") if table.startswith(t)), table)
        tables[group] = tables.get(group, 0) + size
        objects[name] = size
    total = sum(tables.values())
    return {"events": events, "ltm_bytes": total, "faiss_bytes": faiss_bytes,
            "bytes_per_event": (total + faiss_bytes) / events if events else None,
            "tables": dict(sorted(tables.items(), key=lambda kv: -kv[1])),
            "objects": dict(sorted(objects.items(), key=lambda kv: -kv[1]))}


def storage_lines(st: dict[str, Any]) -> list[str]:
    n = st["events"] or 1
    head = (f"storage: {st['ltm_bytes'] / 2**20:.1f} MB in ltm_ tables + {st['faiss_bytes'] / 2**20:.1f} MB FAISS"
            f" for {st['events']:,} events = {_f(st['bytes_per_event'], ',.0f')} B an event")
    tables = "; ".join(f"{t} {b / 2**20:.1f} MB ({b / n:,.0f} B)" for t, b in st["tables"].items() if b / n >= 1)
    objects = "; ".join(f"{o} {b / n:,.0f} B" for o, b in st["objects"].items() if b / n >= 20)
    return [head, "tables (each with its indexes): " + tables, "objects: " + objects]


def sizes(data: Path, db_file: Path) -> dict[str, float]:
    return {"sqlite_mb": db_bytes(db_file) / 2**20, "faiss_mb": dir_bytes(data / "vectors") / 2**20,
            "faiss_files": sum(1 for p in (data / "vectors").rglob("*") if p.is_file())
            if (data / "vectors").exists() else 0,
            "journal_kb": dir_bytes(data / "journal") / 2**10}


# -- the run ---------------------------------------------------------------------------


def soak_config(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The plugin's defaults (retention, the per-scope cap, the vector
    memory budget) but memories go live (auto) and summaries are on; the
    rate limits are per bot, so a bench that speaks for thousands of users
    at once raises them."""
    raw: dict[str, Any] = {
        "write_policy": {"mode": "auto", "max_writes_per_session": 1000, "max_writes_per_hour": 1_000_000},
        "summaries": {"enable": True},
    }
    for dotted, value in (overrides or {}).items():  # "vectors.max_memory_mb": 32
        *path, last = dotted.split(".")
        section = raw
        for part in path:
            section = section.setdefault(part, {})
        section[last] = value
    return raw


def parse_set(pairs: Sequence[str]) -> dict[str, Any]:
    """``--set vectors.max_memory_mb=32``: values read as JSON, else as text."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--set wants key=value, got {pair!r}")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.overrides = parse_set(args.set or [])
        self.rng = random.Random(args.seed)
        self.turns = Turns(self.rng, args.users, args.groups)
        self.clock = SoakClock(START)
        self.embedder = SoakEmbedder()
        self.extractor = SoakExtractor(random.Random(args.seed + 1), self.turns.words)
        self.summarizer = SoakSummarizer()
        self.windows: list[dict[str, Any]] = []
        self.restarts: list[dict[str, Any]] = []
        self.hook_us: list[float] = []
        self.read_ms: list[float] = []
        self.waited_s = 0.0
        self.rss_samples: list[float] = []  # RSS once a second: a window's one reading falls anywhere in a sawtooth
        self.turns_done = 0

    async def _extractor_for(self, _session_id: str | None) -> SoakExtractor:
        return self.extractor

    async def _summarizer_for(self, _session_id: str | None) -> SoakSummarizer:
        return self.summarizer

    async def open(self, data: Path) -> tuple[AsyncEngine, LTMEngine]:
        db = create_async_engine(f"sqlite+aiosqlite:///{data / 'ltm.db'}")
        event.listen(db.sync_engine, "connect", pragmas)
        engine = LTMEngine(db, soak_config(self.overrides), extractor_for=self._extractor_for,
                           summarizer_for=self._summarizer_for, embedder=self.embedder, data_dir=data / "plugin",
                           clock=self.clock)
        await engine.start(background=True)  # every loop, as main.py's initialize
        return db, engine

    async def close(self, db: AsyncEngine, engine: LTMEngine) -> None:
        await engine.stop()
        await db.dispose()
        gc.collect()

    async def window(self, engine: LTMEngine, data: Path, done: int, wall_start: float, turns_start: int) -> None:
        elapsed = time.perf_counter() - wall_start
        row: dict[str, Any] = {
            "turns": done, "simulated_days": (self.clock.now - START).total_seconds() / 86400,
            "wall_s": elapsed, "turns_per_s": (done - turns_start) / elapsed if elapsed else None,
            "waited_for_worker_s": self.waited_s,
            "rss_mb": rss_mb(),
            "rss_p50_mb": pct(self.rss_samples, 50), "rss_max_mb": max(self.rss_samples, default=None),
            # The loaded keyword and vector namespaces: a cache bounded by vectors.max_memory_mb.
            "namespaces_mb": (engine.keyword_index.held() + engine.vector_index.held()) / 2**20,
            "namespaces_loaded": engine.keyword_index.loaded_count + engine.vector_index.loaded_count,
            "memory": account(),
            "hook_p50_us": pct(self.hook_us, 50), "hook_p95_us": pct(self.hook_us, 95),
            "hook_p99_us": pct(self.hook_us, 99), "hook_max_us": max(self.hook_us, default=None),
            "reads": len(self.read_ms), "read_p50_ms": pct(self.read_ms, 50), "read_p95_ms": pct(self.read_ms, 95),
            "queues": await queues(engine, self.embedder.model_id),
            "sizes": sizes(data / "plugin", data / "ltm.db"),
            "rows": await rows(engine),
            "storage": await storage(engine, dir_bytes(data / "plugin" / "vectors")),
            "summaries_calls": dict(self.summarizer.calls), "extractor_calls": self.extractor.calls,
            "candidates": self.extractor.candidates, "compaction_merged": engine.compactor.merged,
        }
        self.windows.append(row)
        self.hook_us, self.read_ms, self.waited_s, self.rss_samples = [], [], 0.0, []
        q, s = row["queues"], row["sizes"]
        print(f"{done:>8,} turns  day {row['simulated_days']:5.1f}  {row['turns_per_s']:6.1f} t/s  "
              f"RSS {_f(row['rss_mb'], '.0f')} MB  hook p50/p95/p99 {_f(row['hook_p50_us'], '.0f')}/"
              f"{_f(row['hook_p95_us'], '.0f')}/{_f(row['hook_p99_us'], '.0f')} µs  read p50/p95 "
              f"{_f(row['read_p50_ms'], '.1f')}/{_f(row['read_p95_ms'], '.1f')} ms  pending {q['pending_events']} "
              f"vec {q['items_without_vector']}+{q['turns_without_vector']} unsummarised {q['turns_unsummarised']} "
              f"journal {s['journal_kb']:.0f} KB  sqlite {s['sqlite_mb']:.0f} MB  faiss {s['faiss_mb']:.1f} MB "
              f"({s['faiss_files']} files)", flush=True)
        m = row["memory"]
        print(f"{'':>8}  memory: malloc in use {_f(m.get('malloc_in_use_mb'), '.0f')} MB, kept free "
              f"{_f(m.get('malloc_free_kept_mb'), '.0f')} MB; sqlite {_f(m['sqlite_mb'], '.1f')} MB; namespaces "
              f"{row['namespaces_mb']:.1f} MB; text caches {m['text_caches_mb']:.1f} MB ("
              + ", ".join(f"{k} {v['mb']}" for k, v in list(m["text_caches"].items())[:4])
              + f"); python blocks {m['python_blocks']:,}", flush=True)
        for line in storage_lines(row["storage"]):
            print(f"{'':>8}  {line}", flush=True)

    async def backlog(self, engine: LTMEngine) -> None:
        """Wait while the worker is behind: the feed goes as fast as the
        engine takes turns, not faster."""
        start = time.perf_counter()
        pending = "SELECT count(*) FROM ltm_events WHERE extraction_status = 'pending'"
        # The recorder's queue counts too: a feed faster than the flusher would grow it.
        while time.perf_counter() - start < 120 and (
                engine.recorder.queued + await scalar(engine, pending) > self.args.max_backlog):
            engine.worker.task.wake()
            await asyncio.sleep(0.05)
        self.waited_s += time.perf_counter() - start

    async def sample_rss(self) -> None:
        while True:
            if (mb := rss_mb()) is not None:
                self.rss_samples.append(mb)
            await asyncio.sleep(1.0)

    async def run(self, data: Path) -> dict[str, Any]:
        sampler = asyncio.create_task(self.sample_rss())
        try:
            return await self._run(data)
        finally:
            sampler.cancel()

    async def _run(self, data: Path) -> dict[str, Any]:
        args = self.args
        db, engine = await self.open(data)
        wall_start, turns_start = time.perf_counter(), 0
        conversations = [self.turns.conversation() for _ in range(args.conversations)]
        step = timedelta(seconds=args.seconds_per_turn)
        deadline = time.perf_counter() + args.time_limit if args.time_limit else None
        for n in range(1, args.turns + 1):
            last = n == args.turns or (deadline is not None and time.perf_counter() > deadline) or (
                args.stop_file is not None and n % args.backlog_every == 0 and Path(args.stop_file).exists())
            k = self.rng.randrange(len(conversations))
            conv = conversations[k]
            origin = self.rng.choice(conv.origin_for)
            user, reply = self.turns.user_text(), self.turns.reply()
            self.clock.now += step
            if n % args.read_every == 0:  # on_llm_request comes before the reply is recorded
                start = time.perf_counter()
                await engine.memory_block(origin, user, conv.history[-6:])
                self.read_ms.append((time.perf_counter() - start) * 1000)
            start_ns = time.perf_counter_ns()
            engine.record_turn(origin, user, reply)
            self.hook_us.append((time.perf_counter_ns() - start_ns) / 1000)
            conv.history += [user, reply]
            conv.left -= 1
            if conv.left <= 0:
                conversations[k] = self.turns.conversation()
            await asyncio.sleep(0)  # the loop is AstrBot's: the flusher and workers run between turns
            if n % args.backlog_every == 0:
                await self.backlog(engine)
            if n % args.tick_turns == 0:
                engine.summaries.task.wake()
                await engine.drift.tick()
            if n % args.window == 0 or last:
                await engine.compactor.run_once()
                await self.window(engine, data, n, wall_start, turns_start)
                wall_start, turns_start = time.perf_counter(), n
            if n % args.restart_every == 0 and not last:
                start = time.perf_counter()
                await self.close(db, engine)
                db, engine = await self.open(data)
                self.restarts.append({"after_turns": n, "seconds": time.perf_counter() - start})
                print(f"restart after {n:,} turns: {self.restarts[-1]['seconds']:.2f} s", flush=True)
            if last:
                self.turns_done = n
                break
        final = await self.drain(engine)
        await self.close(db, engine)
        final["journal_kb_after_stop"] = dir_bytes(data / "plugin" / "journal") / 2**10
        final["journal_files_after_stop"] = sorted(p.name for p in (data / "plugin" / "journal").glob("*")
                                                   if p.is_file() and not p.name.endswith(".lock"))
        return final

    async def drain(self, engine: LTMEngine) -> dict[str, Any]:
        """Work off every queue, as a quiet night would, and say what is left."""
        start = time.perf_counter()
        await engine.recorder.flush()
        for _ in range(50):
            await engine.worker.drain(max_batches=100_000)
            await engine.summaries.drain(max_passes=1000)
            await engine.worker.fill_vectors(max_rounds=100_000)
            await engine.usage.flush()
            left = await queues(engine, self.embedder.model_id)
            if not any(left.values()):
                break
        left = await queues(engine, self.embedder.model_id)
        # Summaries drained means a last pass finds nothing to summarise.
        left["summary_calls_on_a_last_pass"] = len(await engine.summaries.run_once(ignore_idle=True))
        return {"drain_s": time.perf_counter() - start, "queues_left": left,
                "rows": await rows(engine)}


async def open_kept(data: Path, soak: Soak) -> tuple[AsyncEngine, LTMEngine]:
    """A soak's kept data directory opened again, no background loops, its
    clock at the newest turn."""
    db = create_async_engine(f"sqlite+aiosqlite:///{data / 'ltm.db'}")
    event.listen(db.sync_engine, "connect", pragmas)
    async with db.connect() as conn:
        newest = (await conn.execute(sql("SELECT max(created_at) FROM ltm_events"))).scalar()
    if newest:
        soak.clock.now = datetime.fromisoformat(str(newest)).replace(tzinfo=UTC)
    engine = LTMEngine(db, soak_config(soak.overrides), extractor_for=soak._extractor_for,
                       summarizer_for=soak._summarizer_for,
                       embedder=soak.embedder, data_dir=data / "plugin", clock=soak.clock)
    await engine.start(background=False)
    return db, engine


async def time_reads(data: Path, args: argparse.Namespace, count: int) -> dict[str, Any]:
    """Reads on a kept store as the soak's own: ``count`` new conversations
    (30 % in groups), each read once as it starts (its namespaces maybe
    not loaded: "first") and once more at once ("again": loaded), timed.
    The first 20 are not counted (the caches fill)."""
    soak = Soak(args)
    soak.rng = random.Random(args.seed + 2)  # conversations the soak itself did not have
    db, engine = await open_kept(data, soak)
    first: dict[str, list[float]] = {"group": [], "private": []}
    again: list[float] = []
    for n in range(count + 20):
        conv = soak.turns.conversation()
        origin, query = conv.origin_for[0], soak.turns.user_text()
        start = time.perf_counter()
        await engine.memory_block(origin, query)
        took = (time.perf_counter() - start) * 1000
        await engine.loads_settled()
        start = time.perf_counter()
        await engine.memory_block(origin, query)
        if n >= 20:
            first["group" if origin.group_id else "private"].append(took)
            again.append((time.perf_counter() - start) * 1000)
    await engine.stop()
    await db.dispose()
    every = first["group"] + first["private"]
    return {"reads": count, "first_p50_ms": pct(every, 50), "first_p95_ms": pct(every, 95),
            **{f"first_{k}_p50_ms": pct(v, 50) for k, v in first.items()},
            **{f"first_{k}_p95_ms": pct(v, 95) for k, v in first.items()},
            "again_p50_ms": pct(again, 50), "again_p95_ms": pct(again, 95), "rss_mb": rss_mb()}


async def inspect_store(data: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The namespace cache at its largest: a soak's data directory opened
    again (no background loops), one read in every scope that has turns,
    then the bytes the loaded namespaces hold and the process's RSS."""
    soak = Soak(args)
    db, engine = await open_kept(data, soak)
    async with engine.db.read() as session:
        scopes = [(str(kind), str(sid), str(sender)) for kind, sid, sender in await session.execute(sql(
            "SELECT scope, scope_id, max(sender_id) FROM ltm_events WHERE source_role = 'user' "
            "GROUP BY scope, scope_id"))]
    gc.collect()
    before = rss_mb()
    start = time.perf_counter()
    for kind, sid, sender in scopes:
        place = sid.split(":", 1)[1]
        origin = Origin(PLATFORM, f"{PLATFORM}:GroupMessage:{place}", sender, sender, group_id=place) \
            if kind == "group" else Origin(PLATFORM, f"{PLATFORM}:FriendMessage:{place}", place, place)
        await engine.memory_block(origin, "what did we talk about")
    await engine.loads_settled()
    out = {"scopes": len(scopes), "rss_before_reads_mb": before, "read_all_s": time.perf_counter() - start,
           "rss_after_reads_mb": rss_mb(),
           "keyword_mb": engine.keyword_index.held() / 2**20, "vector_mb": engine.vector_index.held() / 2**20,
           "namespaces_loaded": engine.keyword_index.loaded_count + engine.vector_index.loaded_count,
           "budget_mb": engine.config.vectors.max_memory_mb}
    await engine.stop()
    await db.dispose()
    return out


def _f(v: Any, fmt: str) -> str:
    return "—" if v is None else format(v, fmt)


# -- the plot --------------------------------------------------------------------------


def svg(windows: list[dict[str, Any]], restarts: list[int], title: str) -> str:
    """Five small line charts, hand-written SVG (no plotting dependency)."""
    panels = [
        ("resident memory (MB)", [("RSS", "rss_mb", "#1f77b4"), ("malloc", "memory.malloc_in_use_mb", "#7f7f7f"),
                                  ("namespaces", "namespaces_mb", "#17becf"),
                                  ("text caches", "memory.text_caches_mb", "#bcbd22")]),
        ("hook latency (µs)", [("p50", "hook_p50_us", "#2ca02c"), ("p95", "hook_p95_us", "#ff7f0e"),
                               ("p99", "hook_p99_us", "#d62728")]),
        ("read latency (ms)", [("p50", "read_p50_ms", "#2ca02c"), ("p95", "read_p95_ms", "#ff7f0e")]),
        ("sizes (MB)", [("SQLite", "sizes.sqlite_mb", "#1f77b4"), ("FAISS", "sizes.faiss_mb", "#9467bd"),
                        ("journal", "sizes.journal_mb", "#8c564b")]),
        ("storage (B a recorded event)", [("ltm_ tables and files", "storage.bytes_per_event", "#e377c2")]),
    ]
    width, ph, pw, left, top = 900, 190, 760, 90, 40

    def value(w: dict[str, Any], key: str) -> float | None:
        if key == "sizes.journal_mb":
            return w["sizes"]["journal_kb"] / 1024
        if "." in key:
            a, b = key.split(".")
            return w.get(a, {}).get(b)  # a run before a figure existed has none
        return w.get(key)

    xs = [w["turns"] for w in windows]
    xmax = max(xs, default=1) or 1
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + len(panels) * (ph + 50)}" '
           'font-family="sans-serif" font-size="12">', '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{left}" y="22" font-size="14" font-weight="bold">{_esc(title)}</text>']
    for p, (name, series) in enumerate(panels):
        y0 = top + p * (ph + 50) + 20
        values = [v for _, key, _ in series for w in windows if (v := value(w, key)) is not None]
        ymax = max(values, default=1.0) * 1.1 or 1.0
        out.append(f'<text x="{left}" y="{y0 - 6}" font-weight="bold">{_esc(name)}</text>')
        out.append(f'<rect x="{left}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
        for t in range(5):
            yv = ymax * t / 4
            y = y0 + ph - ph * t / 4
            out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#eee"/>')
            out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{yv:.3g}</text>')
        for r in restarts:
            x = left + pw * r / xmax
            out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y0 + ph}" stroke="#bbb" '
                       'stroke-dasharray="4,3"/>')
        label_x = left + pw - sum(7 * len(label) + 14 for label, _, _ in series)  # legends side by side
        for label, key, colour in series:
            points = [(left + pw * w["turns"] / xmax, y0 + ph - ph * v / ymax)
                      for w in windows if (v := value(w, key)) is not None]
            if points:
                out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="'
                           + " ".join(f"{x:.1f},{y:.1f}" for x, y in points) + '"/>')
            out.append(f'<text x="{label_x}" y="{y0 + 16}" fill="{colour}">{_esc(label)}</text>')
            label_x += 7 * len(label) + 14
        out.append(f'<text x="{left + pw}" y="{y0 + ph + 16}" text-anchor="end">{xmax:,} turns</text>')
        out.append(f'<text x="{left}" y="{y0 + ph + 16}">0</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# -- driver ------------------------------------------------------------------------------


def flatness(windows: list[dict[str, Any]], warmup: int) -> dict[str, Any]:
    """RSS after warm-up: its range against the first window after it. Each
    window's median of its once-a-second samples where it has them (one
    reading can fall anywhere in the heap's sawtooth), else its one reading."""
    later = [w for w in windows if w["turns"] > warmup and w.get("rss_mb") is not None]
    key = "rss_p50_mb" if later and all(w.get("rss_p50_mb") is not None for w in later) else "rss_mb"
    after = [w[key] for w in later]
    if not after:
        return {"windows": 0}
    base = after[0]
    return {"windows": len(after), "measure": key, "first_mb": base, "min_mb": min(after), "max_mb": max(after),
            "last_mb": after[-1], "max_dev_pct": max(abs(v - base) for v in after) / base * 100}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200_000)
    parser.add_argument("--users", type=int, default=2000)
    parser.add_argument("--groups", type=int, default=60)
    parser.add_argument("--conversations", type=int, default=20, help="conversations going on at once")
    parser.add_argument("--seconds-per-turn", type=float, default=15.0, help="the fake clock's step")
    parser.add_argument("--read-every", type=int, default=10, help="a timed read every this many turns")
    parser.add_argument("--window", type=int, default=10_000, help="turns per reported window")
    parser.add_argument("--restart-every", type=int, default=50_000)
    parser.add_argument("--tick-turns", type=int, default=2000,
                        help="kick the summaries and ask for the drift snapshot every this many turns")
    parser.add_argument("--max-backlog", type=int, default=400, help="events pending extraction the feed allows")
    parser.add_argument("--backlog-every", type=int, default=100, help="look at the backlog every this many turns")
    parser.add_argument("--warmup", type=int, default=None,
                        help="turns of warm-up before RSS should stay flat (default: the first window)")
    parser.add_argument("--time-limit", type=float, default=0.0,
                        help="stop feeding after this many seconds (then drain and report the turns done); 0: none")
    parser.add_argument("--stop-file", help="stop feeding (then drain and report) once this file exists")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="a plugin setting for the run, e.g. vectors.max_memory_mb=32 (repeatable)")
    parser.add_argument("--dir", help="keep the data here (default: a temporary directory, removed)")
    parser.add_argument("--json", dest="json_out")
    parser.add_argument("--svg", dest="svg_out")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--inspect", metavar="DIR",
                        help="open a kept soak directory (--dir), read once in every scope, report the namespaces")
    parser.add_argument("--reads", type=int, default=0, metavar="N",
                        help="with --inspect: time N reads of new conversations instead, each twice")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.inspect and args.reads:
        print(json.dumps(asyncio.run(time_reads(Path(args.inspect), args, args.reads)), indent=1))
        return 0
    if args.inspect:
        print(json.dumps(asyncio.run(inspect_store(Path(args.inspect), args)), indent=1))
        return 0

    tmp = None if args.dir else tempfile.mkdtemp(prefix="ltm-soak-")
    data = Path(args.dir or tmp or ".")
    data.mkdir(parents=True, exist_ok=True)
    soak = Soak(args)
    started = time.perf_counter()
    try:
        final = asyncio.run(soak.run(data))
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    warmup = args.warmup if args.warmup is not None else min(args.window, args.turns)
    settings = {k: v for k, v in vars(args).items() if k not in ("json_out", "svg_out", "dir")}
    left = {k: v for k, v in final["queues_left"].items() if v}
    flat = flatness(soak.windows, warmup)
    result: dict[str, Any] = {"settings": settings, "turns_done": soak.turns_done, "windows": soak.windows,
              "restarts": soak.restarts, "final": final,
              "rss_after_warmup": flat, "seconds": time.perf_counter() - started,
              "drained": not left}
    print(f"\ndrain at the end: {final['drain_s']:.1f} s; queues left: "
          + ", ".join(f"{k}={v}" for k, v in final["queues_left"].items())
          + f"; journal after stop: {final['journal_kb_after_stop']:.1f} KB")
    if flat.get("windows"):
        print(f"RSS after warm-up ({warmup:,} turns, {flat['measure']}): {flat['first_mb']:.0f} → "
              f"{flat['last_mb']:.0f} MB, "
              f"range {flat['min_mb']:.0f}–{flat['max_mb']:.0f}, max deviation {flat['max_dev_pct']:.1f} %")
    print(f"total {result['seconds']:.0f} s for {soak.turns_done:,} turns"
          + (f" (stopped at the time limit, {args.turns:,} asked)" if soak.turns_done < args.turns else ""))
    if args.json_out:
        out = Path(args.json_out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1, default=str) + "\n")
        print(f"written to {out}")
    if args.svg_out:
        out = Path(args.svg_out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(svg(soak.windows, [r["after_turns"] for r in soak.restarts],
                           f"soak: {soak.turns_done:,} turns, {args.users:,} users, {args.groups} groups, "
                           f"restart every {args.restart_every:,}"))
        print(f"written to {out}")
    if left:
        print(f"NOT DRAINED: {left}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
