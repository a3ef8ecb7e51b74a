"""bench.locomo --misses: each missed evidence turn is placed (cut from
the block and why, retrieved but not loaded, or found by no retriever),
and asking why changes none of the figures (bench/misses.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from astrbot_plugin_ltm.recalling.tokens import EstimateCounter
from bench import locomo
from tests.helpers import TINY_LOCOMO
from tests.test_bench_long_runs import figures


def run(**kwargs: Any) -> dict[str, Any]:
    convs = locomo.load_conversations([TINY_LOCOMO])
    return asyncio.run(locomo.run(convs, counter=EstimateCounter(), max_tokens=60, **kwargs))


def test_every_missed_evidence_turn_is_placed_and_the_figures_stay_the_same():
    plain = run()
    explained = run(misses=True)
    misses = explained.pop("misses")
    assert figures(explained) == figures(plain)
    assert misses, "a 60-token block misses some evidence"
    for record in misses:
        gold = set(record["evidence"])
        assert set(record["reached"]) <= gold
        for turn in record["missed"]:
            assert turn["dia_id"] in gold and turn["dia_id"] not in record["reached"]
            assert turn["where"] in {"cut", "retrieved", "absent"}
            assert (turn["why"] is not None) == (turn["where"] == "cut")
            assert turn["text"]
