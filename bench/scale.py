"""Scale benchmark: the plugin's hot paths against large synthetic stores.

    python -m bench.scale [--sizes 1000,10000,100000] [--scopes 1000] [--json OUT]

For each size N, in a fresh process (so memory and cold-start figures are
its own) and a fresh SQLite file:

0. The process's resident memory before any memory is stored: the
   interpreter, the plugin, its libraries and the tokenizer (the baseline).
1. In a process of its own (``--fill-inline``: in this one, as before
   2026-11-25), ``engine.start(background=False)`` migrates an empty
   database, then steps 2 and 3 fill it: the bulk fill stands in for months
   of history, whose millions of short-lived rows a bot's process never
   holds at once.
2. N active items go into one user scope and ``--other-items`` into each
   of ``--scopes`` other scopes, inserted in bulk through the models on the
   engine's database layer, each with its ``create`` audit row (as the
   writer logs it), ``--events-per-item`` recorded turns (evidence-linked,
   in the events' keyword index) and, when the engine has vectors, a vector
   from the deterministic HashEmbedder (no model).
   Facts are synthetic, Zipf-distributed words, some long, some Chinese.
3. Keyword index rebuild: ``storing.keyword_rows.rebuild_fact_rows`` over all
   items (this is also what builds the index for the bulk-inserted items).
4. Cold start: a new LTMEngine on the filled file, the token counter's
   cache cleared, timed through ``start()``.
5. Hook: ``engine.record_turn`` (what on_agent_done runs: the journal's
   ``write()`` and the queue) per call, back to back, then the recorder's
   flush of those events. ``bench/hook.py`` times it with the flusher
   running between turns, as in AstrBot.
6. Write pipeline: events recorded in the big scope, a fake extractor
   giving one new candidate per user event, ``engine.worker.drain()``
   (extraction batches, writer, policy gate, keyword and vector indexes).
   The hook step's turns are embedded before it and timed apart; the
   figure with them in (as measured until 2026-11-28) is printed too.
7. Restart, first read (vector namespace from its file, then rebuilt from
   SQLite; a read waits at most COLD_WAIT for a namespace, so the time
   until every load it started has ended is reported too, and the reads
   below wait for it), then ``engine.memory_block`` for ``--queries`` messages in the
   big scope (with and without the legacy per-conversation scope) and in
   small scopes; the time the embedder spent is subtracted (reported
   apart), and every block is checked against the token budget, recounted
   with the plugin's counter, at several budgets.
8. Dashboard lists (``bench/lists.py``): the item, event and audit list
   requests of the operator API (every sort and filter, text search, a deep
   page; in the big scope, a small one and the whole store), each timed
   ``--lists-repeats`` times through ``MemoryAPI.call``, every statement
   explained: full table scans and rows sorted in a temp b-tree are
   reported per request. A failed request is an error (exit status 1).
9. Resident memory: current RSS (psutil) and peak (getrusage), and the
   bytes the loaded keyword and vector namespaces hold (as the memory
   budget counts them).

The whole run gets ``--time-limit`` seconds (default 560), shared among the
sizes; a size still running at the end of its share is stopped and
reported with the figures of the phases it finished.

Timings are printed, never asserted; a block over its budget, or a list
request that fails, is an error (exit status 1).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
import json
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import insert
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import create_async_engine

from astrbot_plugin_ltm.config import parse_config
from astrbot_plugin_ltm.doors.api import MemoryAPI
from astrbot_plugin_ltm.engine import LTMEngine
from astrbot_plugin_ltm.enums import MEMORY_TYPES, Corpus
from astrbot_plugin_ltm.learning.candidates import Candidate, ExtractionResult
from astrbot_plugin_ltm.recalling import tokens as tokens_module
from astrbot_plugin_ltm.scope import Origin, Scope
from astrbot_plugin_ltm.storing.keyword_rows import index_turns_after, rebuild_fact_rows
from astrbot_plugin_ltm.storing.tables import (
    MemoryAudit,
    MemoryEvent,
    MemoryEvidence,
    MemoryItem,
    MemoryVector,
)
from astrbot_plugin_ltm.storing.turns import turn_passages
from astrbot_plugin_ltm.storing.vector_rows import encode, store_vectors

from . import lists
from .embedders import HashEmbedder, TimedEmbedder
from .locomo import apply_overrides

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
PLATFORM = "scale"
TARGET_SENDER = "target"
BUDGETS = (800, 200, 60)  # the default read budget, then tighter ones


# -- synthetic text --------------------------------------------------------------------


class Words:
    """A deterministic pseudo-English vocabulary with Zipf frequencies, and
    a pool of Chinese characters."""

    SYLLABLES = [
        "ka", "ro", "mi", "ta", "ne", "su", "lo", "vi", "an", "el", "or", "is", "un", "ber", "ton", "mar", "lin",
        "dra", "pel", "sor", "qui", "fen", "gal", "hol", "jun", "kel", "mos", "nar", "pim", "rut", "sel", "tav",
        "wen", "zor"
    ]

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
    raw = {
        "write_policy": {"mode": "auto", "max_writes_per_session": 100000, "max_writes_per_hour": 1000000,
                         "max_items_per_scope": 10000000},
        "read_policy": {"max_tokens": max_tokens},
        "identity": {"include_legacy_umo_on_read": legacy_scope},
        "retention_days": {t: -1 for t in MEMORY_TYPES},
    }
    return apply_overrides(raw, OVERRIDES)


OVERRIDES: list[str] = []  # --set section.name=value, for every engine of the run


class OneFactPerEvent:
    """Extractor: one new, evidence-linked candidate per user event."""

    def __init__(self) -> None:
        self.candidates = 0

    async def extract(self, events, known=()):
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
               embedder: HashEmbedder | None, rng: random.Random,
               events_per_item: int = 1) -> tuple[Store, dict[str, float]]:
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

    # The writer audits each item it creates; a store at scale has that log
    # too (the dashboard lists it). In time order, as a log grows.
    start = time.perf_counter()
    audit_rows = [{
        "created_at": item["created_at"], "action": "create", "memory_id": item["memory_id"],
        "scope": item["scope"], "scope_id": item["scope_id"],
        "session_id": f"{PLATFORM}:FriendMessage:{item['scope_id'].split(':', 1)[1]}",
        "actor": "system:extractor", "reason": "mode auto: thresholds met", "detail": {},
    } for item in sorted(rows, key=lambda r: r["created_at"])]
    for lo in range(0, len(audit_rows), 5000):
        async with engine.db.write() as session:
            await session.execute(insert(MemoryAudit), audit_rows[lo:lo + 5000])
    timings["insert_audit_s"] = time.perf_counter() - start
    timings["audit_rows"] = len(audit_rows)

    if events_per_item > 0:
        # The turns the items were extracted from: the reader searches them
        # too (raw turns of active memories), so a store at scale has them.
        start = time.perf_counter()
        events, links = [], []
        for item in rows:
            sender = item["scope_id"].split(":", 1)[1]
            for _k in range(events_per_item):
                event_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
                words_said = item["fact"].split()[1:] + words.some(rng.randint(3, 12))
                rng.shuffle(words_said)
                events.append({
                    "event_id": event_id, "scope": "user", "scope_id": item["scope_id"],
                    "source_type": "message", "source_role": "user", "content": {"text": " ".join(words_said)},
                    "platform_id": PLATFORM, "session_id": f"{PLATFORM}:FriendMessage:{sender}",
                    "sender_id": sender, "sender_name": sender, "created_at": item["created_at"],
                    "extraction_status": "done", "attempts": 0,
                })
                links.append({"memory_id": item["memory_id"], "event_id": event_id,
                              "extraction_method": "llm_extract",
                              "extraction_meta": {"confidence": {"base": 0.9, "source": "llm_extract",
                                                                 "weighted": 0.72}},
                              "created_at": item["created_at"]})
        for lo in range(0, len(events), 5000):
            async with engine.db.write() as session:
                await session.execute(insert(MemoryEvent), events[lo:lo + 5000])
                await session.execute(insert(MemoryEvidence), links[lo:lo + 5000])
        async with engine.db.write() as session:
            await index_turns_after(session, 0, batch=5000)
        timings["insert_events_s"] = time.perf_counter() - start
        timings["events"] = len(events)

    if embedder is not None:
        start = time.perf_counter()
        async with engine.db.read() as session:
            ids = [(r[0], r[1], r[2]) for r in await session.execute(
                sql("SELECT id, scope_id, fact FROM ltm_items ORDER BY id"))]
        vec_rows = []
        for lo in range(0, len(ids), 2000):
            chunk = ids[lo:lo + 2000]
            vecs = embedder.embed_sync([f for _, _, f in chunk])
            for (rowid, scope_id, _), vec in zip(chunk, vecs, strict=False):
                vec_rows.append({"item_id": rowid, "scope": "user", "scope_id": scope_id,
                                 "model": embedder.model_id, "dim": int(vec.shape[0]),
                                 "vector": encode(vec), "updated_at": NOW})
        timings["embed_items_s"] = time.perf_counter() - start
        start = time.perf_counter()
        for lo in range(0, len(vec_rows), 5000):
            async with engine.db.write() as session:
                await session.execute(insert(MemoryVector), vec_rows[lo:lo + 5000])
        timings["insert_vectors_s"] = time.perf_counter() - start
        # The recorded turns have vectors too (vectors.embed_turns, default on).
        start = time.perf_counter()
        async with engine.db.read() as session:
            turns = [(r[0], r[1], turn_passages(r[2], json.loads(r[3]), r[4])) for r in await session.execute(
                sql("SELECT id, scope_id, source_type, content, sender_name FROM ltm_events ORDER BY id"))]
        for lo in range(0, len(turns), 5000):
            chunk = turns[lo:lo + 5000]
            flat = embedder.embed_sync([p for _, _, passages in chunk for p in passages])
            turn_vecs = np.split(flat, np.cumsum([len(passages) for _, _, passages in chunk])[:-1])
            async with engine.db.write() as session:
                await store_vectors(session, Corpus.TURNS, [(rowid, Scope("user", scope_id)) for rowid, scope_id, _
                                                            in chunk], embedder.model_id, turn_vecs, NOW)
        timings["turn_vectors_s"] = time.perf_counter() - start
    return Store(target_facts, others), timings


def check_block(block, budget: int, max_items: int, count, max_events: int | None = None) -> list[str]:
    problems = []
    if block.tokens > budget:
        problems.append(f"block.tokens {block.tokens} > {budget}")
    if block.text and count(block.text) > budget:
        problems.append(f"recounted {count(block.text)} > {budget}")
    if block.text and count(block.text) != block.tokens:
        problems.append(f"block.tokens {block.tokens} != recount {count(block.text)}")
    if len(block.items) > max_items:
        problems.append(f"{len(block.items)} items > max_items {max_items}")
    raw = len(getattr(block, "events", None) or [])
    if max_events is not None and raw > max_events:
        problems.append(f"{raw} raw turns > max_events {max_events}")
    return problems


def entries(block) -> int:
    """Lines injected: memories, plus raw turns where the reader adds them."""
    return len(block.items) + len(getattr(block, "events", None) or [])


@dataclass
class Reads:
    ms: list[float] = field(default_factory=list)  # without the embedder's time
    embed_ms: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)  # memories + raw turns injected
    problems: list[str] = field(default_factory=list)


async def timed_reads(engine: LTMEngine, origins: list[Origin], queries: list[str],
                      timed: TimedEmbedder | None, budget: int, count,
                      progress: Callable[[Reads], None] | None = None) -> Reads:
    reads = Reads()
    max_items = engine.config.read_policy.max_items
    reported = time.perf_counter()
    for origin, query in zip(origins, queries, strict=False):
        if progress is not None and time.perf_counter() - reported > 5:
            progress(reads)
            reported = time.perf_counter()
        before = timed.seconds if timed else 0.0
        start = time.perf_counter()
        block = await engine.memory_block(origin, query)
        ms = (time.perf_counter() - start) * 1000
        em = ((timed.seconds - before) * 1000) if timed else 0.0
        reads.ms.append(ms - em)
        reads.embed_ms.append(em)
        reads.tokens.append(block.tokens)
        reads.lines.append(entries(block))
        reads.problems += check_block(block, budget, max_items, count,
                                      getattr(engine.config.read_policy, "max_events", None))
    return reads


def emit(out: dict[str, Any], phase: str) -> None:
    """One JSON line of what is known so far: if the parent has to stop this
    process at its time limit, the figures measured before are kept."""
    out["phase_done"] = phase
    print(json.dumps(out), flush=True)


async def build_store(path: Path, size: int, scopes: int, per_scope: int, vectors: bool,
                      events_per_item: int = 1, seed: int = 7) -> tuple[dict[str, Any], Store]:
    """The synthetic store in ``path``: empty database, bulk fill, keyword
    index. Figures of the fill, and what the reads ask about."""
    rng = random.Random(seed)
    words = Words(rng)
    out: dict[str, Any] = {}
    base_embedder = HashEmbedder() if vectors else None
    db = create_async_engine(f"sqlite+aiosqlite:///{path / 'ltm.db'}")
    engine = LTMEngine(db, config(), clock=Clock(NOW), **engine_kwargs(base_embedder, path / "data", None))
    start = time.perf_counter()
    await engine.start(background=False)
    out["migrate_empty_s"] = time.perf_counter() - start
    with_vectors = bool(vectors and "embedder" in inspect.signature(LTMEngine.__init__).parameters)
    store, timings = await fill(engine, size, scopes, per_scope, words,
                                base_embedder if with_vectors else None, rng, events_per_item)
    out.update(timings)
    start = time.perf_counter()
    async with engine.db.write() as session:
        out["fts_rebuild_rows"] = await rebuild_fact_rows(session)
    out["fts_rebuild_s"] = time.perf_counter() - start
    await engine.stop()
    await db.dispose()
    out["db_mb_after_fill"] = (path / "ltm.db").stat().st_size / 2**20
    return out, store


def build_store_apart(path: Path, size: int, scopes: int, per_scope: int, vectors: bool,
                      events_per_item: int, seed: int) -> tuple[dict[str, Any], Store]:
    """build_store in a process of its own: the bulk fill's millions of
    short-lived rows stand in for months of history, which a bot's process
    never holds at once, so they stay out of the measured process's memory."""
    cmd = [sys.executable, "-m", "bench.scale", "--fill-store", str(size), "--store-dir", str(path),
           "--scopes", str(scopes), "--other-items", str(per_scope), "--events-per-item", str(events_per_item),
           "--seed", str(seed)]
    if not vectors:
        cmd.append("--no-vectors")
    for setting in OVERRIDES:
        cmd += ["--set", setting]
    done = subprocess.run(cmd, capture_output=True, cwd=Path(__file__).resolve().parent.parent)
    figures = _last_json(done.stdout)
    if done.returncode != 0 or figures is None:
        sys.stderr.write(done.stderr.decode(errors="replace"))
        raise RuntimeError(f"filling the store of size {size} failed")
    stored = json.loads((path / "store.json").read_text())
    return figures, Store(stored["target_facts"], stored["other_scopes"])


async def run_size(size: int, scopes: int, per_scope: int, n_queries: int, n_hooks: int,
                   n_writes: int, vectors: bool, events_per_item: int = 1, seed: int = 7,
                   lists_repeats: int = 20, fill_inline: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"size": size, "scopes": scopes + 1, "items_total": size + scopes * per_scope}
    # What the process holds before any memory is stored: the interpreter,
    # the plugin and its libraries (faiss, numpy, SQLAlchemy), the tokenizer.
    tokens_module.default_counter()
    out["baseline_rss_mb"] = rss_mb()
    tmp = tempfile.TemporaryDirectory(prefix=f"ltm-scale-{size}-")
    path = Path(tmp.name)
    out["tmpdir"] = str(path)
    out["fill_inline"] = fill_inline
    base_embedder = HashEmbedder() if vectors else None
    target = Origin(PLATFORM, f"{PLATFORM}:FriendMessage:{TARGET_SENDER}", TARGET_SENDER, "Target")
    extractor = OneFactPerEvent()

    async def extractor_for(_session_id):
        return extractor

    def open_engine(embedder) -> tuple[Any, LTMEngine, Clock]:
        gc.collect()
        tokens_module.default_counter.cache_clear()  # a cold start loads it again
        db = create_async_engine(f"sqlite+aiosqlite:///{path / 'ltm.db'}")
        clock = Clock(NOW)
        return db, LTMEngine(db, config(), clock=clock, extractor_for=extractor_for,
                             **engine_kwargs(embedder, path / "data", None)), clock

    try:
        # -- empty database, bulk fill, keyword index ------------------------------
        if fill_inline:
            figures, store = await build_store(path, size, scopes, per_scope, vectors, events_per_item, seed)
        else:
            figures, store = build_store_apart(path, size, scopes, per_scope, vectors, events_per_item, seed)
        out.update(figures)
        out["vectors"] = bool(vectors and "embedder" in inspect.signature(LTMEngine.__init__).parameters)
        # The vocabulary again (Words draws it first), then draws of its own.
        words = Words(random.Random(seed))
        rng = words.rng = random.Random(seed + 1)
        emit(out, "fill")

        # -- cold start; the hook; the write pipeline ---------------------------------
        timed = TimedEmbedder(base_embedder) if out["vectors"] else None
        db, engine, clock = open_engine(timed)
        start = time.perf_counter()
        await engine.start(background=False)
        out["cold_start_s"] = time.perf_counter() - start
        emit(out, "cold start")

        hook_us = []
        cpu = time.process_time()
        messages = [(" ".join(words.some(rng.randint(5, 30))), " ".join(words.some(rng.randint(10, 60))))
                    for _ in range(n_hooks)]
        for user, assistant in messages:
            start = time.perf_counter_ns()
            engine.record_turn(target, user, assistant)
            hook_us.append((time.perf_counter_ns() - start) / 1000)
        # CPU time (every thread of the process) is less sensitive than the
        # wall clock to other processes on a busy machine (docs/decisions.md#d94).
        out["hook_cpu_us"] = (time.process_time() - cpu) / max(1, n_hooks) * 1e6
        out["hook_p50_us"], out["hook_p95_us"] = pct(hook_us, 50), pct(hook_us, 95)
        start = time.perf_counter()
        flushed = await engine.recorder.flush()
        out["flush_events_per_s"] = flushed / (time.perf_counter() - start)
        # these events are not what the write benchmark extracts
        async with engine.db.write() as session:
            await session.execute(sql("UPDATE ltm_events SET extraction_status = 'skipped' "
                                      "WHERE extraction_status = 'pending'"))
        emit(out, "hook")

        for i in range(n_writes):
            clock.now = NOW + timedelta(seconds=i)
            engine.record_turn(target, f"update {i}: " + " ".join(words.some(rng.randint(5, 20))), "")
        await engine.recorder.flush()
        clock.now = NOW + timedelta(seconds=n_writes + 60)
        embed_before = timed.seconds if timed else 0.0
        # The hook step's turns (2 per call) are embedded first and timed
        # apart: the drain below is then the candidates' own work (their
        # memories and turns). Until 2026-11-28 the drain embedded them too;
        # the old figure is printed beside (docs/decisions.md#d145).
        start, cpu = time.perf_counter(), time.process_time()
        await engine.worker.fill_vectors()
        hook_fill_s, hook_fill_cpu = time.perf_counter() - start, time.process_time() - cpu
        out["hook_turns_fill_s"] = hook_fill_s
        start, cpu = time.perf_counter(), time.process_time()
        results = await engine.worker.drain(max_batches=100000)
        elapsed = time.perf_counter() - start
        drain_cpu = time.process_time() - cpu
        out["write_cpu_ms_per_candidate"] = drain_cpu * 1000 / max(1, extractor.candidates)
        out["write_candidates"] = extractor.candidates
        out["write_created"] = sum(1 for r in results for o in r.outcomes if o.action == "created")
        out["write_batches"] = len(results)
        out["write_candidates_per_s"] = extractor.candidates / elapsed if elapsed else None
        with_hook = elapsed + hook_fill_s
        out["write_with_hook_turns_per_s"] = extractor.candidates / with_hook if with_hook else None
        out["write_with_hook_turns_cpu_ms"] = (drain_cpu + hook_fill_cpu) * 1000 / max(1, extractor.candidates)
        out["write_embed_s"] = (timed.seconds - embed_before) if timed else 0.0
        await engine.stop()  # writes the vector namespace files
        await db.dispose()
        emit(out, "write pipeline")

        # -- restart and read ------------------------------------------------------------
        db, engine, clock = open_engine(timed)
        clock.now = NOW + timedelta(seconds=n_writes + 120)
        start = time.perf_counter()
        await engine.start(background=False)
        out["cold_start_2_s"] = time.perf_counter() - start
        start = time.perf_counter()
        await engine.memory_block(target, words.query(store.target_facts))
        out["first_read_ns_file_ms"] = (time.perf_counter() - start) * 1000
        await engine.loads_settled()  # the reads below are of a warm cache
        out["ns_file_loaded_ms"] = (time.perf_counter() - start) * 1000
        emit(out, "first read")
        if out["vectors"]:
            engine.vector_index.clear()
            for f in (path / "data").rglob("*"):
                if f.is_file():
                    f.unlink()
            start = time.perf_counter()
            await engine.memory_block(target, words.query(store.target_facts))
            out["first_read_ns_build_ms"] = (time.perf_counter() - start) * 1000
            await engine.loads_settled()
            out["ns_build_loaded_ms"] = (time.perf_counter() - start) * 1000
            emit(out, "first read, namespace rebuilt")
        assert engine.reader is not None
        count = engine.reader.counter.count

        queries = [words.query(store.target_facts) for _ in range(n_queries)]
        origins = [target] * n_queries

        def progress(reads: Reads) -> None:
            out["read_p50_ms"], out["read_p95_ms"] = pct(reads.ms, 50), pct(reads.ms, 95)
            out["reads_done"] = len(reads.ms)
            emit(out, "reads (partial)")

        cpu = time.process_time()
        main = await timed_reads(engine, origins, queries, timed, 800, count, progress)
        out["read_cpu_ms"] = (time.process_time() - cpu) * 1000 / max(1, len(main.ms))
        out["read_p50_ms"], out["read_p95_ms"] = pct(main.ms, 50), pct(main.ms, 95)
        out["reads_done"] = len(main.ms)
        out["read_embed_p50_ms"] = pct(main.embed_ms, 50)
        out["read_mean_tokens"] = statistics.fmean(main.tokens) if main.tokens else 0
        out["read_mean_lines"] = statistics.fmean(main.lines) if main.lines else 0
        problems = list(main.problems)
        budget_checks = len(main.ms)
        emit(out, "reads")
        engine.apply_config(config(legacy_scope=False))
        # Messages of its own: the same ones again would find their whole
        # blocks' token counts cached (measured 1 ms of a 7 ms read at 10k).
        others = [words.query(store.target_facts) for _ in range(n_queries)]
        no_legacy = await timed_reads(engine, origins, others, timed, 800, count)
        out["read_no_legacy_p50_ms"] = pct(no_legacy.ms, 50)
        out["read_no_legacy_p95_ms"] = pct(no_legacy.ms, 95)
        problems += no_legacy.problems
        budget_checks += len(no_legacy.ms)
        engine.apply_config(config())
        emit(out, "reads without the legacy scope")
        small = [Origin(PLATFORM, f"{PLATFORM}:FriendMessage:{s[len(PLATFORM) + 1:]}", s[len(PLATFORM) + 1:])
                 for s in rng.sample(store.other_scopes, min(len(store.other_scopes), n_queries // 2))]
        small_reads = await timed_reads(engine, small, [words.query([]) for _ in small], timed, 800, count)
        out["read_small_scope_p50_ms"] = pct(small_reads.ms, 50)
        out["read_small_scope_p95_ms"] = pct(small_reads.ms, 95)
        problems += small_reads.problems
        budget_checks += len(small_reads.ms)
        for budget in BUDGETS[1:]:
            engine.apply_config(config(max_tokens=budget))
            tight = await timed_reads(engine, origins[:50], queries[:50], timed, budget, count)
            problems += tight.problems
            budget_checks += len(tight.ms)
        engine.apply_config(config())
        out["budget_checks"] = budget_checks
        out["budget_violations"] = len(problems)
        out["budget_problems"] = problems[:5]
        emit(out, "reads in small scopes and at tighter budgets")

        # -- the dashboard's lists -------------------------------------------------------
        async def keep_config(_raw: dict[str, Any]) -> None:
            return None

        api = MemoryAPI(engine, config, keep_config)
        listed = await lists.measure_lists(
            engine, api, ("user", f"{PLATFORM}:{TARGET_SENDER}"), f"{PLATFORM}:FriendMessage:{TARGET_SENDER}",
            lists_repeats, small_scope=("user", store.other_scopes[0]) if store.other_scopes else None,
            search_words=[words.names[0], words.words[0]],  # a name (rare), the commonest word
        )
        out.update(lists.summary(listed))
        out["lists_detail"] = lists.compact(listed)
        emit(out, "lists")

        out["rss_mb"] = rss_mb()
        out["peak_rss_mb"] = peak_mb()
        # (None from versions before the indexes reported their bytes)
        for name, index in (("keyword", engine.keyword_index), ("vector", engine.vector_index)):
            held = getattr(index, "held", None)
            out[f"{name}_index_mb"] = held() / 2**20 if held else None
            out[f"{name}_namespaces_loaded"] = getattr(index, "loaded_count", None)
        await engine.stop()
        await db.dispose()
        out.pop("phase_done", None)
    finally:
        tmp.cleanup()
    return out


# -- driver ------------------------------------------------------------------------------


def _last_json(stdout: bytes) -> dict[str, Any] | None:
    for line in reversed(stdout.decode(errors="replace").splitlines()):
        try:
            found = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(found, dict):
            return found
    return None


def _fmt(v: Any, fmt: str) -> str:
    return "—" if v is None else format(v, fmt)


ROWS = [
    ("items in database", "items_total", ",.0f"),
    ("bulk insert items (s)", "insert_items_s", ".2f"),
    ("audit rows (create)", "audit_rows", ",.0f"),
    ("bulk insert audit (s)", "insert_audit_s", ".2f"),
    ("bulk insert vectors (s)", "insert_vectors_s", ".2f"),
    ("events (evidence of items)", "events", ",.0f"),
    ("bulk insert events+FTS (s)", "insert_events_s", ".2f"),
    ("FTS rebuild (s)", "fts_rebuild_s", ".2f"),
    ("database file (MB)", "db_mb_after_fill", ".0f"),
    ("cold start (s)", "cold_start_s", ".3f"),
    ("restart (s)", "cold_start_2_s", ".3f"),
    ("  first read, ns file (ms)", "first_read_ns_file_ms", ".1f"),
    ("  first read, ns rebuilt (ms)", "first_read_ns_build_ms", ".1f"),
    ("  namespaces loaded, from file (ms)", "ns_file_loaded_ms", ".1f"),
    ("  namespaces loaded, rebuilt (ms)", "ns_build_loaded_ms", ".1f"),
    ("reads done", "reads_done", ",.0f"),
    ("read p50 (ms)", "read_p50_ms", ".2f"),
    ("read p95 (ms)", "read_p95_ms", ".2f"),
    ("  read CPU per read (ms)", "read_cpu_ms", ".2f"),
    ("  query embedding p50 (ms)", "read_embed_p50_ms", ".2f"),
    ("  mean tokens injected", "read_mean_tokens", ".0f"),
    ("  mean lines injected", "read_mean_lines", ".1f"),
    ("read p50, no legacy scope (ms)", "read_no_legacy_p50_ms", ".2f"),
    ("read p95, no legacy scope (ms)", "read_no_legacy_p95_ms", ".2f"),
    ("read small scope p50 (ms)", "read_small_scope_p50_ms", ".2f"),
    ("read small scope p95 (ms)", "read_small_scope_p95_ms", ".2f"),
    ("hook p50 (µs)", "hook_p50_us", ".1f"),
    ("hook p95 (µs)", "hook_p95_us", ".1f"),
    ("  hook CPU per call (µs)", "hook_cpu_us", ".1f"),
    ("recorder flush (events/s)", "flush_events_per_s", ",.0f"),
    ("write pipeline (cand./s)", "write_candidates_per_s", ",.0f"),
    ("  CPU per candidate (ms)", "write_cpu_ms_per_candidate", ".1f"),
    ("  hook's turns embedded first (s)", "hook_turns_fill_s", ".2f"),
    ("  with them, as before 11-28 (cand./s)", "write_with_hook_turns_per_s", ",.0f"),
    ("  with them: CPU per candidate (ms)", "write_with_hook_turns_cpu_ms", ".1f"),
    ("  candidates / created", None, ""),
    ("budget violations / checks", None, ""),
    ("list requests", "lists_requests", ",.0f"),
    ("list p50, median request (ms)", "lists_p50_ms_median", ".2f"),
    ("list p95, slowest request (ms)", "lists_p95_ms_max", ".2f"),
    ("list full scans / temp sorts", None, ""),
    ("list errors", None, ""),
    ("RSS (MB)", "rss_mb", ".0f"),
    ("peak RSS (MB)", "peak_rss_mb", ".0f"),
    ("  baseline: no memories (MB)", "baseline_rss_mb", ".0f"),
    ("  keyword namespaces (MB)", "keyword_index_mb", ".1f"),
    ("  vector namespaces (MB)", "vector_index_mb", ".1f"),
    ("  keyword namespaces loaded", "keyword_namespaces_loaded", ",.0f"),
    ("  vector namespaces loaded", "vector_namespaces_loaded", ",.0f"),
    ("time for this size (s)", "seconds", ".1f"),
    ("stopped at time limit after", "stopped_after", ""),
]


def table(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    head = f"{'':<32}" + "".join(f"{r['size']:>12,}" for r in results)
    lines = [
        f"scale bench: one scope of N items + {meta['scopes']} other scopes × {meta['other_items']} items, "
        f"{meta['events_per_item']} recorded turn(s) behind each; "
        f"vectors: {'HashEmbedder (384-d, fake)' if results and results[0].get('vectors') else 'none (keyword-only)'}; "
        f"{meta['queries']} reads, {meta['hooks']} hooks, {meta['writes']} candidates written per size",
        "read times exclude the embedder's own time; the hook is engine.record_turn; the plugin's default "
        "identity settings read the legacy per-conversation scope too (the 'no legacy scope' rows turn it off)"
        + (f"; overrides: {', '.join(meta['overrides'])}" if meta.get("overrides") else ""),
        "",
        head,
    ]
    for label, key, fmt in ROWS:
        if key is None and label.startswith("  candidates"):
            cells = [f"{r.get('write_candidates', 0)}/{r.get('write_created', 0)}" for r in results]
        elif key is None and label.startswith("list"):
            if all("lists_requests" not in r for r in results):
                continue
            names = ("lists_full_scans", "lists_temp_sorts") if "scans" in label else ("lists_errors",)
            cells = ["/".join(str(len(r.get(n) or [])) for n in names) if "lists_requests" in r else "—"
                     for r in results]
        elif key is None:
            cells = [f"{r.get('budget_violations', 0)}/{r.get('budget_checks', 0)}" for r in results]
        else:
            if all(r.get(key) is None for r in results):
                continue
            cells = [_fmt(r.get(key), fmt) if fmt else str(r.get(key) or "") for r in results]
        lines.append(f"{label:<32}" + "".join(f"{c:>12}" for c in cells))
    for r in results:
        if r.get("lists_detail"):
            head = (f"dashboard lists at {r['size']:,} items in the big scope ({r.get('items_total', 0):,} in all; "
                    "ms through MemoryAPI.call; kinstr: the heaviest statement's SQLite VM instructions, "
                    "thousands, run alone):")
            lines += ["", head, lists.table(r["lists_detail"])]
            for kind in ("full_scans", "temp_sorts", "ignored_ids", "errors"):
                lines += [f"  {kind.replace('_', ' ')}: {p}" for p in r.get(f"lists_{kind}") or []]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--scopes", type=int, default=1000, help="other scopes in the database")
    parser.add_argument("--other-items", type=int, default=20, help="items in each other scope")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--hooks", type=int, default=2000)
    parser.add_argument("--writes", type=int, default=400, help="candidates through the write pipeline")
    parser.add_argument("--events-per-item", type=int, default=1,
                        help="recorded turns behind each item (evidence-linked, keyword-indexed)")
    parser.add_argument("--lists-repeats", type=int, default=20,
                        help="timed passes over the dashboard's list requests (0: plans only)")
    parser.add_argument("--no-vectors", action="store_true", help="keyword-only even if the engine takes an embedder")
    parser.add_argument("--inline", action="store_true", help="run the sizes in this process (no time limit)")
    parser.add_argument("--time-limit", type=float, default=560.0,
                        help="seconds for all sizes; a size still running at its share is stopped and "
                             "reported with what it measured so far")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.NAME=VALUE",
                        help="override a plugin setting, e.g. read_policy.max_events=0 (repeatable)")
    parser.add_argument("--json", dest="json_out")
    parser.add_argument("--fill-inline", action="store_true",
                        help="fill the store in the measured process (as before 2026-11-25: its RSS then "
                             "includes what the bulk fill left behind)")
    parser.add_argument("--seed", type=int, default=7, help=argparse.SUPPRESS)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # child: run one size, print JSON
    parser.add_argument("--fill-store", type=int, help=argparse.SUPPRESS)  # child: fill a store, print JSON
    parser.add_argument("--store-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    OVERRIDES[:] = args.overrides
    _, errors = parse_config(config())
    if errors:
        raise SystemExit(f"settings rejected: {errors}")

    if args.fill_store is not None:
        figures, store = asyncio.run(build_store(Path(args.store_dir), args.fill_store, args.scopes,
                                                 args.other_items, not args.no_vectors, args.events_per_item,
                                                 args.seed))
        (Path(args.store_dir) / "store.json").write_text(json.dumps(
            {"target_facts": store.target_facts, "other_scopes": store.other_scopes}))
        print(json.dumps(figures), flush=True)
        return 0

    def one(size: int) -> dict[str, Any]:
        start = time.perf_counter()
        result = asyncio.run(run_size(size, args.scopes, args.other_items, args.queries, args.hooks,
                                      args.writes, not args.no_vectors, args.events_per_item, seed=args.seed,
                                      lists_repeats=args.lists_repeats, fill_inline=args.fill_inline))
        result["seconds"] = time.perf_counter() - start
        return result

    if args.one is not None:
        print(json.dumps(one(args.one)), flush=True)
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    deadline = time.monotonic() + args.time_limit
    weight = {size: 1.0 + size / 30000 for size in sizes}  # rough share of the run time
    results = []
    for n, size in enumerate(sizes):
        if args.inline:
            results.append(one(size))
            continue
        # The time left, shared among this size and the ones after it.
        left = deadline - time.monotonic()
        timeout = max(20.0, left * weight[size] / sum(weight[s] for s in sizes[n:]))
        cmd = [sys.executable, "-m", "bench.scale", "--one", str(size), "--scopes", str(args.scopes),
               "--other-items", str(args.other_items), "--queries", str(args.queries),
               "--hooks", str(args.hooks), "--writes", str(args.writes),
               "--events-per-item", str(args.events_per_item), "--lists-repeats", str(args.lists_repeats)]
        if args.no_vectors:
            cmd.append("--no-vectors")
        if args.fill_inline:
            cmd.append("--fill-inline")
        for setting in args.overrides:
            cmd += ["--set", setting]
        start = time.monotonic()
        try:
            done = subprocess.run(cmd, capture_output=True, cwd=Path(__file__).resolve().parent.parent,
                                  timeout=timeout)
            stdout, failed = done.stdout, done.returncode != 0
            if failed:
                sys.stderr.write(done.stderr.decode(errors="replace"))
        except subprocess.TimeoutExpired as exc:
            stdout, failed = exc.stdout or b"", False
        result = _last_json(stdout)
        if result is None:
            raise SystemExit(f"size {size} failed before measuring anything")
        if "phase_done" in result:  # stopped (or failed) part-way
            result["stopped_after"] = result.pop("phase_done")
            result["seconds"] = time.monotonic() - start
            shutil.rmtree(result.get("tmpdir", ""), ignore_errors=True)
            print(f"size {size:,}: {'failed' if failed else f'stopped at its time limit ({timeout:.0f} s)'} "
                  f"after: {result['stopped_after']}", file=sys.stderr)
        results.append(result)
        print(f"size {size:,}: {result['seconds']:.1f} s", file=sys.stderr)
    meta = {"scopes": args.scopes, "other_items": args.other_items, "queries": args.queries,
            "fill_inline": args.fill_inline,
            "hooks": args.hooks, "writes": args.writes, "events_per_item": args.events_per_item,
            "overrides": args.overrides, "time_limit": args.time_limit}
    print(table(results, meta))
    if args.json_out:
        out = Path(args.json_out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"settings": meta, "results": results}, indent=2) + "\n")
        print(f"\nwritten to {out}")
    return 1 if any(r.get("budget_violations") or r.get("lists_errors") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
