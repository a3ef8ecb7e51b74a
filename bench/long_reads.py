"""Reads on long chats: the latency of ``engine.memory_block`` in scopes of
~500 turns with long replies of the bot's (a LongMemEval-shaped store),
keyword-only, and where the time goes.

    python -m bench.long_reads [--data ../shared/data/longmemeval/longmemeval_dev.json]
        [--limit-conversations N] [--queries 10] [--store PATH] [--profile [TOP]] [--json OUT]

Each conversation of the file (one user and an AI assistant, ~50 sessions)
is replayed through the plugin as ``bench.locomo`` does it (record_turn per
exchange, the worker after each session, no model: the file has no facts),
all in one SQLite database, one scope per conversation. Then, with a fresh
engine on that file (a bot's restart: every cache cold) and one untimed
read per scope (which loads its keyword namespace, as a running bot has),
each conversation's question is read, and ``--queries`` more
messages per conversation made of the opening words of its own user turns
("Can you suggest …", "I'm planning …"): a read whose words match many long
turns. Reads are timed one after another (wall clock, and the process's CPU
time, steadier on a shared machine); every block is recounted with the
plugin's counter against its budget. ``--store PATH`` keeps the filled
database and reuses it on the next run (the replay takes a minute or two).
``--profile`` runs the reads under cProfile (on Python 3.12 it sees every
thread: the event loop's, the database's read threads, the ranking's) and
prints the TOP functions by cumulative and by own time.

Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import create_async_engine

from astrbot_plugin_ltm.engine import LTMEngine
from astrbot_plugin_ltm.recalling.tokens import default_counter

from .conversations import load_conversations
from .locomo import READ_AFTER, Clock, RecordedExtractor, bench_config, origin_for, replay

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "longmemeval" / "longmemeval_dev.json"
WARM_UP = "hello"  # the untimed first read of each scope, which loads its keyword namespace
QUERY_WORDS = 8  # a synthetic message: the opening words of one of the user's turns


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def messages_of(conv: Any, n: int, rng: random.Random) -> list[str]:
    """The conversation's question, then ``n`` openings of its user turns."""
    own = [t.text for t in conv.turns if t.speaker != conv.bot_speaker and len(t.text.split()) >= QUERY_WORDS]
    picked = rng.sample(own, min(n, len(own)))
    return [q.text for q in conv.questions] + [" ".join(text.split()[:QUERY_WORDS]) for text in picked]


async def fill(path: Path, conversations: list[Any]) -> float:
    """Replay every conversation into the database at ``path``; seconds taken."""
    db = create_async_engine(f"sqlite+aiosqlite:///{path}")
    clock = Clock(conversations[0].sessions[0].at)
    extractors: dict[str, RecordedExtractor] = {}

    async def extractor_for(session_id: str | None) -> RecordedExtractor | None:
        return extractors.get(session_id or "")

    engine = LTMEngine(db, bench_config(800, 15, None), extractor_for=extractor_for, clock=clock,
                       counter=default_counter())
    started = time.perf_counter()
    try:
        await engine.start(background=False)
        for n, conv in enumerate(conversations, 1):
            extractor = RecordedExtractor(conv)
            extractors[origin_for(conv, conv.user).unified_msg_origin] = extractor
            await replay(engine, clock, conv, extractor)
            print(f"replayed {n}/{len(conversations)}: {conv.sample_id} ({len(conv.turns)} turns)",
                  file=sys.stderr, flush=True)
    finally:
        await engine.stop()
        await db.dispose()
    return time.perf_counter() - started


async def reads(path: Path, conversations: list[Any], n_queries: int, seed: int,
                profile: cProfile.Profile | None) -> dict[str, Any]:
    db = create_async_engine(f"sqlite+aiosqlite:///{path}")
    clock = Clock(max(c.end for c in conversations) + READ_AFTER)
    counter = default_counter()
    engine = LTMEngine(db, bench_config(800, 15, None), clock=clock, counter=counter)
    rng = random.Random(seed)
    times: list[float] = []
    cpu_times: list[float] = []  # the process's CPU time: steadier than the wall clock on a shared machine
    over: list[str] = []
    tokens: list[int] = []
    try:
        await engine.start(background=False)
        plan = [(conv, message) for conv in conversations for message in messages_of(conv, n_queries, rng)]
        budget = engine.config.read_policy.max_tokens
        for conv in conversations:  # each scope's keyword namespace loaded, as in a running bot (untimed)
            await engine.memory_block(origin_for(conv, conv.user), WARM_UP)
        for conv, message in plan:
            origin = origin_for(conv, conv.user)
            if profile is not None:
                profile.enable()
            start, cpu = time.perf_counter(), time.process_time()
            block = await engine.memory_block(origin, message)
            times.append((time.perf_counter() - start) * 1000.0)
            cpu_times.append((time.process_time() - cpu) * 1000.0)
            if profile is not None:
                profile.disable()
            tokens.append(block.tokens)
            if block.text and counter.count(block.text) > budget:
                over.append(message)
    finally:
        await engine.stop()
        await db.dispose()
    return {
        "reads": len(times), "p50_ms": statistics.median(times), "p95_ms": pct(times, 95),
        "max_ms": max(times), "cpu_p50_ms": statistics.median(cpu_times), "cpu_p95_ms": pct(cpu_times, 95),
        "mean_tokens": statistics.mean(tokens), "over_budget": over,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.long_reads", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="a LoCoMo-format JSON file (LongMemEval-shaped)")
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--queries", type=int, default=10, help="messages per conversation beside its question")
    parser.add_argument("--store", help="keep the filled database here (reused when it exists)")
    parser.add_argument("--profile", type=int, nargs="?", const=25, default=None, metavar="TOP")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args(argv)
    conversations = load_conversations(args.data)[: args.limit_conversations]
    scratch = None
    if args.store:
        path = Path(args.store)
    else:
        import tempfile

        scratch = tempfile.TemporaryDirectory(prefix="ltm-long-reads-")
        path = Path(scratch.name) / "long.db"
    replay_seconds = None
    if not path.exists():
        replay_seconds = asyncio.run(fill(path, conversations))
    profile = cProfile.Profile() if args.profile is not None else None
    result = asyncio.run(reads(path, conversations, args.queries, args.seed, profile))
    turns = [len(c.turns) for c in conversations]
    bot_chars = [len(t.text) for c in conversations for t in c.turns if t.speaker == c.bot_speaker]
    doc = {"data": args.data, "conversations": len(conversations), "turns_per_scope": statistics.mean(turns),
           "bot_reply_chars_mean": statistics.mean(bot_chars) if bot_chars else 0,
           "replay_seconds": replay_seconds, **result}
    print(f"{doc['conversations']} scopes of {doc['turns_per_scope']:.0f} turns (bot replies "
          f"{doc['bot_reply_chars_mean']:.0f} chars on average), keyword-only: {result['reads']} reads, "
          f"p50 {result['p50_ms']:.1f} ms, p95 {result['p95_ms']:.1f} ms, max {result['max_ms']:.1f} ms "
          f"(CPU p50 {result['cpu_p50_ms']:.1f} ms, p95 {result['cpu_p95_ms']:.1f} ms), "
          f"{result['mean_tokens']:.0f} tokens a block, {len(result['over_budget'])} over budget")
    if profile is not None:
        for key in ("cumulative", "tottime"):
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats(key).print_stats(args.profile)
            print(out.getvalue())
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(doc, indent=2, ensure_ascii=False))
    if scratch is not None:
        scratch.cleanup()
    return 1 if result["over_budget"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
