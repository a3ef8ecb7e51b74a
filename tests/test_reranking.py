"""A rerank provider reorders a read's best candidates (recalling/reranking.py);
one that fails, is slow or answers out of shape leaves the block as the
retrievers ranked it, with one warning."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from types import SimpleNamespace

import pytest

from astrbot_plugin_ltm.adapter import AstrBotReranker
from astrbot_plugin_ltm.config import READ_SECONDS, RerankConfig
from astrbot_plugin_ltm.recalling.ranking import Ranked
from astrbot_plugin_ltm.recalling.reranking import Reranking, reorder
from astrbot_plugin_ltm.scope import Scope
from astrbot_plugin_ltm.storing.memory_rows import fact_written
from astrbot_plugin_ltm.storing.tables import MemoryItem

ALICE = Scope("user", "qq:alice")
TEAS = ["Alice drinks green tea every morning", "Alice brews oolong tea for guests",
        "Alice keeps a tea diary", "Alice grows tea plants on the balcony"]


class ScoringReranker:
    """Scores each document by the first of ``liked`` it contains (earlier is better)."""

    def __init__(self, liked: list[str]) -> None:
        self.liked = liked
        self.calls: list[tuple[str, list[str]]] = []

    async def rerank(self, query: str, documents: list[str]) -> list[float]:
        self.calls.append((query, documents))
        return [float(len(self.liked) - next((n for n, word in enumerate(self.liked) if word in d), len(self.liked)))
                for d in documents]


class FailingReranker:
    async def rerank(self, query: str, documents: list[str]) -> list[float]:
        raise ConnectionError("rerank server down")


class HangingReranker:
    async def rerank(self, query: str, documents: list[str]) -> list[float]:
        await asyncio.sleep(3600)
        return []


class ShortReranker:
    async def rerank(self, query: str, documents: list[str]) -> list[float]:
        return [1.0]


async def add(ltm, fact: str) -> None:
    async with ltm.engine.db.write() as session:
        item = MemoryItem(scope=ALICE.kind, scope_id=ALICE.id, type="episode", fact=fact,
                          fact_key=f"k{random.random()}", confidence=0.9, status="active")
        session.add(item)
        await session.flush()
        await fact_written(session, item, created=True)


def settings(**rerank) -> dict:
    return {"write_policy": {"mode": "auto"}, "read_policy": {"max_items": 1, "max_events": 0},
            "rerank": {"provider_id": "bge", **rerank}}


async def shown(ltm, origin, query: str = "tea") -> list[str]:
    return [item.fact for item in (await ltm.block(origin("alice"), query)).items]


async def retrievers_order(make_ltm, origin) -> list[str]:
    plain = await make_ltm({"write_policy": {"mode": "auto"}, "read_policy": {"max_items": 4, "max_events": 0}})
    for fact in TEAS:
        await add(plain, fact)
    return await shown(plain, origin)


async def test_a_candidate_the_reranker_prefers_strongly_goes_first(make_ltm, origin):
    order = await retrievers_order(make_ltm, origin)
    assert len(order) == 4
    # The runner-up is the reranker's first; the retrievers' first its last.
    reranker = ScoringReranker([order[1], order[2], order[3]])
    ltm = await make_ltm(settings(), rerankers=lambda provider_id: reranker)
    for fact in TEAS:
        await add(ltm, fact)
    assert await shown(ltm, origin) == [order[1]]
    query, documents = reranker.calls[-1]
    assert query == "tea" and order[0] in documents and order[1] in documents  # the facts, as the block shows them


async def test_the_reranker_reads_at_most_the_configured_candidates(make_ltm, origin, monkeypatch):
    monkeypatch.setattr(RerankConfig, "candidates", 2)
    reranker = ScoringReranker([])
    ltm = await make_ltm(settings(), rerankers=lambda provider_id: reranker)
    for fact in TEAS:
        await add(ltm, fact)
    await shown(ltm, origin)
    assert [len(documents) for _, documents in reranker.calls] == [2]


async def test_without_a_provider_id_nothing_is_reranked(make_ltm, origin):
    built: list[str] = []
    ltm = await make_ltm(settings(provider_id=""), rerankers=built.append)
    for fact in TEAS:
        await add(ltm, fact)
    assert len(await shown(ltm, origin)) == 1
    assert built == []


@pytest.mark.parametrize("reranker", [FailingReranker(), HangingReranker(), ShortReranker()],
                         ids=["failing", "hanging", "out-of-shape"])
async def test_a_reranker_that_fails_leaves_the_retrievers_order_with_one_warning(make_ltm, origin, caplog,
                                                                                   reranker, monkeypatch):
    monkeypatch.setattr(RerankConfig, "timeout_seconds", 0.2)
    order = await retrievers_order(make_ltm, origin)
    ltm = await make_ltm(settings(), rerankers=lambda provider_id: reranker)
    for fact in TEAS:
        await add(ltm, fact)
    caplog.set_level(logging.INFO)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await shown(ltm, origin) == [order[0]]
    assert await shown(ltm, origin) == [order[0]]
    assert loop.time() - started < 5  # a hanging provider costs its timeout, not the turn
    warnings = [r for r in caplog.records if "reranking unavailable" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING


async def test_a_reranker_answering_again_is_announced(make_ltm, origin, caplog):
    class Flaky(ScoringReranker):
        down = True

        async def rerank(self, query: str, documents: list[str]) -> list[float]:
            if self.down:
                raise ConnectionError("down")
            return await super().rerank(query, documents)

    reranker = Flaky([])
    ltm = await make_ltm(settings(), rerankers=lambda provider_id: reranker)
    for fact in TEAS:
        await add(ltm, fact)
    caplog.set_level(logging.INFO)
    await shown(ltm, origin)
    reranker.down = False
    await shown(ltm, origin)
    assert any("reranking available again" in r.getMessage() for r in caplog.records)


def test_reordering_keeps_each_position_s_score_and_leaves_the_rest():
    ranked = [Ranked(score) for score in (0.9, 0.8, 0.7, 0.6, 0.5)]
    first, second, third = ranked[:3]
    out = reorder(list(ranked), [0.0, 1.0, 0.5])  # the reranker: second, third, first
    # fused by reciprocal rank: second 1/12 + 1/11, first 1/11 + 1/13, third 1/13 + 1/12
    assert out[:3] == [second, first, third]
    assert [r.score for r in out] == [0.9, 0.8, 0.7, 0.6, 0.5]
    assert out[3:] == ranked[3:]


async def test_a_message_without_words_or_a_read_out_of_time_is_not_reranked():
    reranker = ScoringReranker([])
    reranking = Reranking(lambda provider_id: reranker, lambda: RerankConfig(provider_id="bge"))
    ranked = [Ranked(0.9), Ranked(0.8)]
    assert await reranking.apply("  ", list(ranked), ["a", "b"], seconds_left=3.0) == ranked
    assert await reranking.apply("tea?", list(ranked), ["a", "b"], seconds_left=0.2) == ranked  # 3 s nearly spent
    assert reranker.calls == []
    await reranking.apply("tea?", list(ranked), ["a", "b"], seconds_left=3.0)
    assert len(reranker.calls) == 1


def test_a_reranker_is_waited_for_less_than_a_read():
    # A read has READ_SECONDS in all: a longer timeout would be cut without a word.
    assert 0 < RerankConfig.timeout_seconds < READ_SECONDS and RerankConfig.candidates >= 2


async def test_astrbot_s_rerank_results_become_scores_in_the_documents_order():
    class Provider:
        async def rerank(self, query, documents, top_n=None):
            # AstrBot's providers answer best first, by index; this one leaves one out (top_n).
            return [SimpleNamespace(index=2, relevance_score=0.9), SimpleNamespace(index=0, relevance_score=0.4)]

    context = SimpleNamespace(get_provider_by_id=lambda provider_id: Provider() if provider_id == "bge" else None)
    assert await AstrBotReranker(context, "bge").rerank("q", ["a", "b", "c"]) == [0.4, -0.6, 0.9]


async def test_many_candidates_go_to_astrbot_in_requests_of_at_most_32():
    sizes: list[int] = []

    class Provider:
        async def rerank(self, query, documents, top_n=None):
            sizes.append(len(documents))
            return [SimpleNamespace(index=i, relevance_score=float(d)) for i, d in enumerate(documents)]

    context = SimpleNamespace(get_provider_by_id=lambda provider_id: Provider())
    documents = [str(n) for n in range(70)]
    assert await AstrBotReranker(context, "tei").rerank("q", documents) == [float(n) for n in range(70)]
    assert sorted(sizes) == [6, 32, 32]


async def test_a_missing_rerank_provider_is_looked_up_again_only_after_a_while():
    lookups: list[str] = []
    context = SimpleNamespace(get_provider_by_id=lambda provider_id: lookups.append(provider_id))  # always None
    reranker = AstrBotReranker(context, "gone")
    for _ in range(3):
        with pytest.raises(LookupError):
            await reranker.rerank("q", ["a", "b"])
    assert lookups == ["gone"]  # AstrBot logs each lookup of an unknown id
    reranker._missing_since = time.monotonic() - AstrBotReranker.MISSING_RECHECK_SECONDS - 1  # a while later
    with pytest.raises(LookupError):
        await reranker.rerank("q", ["a", "b"])
    assert lookups == ["gone", "gone"]
