"""A long turn is searched as bounded passages (storing.turns.passages):
each part of it is found by keywords and by vectors, a turn never has more
than MAX_PASSAGES, and stores from before passages are rebuilt at start
(docs/decisions.md#d77)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import create_async_engine

from astrbot_plugin_ltm import LTMEngine, Origin
from astrbot_plugin_ltm.enums import Corpus
from astrbot_plugin_ltm.indexes.keywords import turn_document
from astrbot_plugin_ltm.scope import Scope
from astrbot_plugin_ltm.storing.keyword_rows import PASSAGES_BUILD
from astrbot_plugin_ltm.storing.tables import MemoryEvent, TurnVector
from astrbot_plugin_ltm.storing.terms import BREAK_KEY, decode, encode
from astrbot_plugin_ltm.storing.turns import (
    MAX_PASSAGES,
    PASSAGE_BREAK,
    PASSAGE_CHARS,
    PASSAGE_LAYOUT,
    passages,
    turn_passages,
    turn_tokens,
)
from astrbot_plugin_ltm.storing.vector_rows import TURN_BITS, row_bytes
from astrbot_plugin_ltm.text import query_tokens, search_tokens
from tests.helpers import HashEmbedder

TURNS = Corpus.TURNS

# A reply of twelve sentences; the ninth holds the detail asked about later.
TOPICS = ["the lake walk at sunrise", "a quiet bookshop near the station", "the night market stalls",
          "the old silk museum", "a tea plantation tour", "the riverside cycling path",
          "a temple on the hill", "the art district galleries", "Louwailou, famous for its West Lake vinegar fish",
          "a jazz bar downtown", "the botanical garden", "a street of antique shops"]
LONG_REPLY = " ".join(f"Number {n}: I suggest {topic}, which many visitors enjoy in every season of the year."
                      for n, topic in enumerate(TOPICS, 1))
CHINESE_REPLY = "".join(f"第{n}家推荐{name}，环境不错，服务也很周到，适合朋友聚会和家庭聚餐。"
                        for n, name in enumerate(["知味观", "新白鹿", "外婆家", "绿茶餐厅", "弄堂里", "菊英面馆",
                                                  "奎元馆", "楼外楼，招牌是西湖醋鱼", "山外山", "张生记",
                                                  "杭州酒家", "天香楼"], 1))


def alice() -> Origin:
    return Origin("qq", "qq:FriendMessage:alice", "alice", "Alice")


# -- the passages -------------------------------------------------------------------


def test_a_short_turn_stays_one_passage_and_a_long_reply_is_cut_into_a_few():
    assert passages("We hiked at dawn. Then I cooked noodles!") == ["We hiked at dawn. Then I cooked noodles!"]
    assert passages("  ") == []
    parts = passages(LONG_REPLY)
    assert 2 <= len(parts) <= MAX_PASSAGES
    assert " ".join(parts) == LONG_REPLY  # in order, nothing left out, no sentence cut
    assert sum("vinegar fish" in part for part in parts) == 1


def test_a_long_chinese_reply_without_spaces_is_cut_at_its_full_stops():
    parts = passages(CHINESE_REPLY)
    assert 2 <= len(parts) <= MAX_PASSAGES
    assert "".join(parts) == CHINESE_REPLY
    assert all(part.endswith("。") for part in parts)  # cut between sentences, not inside one
    assert sum("西湖醋鱼" in part for part in parts) == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=300), min_size=0, max_size=60),
       st.sampled_from([". ", "。", "! ", "\n", " ", "，", ""]))
def test_a_turn_never_has_more_than_max_passages_and_loses_no_word(pieces, joint):
    said = joint.join(pieces)
    parts = passages(said)
    assert len(parts) <= MAX_PASSAGES
    assert "".join("".join(parts).split()) == "".join(said.split())
    vectors = turn_passages("message", {"text": said}, "Alice")
    assert 1 <= len(vectors) <= MAX_PASSAGES
    assert turn_tokens({"text": said}).count(PASSAGE_BREAK) <= max(len(parts), 1) - 1


def test_a_turn_far_longer_than_the_passages_has_longer_passages_not_more():
    said = "word " * (PASSAGE_CHARS * MAX_PASSAGES)  # one sentence, no full stop at all
    parts = passages(said)
    assert len(parts) == MAX_PASSAGES
    assert sum(len(part.split()) for part in parts) == PASSAGE_CHARS * MAX_PASSAGES


def test_a_turns_keyword_row_holds_its_passages_the_first_with_the_turn_before_it():
    tokens = turn_tokens({"text": LONG_REPLY}, {"text": "Can you suggest places in Hangzhou?"})
    documents = [doc.split() for doc in " ".join(tokens).split(PASSAGE_BREAK)]
    assert len(documents) == len(passages(LONG_REPLY))
    assert "hangzhou" in documents[0] and not any("hangzhou" in doc for doc in documents[1:])
    # without its breaks, the row is the turn's tokens as before passages
    assert sorted(t for t in tokens if t != PASSAGE_BREAK) == sorted(
        search_tokens(LONG_REPLY) + search_tokens("Can you suggest places in Hangzhou?"))
    # the keyword index reads the turn as one document, without the breaks
    rowid, document = turn_document(7, tokens)
    assert (rowid, len(document)) == (7, len(tokens) - (len(documents) - 1))


# -- found by keywords -----------------------------------------------------------------


async def keyword_turns(ltm, scope: Scope, query: str, k: int = 10) -> list[int]:
    return [rowid for rowid, _ in await ltm.engine.keyword_index.search([scope], TURNS, query_tokens(query), k)]


async def test_a_detail_in_the_middle_of_a_long_reply_is_found_by_its_keywords(ltm, origin):
    alice_ = origin("alice")
    await ltm.record(alice_, "Can you suggest some places to visit in Hangzhou?", LONG_REPLY)
    for n in range(30):  # other talk about restaurants and fish, none of it the answer
        await ltm.record(alice_, f"I had fish at a restaurant on day {n}", "")
    await ltm.record(alice_, "我想去杭州吃饭，能推荐几家餐厅吗？", CHINESE_REPLY)
    scope = ltm.engine.resolver.user_scope(alice_)
    reply = (await ltm.sql(f"SELECT id FROM ltm_events WHERE content LIKE '%{TOPICS[8][:20]}%'"))[0][0]
    assert (await keyword_turns(ltm, scope, "the restaurant famous for vinegar fish you suggested"))[0] == reply
    chinese = (await ltm.sql("SELECT max(id) FROM ltm_events WHERE source_role = 'assistant'"))[0][0]
    assert (await keyword_turns(ltm, scope, "你之前推荐的那家做西湖醋鱼的餐厅叫什么名字？"))[0] == chinese
    # Every passage of the reply matches "visitors enjoy": the reply is still one hit.
    hits = await keyword_turns(ltm, scope, "visitors enjoy every season", 3)
    assert hits[0] == reply and len(hits) == len(set(hits))
    # Withheld, every passage of it leaves the index.
    await ltm.engine.admin.forget_scope(scope, "user:alice")
    assert await keyword_turns(ltm, scope, "vinegar fish") == []


async def test_a_turn_that_matches_in_many_passages_leaves_room_for_k_turns(ltm, origin):
    alice_ = origin("alice")
    await ltm.record(alice_, "pasta " * 2000 + "is all I cook", "")  # six passages, each full of pasta
    for n in range(4):
        await ltm.record(alice_, f"I cooked pasta with friend number {n}", "")
    scope = ltm.engine.resolver.user_scope(alice_)
    assert len(await keyword_turns(ltm, scope, "pasta", 5)) == 5


# -- found by vectors ---------------------------------------------------------------


async def make(db_url: str, tmp_path, embedder) -> LTMEngine:
    engine = LTMEngine(create_async_engine(db_url), {"write_policy": {"mode": "auto"}},
                       embedder=embedder, data_dir=tmp_path)
    await engine.start(background=False)
    return engine


async def test_a_detail_in_the_middle_of_a_long_reply_is_found_by_vectors(tmp_path):
    embedder = HashEmbedder(64)
    engine = await make(f"sqlite+aiosqlite:///{tmp_path}/ltm.db", tmp_path, embedder)
    engine.record_turn(alice(), "Can you suggest some places to visit in Hangzhou?", LONG_REPLY)
    await engine.recorder.flush()
    assert await engine.worker.fill_vectors() == 2
    async with engine.db.read() as session:
        rows = {r.event_rowid: r for r in (await session.execute(select(TurnVector))).scalars()}
        reply = (await session.execute(select(MemoryEvent.id).where(MemoryEvent.source_role == "assistant"))
                 ).scalar_one()
    # one vector per passage (5 bits a component), not per sentence
    one = row_bytes(embedder.dim, TURN_BITS)  # a vector's bytes
    assert len(rows[reply].vector) == len(passages(LONG_REPLY)) * one
    assert len(rows[reply].vector) < len(TOPICS) * one
    scope = engine.resolver.user_scope(alice())
    hits = (await engine.embeddings.query([scope], "Louwailou West Lake vinegar fish", 5)).turns
    assert max(hits, key=lambda rowid: hits[rowid]) == reply
    await engine.stop()


# -- stores from before passages ----------------------------------------------------------


async def test_a_store_from_before_passages_gets_passage_rows_and_its_long_turns_new_vectors(tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path}/ltm.db"
    engine = await make(url, tmp_path, HashEmbedder(64))
    engine.record_turn(alice(), "Can you suggest some places to visit in Hangzhou?", LONG_REPLY)
    await engine.recorder.flush()
    await engine.worker.fill_vectors()
    scope = engine.resolver.user_scope(alice())
    # As an earlier release left it: one keyword document a turn, a vector a sentence, no build row.
    async with engine.db.write() as session:
        reply = (await session.execute(select(MemoryEvent).where(MemoryEvent.source_role == "assistant"))
                 ).scalar_one()
        await session.execute(text("UPDATE ltm_turn_terms SET terms = :t WHERE event_rowid = :r"),
                              {"t": encode(search_tokens(LONG_REPLY), PASSAGE_BREAK), "r": reply.id})
        await session.execute(text("UPDATE ltm_turn_vectors SET vector = :v WHERE event_rowid = :r"),
                              {"v": np.ones((len(TOPICS), 64), np.int8).tobytes(), "r": reply.id})
        await session.execute(text("DELETE FROM ltm_index_builds WHERE name = :n"), {"n": PASSAGES_BUILD})
    await engine.stop()

    engine = await make(url, tmp_path, HashEmbedder(64))
    async with engine.db.read() as session:
        terms = decode((await session.execute(text("SELECT terms FROM ltm_turn_terms WHERE event_rowid = :r"),
                                              {"r": reply.id})).scalar_one())
        built = (await session.execute(text("SELECT built_with FROM ltm_index_builds WHERE name = :n"),
                                       {"n": PASSAGES_BUILD})).scalar_one()
        vectors = dict((await session.execute(select(TurnVector.event_rowid, TurnVector.vector))).all())
    assert list(terms).count(BREAK_KEY) == len(passages(LONG_REPLY)) - 1 and built == PASSAGE_LAYOUT
    assert reply.id not in vectors and len(vectors) == 1  # the request, one sentence, keeps its vector
    assert await engine.worker.fill_vectors() == 1  # the reply, embedded again as passages
    hits = (await engine.embeddings.query([scope], "Louwailou West Lake vinegar fish", 5)).turns
    assert max(hits, key=lambda rowid: hits[rowid]) == reply.id
    await engine.stop()
    # A start with the layout recorded rebuilds nothing.
    engine = await make(url, tmp_path, HashEmbedder(64))
    assert await engine.worker.fill_vectors() == 0
    await engine.stop()
