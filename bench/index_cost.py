"""What indexing the raw turns costs, read from a bench's store after its
replay: passages per turn (keyword documents and vectors), the tokens sent
to the embedding model per turn, and the size of the indexes
(docs/decisions.md#d77). ``bench.locomo`` prints it under its table."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, text

from astrbot_plugin_ltm import LTMEngine
from astrbot_plugin_ltm.extension_points import TokenCounter
from astrbot_plugin_ltm.storing.tables import MemoryEvent
from astrbot_plugin_ltm.storing.terms import BREAK_KEY, decode
from astrbot_plugin_ltm.storing.turns import turn_parts, turn_passages
from astrbot_plugin_ltm.text import sentences
from astrbot_plugin_ltm.withholding import speaker_of

BATCH = 2000


def _spread(values: list[int]) -> dict[str, float]:
    return {"mean": sum(values) / len(values) if values else 0.0, "max": max(values, default=0),
            "total": sum(values), "n": len(values)}


def _spreads(parts: list[dict[str, float]]) -> dict[str, float]:
    n, total = sum(p["n"] for p in parts), sum(p["total"] for p in parts)
    return {"mean": total / n if n else 0.0, "max": max((p["max"] for p in parts), default=0), "total": total,
            "n": n}


def combine_costs(costs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The costs of several stores (a bench run's conversations, each in a
    store of its own) as one."""
    if not costs:
        return None
    spreads = ("keyword_documents", "embedding_inputs", "sentence_vectors_before", "vectors_stored")
    return {
        "turns": sum(c["turns"] for c in costs),
        **{name: _spreads([c[name] for c in costs]) for name in spreads},
        "embedding_tokens": {**_spreads([c["embedding_tokens"] for c in costs]),
                             "counter": costs[0]["embedding_tokens"]["counter"]},
        "bytes": {k: sum(c["bytes"][k] for c in costs) for k in costs[0]["bytes"]},
    }


async def index_cost(engine: LTMEngine, counter: TokenCounter) -> dict[str, Any]:
    """The turns' index costs in ``engine``'s store: per keyword-indexed
    turn its keyword documents, its embedding inputs (``turn_passages``;
    before d77 a turn was embedded sentence by sentence, counted as
    ``sentence_vectors_before``) and their tokens by ``counter``; the
    vectors stored, if any; the bytes of each index."""
    documents: list[int] = []
    inputs: list[int] = []
    before: list[int] = []
    tokens: list[int] = []
    last = 0
    while True:
        async with engine.db.read() as session:
            keyword_rows: dict[int, bytes] = dict((await session.execute(text(
                "SELECT event_rowid, terms FROM ltm_turn_terms WHERE event_rowid > :last "
                "ORDER BY event_rowid LIMIT :n"),
                {"last": last, "n": BATCH})).all())
            events = (await session.execute(
                select(MemoryEvent).where(MemoryEvent.id.in_(list(keyword_rows))))).scalars().all()
        if not keyword_rows:
            break
        for event in events:
            keys = decode(keyword_rows[event.id or 0])
            documents.append(int((keys == BREAK_KEY).sum()) + 1)
            said = turn_passages(event.source_type, event.content, speaker_of(event))
            inputs.append(len(said))
            tokens.append(sum(counter.count(passage) for passage in said))
            before.append(min(len(sentences(turn_parts(event.source_type, event.content, None)[1])) or 1, 9))
        last = max(keyword_rows)
    async with engine.db.read() as session:
        fts_bytes = (await session.execute(text("SELECT coalesce(sum(length(terms)), 0) FROM ltm_turn_terms")
                                           )).scalar_one()
        vectors = [int(n) for (n,) in (await session.execute(text(
            "SELECT length(t.vector) / ((s.dim * s.bits + 7) / 8) FROM ltm_turn_vectors t "
            "JOIN ltm_vector_spaces s ON s.id = t.space "
            "WHERE s.dim > 0"))).all()]
        vector_bytes = (await session.execute(text("SELECT coalesce(sum(length(vector)), 0) FROM ltm_turn_vectors")
                                              )).scalar_one()
    return {
        "turns": len(documents),
        "keyword_documents": _spread(documents),
        "embedding_inputs": _spread(inputs),
        "sentence_vectors_before": _spread(before),
        "embedding_tokens": {**_spread(tokens), "counter": counter.name},
        "vectors_stored": _spread(vectors),
        "bytes": {"keyword_rows": int(fts_bytes), "keyword_namespaces_loaded": engine.keyword_index.held(),
                  "vector_rows": int(vector_bytes)},
    }


def cost_lines(cost: dict[str, Any] | None) -> list[str]:
    """The cost, as lines under the bench's table."""
    if not cost:
        return []
    docs, inputs, before, tokens = (cost["keyword_documents"], cost["embedding_inputs"],
                                    cost["sentence_vectors_before"], cost["embedding_tokens"])
    size = cost["bytes"]
    return [
        f"index cost: {cost['turns']} turns; per turn {docs['mean']:.2f} keyword passages (max {docs['max']}), "
        f"{inputs['mean']:.2f} vectors (max {inputs['max']}; by sentence before d77 {before['mean']:.2f}, "
        f"max {before['max']}), {tokens['mean']:.0f} embedding tokens (max {tokens['max']}, {tokens['counter']})",
        f"  index sizes: keyword rows {size['keyword_rows'] / 1e6:.1f} MB, keyword namespaces loaded "
        f"{size['keyword_namespaces_loaded'] / 1e6:.1f} MB, vector rows {size['vector_rows'] / 1e6:.1f} MB "
        f"({cost['vectors_stored']['total']} vectors, max {cost['vectors_stored']['max']} a turn)",
    ]
