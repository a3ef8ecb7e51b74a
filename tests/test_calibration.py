"""The writer's "same fact" cosine follows the embedding model: a model that
puts every text near cosine 0.8 (as multilingual-e5 does) must not merge a
person's different facts, and a paraphrase still merges
(indexes/calibration.py, docs/decisions.md#d68)."""

from __future__ import annotations

import numpy as np
import pytest

from astrbot_plugin_ltm.enums import Status
from astrbot_plugin_ltm.indexes.calibration import FLOOR_PROBES, floor_of, same_threshold
from astrbot_plugin_ltm.indexes.embeddings import SEMANTIC_MATCH
from astrbot_plugin_ltm.storing.tables import MemoryItem
from bench.embedders import HashEmbedder


class CrowdedEmbedder:
    """HashEmbedder's vectors pulled towards one shared direction: unrelated
    texts sit near cosine 0.8, as under multilingual-e5."""

    def __init__(self, pull: float = 2.0) -> None:
        self.inner = HashEmbedder(dim=64, model_id="crowded-64")
        self.model_id = self.inner.model_id
        self.pull = pull
        self.calls = 0

    async def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        v = np.asarray(self.inner.embed_sync(texts), dtype=np.float32)
        v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        common = np.zeros(v.shape[1], dtype=np.float32)
        common[0] = self.pull
        return v + common


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_a_model_that_tells_texts_apart_keeps_the_fixed_threshold():
    vectors = np.eye(len(FLOOR_PROBES), 16, dtype=np.float32)  # orthogonal: floor 0
    assert floor_of(vectors) == 0.0
    assert same_threshold(0.0) == pytest.approx(SEMANTIC_MATCH)


def test_a_crowded_model_needs_a_closer_match():
    vectors = np.ones((4, 8), dtype=np.float32) + np.eye(4, 8, dtype=np.float32) * 0.5
    floor = floor_of(vectors)
    assert 0.8 < floor < 1.0
    assert floor < same_threshold(floor) < 1.0
    assert same_threshold(floor) > same_threshold(0.5) > same_threshold(0.0)


async def test_a_persons_different_facts_stay_apart_under_a_crowded_model(make_ltm, origin):
    embedder = CrowdedEmbedder()
    tea, hiking = "Alice likes green tea in the morning", "Alice likes hiking in the morning"
    a, b = (await embedder.embed([tea, hiking]))
    assert cosine(a, b) > SEMANTIC_MATCH  # a fixed 0.85 would merge them
    ltm = await make_ltm({"write_policy": {"mode": "auto"}}, embedder=embedder)
    alice = origin("alice")
    await ltm.turn(alice, "I like green tea in the morning", "OK.",
                   {"type": "preference", "fact": tea, "fact_key": "drink"})
    await ltm.turn(alice, "I like hiking in the morning", "OK.",
                   {"type": "preference", "fact": hiking, "fact_key": "hobby"})
    facts = {i.fact for i in await ltm.rows(MemoryItem, MemoryItem.status == Status.ACTIVE)}
    assert facts == {tea, hiking}
    threshold = await ltm.engine.embeddings.same_fact_cosine()
    assert cosine(a, b) < threshold < 1.0
    # a paraphrase (the same words, under another key) still merges
    await ltm.turn(alice, "Green tea in the morning, that's what I like", "OK.",
                   {"type": "preference", "fact": "Alice likes green tea in the morning.", "fact_key": "tea"})
    rows = await ltm.rows(MemoryItem, MemoryItem.status == Status.ACTIVE)
    assert {i.fact for i in rows} == {tea, hiking}
    assert next(i for i in rows if i.fact == tea).evidence_count == 2


async def test_the_threshold_is_measured_once_per_model(make_ltm):
    embedder = CrowdedEmbedder()
    ltm = await make_ltm({"write_policy": {"mode": "auto"}}, embedder=embedder)
    first = await ltm.engine.embeddings.same_fact_cosine()
    calls = embedder.calls
    assert await ltm.engine.embeddings.same_fact_cosine() == first
    assert embedder.calls == calls
