"""Why a question's evidence was missed: ``bench.locomo --misses PATH``.

For each question with a gold turn the block did not reach, the question is
read once more with the preview's trace (recalling/trace.py) and each missed
turn is put in one of four places:

taken      reached after all (never: the read is the same; a check)
cut        a candidate the block left out (the trace's reason: the budget,
           the caps, a full block...), directly or through a memory citing it
retrieved  in a retriever's top hits but not among the loaded candidates
absent     in no retriever's hits

With the turn's own words shared with the question, and with the question's
reached evidence turns (a second hop's way in). JSON lines, one a question;
the timed read is not affected (this read comes after it).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import text as sql

from astrbot_plugin_ltm.extension_points import Query
from astrbot_plugin_ltm.recalling.reader import HITS_PER_SEARCH
from astrbot_plugin_ltm.recalling.trace import Trace
from astrbot_plugin_ltm.text import query_tokens

from .conversations import Question


async def event_rowids(engine: Any) -> dict[str, int]:
    """event_id -> the event's row id."""
    async with engine.db.read() as session:
        rows = await session.execute(sql("SELECT id, event_id FROM ltm_events"))
        return {event_id: rowid for rowid, event_id in rows}


async def explain(engine: Any, origin: Any, q: Question, rep: Any, reached: set[str],
                  rowids: dict[str, int]) -> dict[str, Any] | None:
    """The record of ``q``'s missed evidence, or None when nothing was missed."""
    missed = [d for d in q.evidence if d not in reached]
    if not missed:
        return None
    trace = Trace()
    await engine.memory_block(origin, q.text, trace=trace)
    dia_event = {dia: event for event, dia in rep.event_dia.items()}
    cut: dict[str, str] = {}
    for c in trace.cut:
        ids = rep.evidence.get(c.id, {c.id})  # a memory reaches its evidence; a turn itself
        for event in ids:
            dia = rep.event_dia.get(event)
            if dia is not None:
                cut.setdefault(dia, f"{c.why_code.rsplit('.', 1)[-1]}@{c.score:.3f}"
                               + ("" if c.id in rep.event_dia else " (memory)"))
    scopes = engine.resolver.read_scopes(origin)
    ranks: dict[str, dict[str, int]] = {}
    for retriever in engine.reader.retrievers:
        found = await retriever.search(scopes, Query.of(q.text), HITS_PER_SEARCH)
        ranks[retriever.name] = {str(r): n for n, r in enumerate(found.turns)}
    turns = {t.dia_id: t for t in rep.conv.turns}
    asked = set(query_tokens(q.text, 64))
    hops = set().union(*(query_tokens(turns[d].text, 64) for d in q.evidence if d in reached and d in turns))
    out = []
    for dia in missed:
        event = dia_event.get(dia)
        rowid = str(rowids.get(event, -1)) if event is not None else "-1"
        hit = {name: r[rowid] for name, r in ranks.items() if rowid in r}
        where = "cut" if dia in cut else "retrieved" if hit else "absent"
        words = set(query_tokens(turns[dia].text, 64)) if dia in turns else set()
        out.append({"dia_id": dia, "where": where, "why": cut.get(dia), "ranks": hit,
                    "shares_question": sorted(words & asked), "shares_reached": len(words & hops),
                    "text": turns[dia].text[:200] if dia in turns else None,
                    "session": turns[dia].session if dia in turns else None})
    return {"sample_id": rep.conv.sample_id, "category": q.category, "question": q.text,
            "evidence": list(q.evidence), "reached": sorted(set(q.evidence) & reached), "missed": out,
            "block_lines": len(trace.lines)}
