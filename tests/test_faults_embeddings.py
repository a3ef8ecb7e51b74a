"""The embedding provider misbehaving (issue 29, docs/faults.md): down,
slow (10× the timeout), answering another dimension mid-run, switched to
another model. Reads fall back to keywords with one warning, the fill
resumes when the provider is back, and vectors of one model (or one
dimension) are never compared with another's."""

from __future__ import annotations

import asyncio
import hashlib
import re
import time

import numpy as np
from sqlalchemy import func, select

from astrbot_plugin_ltm.storing.tables import MemoryVector, TurnVector, VectorSpace

QUERY_TIMEOUT = 0.05


class Provider:
    """A bag-of-words embedding provider an operator (or the network) can
    take down, slow down, or change the dimension or model of."""

    def __init__(self, dim: int = 32, model_id: str = "hash") -> None:
        self.dim, self.model_id = dim, model_id
        self.down = False
        self.delay = 0.0
        self.calls = 0

    async def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.down:
            raise ConnectionError("embedding provider down (connection refused)")
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, text in enumerate(texts):
            for token in re.findall(r"\w+", text.lower()):
                out[i, int(hashlib.md5(token.encode()).hexdigest(), 16) % self.dim] += 1
        return out


async def engine_with(make_ltm, tmp_path, provider: Provider):
    return await make_ltm({"write_policy": {"mode": "auto"}, "vectors": {"query_timeout_seconds": QUERY_TIMEOUT}},
                          name="e.db", embedder=provider, data_dir=tmp_path / "data")


async def by_meaning(ltm, origin, text: str) -> dict[int, float]:
    return (await ltm.engine.embeddings.query([ltm.engine.resolver.user_scope(origin)], text, 5)).memories


async def test_a_provider_that_goes_down_leaves_reads_on_keywords_with_one_warning_and_the_fill_resumes(
        make_ltm, origin, tmp_path, caplog):
    caplog.set_level("INFO")
    provider = Provider()
    ltm = await engine_with(make_ltm, tmp_path, provider)
    a = origin("alice")
    await ltm.engine.remember(a, "I enjoy hiking in the mountains")
    await ltm.engine.worker.fill_vectors()
    assert len(await by_meaning(ltm, a, "mountains hiking")) == 1

    provider.down = True
    await ltm.engine.remember(a, "My sister lives by the sea")  # its vector must wait
    assert await ltm.engine.worker.fill_vectors() == 0  # no exception
    for _ in range(3):
        block = await ltm.block(a, "sister sea hiking mountains")
        assert "sister lives by the sea" in block.text and "hiking in the mountains" in block.text
    assert caplog.text.count("vector search unavailable") == 1

    provider.down = False
    assert await ltm.engine.worker.fill_vectors() == 2  # the new memory and its turn
    assert len(await by_meaning(ltm, a, "sister by the sea")) == 2
    assert "vector search available again" in caplog.text


async def test_a_provider_ten_times_slower_than_the_timeout_costs_a_read_only_the_timeout(
        make_ltm, origin, tmp_path):
    provider = Provider()
    ltm = await engine_with(make_ltm, tmp_path, provider)
    a = origin("alice")
    await ltm.engine.remember(a, "I enjoy hiking in the mountains")
    await ltm.engine.worker.fill_vectors()
    provider.delay = 10 * QUERY_TIMEOUT
    started = time.perf_counter()
    block = await ltm.block(a, "hiking mountains")
    elapsed = time.perf_counter() - started
    print(f"\na read with the provider 10x slower than its {QUERY_TIMEOUT * 1000:.0f} ms timeout: "
          f"{elapsed * 1000:.0f} ms")
    assert "hiking in the mountains" in block.text  # by keywords
    provider.delay = 0
    assert len(await by_meaning(ltm, a, "mountains hiking")) == 1  # and by meaning once it is quick again


async def test_a_provider_answering_another_dimension_mid_run_is_a_new_vector_space(make_ltm, origin, tmp_path):
    provider = Provider(dim=32)
    ltm = await engine_with(make_ltm, tmp_path, provider)
    a = origin("alice")
    await ltm.engine.remember(a, "I enjoy hiking in the mountains")
    await ltm.engine.worker.fill_vectors()

    provider.dim = 48  # same model name, another dimension (the provider was reconfigured)
    block = await ltm.block(a, "hiking mountains")  # no error: the 32-dimension vectors are not searched
    assert "hiking in the mountains" in block.text
    await ltm.engine.remember(a, "My sister lives by the sea")
    await ltm.engine.worker.fill_vectors()
    hits = await by_meaning(ltm, a, "sister by the sea")
    assert hits and all(0 <= score <= 1.0001 for score in hits.values())
    # Every vector is of the new dimension: the old ones were embedded again, none is mixed in.
    async with ltm.engine.db.read() as session:
        assert set((await session.execute(select(MemoryVector.dim).distinct())).scalars()) == {48}
        turns = select(VectorSpace.dim).join(TurnVector, TurnVector.space == VectorSpace.id).distinct()
        assert set((await session.execute(turns)).scalars()) == {48}
    hiking = await by_meaning(ltm, a, "hiking mountains")
    assert max(hiking, key=hiking.__getitem__) == 1 and hiking[1] > 0.5


async def test_a_switch_to_another_model_embeds_afresh_and_never_mixes_the_two(make_ltm, origin, tmp_path):
    provider = Provider(model_id="model-a")
    ltm = await engine_with(make_ltm, tmp_path, provider)
    a = origin("alice")
    await ltm.engine.remember(a, "I enjoy hiking in the mountains")
    await ltm.engine.worker.fill_vectors()

    provider.model_id = "model-b"  # the operator picked another embedding model
    assert await by_meaning(ltm, a, "mountains hiking") == {}  # model-a's vectors are not compared with b's
    assert "hiking in the mountains" in (await ltm.block(a, "hiking mountains")).text  # keywords meanwhile
    assert await ltm.engine.worker.fill_vectors() == 2
    assert len(await by_meaning(ltm, a, "mountains hiking")) == 1
    async with ltm.engine.db.read() as session:
        models = (await session.execute(select(MemoryVector.model, func.count()).group_by(MemoryVector.model))).all()
        assert [m for m, _ in models] == ["model-b"], models
        turns = (await session.execute(select(VectorSpace.model, func.count()).join(
            TurnVector, TurnVector.space == VectorSpace.id).group_by(VectorSpace.model))).all()
        assert [m for m, _ in turns] == ["model-b"], turns
