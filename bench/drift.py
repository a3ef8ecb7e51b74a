"""How far snapshots of a normal store move, what a policy change does to
them, and what a snapshot costs (operating/drift.py, drift_monitor.py).

    python -m bench.drift --data ../shared/data/locomo/locomo_dev.json [--embedder minilm|hash|none]
    python -m bench.drift --scale 100000     # the cost on a synthetic store only

steady   LoCoMo's conversations replayed through the real write pipeline
         (bench.locomo's replay, mode auto, one scope per conversation, all
         of kind user), a snapshot after every session: the similarity of
         consecutive snapshots of a store growing under one policy. The
         threshold should sit below these.
change   The same, but from the first conversation's middle session on (sessions
         in time order across all conversations) the write mode is shadow.
cost     A synthetic store (``--scale`` memories of kind user with 384-dim
         vectors): the time of one snapshot and the longest the event loop
         waited meanwhile (a 5 ms ticker), and the same wait while idle as
         long (the machine's own noise).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy.ext.asyncio import create_async_engine

from astrbot_plugin_ltm.engine import LTMEngine
from astrbot_plugin_ltm.enums import DriftTrigger
from astrbot_plugin_ltm.operating.drift_monitor import MIN_ITEMS_FOR_ALARM

from .conversations import Conversation, load_conversations
from .locomo import DEFAULT_DATA, Clock, RecordedExtractor, bench_config, origin_for


def _embedder(name: str) -> Any:
    if name == "none":
        return None
    from .embedders import FastEmbedEmbedder, HashEmbedder

    return FastEmbedEmbedder() if name == "minilm" else HashEmbedder()


async def _replay_session(engine: LTMEngine, clock: Clock, conv: Conversation, index: int,
                          extractor: RecordedExtractor) -> None:
    session = conv.sessions[index]
    for turn in session.turns:
        clock.now = turn.at
        for event in engine.record_turn(origin_for(conv, turn.speaker), turn.text, "", created_at=turn.at):
            extractor.recorded(turn.dia_id, event)
    await engine.recorder.flush()
    await engine.worker.drain()
    await engine.worker.fill_vectors()


async def replay_arm(conversations: list[Conversation], embedder: Any, switch: bool, tmp: Path) -> dict[str, Any]:
    """Sessions in time order across conversations, a snapshot after each."""
    path = tmp / f"drift-{'change' if switch else 'steady'}.db"
    db = create_async_engine(f"sqlite+aiosqlite:///{path}")
    clock = Clock(min(c.sessions[0].at for c in conversations))
    extractors = {origin_for(c, c.speakers[0]).unified_msg_origin: RecordedExtractor(c) for c in conversations}

    async def extractor_for(session_id: str | None) -> Any:
        return extractors.get(session_id or "")

    config = bench_config(800, 15, None)
    config["vectors"] = {"embed_turns": False}
    engine = LTMEngine(db, config, extractor_for=extractor_for, clock=clock, embedder=embedder)
    await engine.start(background=False)
    steps = sorted(((c.sessions[i].at, n, i) for n, c in enumerate(conversations) for i in range(len(c.sessions))))
    middle = {n: len(c.sessions) // 2 for n, c in enumerate(conversations)}
    out: list[dict[str, Any]] = []
    try:
        for _, n, i in steps:
            conv = conversations[n]
            if switch and i == middle[n] and engine.config.write_policy.mode == "auto" and n == 0:
                config["write_policy"]["mode"] = "shadow"
                engine.apply_config(config)
            await _replay_session(engine, clock, conv, i,
                                  extractors[origin_for(conv, conv.speakers[0]).unified_msg_origin])
            (row,) = [r for r in await engine.drift.snapshot(DriftTrigger.MANUAL) if r.scope_kind == "user"]
            out.append({"at": clock().isoformat(), "items": row.features["items"], "similarity": row.similarity,
                        "mode": engine.config.write_policy.mode, "vectors": row.features["vectors"]})
    finally:
        await engine.stop()
        await db.dispose()
    return {"snapshots": out}


def summary(snapshots: list[dict[str, Any]], mode: str | None = None) -> str:
    sims = [s["similarity"] for s in snapshots if s["similarity"] is not None
            and s["items"] >= MIN_ITEMS_FOR_ALARM and (mode is None or s["mode"] == mode)]
    if not sims:
        return "no comparable snapshots"
    sims.sort()
    p5 = sims[max(0, int(len(sims) * 0.05) - 1)]
    return (f"n={len(sims)} min={sims[0]:.4f} p5={p5:.4f} median={statistics.median(sims):.4f} "
            f"below 0.9: {sum(s < 0.9 for s in sims)}, below 0.95: {sum(s < 0.95 for s in sims)}")


async def cost(scale: int, tmp: Path) -> dict[str, float]:
    path = tmp / "drift-scale.db"
    db = create_async_engine(f"sqlite+aiosqlite:///{path}")
    engine = LTMEngine(db, {})
    await engine.start(background=False)
    import sqlite3

    rng = np.random.default_rng(7)
    conn = sqlite3.connect(path)
    with conn:
        conn.executemany(
            "INSERT INTO ltm_items (memory_id, scope, scope_id, type, fact, fact_key, confidence, importance, "
            "evidence_count, status, awaiting_approval, created_at, updated_at) VALUES (?, 'user', ?, ?, ?, ?, ?, "
            "0.5, 1, 'active', 0, '2026-11-25 10:00:00', '2026-11-25 10:00:00')",
            [(f"m{i}", f"u:{i % 1000}", ("profile", "preference", "episode")[i % 3], f"fact {i}", f"fact {i}",
              float(rng.random())) for i in range(scale)])
        conn.executemany(
            "INSERT INTO ltm_item_vectors (item_id, scope, scope_id, model, dim, vector, updated_at) "
            "SELECT id, 'user', scope_id, 'bench', 384, ?, '2026-11-25 10:00:00' FROM ltm_items WHERE id = ?",
            [(rng.standard_normal(384).astype(np.float32).tobytes(), i + 1) for i in range(scale)])
    conn.close()
    async def lag_during(work: Any) -> tuple[float, float]:
        """(seconds the work took, the longest the event loop waited meanwhile)."""
        lag, running = 0.0, True

        async def ticker() -> None:
            nonlocal lag
            while running:
                before = time.perf_counter()
                await asyncio.sleep(0.005)
                lag = max(lag, time.perf_counter() - before - 0.005)

        task = asyncio.create_task(ticker())
        start = time.perf_counter()
        await work
        seconds = time.perf_counter() - start
        running = False
        await task
        return seconds, lag

    seconds, lag = await lag_during(engine.drift.snapshot(DriftTrigger.MANUAL))
    _, idle = await lag_during(asyncio.sleep(seconds))  # the machine's own noise, for comparison
    await engine.stop()
    await db.dispose()
    return {"memories": scale, "snapshot_s": round(seconds, 3), "max_loop_lag_ms": round(lag * 1000, 1),
            "idle_max_loop_lag_ms": round(idle * 1000, 1)}


async def main_async(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="ltm-drift-") as name:
        tmp = Path(name)
        if args.scale:
            print("cost:", await cost(args.scale, tmp))
        if args.data:
            conversations = load_conversations(args.data)
            embedder = _embedder(args.embedder)
            steady = await replay_arm(conversations, embedder, False, tmp)
            print(f"steady (auto throughout), embedder={args.embedder}: {summary(steady['snapshots'])}")
            change = await replay_arm(conversations, embedder, True, tmp)
            print(f"change (auto, then shadow), after the switch: {summary(change['snapshots'], 'shadow')}")
            for s in change["snapshots"]:
                if s["mode"] == "shadow" and s["similarity"] is not None and s["items"] >= MIN_ITEMS_FOR_ALARM:
                    print(f"  {s['at'][:10]} items={s['items']} similarity={s['similarity']:.4f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", nargs="?", const=str(DEFAULT_DATA), default=None, help="a LoCoMo-format JSON file")
    parser.add_argument("--embedder", choices=("minilm", "hash", "none"), default="minilm")
    parser.add_argument("--scale", type=int, default=0, help="memories of the synthetic cost store (0: skip)")
    args = parser.parse_args(argv)
    if not args.data and not args.scale:
        parser.error("give --data, --scale or both")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
