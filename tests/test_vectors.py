"""FAISS namespaces per scope: rebuilt from SQLite, isolated, and optional."""

from __future__ import annotations

import asyncio
import json
import os
import random
import threading
import time
from datetime import UTC, datetime

import faiss
import numpy as np
import pytest
from sqlalchemy import delete, func, select, update
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import create_async_engine

from astrbot_plugin_ltm import LTMEngine, Origin
from astrbot_plugin_ltm.config import VectorConfig
from astrbot_plugin_ltm.enums import Corpus
from astrbot_plugin_ltm.indexes import faiss_files, vectors
from astrbot_plugin_ltm.indexes.faiss_files import STRIDE
from astrbot_plugin_ltm.scope import Scope
from astrbot_plugin_ltm.storing.changes import MemoryRemoved, ScopeForgotten, note
from astrbot_plugin_ltm.storing.tables import MemoryEvent, MemoryItem, MemoryVector, TurnVector, VectorSpace
from astrbot_plugin_ltm.storing.vector_rows import delete_memory_vector, store_vectors
from tests.helpers import FailingEmbedder, HashEmbedder

# Namespaces of these tests are small: kept in files all the same (conftest.namespace_files).
pytestmark = pytest.mark.usefixtures("namespace_files")

MEMORIES, TURNS = Corpus.MEMORIES, Corpus.TURNS
NOW = datetime(2025, 3, 1, tzinfo=UTC)


async def store(engine: LTMEngine, corpus: Corpus, rows, model: str, vecs) -> None:
    """Vectors stored through the single write point, as the fill does (a
    turn's row gets its event first, if it has none: a turn's scope is its
    event's)."""
    async with engine.db.write() as session:
        if corpus == TURNS:
            await session.execute(sql(
                "INSERT OR IGNORE INTO ltm_events (id, event_id, scope, scope_id, source_type, source_role, content, "
                "created_at, extraction_status, attempts, withheld) VALUES (:id, :event_id, :kind, :scope_id, "
                "'message', 'user', '{}', '2025-03-01 00:00:00.000000', 'done', 0, 0)"),
                [{"id": rowid, "event_id": f"event-{rowid}", "kind": scope.kind, "scope_id": scope.id}
                 for rowid, scope in rows])
        await store_vectors(session, corpus, rows, model, vecs, NOW)


class HangingEmbedder:
    model_id = "slow"

    async def embed(self, texts: list[str]) -> np.ndarray:
        await asyncio.sleep(30)
        raise AssertionError("never reached")


def alice(n: int = 0) -> Origin:
    return Origin("qq", f"qq:FriendMessage:user{n}", f"user{n}", f"User{n}")


@pytest.fixture
def db_url(tmp_path):
    return f"sqlite+aiosqlite:///{tmp_path}/ltm.db"


async def make(db_url, tmp_path, embedder, **config) -> LTMEngine:
    engine = LTMEngine(
        create_async_engine(db_url),
        {"write_policy": {"mode": "auto", "max_writes_per_session": 1000, "max_writes_per_hour": 10000}, **config},
        embedder=embedder,
        data_dir=tmp_path,
    )
    await engine.start(background=False)
    return engine


async def vector_ids(engine: LTMEngine, scope: Scope, text: str) -> set[int]:
    return set((await engine.embeddings.query([scope], text, 50)).memories)


async def test_items_get_vectors_in_the_background_and_are_found_by_meaning(db_url, tmp_path):
    engine = await make(db_url, tmp_path, HashEmbedder())
    await engine.remember(alice(), "I enjoy hiking in the mountains")
    assert await engine.worker.fill_vectors() == 2  # the memory, and the turn that said it
    scope = engine.resolver.user_scope(alice())
    hits = (await engine.embeddings.query([scope], "mountains hiking", 5)).memories
    assert len(hits) == 1 and next(iter(hits.values())) > 0.5
    block = await engine.memory_block(alice(), "any mountains nearby?")
    assert "hiking in the mountains" in block.text


async def test_deleted_item_leaves_the_namespace_and_a_stale_file_is_rebuilt(db_url, tmp_path):
    engine = await make(db_url, tmp_path, HashEmbedder())
    kept = await engine.remember(alice(), "I enjoy hiking in the mountains")
    gone = await engine.remember(alice(), "I enjoy swimming in mountains lakes")
    await engine.worker.fill_vectors()
    scope = engine.resolver.user_scope(alice())
    both = await vector_ids(engine, scope, "mountains")
    assert len(both) == 2
    await engine.stop()  # the namespace file now holds both vectors
    gone_row = await _rowid(engine, gone.memory_id)

    await engine.admin.delete(gone.memory_id, "operator:test")
    async with engine.db.read() as session:
        assert await session.get(MemoryVector, gone_row) is None  # SQLite first
    assert gone_row not in await vector_ids(engine, scope, "mountains")

    # A new process finds the file stale (its fingerprint no longer matches
    # SQLite) and rebuilds the namespace without the deleted item.
    fresh = await make(db_url, tmp_path, HashEmbedder())
    assert await vector_ids(fresh, scope, "mountains") == {await _rowid(fresh, kept.memory_id)}


async def test_corrupt_namespace_file_is_rebuilt_from_sqlite(db_url, tmp_path):
    engine = await make(db_url, tmp_path, HashEmbedder())
    await engine.remember(alice(), "I enjoy hiking in the mountains")
    await engine.worker.fill_vectors()
    scope = engine.resolver.user_scope(alice())
    expected = await vector_ids(engine, scope, "hiking")
    assert expected
    await engine.stop()
    files = list((tmp_path / "vectors").glob("*.faiss"))
    assert files
    for path in files:
        path.write_bytes(b"not a faiss index")

    fresh = await make(db_url, tmp_path, HashEmbedder())
    assert await vector_ids(fresh, scope, "hiking") == expected
    await fresh.stop()
    assert all(p.read_bytes()[:4] != b"not " for p in files)  # rewritten


async def test_a_malformed_vector_row_is_left_out_and_embedded_again(db_url, tmp_path):
    engine = await make(db_url, tmp_path, HashEmbedder())
    kept = await engine.remember(alice(), "I enjoy hiking in the mountains")
    torn = await engine.remember(alice(), "I enjoy swimming in mountain lakes")
    await engine.worker.fill_vectors()
    await engine.stop()
    kept_row, torn_row = await _rowid(engine, kept.memory_id), await _rowid(engine, torn.memory_id)
    async with engine.db.write() as session:  # not a whole number of vectors
        await session.execute(update(MemoryVector).where(MemoryVector.item_id == torn_row).values(vector=b"\0" * 7))

    fresh = await make(db_url, tmp_path, HashEmbedder())
    scope = fresh.resolver.user_scope(alice())
    assert await vector_ids(fresh, scope, "mountains") == {kept_row}  # the rest of the scope still loads
    assert await fresh.worker.fill_vectors() == 1
    assert await vector_ids(fresh, scope, "mountains") == {kept_row, torn_row}
    await fresh.stop()


async def test_a_new_model_or_dimension_is_embedded_afresh(db_url, tmp_path):
    engine = await make(db_url, tmp_path, HashEmbedder(32))
    await engine.remember(alice(), "I enjoy hiking in the mountains")
    await engine.worker.fill_vectors()
    await engine.stop()

    switched = await make(db_url, tmp_path, HashEmbedder(16))
    scope = switched.resolver.user_scope(alice())
    assert await vector_ids(switched, scope, "hiking") == set()  # no 32-d vector is compared with 16-d
    block = await switched.memory_block(alice(), "hiking")
    assert "hiking" in block.text  # keyword retrieval covers the gap
    assert await switched.worker.fill_vectors() == 2  # the memory and its turn
    assert len(await vector_ids(switched, scope, "hiking")) == 1
    async with switched.db.read() as session:
        models = set((await session.execute(select(MemoryVector.model))).scalars())
    assert models == {"hash-16"}


@pytest.mark.parametrize("embedder", [None, FailingEmbedder(), HangingEmbedder()], ids=["none", "failing", "hanging"])
async def test_keyword_only_without_a_working_embedding_provider(db_url, tmp_path, embedder):
    engine = await make(db_url, tmp_path, embedder, vectors={"query_timeout_seconds": 0.2})
    await engine.remember(alice(), "I enjoy hiking in the mountains")
    assert await engine.worker.fill_vectors() == 0
    loop = asyncio.get_running_loop()
    started = loop.time()
    block = await engine.memory_block(alice(), "hiking")
    assert loop.time() - started < 5  # a hanging provider costs one timeout, not the turn
    assert "hiking in the mountains" in block.text


async def test_loaded_namespaces_stay_under_the_bound(db_url, tmp_path, monkeypatch):
    monkeypatch.setattr(VectorConfig, "max_loaded_namespaces", 2)
    engine = await make(db_url, tmp_path, HashEmbedder())
    for n in range(4):
        await engine.remember(alice(n), f"I collect stamps number {n}")
    await engine.worker.fill_vectors()
    for n in range(4):
        scope = engine.resolver.user_scope(alice(n))
        assert len(await vector_ids(engine, scope, "stamps")) == 1
        assert engine.vector_index.loaded_count <= 2


async def test_under_a_small_memory_budget_reads_find_the_same_and_namespaces_are_let_go(db_url, tmp_path):
    """The keyword and vector namespaces share the budget: one smaller than
    a scope's namespaces keeps only the last loaded, and every read finds
    what it finds with room to spare."""
    engine = await make(db_url, tmp_path, HashEmbedder())
    for n in range(4):
        await engine.remember(alice(n), f"I collect stamps number {n}")
    await fill_all(engine)
    found = {}
    for n in range(4):
        block = await engine.memory_block(alice(n), "which stamps do I collect?")
        found[n] = [item.fact for item in block.items]
    assert all(found.values())
    assert engine.vector_index.loaded_count + engine.keyword_index.loaded_count > 4
    engine.vector_index.clear()
    engine.keyword_index.clear()
    engine.index_budget.limit = 1
    for n in range(4):
        block = await engine.memory_block(alice(n), "which stamps do I collect?")
        assert [item.fact for item in block.items] == found[n]
        await engine.loads_settled()
        assert engine.vector_index.loaded_count + engine.keyword_index.loaded_count == 1
    await engine.stop()


@pytest.mark.parametrize("seed", range(4))
async def test_no_vector_from_one_scope_is_returned_for_another(db_url, tmp_path, seed, monkeypatch):
    """Random adds, edits, deletions, recorded turns, forgotten scopes and
    reloads over 5 scopes: every vector hit a scope's query returns, memory
    or turn, is a row of that scope."""
    rng = random.Random(seed)
    words = ["tea", "coffee", "hiking", "stamps", "chess", "piano", "paris", "london", "rome", "cats", "dogs"]
    monkeypatch.setattr(VectorConfig, "max_loaded_namespaces", 2)
    engine = await make(db_url, tmp_path, HashEmbedder(16))
    seen_turns = [0]
    for step in range(60):
        who = alice(rng.randrange(5))
        op = rng.random()
        if op < 0.4:
            await engine.remember(who, f"I like {rng.choice(words)} and {rng.choice(words)} {step}")
        elif op < 0.55:
            engine.record_turn(who, f"we talked about {rng.choice(words)} {step}", "OK")
            await engine.recorder.flush()
        elif op < 0.58:
            await engine.admin.forget_scope(engine.resolver.user_scope(who), "operator:test")
        elif op < 0.7:
            items, _ = await engine.admin.list_items(_filter(engine, who), limit=50)
            if items:
                await engine.admin.delete(rng.choice(items).memory_id, "operator:test")
        elif op < 0.8:
            items, _ = await engine.admin.list_items(_filter(engine, who), limit=50)
            items = [i for i in items if i.status != "superseded"]  # history is not edited
            if items:
                await engine.admin.update_item(rng.choice(items).memory_id,
                                               {"fact": f"edited {rng.choice(words)} {step}"}, "operator:test")
        elif op < 0.9:
            await engine.worker.fill_vectors()
        else:
            engine.vector_index.clear()  # as if evicted or restarted
        if step % 5 == 0:
            await engine.worker.fill_vectors()
        for n in range(5):
            scope = engine.resolver.user_scope(alice(n))
            hits = await engine.embeddings.query([scope], rng.choice(words), 50)
            async with engine.db.read() as session:
                rows = (
                    await session.execute(select(MemoryItem.scope, MemoryItem.scope_id)
                                          .where(MemoryItem.id.in_(list(hits.memories))))
                ).all() + (
                    await session.execute(select(MemoryEvent.scope, MemoryEvent.scope_id)
                                          .where(MemoryEvent.id.in_(list(hits.turns)), MemoryEvent.withheld.is_(False)))
                ).all()
                withheld = (
                    await session.execute(select(func.count()).select_from(MemoryEvent)
                                          .where(MemoryEvent.id.in_(list(hits.turns)), MemoryEvent.withheld))
                ).scalar_one()
            assert {(k, i) for k, i in rows} <= {(scope.kind, scope.id)}
            assert withheld == 0  # a forgotten turn's vector is gone too
            seen_turns[0] += len(hits.turns)
    async with engine.db.read() as session:
        assert (await session.execute(select(func.count()).select_from(MemoryItem))).scalar_one() > 0
    assert seen_turns[0] > 0  # turns were really searched


def _filter(engine, who):
    from astrbot_plugin_ltm.operating.queries import ItemFilter

    scope = engine.resolver.user_scope(who)
    return ItemFilter(scope=scope.kind, scope_id=scope.id)


async def _rowid(engine: LTMEngine, memory_id: str | None) -> int:
    async with engine.db.read() as session:
        rowid = (await session.execute(select(MemoryItem.id).where(MemoryItem.memory_id == memory_id))).scalar_one()
    assert rowid is not None
    return rowid


async def fill_all(engine: LTMEngine) -> None:
    while await engine.worker.fill_vectors():
        pass


async def test_a_large_namespace_is_an_inverted_file_and_a_growing_one_becomes_one(db_url, tmp_path, monkeypatch):
    import faiss

    monkeypatch.setattr(vectors, "EXACT_SEARCH_MAX", 30)
    monkeypatch.setattr(faiss_files, "EXACT_SEARCH_MAX", 30)
    engine = await make(db_url, tmp_path, HashEmbedder())
    scope = engine.resolver.user_scope(alice())
    words = [f"topic{n} alpha{n} beta{n}" for n in range(45)]
    for text in words[:20]:
        await engine.remember(alice(), f"I study {text}")
    await fill_all(engine)
    hits = await vector_ids(engine, scope, f"I study {words[3]}")
    ns = await engine.vector_index.namespace(scope, engine.embeddings.model)
    assert isinstance(ns.index, faiss.IndexIDMap2) and ns.size == 20  # small: exact
    assert hits

    for text in words[20:]:  # grows past the limit while loaded
        last = await engine.remember(alice(), f"I study {text}")
    await fill_all(engine)
    await vector_ids(engine, scope, "anything")  # a search starts the conversion
    await engine.vector_index.flush()  # waits for it
    async with engine.db.read() as session:
        stored = (await session.execute(select(func.count()).select_from(MemoryVector))).scalar_one()
    assert stored > 30
    ns = await engine.vector_index.namespace(scope, engine.embeddings.model)
    assert isinstance(ns.index, faiss.IndexIVF) and ns.size == stored
    async with engine.db.read() as session:
        newest = (await session.execute(select(MemoryItem).where(MemoryItem.memory_id == last.memory_id))).scalar_one()
    best = (await engine.embeddings.query([scope], newest.fact, 1)).memories
    assert list(best) == [newest.id] and best[newest.id] > 0.99

    # Restarted, it loads as an inverted file from its file, same contents.
    await engine.stop()
    again = await make(db_url, tmp_path, HashEmbedder())
    ns = await again.vector_index.namespace(scope, again.embeddings.model)
    assert isinstance(ns.index, faiss.IndexIVF) and ns.size == stored
    assert list((await again.embeddings.query([scope], newest.fact, 1)).memories) == [newest.id]
    await again.stop()


# -- raw turns ------------------------------------------------------------------------


async def turn(engine: LTMEngine, who: Origin, said: str, answer: str = "") -> None:
    engine.record_turn(who, said, answer)
    await engine.recorder.flush()


async def test_turns_and_the_bots_replies_get_vectors_in_the_background(db_url, tmp_path):
    engine = await make(db_url, tmp_path, HashEmbedder())
    await turn(engine, alice(), "we hiked up the mountains at dawn", "I recommend the Alps trail next time")
    assert await engine.worker.fill_vectors() == 2  # the user's line and the bot's reply
    assert await engine.worker.fill_vectors() == 0  # nothing is embedded twice
    scope = engine.resolver.user_scope(alice())
    hits = (await engine.embeddings.query([scope], "mountains dawn", 5)).turns
    async with engine.db.read() as session:
        events = {e.id: e for e in (await session.execute(
            select(MemoryEvent).where(MemoryEvent.id.in_(list(hits))))).scalars()}
    best = max(hits, key=lambda rowid: hits[rowid])
    assert events[best].source_role == "user" and hits[best] > 0.5
    bot = (await engine.embeddings.query([scope], "Alps trail", 5)).turns
    async with engine.db.read() as session:
        reply = await session.get(MemoryEvent, max(bot, key=lambda rowid: bot[rowid]))
    assert reply is not None and reply.source_role == "assistant"
    # Files of turns are caches like the memories': rebuilt when missing.
    await engine.stop()
    for path in (tmp_path / "vectors").glob("*"):
        path.unlink()
    fresh = await make(db_url, tmp_path, HashEmbedder())
    assert list((await fresh.embeddings.query([scope], "mountains dawn", 5)).turns) == list(hits)


async def test_withheld_turns_lose_their_vectors(db_url, tmp_path):
    engine = await make(db_url, tmp_path, HashEmbedder())
    await turn(engine, alice(), "my bank pin is hidden under the mountains")
    await engine.worker.fill_vectors()
    scope = engine.resolver.user_scope(alice())
    assert (await engine.embeddings.query([scope], "bank pin mountains", 5)).turns
    await engine.admin.forget_scope(scope, "user:user0")
    assert (await engine.embeddings.query([scope], "bank pin mountains", 5)).turns == {}
    async with engine.db.read() as session:
        assert (await session.execute(select(func.count()).select_from(TurnVector))).scalar_one() == 0
    assert await engine.worker.fill_vectors() == 0  # and are not embedded again


async def test_turns_are_not_embedded_when_switched_off(db_url, tmp_path):
    embedder = HashEmbedder()
    engine = await make(db_url, tmp_path, embedder, vectors={"embed_turns": False})
    await turn(engine, alice(), "we hiked up the mountains at dawn")
    await engine.remember(alice(), "I enjoy hiking")
    assert await engine.worker.fill_vectors() == 1  # the memory only
    async with engine.db.read() as session:
        assert (await session.execute(select(func.count()).select_from(TurnVector))).scalar_one() == 0
    block = await engine.memory_block(alice(), "mountains at dawn")
    assert "hiked up the mountains" in block.text  # still found by its words


async def test_turns_are_embedded_again_after_a_switch_to_another_model_and_back(db_url, tmp_path):
    first, second = HashEmbedder(32), HashEmbedder(16)
    engine = await make(db_url, tmp_path, first)
    await turn(engine, alice(), "we hiked up the mountains at dawn")
    assert await engine.worker.fill_vectors() == 1
    scope = engine.resolver.user_scope(alice())
    engine.embeddings.embedder = second  # the operator picks another provider, at run time
    assert await engine.worker.fill_vectors() == 1  # and the turn's vector follows
    engine.embeddings.embedder = first  # and back
    assert await engine.worker.fill_vectors() == 1
    async with engine.db.read() as session:
        models = select(VectorSpace.model).join(TurnVector, TurnVector.space == VectorSpace.id)
        assert set((await session.execute(models)).scalars()) == {first.model_id}
    assert (await engine.embeddings.query([scope], "mountains at dawn", 5)).turns


async def test_a_turn_is_embedded_sentence_by_sentence_and_found_by_its_nearest_sentence(db_url, tmp_path):
    embedder = HashEmbedder()
    engine = await make(db_url, tmp_path, embedder)
    said = "Hey there! We hiked up the mountains at dawn. Then I cooked spicy noodles for my sister."
    await turn(engine, alice(), said)
    assert await engine.worker.fill_vectors() == 1
    async with engine.db.read() as session:
        (row,) = (await session.execute(select(TurnVector))).scalars()
        (dim, bits) = (await session.execute(select(VectorSpace.dim, VectorSpace.bits)
                                             .where(VectorSpace.id == row.space))).one()
    # each sentence has a vector (5 bits a component: 20 bytes), and "Hey
    # there!", too short to stand alone, is in the whole turn's
    assert (dim, bits) == (32, 5) and len(row.vector) == 3 * 20
    scope = engine.resolver.user_scope(alice())
    query = "spicy noodles for my sister"
    (sim,) = (await engine.embeddings.query([scope], query, 5)).turns.values()

    def cosine(a: str, b: str) -> float:
        va, vb = (v / np.linalg.norm(v) for v in np.asarray(asyncio.run(embedder.embed([a, b]))))
        return float(va @ vb)

    nearest = await asyncio.to_thread(cosine, query, "User0: Then I cooked spicy noodles for my sister.")
    whole = await asyncio.to_thread(cosine, query, f"User0: {said}")
    # stored in 5 bits a component: the cosine within a hundredth or two of
    # float32's in 32 dimensions (0.0025 on average in MiniLM's 384, docs/decisions.md#d165)
    assert sim == pytest.approx(nearest, abs=2e-2) and sim > whole + 0.1
    # Rebuilt from SQLite with every sentence, under the turn's one id.
    await engine.stop()
    for path in (tmp_path / "vectors").glob("*"):
        path.unlink()
    fresh = await make(db_url, tmp_path, HashEmbedder())
    assert (await fresh.embeddings.query([scope], query, 5)).turns == {row.event_rowid: pytest.approx(sim, abs=1e-5)}
    ns = await fresh.vector_index.namespace(scope, embedder.model_id, TURNS)
    assert ns.size == 3
    # Withholding the turn takes all of its sentences out.
    await fresh.admin.forget_scope(scope, "user:user0")
    assert (await fresh.embeddings.query([scope], query, 5)).turns == {}


async def test_a_turn_search_finds_k_turns_when_a_few_long_turns_crowd_it(db_url, tmp_path):
    """Five turns of eight sentences all near the query fill the first 3k
    vectors FAISS returns; the search widens until it has k turns."""
    engine = await make(db_url, tmp_path, HashEmbedder())
    scope, model, dim = Scope("user", "u1"), "m", 32
    rng = np.random.default_rng(0)
    query = rng.normal(size=dim).astype(np.float32)

    def unit(v: np.ndarray) -> np.ndarray:
        return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)

    long_turns = [unit(query + 0.05 * rng.normal(size=(8, dim))) for _ in range(5)]
    short_turns = [unit(query + 0.8 * rng.normal(size=(1, dim))) for _ in range(20)]
    await store(engine, TURNS, [(rowid, scope) for rowid in range(1, 26)], model, long_turns + short_turns)
    hits = await engine.vector_index.search([scope], model, unit(query)[None, :], 10, TURNS)
    assert len(hits) == 10 and set(range(1, 6)) <= set(hits)
    # and never more than the namespace holds
    assert len(await engine.vector_index.search([scope], model, unit(query)[None, :], 40, TURNS)) == 25
    await engine.stop()


async def test_a_namespace_file_of_whole_turn_vectors_is_rebuilt(db_url, tmp_path):
    """Files written before turns were embedded by sentence have no stride in
    their metadata; their ids would be read wrong, so they are rebuilt."""
    import json

    engine = await make(db_url, tmp_path, HashEmbedder())
    await turn(engine, alice(), "We hiked up the mountains at dawn. Then I cooked spicy noodles.")
    await engine.worker.fill_vectors()
    scope = engine.resolver.user_scope(alice())
    expected = (await engine.embeddings.query([scope], "spicy noodles", 5)).turns
    await engine.stop()
    for meta in (tmp_path / "vectors").glob("*.json"):
        doc = json.loads(meta.read_text())
        if doc["kind"] == "turns":
            del doc["stride"]
            meta.write_text(json.dumps(doc))
    fresh = await make(db_url, tmp_path, HashEmbedder())
    assert (await fresh.embeddings.query([scope], "spicy noodles", 5)).turns == expected
    metas = [json.loads(m.read_text()) for m in (tmp_path / "vectors").glob("*.json")]
    kinds = {meta["kind"]: meta for meta in metas}
    assert kinds["turns"]["stride"] == STRIDE[TURNS]  # rebuilt and written again


async def test_a_read_does_not_wait_long_for_a_vector_namespace_that_is_slow_to_load(db_url, tmp_path, monkeypatch):
    """Past COLD_WAIT a read goes on without the namespace (keyword-only for
    its corpus) while it loads; the next read has it. The writer's semantic
    dedup waits for it."""
    from astrbot_plugin_ltm.indexes import embeddings

    engine = await make(db_url, tmp_path, HashEmbedder())
    item = await engine.remember(alice(), "I enjoy hiking in the mountains")
    await engine.worker.fill_vectors()
    scope = engine.resolver.user_scope(alice())
    engine.vector_index.clear()
    monkeypatch.setattr(embeddings, "COLD_WAIT", 0.05)
    release = threading.Event()
    real = vectors.load_namespace

    def slow(conn, *args):
        release.wait(10)
        return real(conn, *args)

    monkeypatch.setattr(vectors, "load_namespace", slow)
    started = time.monotonic()
    assert (await engine.embeddings.query([scope], "mountains hiking", 5)).memories == {}
    assert time.monotonic() - started < 2
    release.set()
    # The writer's dedup (VectorIndex.search) waits for the load it joins.
    rowid = await _rowid(engine, item.memory_id)
    query = await engine.embeddings.embed(["mountains hiking"])
    assert list(await engine.vector_index.search([scope], engine.embeddings.model, query, 5)) == [rowid]
    assert list((await engine.embeddings.query([scope], "mountains hiking", 5)).memories) == [rowid]
    # A load a read left running can be waited for (benchmarks, and stop()).
    engine.vector_index.clear()
    release.clear()
    assert (await engine.embeddings.query([scope], "mountains hiking", 5)).memories == {}
    release.set()
    await engine.loads_settled()
    assert list((await engine.embeddings.query([scope], "mountains hiking", 5)).memories) == [rowid]


def _load_held_after_reading(monkeypatch) -> tuple[threading.Event, threading.Event, list[int]]:
    """Make namespace loads read SQLite, then wait to be released: changes
    committed meanwhile are ones the load did not see."""
    have_read, release, loads = threading.Event(), threading.Event(), []
    real = vectors.load_namespace

    def held(conn, *args):
        ns = real(conn, *args)
        loads.append(1)
        have_read.set()
        release.wait(10)
        return ns

    monkeypatch.setattr(vectors, "load_namespace", held)
    return have_read, release, loads


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, 32)).astype(np.float32)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


async def test_changes_committed_while_a_vector_namespace_loads_reach_it(db_url, tmp_path, monkeypatch):
    engine = await make(db_url, tmp_path, HashEmbedder())
    index, scope, model = engine.vector_index, Scope("user", "u1"), "m"
    rng = np.random.default_rng(1)
    old, new, other, sentences = _unit(rng, 1), _unit(rng, 1), _unit(rng, 1), _unit(rng, 2)
    await store(engine, MEMORIES, [(5, scope), (6, scope)], model, [old, other])
    await store(engine, TURNS, [(1, scope)], model, [sentences])
    have_read, release, _ = _load_held_after_reading(monkeypatch)
    memories = asyncio.create_task(index.namespace(scope, model, MEMORIES))
    await asyncio.to_thread(have_read.wait, 10)
    await store(engine, MEMORIES, [(5, scope)], model, [new])  # memory 5's fact changed
    async with engine.db.write() as session:  # memory 6 deleted
        await delete_memory_vector(session, 6)
        note(session, MemoryRemoved(scope, 6))
    release.set()
    assert (await memories).size == 1
    # the vector as stored, int8: within a few thousandths of the one given (docs/decisions.md#d159)
    assert await index.search([scope], model, new, 5) == {5: pytest.approx(1.0, abs=5e-3)}
    have_read.clear(), release.clear()
    turns = asyncio.create_task(index.namespace(scope, model, TURNS))
    await asyncio.to_thread(have_read.wait, 10)
    await store(engine, TURNS, [(2, scope)], model, [other])
    release.set()
    assert (await turns).size == 3  # the turn read by the load is not added twice
    assert set(await index.search([scope], model, other, 5, TURNS)) == {1, 2}
    # The files written at the stop are not trusted for what they hold: the
    # next start builds the namespaces from SQLite, the same.
    await engine.stop()
    fresh = await make(db_url, tmp_path, HashEmbedder())
    assert (await fresh.vector_index.namespace(scope, model, MEMORIES)).size == 1
    assert set(await fresh.vector_index.search([scope], model, other, 5, TURNS)) == {1, 2}
    await fresh.stop()


async def test_a_namespace_found_empty_while_a_vector_was_stored_is_not_taken_for_empty(db_url, tmp_path, monkeypatch):
    engine = await make(db_url, tmp_path, HashEmbedder())
    index, scope, model = engine.vector_index, Scope("user", "u1"), "m"
    have_read, release, _ = _load_held_after_reading(monkeypatch)
    loading = asyncio.create_task(index.namespace(scope, model, TURNS))
    await asyncio.to_thread(have_read.wait, 10)  # it counted no vectors
    vector = np.ones((1, 32), np.float32)
    await store(engine, TURNS, [(1, scope)], model, [vector])
    release.set()
    assert await loading is not None  # counted again at once
    assert set(await index.search([scope], model, vector, 5, TURNS)) == {1}
    await engine.stop()


async def test_a_write_that_rolls_back_never_reaches_a_loaded_namespace(db_url, tmp_path):
    """No index is touched before the commit: during the transaction and
    after its rollback the namespace holds what SQLite held before it."""
    engine = await make(db_url, tmp_path, HashEmbedder())
    index, scope, model = engine.vector_index, Scope("user", "u1"), "m"
    rng = np.random.default_rng(2)
    kept, lost = _unit(rng, 1), _unit(rng, 1)
    await store(engine, TURNS, [(1, scope)], model, [kept])
    assert await index.namespace(scope, model, TURNS) is not None  # loaded, so a commit reaches it at once
    with pytest.raises(RuntimeError):
        async with engine.db.write() as session:
            await store_vectors(session, TURNS, [(2, scope)], model, [lost], NOW)
            assert set(await index.search([scope], model, lost, 5, TURNS)) == {1}  # not before the commit
            raise RuntimeError("the rest of the write failed")
    assert set(await index.search([scope], model, lost, 5, TURNS)) == {1}
    await store(engine, TURNS, [(2, scope)], model, [lost])
    assert set(await index.search([scope], model, lost, 5, TURNS)) == {1, 2}  # committed: there at once
    await engine.stop()


async def test_a_namespace_whose_scope_is_forgotten_while_it_loads_is_loaded_again(db_url, tmp_path, monkeypatch):
    engine = await make(db_url, tmp_path, HashEmbedder())
    index, scope, model = engine.vector_index, Scope("user", "u1"), "m"
    await store(engine, TURNS, [(1, scope)], model, [np.ones((1, 32), np.float32)])
    have_read, release, loads = _load_held_after_reading(monkeypatch)
    loading = asyncio.create_task(index.namespace(scope, model, TURNS))
    await asyncio.to_thread(have_read.wait, 10)
    async with engine.db.write() as session:  # every turn of the scope withheld: their vectors deleted
        await session.execute(delete(TurnVector))
        note(session, ScopeForgotten(scope))
    release.set()
    assert await loading is None and len(loads) == 2
    await engine.stop()


async def test_a_vector_namespace_that_fails_to_load_costs_a_read_nothing(db_url, tmp_path, monkeypatch):
    engine = await make(db_url, tmp_path, HashEmbedder())
    await engine.remember(alice(), "I enjoy hiking in the mountains")
    await engine.worker.fill_vectors()
    engine.vector_index.clear()

    def broken(conn, *args):
        raise OSError("disk gone")

    monkeypatch.setattr(vectors, "load_namespace", broken)
    block = await engine.memory_block(alice(), "any mountains nearby?")
    assert "hiking in the mountains" in block.text  # found by its words


async def test_a_float32_namespace_file_of_an_earlier_version_is_rebuilt_in_todays_layout(db_url, tmp_path):
    """Files written before vectors were held as float16 have no layout in
    their metadata: they are rebuilt, and find the same rows."""
    import json

    import faiss

    engine = await make(db_url, tmp_path, HashEmbedder())
    for text in ("I hiked up the mountains at dawn", "I cooked spicy noodles", "I play the cello"):
        await engine.remember(alice(), text)
    await fill_all(engine)
    scope = engine.resolver.user_scope(alice())
    expected = await vector_ids(engine, scope, "spicy noodles")
    assert expected  # found before the files are rewritten
    await engine.stop()
    for meta in (tmp_path / "vectors").glob("*.json"):
        doc = json.loads(meta.read_text())
        index = faiss.read_index(str(meta.with_suffix(".faiss")))
        inner = faiss.downcast_index(index.index)
        old = faiss.IndexIDMap2(faiss.IndexFlatIP(index.d))  # as earlier versions wrote it
        old.add_with_ids(inner.reconstruct_n(0, index.ntotal), faiss.vector_to_array(index.id_map))
        faiss.write_index(old, str(meta.with_suffix(".faiss")))
        del doc["layout"]
        meta.write_text(json.dumps(doc))
    fresh = await make(db_url, tmp_path, HashEmbedder())
    assert await vector_ids(fresh, scope, "spicy noodles") == expected
    ns = await fresh.vector_index.namespace(scope, fresh.embeddings.model)
    assert isinstance(faiss.downcast_index(ns.index.index), faiss.IndexScalarQuantizer)
    await fresh.stop()
    metas = [json.loads(m.read_text()) for m in (tmp_path / "vectors").glob("*.json")]
    assert metas and {meta["layout"] for meta in metas} == {faiss_files.LAYOUT}  # rebuilt and written again


class _CountedBeforeTheLastRow:
    """A connection whose count of a namespace's vectors was taken before
    its last row was committed (the count and the rows are two statements,
    each seeing the latest commit)."""

    def __init__(self, conn) -> None:
        self._conn = conn
        self.connection = conn.connection  # the driver's own cursor (storing.driver_rows), uncounted

    def execute(self, statement, *args, **kwargs):
        result = self._conn.execute(statement, *args, **kwargs)
        if "GROUP BY" not in str(statement):
            return result
        return [(*row[:-1], row[-1] - 1) for row in result]  # (dim, rows, whole rows, vectors)


async def test_a_vector_row_committed_while_a_namespace_is_built_is_held_not_a_failed_load(db_url, tmp_path):
    engine = await make(db_url, tmp_path, HashEmbedder())
    scope, model = Scope("group", "g1"), "m"
    rng = np.random.default_rng(3)
    await store(engine, TURNS, [(1, scope), (2, scope)], model, [_unit(rng, 2), _unit(rng, 3)])
    ns = await engine.db.load(lambda conn: faiss_files.load_namespace(
        _CountedBeforeTheLastRow(conn), engine.vector_index.files, scope, model, TURNS))
    assert ns is not None and ns.size == 5
    held = {int(i) for i in faiss.vector_to_array(ns.index.id_map)}
    assert held == {1 * STRIDE[TURNS] + n for n in range(2)} | {2 * STRIDE[TURNS] + n for n in range(3)}


async def test_a_flat_namespace_keeps_no_file_and_files_from_before_are_removed(db_url, tmp_path, monkeypatch):
    # As shipped: only an inverted file (past EXACT_SEARCH_MAX vectors) is kept in a file.
    monkeypatch.setattr(faiss_files, "FILES_ABOVE", faiss_files.EXACT_SEARCH_MAX)
    engine = await make(db_url, tmp_path, HashEmbedder())
    directory = tmp_path / "vectors"
    directory.mkdir()
    # a flat namespace's file from before, and a large one of a layout no longer read
    for name, count in (("aaaa", 5), ("bbbb", 30_000)):
        (directory / f"{name}.faiss").write_bytes(b"x")
        (directory / f"{name}.json").write_text(json.dumps({"layout": "fp16", "fingerprint": [count, 1, "x"]}))
        for path in directory.glob(f"{name}.*"):
            os.utime(path, (0, 0))
    await engine.remember(alice(), "I enjoy hiking in the mountains")
    await engine.worker.fill_vectors()
    assert await vector_ids(engine, engine.resolver.user_scope(alice()), "hiking")
    await engine.vector_index.flush()
    assert len(list(directory.iterdir())) == 4  # the namespace just used wrote none
    assert engine.vector_index.files.remove_stale() == 4
    assert list(directory.iterdir()) == []
    await engine.stop()
