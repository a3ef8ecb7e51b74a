"""A store of today's layout moved into the compact one, in place (issue 39).

    python -m bench.relayout build DIR [--gb 1.0]
    python -m bench.relayout move DIR [--kill-after 60] [--json OUT]

``build``: a store of the layout before migration 0017 (the schema at
0015, as the plugin wrote it until then), in bulk, until its file holds
``--gb`` gigabytes: the soak's turns (``bench.soak.Turns``: groups and
private chats, long replies, a fifth Chinese) with their FTS5 rows of
scoped tokens (the turn before as context), their float32 vectors (the
soak's embedder) in ``ltm_event_vectors``, a fact for one user message in
three (its FTS5 row, float32 vector, evidence and audit row, JSON with
``\\u`` escapes), and session and day summaries linking every turn of
their span (rows of ``ltm_evidence``), so two summary links a turn as on
a bot that has run for weeks. A copy of the store is kept as
``DIR/original.db`` for reruns.

``move``: the plugin started on a copy of the store (``DIR/data_v4.db``)
in a child process, with every background loop, as AstrBot starts it:
the migrations, then the move in batches. Meanwhile the child reads
(``engine.memory_block``) every 0.2 s in a few scopes, and checks each
scope's keyword and vector hits against those read before the move began.
After ``--kill-after`` seconds the parent kills it (SIGKILL), then starts
it again on the same file: it goes on where the first stopped, until the
move is done. Printed: each run's batches, the write lock's hold per
batch (p50, p99, max), rows moved, reads' p50/p95 and any read that
differed, the file's size and the ltm_ tables' bytes before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from astrbot_plugin_ltm.storing.keyword_rows import scoped_text, scoped_tokens
from astrbot_plugin_ltm.storing.migrate import migrate
from astrbot_plugin_ltm.storing.turns import CONTEXT_WINDOW, PASSAGE_LAYOUT, turn_passages, turn_tokens
from astrbot_plugin_ltm.text import index_text

from .soak import START, SoakEmbedder, Turns

STORE = "data_v4.db"
ORIGINAL = "original.db"


def _stored(at: Any) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S.%f")


def build(directory: Path, gb: float, seed: int = 7) -> dict[str, Any]:
    """A store of the 0015 layout of at least ``gb`` gigabytes."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / ORIGINAL
    path.unlink(missing_ok=True)
    migrate(str(path), target=15)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("INSERT INTO ltm_index_builds (name, built_with, built_at) VALUES ('turn_passages', ?, ?)",
                 (PASSAGE_LAYOUT, _stored(START)))
    rng = random.Random(seed)
    turns = Turns(rng, 2000, 60)
    embedder = SoakEmbedder()
    model = embedder.model_id
    clock = START
    rowid = item_id = 0
    before: dict[str, tuple[Any, dict[str, str]]] = {}
    spans: dict[tuple[str, ...], list[str]] = {}  # a scope's turns since its last session summary
    days: dict[tuple[str, ...], list[str]] = {}  # a scope's turns of one day
    started = time.perf_counter()
    conversations = [turns.conversation() for _ in range(20)]
    target = gb * 1e9
    n = 0
    while True:
        events, fts, vectors, items, items_fts, item_vectors, evidence, audits = [], [], [], [], [], [], [], []
        for _ in range(2000):
            n += 1
            k = rng.randrange(len(conversations))
            conv = conversations[k]
            origin = rng.choice(conv.origin_for)
            clock += timedelta(seconds=15)
            kind = "group" if origin.group_id else "user"
            scope_id = f"{origin.platform_id}:{origin.group_id or origin.sender_id}"
            for role, said in (("user", turns.user_text()), ("assistant", turns.reply())):
                rowid += 1
                at = clock + timedelta(milliseconds=rowid % 1000)
                content = {"text": said}
                event_id = str(uuid.uuid4())
                events.append((rowid, event_id, kind, scope_id, role, json.dumps(content), origin.platform_id,
                               origin.unified_msg_origin, origin.sender_id if role == "user" else None,
                               origin.sender_name if role == "user" else None, _stored(at)))
                previous = before.get(origin.unified_msg_origin)
                context = previous[1] if previous is not None and at - previous[0] <= CONTEXT_WINDOW else None
                fts.append((rowid, scoped_tokens(kind, scope_id, turn_tokens(content, context))))
                who = origin.sender_name if role == "user" else "Assistant"
                vecs = embedder.embed_sync(turn_passages("message", content, who))
                vectors.append((rowid, kind, scope_id, model, vecs.shape[1], vecs.astype(np.float32).tobytes(),
                                _stored(at)))
                before[origin.unified_msg_origin] = (at, content)
                spans.setdefault((kind, scope_id), []).append(event_id)
                days.setdefault((kind, scope_id, at.strftime("%Y%m%d")), []).append(event_id)
                if role == "user" and rng.random() < 0.33:  # a fact, as the soak's extractor gives one
                    item_id += 1
                    fact = f"{origin.sender_name} likes {' '.join(turns.words.some(rng.randint(1, 4)))}"
                    memory_id = str(uuid.uuid4())
                    items.append((item_id, memory_id, kind, scope_id, "preference", fact,
                                  f"{origin.sender_id}_likes_{item_id}", _stored(at)))
                    items_fts.append((item_id, index_text(fact), scoped_text(kind, scope_id, fact)))
                    item_vectors.append((item_id, kind, scope_id, model, embedder.dim,
                                         embedder.embed_sync([fact]).astype(np.float32).tobytes(), _stored(at)))
                    evidence.append((memory_id, event_id, "llm_extract", json.dumps(
                        {"confidence": {"base": 0.9, "source": "llm_extract", "weighted": 0.72}}), _stored(at)))
                    audits.append((_stored(at), memory_id, kind, scope_id, origin.unified_msg_origin, json.dumps(
                        {"fact": fact, "fact_key": f"{origin.sender_id}_likes", "confidence": 0.72})))
            conv.left -= 1
            if conv.left <= 0:
                conversations[k] = turns.conversation()
            for key in [key for key, ids in spans.items() if len(ids) >= 40]:  # a session summary each 40 turns
                item_id += 1
                memory_id = str(uuid.uuid4())
                items.append((item_id, memory_id, key[0], key[1], "summary", "a conversation about things",
                              f"summary_session_{item_id}", _stored(clock)))
                evidence += [(memory_id, e, "summary", '{"level": "session"}', _stored(clock)) for e in spans.pop(key)]
        for key in [key for key in days if key[2] < clock.strftime("%Y%m%d")]:  # a day's roll-up
            item_id += 1
            memory_id = str(uuid.uuid4())
            items.append((item_id, memory_id, key[0], key[1], "summary", "a day of talk",
                          f"summary_day_{key[2]}", _stored(clock)))
            evidence += [(memory_id, e, "summary", '{"level": "day"}', _stored(clock)) for e in days.pop(key)]
        conn.executemany(
            "INSERT INTO ltm_events (id, event_id, scope, scope_id, source_type, source_role, content, platform_id, "
            "session_id, sender_id, sender_name, created_at, extraction_status, attempts, withheld) "
            "VALUES (?, ?, ?, ?, 'message', ?, ?, ?, ?, ?, ?, ?, 'done', 0, 0)", events)
        conn.executemany("INSERT INTO ltm_events_fts (rowid, scoped) VALUES (?, ?)", fts)
        conn.executemany("INSERT INTO ltm_event_vectors (event_rowid, scope, scope_id, model, dim, vector, updated_at) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?)", vectors)
        conn.executemany(
            "INSERT INTO ltm_items (id, memory_id, scope, scope_id, type, fact, fact_key, confidence, importance, "
            "evidence_count, status, awaiting_approval, created_at, updated_at, injected_count, tool_count, "
            "use_count) VALUES (?, ?, ?, ?, ?, ?, ?, 0.72, 0.5, 1, 'active', 0, ?, ?, 0, 0, 0)",
            [(*i, i[-1]) for i in items])
        conn.executemany("INSERT INTO ltm_items_fts (rowid, tokens, scoped) VALUES (?, ?, ?)", items_fts)
        conn.executemany("INSERT INTO ltm_item_vectors (item_id, scope, scope_id, model, dim, vector, updated_at) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?)", item_vectors)
        conn.executemany("INSERT INTO ltm_evidence (memory_id, event_id, extraction_method, extraction_meta, "
                         "created_at) VALUES (?, ?, ?, ?, ?)", evidence)
        conn.executemany("INSERT INTO ltm_audit (created_at, action, memory_id, scope, scope_id, session_id, actor, "
                         "reason, detail) VALUES (?, 'create', ?, ?, ?, ?, 'system:extractor', "
                         "'mode auto: thresholds met', ?)", audits)
        conn.commit()
        size = path.stat().st_size + (path.with_name(path.name + "-wal").stat().st_size
                                      if path.with_name(path.name + "-wal").exists() else 0)
        print(f"{n:,} turns, {rowid:,} events, {size / 1e9:.2f} GB, {time.perf_counter() - started:.0f} s", flush=True)
        if size >= target:
            break
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return {"turns": n, "events": rowid, "items": item_id, "bytes": path.stat().st_size,
            "seconds": time.perf_counter() - started}


def ltm_bytes(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master"))
        out: dict[str, int] = {}
        for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            table = owner.get(name, name)
            table = next((t for t in ("ltm_events_fts", "ltm_items_fts") if table.startswith(t)), table)
            if table.startswith("ltm"):
                out[table] = out.get(table, 0) + int(size)
        free = conn.execute("PRAGMA freelist_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
        out["(free pages)"] = int(free)
        return out
    finally:
        conn.close()


# -- the child: the plugin on the store -------------------------------------------------


async def child(directory: Path, log_path: Path) -> None:
    from sqlalchemy import event
    from sqlalchemy.ext.asyncio import create_async_engine

    from astrbot_plugin_ltm.engine import LTMEngine
    from astrbot_plugin_ltm.enums import Corpus
    from astrbot_plugin_ltm.scope import Origin, Scope
    from astrbot_plugin_ltm.text import query_tokens

    from .soak import pragmas, soak_config

    log = log_path.open("a")

    def say(**record: Any) -> None:
        log.write(json.dumps({"t": time.time(), "pid": os.getpid(), **record}) + "\n")
        log.flush()

    db = create_async_engine(f"sqlite+aiosqlite:///{directory / STORE}")
    event.listen(db.sync_engine, "connect", pragmas)
    embedder = SoakEmbedder()
    engine = LTMEngine(db, soak_config(), embedder=embedder, data_dir=directory / "plugin")
    started = time.perf_counter()
    await engine.start(background=False)
    say(kind="started", seconds=time.perf_counter() - started, moving=not engine.relayout.progress.done)
    async with engine.db.read() as session:
        from sqlalchemy import text

        rows = (await session.execute(text(
            "SELECT scope, scope_id, max(sender_id), (SELECT content FROM ltm_events x WHERE x.scope = e.scope "
            "AND x.scope_id = e.scope_id AND x.source_role = 'user' LIMIT 1) FROM ltm_events e "
            "WHERE source_role = 'user' GROUP BY scope, scope_id ORDER BY count(*) DESC LIMIT 12"))).all()
    probes = []
    for kind, scope_id, sender, content in rows:
        words = " ".join(str(json.loads(content).get("text", "")).split()[:6])
        place = scope_id.split(":", 1)[1]
        origin = Origin("soak", f"soak:GroupMessage:{place}", sender, sender, group_id=place) if kind == "group" \
            else Origin("soak", f"soak:FriendMessage:{place}", place, place)
        probes.append((Scope(kind, scope_id), origin, words))

    async def hits() -> dict[str, Any]:
        engine.keyword_index.clear()
        engine.vector_index.clear()
        out: dict[str, Any] = {}
        for scope, _, words in probes:
            keyword = await engine.keyword_index.search([scope], Corpus.TURNS, query_tokens(words), 5)
            near = (await engine.embeddings.query([scope], words, 5)).turns
            out[f"{scope.namespace} {words}"] = {"keywords": [r for r, _ in keyword],
                                                 "meaning": max(near, key=near.__getitem__) if near else None}
        return out

    baseline_path = directory / "baseline.json"
    if not baseline_path.exists():  # the first run, before any batch: what the old layout reads
        baseline_path.write_text(json.dumps(await hits()))
    baseline = json.loads(baseline_path.read_text())
    engine.tasks.start()  # every loop, the move among them
    reads: list[float] = []
    differed: list[str] = []
    n = 0
    reported = 0
    while not engine.relayout.progress.done:
        await asyncio.sleep(0.2)
        scope, origin, words = probes[n % len(probes)]
        n += 1
        start = time.perf_counter()
        await engine.memory_block(origin, words)
        reads.append((time.perf_counter() - start) * 1000)
        if n % 50 == 0:  # the hits, from namespaces loaded afresh mid-move
            now = await hits()
            differed += [f"{key}: {baseline.get(key)} -> {value}" for key, value in now.items()
                         if value != baseline.get(key)]
        p = engine.relayout.progress
        if p.batches - reported >= 200 or p.done:
            say(kind="progress", batches=p.batches, rows=p.rows, held=p.held[reported:], reads=reads,
                differed=differed)
            reported, reads, differed = p.batches, [], []
    now = await hits()
    differed = [f"{key}: {baseline.get(key)} -> {value}" for key, value in now.items() if value != baseline.get(key)]
    p = engine.relayout.progress
    say(kind="done", batches=p.batches, rows=p.rows, held=p.held[reported:], reads=reads, differed=differed,
        compared=len(now))
    await engine.stop()
    await db.dispose()


def move(directory: Path, kill_after: float) -> dict[str, Any]:
    store = directory / STORE
    for suffix in ("", "-wal", "-shm"):
        Path(str(store) + suffix).unlink(missing_ok=True)
    shutil.copy(directory / ORIGINAL, store)
    shutil.rmtree(directory / "plugin", ignore_errors=True)
    (directory / "baseline.json").unlink(missing_ok=True)
    log_path = directory / "move.jsonl"
    log_path.unlink(missing_ok=True)
    before = ltm_bytes(store)
    runs: list[dict[str, Any]] = []
    started = time.perf_counter()
    for attempt in range(10):
        proc = subprocess.Popen([sys.executable, "-m", "bench.relayout", "child", str(directory), str(log_path)])
        begun = time.perf_counter()
        try:
            proc.wait(timeout=kill_after if attempt == 0 and kill_after > 0 else None)
            runs.append({"run": attempt + 1, "seconds": time.perf_counter() - begun, "ended": proc.returncode})
            break
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            runs.append({"run": attempt + 1, "seconds": time.perf_counter() - begun, "ended": "SIGKILL"})
            print(f"killed (SIGKILL) after {kill_after:.0f} s", flush=True)
    records = [json.loads(line) for line in log_path.read_text().splitlines()]
    held = [s for r in records for s in r.get("held", [])]
    reads = [s for r in records for s in r.get("reads", [])]
    differed = sorted({d for r in records for d in r.get("differed", [])})
    after = ltm_bytes(store)
    out = {
        "runs": runs, "seconds": time.perf_counter() - started, "batches": len(held),
        "held_ms": {"p50": _pct(held, 50), "p99": _pct(held, 99), "max": max(held, default=0) * 1000},
        "batches_over_100ms": sum(1 for s in held if s > 0.1),
        "reads_ms": {"n": len(reads), "p50": _pct(reads, 50, 1), "p95": _pct(reads, 95, 1)},
        "reads_differed": differed, "starts": [r for r in records if r["kind"] == "started"],
        "done": [r for r in records if r["kind"] == "done"][-1:] and {
            k: v for k, v in records[-1].items() if k in ("rows", "compared")},
        "file_bytes": store.stat().st_size, "ltm_bytes_before": before, "ltm_bytes_after": after,
    }
    return out


def _pct(values: list[float], q: float, scale: float = 1000) -> float | None:
    return float(np.percentile(np.asarray(values) * scale, q)) if values else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.relayout", description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("build", "move", "child"))
    parser.add_argument("dir")
    parser.add_argument("log", nargs="?")
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--kill-after", type=float, default=60.0,
                        help="seconds before the first run is killed; 0: never")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args(argv)
    directory = Path(args.dir)
    if args.what == "child":
        asyncio.run(child(directory, Path(args.log)))
        return 0
    result = build(directory, args.gb) if args.what == "build" else move(directory, args.kill_after)
    print(json.dumps(result, indent=1, default=str))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
