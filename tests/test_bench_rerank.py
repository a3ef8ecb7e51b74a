"""bench.locomo --rerank: the stand-in reranker (bench/rerank_standin.py)
scores by meaning and switches the plugin's reranking on."""

from __future__ import annotations

import sqlite3

import pytest

from astrbot_plugin_ltm.config import parse_config
from bench import locomo, rerank_standin


async def test_the_stand_in_scores_the_candidate_about_the_question_highest(tmp_path):
    reranker = rerank_standin.E5Reranker(tmp_path / "cache.sqlite")
    scores = await reranker.rerank("Where did Caroline move from?",
                                   ["Caroline bought a new guitar", "Caroline moved here from Sweden four years ago",
                                    "Melanie likes pottery"])
    assert len(scores) == 3 and max(range(3), key=lambda i: scores[i]) == 1
    again = await reranker.rerank("Where did Caroline move from?", ["Caroline moved here from Sweden four years ago"])
    assert again == pytest.approx([scores[1]], abs=1e-5)
    # A text as a query and as a passage are two vectors, cached apart.
    text = "Caroline moved here from Sweden four years ago"
    assert await reranker.rerank(text, [text]) != pytest.approx([1.0], abs=1e-4)
    with sqlite3.connect(tmp_path / "cache.sqlite") as conn:
        models = dict(conn.execute("SELECT model, COUNT(*) FROM vectors GROUP BY model").fetchall())
    assert set(models) == {"multilingual-e5-small-q4", "multilingual-e5-small-q4:passage"}, models


def test_installing_the_stand_in_switches_reranking_on(monkeypatch):
    monkeypatch.setattr(rerank_standin, "INSTALLED", False)
    monkeypatch.setattr(rerank_standin, "_BUILT", [object()])  # no model loaded here
    assert rerank_standin.rerankers_for() is None
    overrides: list[str] = []
    rerank_standin.install(overrides)
    assert f"rerank.provider_id={rerank_standin.PROVIDER_ID}" in overrides
    # The settings it adds are ones the plugin accepts (the bench refuses a run with config errors).
    assert parse_config(locomo.apply_overrides(locomo.bench_config(800, 15, None), overrides))[1] == []
    make = rerank_standin.rerankers_for()
    assert make is not None and make("a") is make("b")  # one per process
