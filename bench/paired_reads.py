"""Read time of one ranking rule, paired: each LoCoMo-format question read
with the rule and without it, in alternating order, over one replay per
conversation (keyword-only), so the machine's load falls on both alike.

    python -m bench.paired_reads --data ../shared/data/locomo/locomo_dev.json \\
        --without named_speakers [--limit-conversations N] [--rounds 2]

``--without NAME``: a function of recalling/ranking.py whose empty answer
switches its rule off (a ranking to fuse, or what it is made of: a list or a
set); "without" reads it as answering empty (docs/decisions.md#d124).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import create_async_engine

from astrbot_plugin_ltm.engine import LTMEngine
from astrbot_plugin_ltm.recalling import ranking
from astrbot_plugin_ltm.recalling.tokens import default_counter

from . import locomo
from .conversations import Conversation, load_conversations
from .metrics import percentile


def _none(*_: Any) -> frozenset[Any]:
    return frozenset()


async def read_paired(conv: Conversation, name: str, rounds: int, times: dict[bool, list[float]]) -> None:
    """Replay ``conv``; read each question ``rounds`` times with and without ``name``."""
    real = getattr(ranking, name)
    with tempfile.TemporaryDirectory(prefix="ltm-paired-") as tmp:
        db = create_async_engine(f"sqlite+aiosqlite:///{Path(tmp) / 'paired.db'}")
        clock = locomo.Clock(conv.sessions[0].at)
        extractor = locomo.RecordedExtractor(conv)

        async def extractor_for(_: str | None) -> locomo.RecordedExtractor:
            return extractor

        engine = LTMEngine(db, locomo.bench_config(800, 15, None), extractor_for=extractor_for, clock=clock,
                           counter=default_counter())
        try:
            await engine.start(background=False)
            await locomo.replay(engine, clock, conv, extractor)
            origin = locomo.origin_for(conv, conv.user)
            await locomo.warm_indexes(engine, origin)
            clock.now = conv.end + locomo.READ_AFTER
            questions = [q for q in conv.questions if q.evidence]
            for round_ in range(rounds):
                for n, q in enumerate(questions):
                    for on in ((True, False) if (n + round_) % 2 == 0 else (False, True)):
                        setattr(ranking, name, real if on else _none)
                        start = time.perf_counter()
                        await engine.memory_block(origin, q.text)
                        times[on].append((time.perf_counter() - start) * 1000.0)
        finally:
            setattr(ranking, name, real)
            await engine.stop()
            await db.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.paired_reads", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(locomo.DEFAULT_DATA))
    parser.add_argument("--without", required=True, help="a ranking rule of recalling/ranking.py")
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if not callable(getattr(ranking, args.without, None)):
        parser.error(f"recalling/ranking.py has no function {args.without!r}")
    conversations = load_conversations(args.data)[: args.limit_conversations]
    times: dict[bool, list[float]] = {True: [], False: []}
    for conv in conversations:
        asyncio.run(read_paired(conv, args.without, args.rounds, times))
    for on, label in ((True, "with"), (False, "without")):
        ms = times[on]
        print(f"{label:8} {args.without}: {len(ms)} reads, p50 {percentile(ms, 50):.2f} ms, "
              f"p95 {percentile(ms, 95):.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
