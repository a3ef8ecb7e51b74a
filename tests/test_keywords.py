"""The reader's in-memory keyword index (indexes/keywords.py): BM25 as FTS5
ranks, per scope, and kept in step with every committed write."""

from __future__ import annotations

import gc
import math
import random
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from astrbot_plugin_ltm.enums import Corpus
from astrbot_plugin_ltm.extension_points import Query
from astrbot_plugin_ltm.indexes import bm25, keywords
from astrbot_plugin_ltm.indexes.bm25 import KeywordNamespace
from astrbot_plugin_ltm.indexes.keywords import load_namespace
from astrbot_plugin_ltm.operating.fact_search import search_facts
from astrbot_plugin_ltm.recalling.retrieval import KeywordRetriever
from astrbot_plugin_ltm.scope import Scope
from astrbot_plugin_ltm.storing.changes import MemoriesReindexed
from astrbot_plugin_ltm.storing.keyword_rows import rebuild_fact_rows
from astrbot_plugin_ltm.storing.memory_rows import fact_written
from astrbot_plugin_ltm.storing.tables import MemoryItem
from astrbot_plugin_ltm.text import query_tokens

MEMORIES, TURNS = Corpus.MEMORIES, Corpus.TURNS

ALICE = Scope("user", "qq:alice")
BOB = Scope("user", "qq:bob")


async def add(ltm, fact: str, scope: Scope = ALICE, status: str = "active") -> MemoryItem:
    async with ltm.engine.db.write() as session:
        item = MemoryItem(scope=scope.kind, scope_id=scope.id, type="episode", fact=fact,
                          fact_key=f"k{random.random()}", confidence=0.9, status=status)
        session.add(item)
        await session.flush()
        await fact_written(session, item, created=True)
    return item


async def keyword(ltm, query: str, scopes=(ALICE,), corpus: Corpus = MEMORIES) -> list[int]:
    return [rowid for rowid, _ in
            await ltm.engine.keyword_index.search(list(scopes), corpus, query_tokens(query), 50)]


# -- BM25 -------------------------------------------------------------------------


async def test_ranking_and_scores_equal_fts5_bm25_in_a_single_scope(ltm):
    """With one scope in the table FTS5's idf is the scope's own, so the two
    must agree: same formula, same constants."""
    rng = random.Random(5)
    words = ["tea", "coffee", "paris", "london", "cat", "dog", "piano", "chess", "rain", "snow",
             "上海", "北京", "绿茶", "猫"]
    for _ in range(60):
        await add(ltm, " ".join(rng.choice(words) for _ in range(rng.randint(1, 12))))
    scopes = [(ALICE.kind, ALICE.id)]
    for query in ("tea", "paris rain", "绿茶 上海", "cat dog piano", "snow coffee chess london"):
        tokens = query_tokens(query)
        theirs = await ltm.engine.db.run(
            lambda conn, tokens=tokens: search_facts(conn, tokens, scopes, ("active",), 50))
        ours = await ltm.engine.keyword_index.search([ALICE], MEMORIES, tokens, 50)
        assert theirs, query
        assert dict(ours) == pytest.approx(dict(theirs), rel=1e-4), query
        assert [s for _, s in ours] == sorted((s for _, s in ours), reverse=True)


async def test_a_term_is_weighed_by_its_own_scope_not_by_the_others(ltm):
    """Bob says "tea" everywhere; for Alice it is as rare as in her scope."""
    for n in range(40):
        await add(ltm, f"tea number {n}", scope=BOB)
    tea = await add(ltm, "Alice drinks tea")
    await add(ltm, "Alice likes rain")
    await add(ltm, "Alice likes snow")
    ns = await ltm.engine.db.run(lambda conn: load_namespace(conn, ALICE, MEMORIES))
    assert ns.size == 3
    ((best, score),) = ns.search(["tea"], 5)
    # three rows of three tokens each: tf 1 at the average length leaves idf
    assert best == tea.id and score == pytest.approx(math.log((3 - 1 + 0.5) / (1 + 0.5)), rel=1e-5)


ops = st.lists(
    st.tuples(st.sampled_from(["add", "add", "add", "remove"]), st.integers(1, 40),
              st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f", "茶", "猫"]), min_size=0, max_size=8)),
    max_size=150,
)


@settings(max_examples=80, deadline=None)
@given(ops=ops, query=st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f", "茶", "猫", "z"]), min_size=1,
                               max_size=4))
def test_a_namespace_after_any_adds_and_removes_ranks_as_one_built_afresh(ops, query):
    """Slots, pending postings, merges and compaction never change an
    answer: compared with a namespace built from the final rows alone."""
    ns = KeywordNamespace()
    rows: dict[int, list[str]] = {}
    for op, rowid, tokens in ops:
        if op == "add":
            ns.add(rowid, tokens)
            rows[rowid] = tokens
        else:
            ns.remove(rowid)
            rows.pop(rowid, None)
    fresh = KeywordNamespace()
    for rowid, tokens in rows.items():
        fresh.add(rowid, tokens)
    built = KeywordNamespace.build(list(rows.items()))  # what a load does
    got, want = dict(ns.search(query, 100)), dict(fresh.search(query, 100))
    assert got == pytest.approx(want, rel=1e-5)
    assert dict(built.search(query, 100)) == pytest.approx(want, rel=1e-5)
    for rowid in list(rows)[:5]:  # a built namespace takes changes like any other
        built.remove(rowid)
        fresh.remove(rowid)
    assert dict(built.search(query, 100)) == pytest.approx(dict(fresh.search(query, 100)), rel=1e-5)
    assert ns.size == len(rows)


@settings(max_examples=80, deadline=None)
@given(ops=ops, query=st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f", "茶", "猫", "z"]), min_size=1,
                               max_size=4), pending=st.integers(0, 6), dead=st.integers(1, 6))
def test_merging_and_compacting_often_change_no_answer(ops, query, pending, dead):
    """With postings merged into the arrays every few adds and dead slots
    dropped every few removals, a namespace still ranks as one built from
    its final rows."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bm25, "_PENDING_MIN", pending)
        patch.setattr(bm25, "_COMPACT_MIN", dead)
        ns = KeywordNamespace.build([(100, ["a", "b"]), (101, ["c", "a", "a"])])
        rows: dict[int, list[str]] = {100: ["a", "b"], 101: ["c", "a", "a"]}
        for op, rowid, tokens in ops:
            if op == "add":
                ns.add(rowid, tokens)
                rows[rowid] = tokens
            else:
                ns.remove(rowid)
                rows.pop(rowid, None)
    built = KeywordNamespace.build(list(rows.items()))
    assert dict(ns.search(query, 100)) == pytest.approx(dict(built.search(query, 100)), rel=1e-5)
    assert ns.size == len(rows)


def test_postings_take_a_few_bytes_each_not_objects_per_term():
    """A large vocabulary of rare terms (names, CJK bigrams) costs its
    postings and a key per term, not Python objects per term (measured:
    about 120 bytes a row here, 700 when each term had its own arrays), and
    the size the memory budget counts is not below what is held."""
    rows = [(n, [f"rare{n}", f"other{n}", "common"]) for n in range(20_000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        ns = KeywordNamespace.build(rows)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 160 * len(rows)
    assert held <= ns.nbytes < 2 * held
    assert [r for r, _ in ns.search(["rare777"], 5)] == [777]


def test_compaction_keeps_every_live_row(monkeypatch):
    ns = KeywordNamespace()
    for n in range(3000):
        ns.add(n, ["common", f"w{n}"])
    for n in range(0, 3000, 3):
        ns.add(n, ["moved", f"w{n}"])  # a re-added row takes a new slot
    for n in range(1, 3000, 3):
        ns.remove(n)
    assert ns.size == 2000
    assert {r for r, _ in ns.search(["moved"], 5000)} == set(range(0, 3000, 3))
    assert {r for r, _ in ns.search(["common"], 5000)} == set(range(2, 3000, 3))
    assert ns.search(["w1"], 5) == [] and [r for r, _ in ns.search(["w2"], 5)] == [2]


# -- kept in step with SQLite --------------------------------------------------------


async def test_writes_after_loading_are_seen_and_a_rolled_back_one_is_not(ltm, origin):
    first = await add(ltm, "Alice lives in Paris")
    assert await keyword(ltm, "Paris") == [first.id]  # loads the namespace
    second = await add(ltm, "Alice visited Paris twice")
    assert set(await keyword(ltm, "Paris")) == {first.id, second.id}
    await ltm.engine.admin.update_item(first.memory_id, {"fact": "Alice lives in Lisbon"}, "operator:root")
    assert await keyword(ltm, "Lisbon") == [first.id] and await keyword(ltm, "Paris") == [second.id]
    await ltm.engine.admin.delete(second.memory_id, "operator:root")
    assert await keyword(ltm, "Paris") == []

    with pytest.raises(RuntimeError):
        async with ltm.engine.db.write() as session:
            item = MemoryItem(scope=ALICE.kind, scope_id=ALICE.id, type="episode", fact="Alice saw Rome",
                              fact_key="rome", confidence=0.9, status="active")
            session.add(item)
            await session.flush()
            await fact_written(session, item, created=True)
            raise RuntimeError("rolled back")
    assert await keyword(ltm, "Rome") == []
    assert await ltm.sql("SELECT count(*) FROM ltm_items WHERE fact = 'Alice saw Rome'") == [(0,)]


async def test_turns_are_indexed_as_recorded_and_leave_when_withheld(ltm, origin):
    alice = origin("alice")
    await ltm.record(alice, "I adopted a kitten called Miso", "What a lovely name!")
    # the bot's reply too, found by the words of the message it answers
    assert len(await keyword(ltm, "kitten", corpus=TURNS)) == 2
    await ltm.record(alice, "Miso sleeps all day", "")
    assert len(await keyword(ltm, "Miso", corpus=TURNS)) == 3
    await ltm.engine.admin.forget_scope(ALICE, "user:alice")
    assert await keyword(ltm, "Miso", corpus=TURNS) == []
    await ltm.record(alice, "Miso came back", "")  # said after forgetting: shown again
    assert len(await keyword(ltm, "Miso", corpus=TURNS)) == 1


async def test_a_turn_is_found_by_the_words_of_the_turn_before_it(ltm, origin):
    """The bot asks, the user answers with a name: the answer is found by
    the question's words (the context the events' index keeps)."""
    alice = origin("alice")
    await ltm.record(alice, "I went to a concert for my daughter's birthday", "Who performed?")
    await ltm.record(alice, "It was Matt Patterson")
    hits = await keyword(ltm, "who performed", corpus=TURNS)
    rows = await ltm.sql(f"SELECT content FROM ltm_events WHERE id = {hits[0]}")
    assert "Matt Patterson" in rows[0][0]


async def test_a_rebuild_of_the_items_index_is_seen(ltm):
    item = await add(ltm, "Alice collects stamps")
    assert await keyword(ltm, "stamps") == [item.id]
    async with ltm.engine.db.write() as session:
        await session.execute(text("DELETE FROM ltm_items_fts"))
        await rebuild_fact_rows(session)
    assert await keyword(ltm, "stamps") == [item.id]
    await ltm.engine.keyword_index.follow([MemoriesReindexed()])  # loaded afresh from SQLite
    assert await keyword(ltm, "stamps") == [item.id]


async def test_the_retriever_searches_both_kinds_in_every_scope_given(ltm, origin):
    mine = await add(ltm, "Alice plays chess")
    theirs = await add(ltm, "Bob plays chess", scope=BOB)
    retriever = KeywordRetriever(ltm.engine.keyword_index)
    found = await retriever.search([ALICE, BOB], Query.of("chess"), 10)
    assert set(found.memories) == {mine.id, theirs.id}
    assert (await retriever.search([ALICE], Query.of("chess"), 10)).memories == [mine.id]


async def test_a_read_does_not_wait_long_for_a_namespace_that_is_slow_to_load(ltm, monkeypatch):
    """Past COLD_WAIT the read goes on without the namespace; the load
    finishes in the background and the next read has it."""
    import asyncio

    item = await add(ltm, "Alice keeps bees")
    monkeypatch.setattr(keywords, "COLD_WAIT", 0.05)
    index, db = ltm.engine.keyword_index, ltm.engine.db
    release = asyncio.Event()
    real_load = db.load

    async def slow_load(fn):
        await release.wait()
        return await real_load(fn)

    monkeypatch.setattr(db, "load", slow_load)
    assert await index.search([ALICE], MEMORIES, ["bee"], 5) == []
    await add(ltm, "Alice sells honey")  # committed while loading: not lost
    release.set()
    await index.loads_settled()
    hits = await index.search([ALICE], MEMORIES, ["bee", "honey"], 5)
    assert len(hits) == 2 and item.id in {rowid for rowid, _ in hits}


async def test_namespace_loads_never_hold_up_the_reads_own_queries(make_ltm, origin, monkeypatch):
    """Loads run on threads of their own (Database.load): with every load
    stuck, a read still answers (from what needs no keyword namespace) —
    if it waited for a load, or for a thread a load holds, it never would."""
    import asyncio
    import threading

    ltm = await make_ltm({"write_policy": {"mode": "auto"}})
    await add(ltm, "Alice keeps bees")
    stuck = threading.Event()
    real = keywords.load_namespace

    def blocked(conn, scope, corpus):
        stuck.wait(10)
        return real(conn, scope, corpus)

    monkeypatch.setattr(keywords, "load_namespace", blocked)
    monkeypatch.setattr(keywords, "COLD_WAIT", 0.05)
    alice = origin("alice")  # her scope and the legacy one, two corpora: four loads, more than the load threads
    assert len(ltm.engine.resolver.read_scopes(alice)) == 2
    block = await asyncio.wait_for(ltm.block(alice, "bees"), 5)
    assert [s.fact for s in block.items] == ["Alice keeps bees"]  # the scope's most important memories
    stuck.set()
    await ltm.engine.keyword_index.loads_settled()
    found = await KeywordRetriever(ltm.engine.keyword_index).search([ALICE], Query.of("bees"), 5)
    assert len(found.memories) == 1


async def test_a_namespace_that_fails_to_load_costs_the_read_nothing_and_is_tried_again(ltm, origin, monkeypatch):
    await add(ltm, "Alice keeps bees")
    real = keywords.load_namespace
    calls = []

    def broken(conn, scope, corpus):
        calls.append(corpus)
        raise OSError("disk on fire")

    monkeypatch.setattr(keywords, "load_namespace", broken)
    block = await ltm.block(origin("alice"), "bees")
    assert [s.fact for s in block.items] == ["Alice keeps bees"]  # from the scope's most important ones
    assert calls
    monkeypatch.setattr(keywords, "load_namespace", real)
    found = await KeywordRetriever(ltm.engine.keyword_index).search([ALICE], Query.of("bees"), 5)
    assert len(found.memories) == 1
