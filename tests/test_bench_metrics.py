"""The benchmarks' metric code (bench/metrics.py, bench/locomo.py) on tiny
fixtures whose answers are worked out by hand. No model is loaded: the
dense parts get the deterministic HashEmbedder, and token counts the
plugin's estimate counter (no tiktoken vocabulary to load)."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

import numpy as np
import pytest

from astrbot_plugin_ltm.config import ReadPolicy
from astrbot_plugin_ltm.recalling.block import frame
from astrbot_plugin_ltm.recalling.tokens import EstimateCounter
from bench import conversations, locomo
from bench.embedders import HashEmbedder
from bench.metrics import (
    BM25,
    FOOTER,
    HEADER,
    QuestionResult,
    Unit,
    answer_words,
    budget_cut,
    cut_reaches,
    dense_rank,
    evidence_recall,
    item_event_ids,
    normalise_evidence,
    reached_dia_ids,
    report,
    rrf,
)
from tests.helpers import TINY_LOCOMO


def words(text: str) -> int:
    """A counter that is easy to follow by hand: one token per word."""
    return len(text.split())


# -- evidence ids -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("D3:7", ["D3:7"]),
        ("D8:6; D9:17", ["D8:6", "D9:17"]),
        ("D:11:26", ["D11:26"]),
        ("D9:1 D4:4 D4:6", ["D9:1", "D4:4", "D4:6"]),
        ("D4:17, D4:19", ["D4:17", "D4:19"]),
        (["D1:2", "D1:2", "D1:3; D1:2"], ["D1:2", "D1:3"]),
        (["D01:05"], ["D1:5"]),
        ("", []),
        ("no id here", []),
        (None, []),
        ([None, 3, "D2:1"], ["D2:1"]),
    ],
)
def test_normalise_evidence(raw, expected):
    assert normalise_evidence(raw) == expected


# -- what a block reaches ---------------------------------------------------------------------


@dataclass(frozen=True)
class FakeSelected:  # the reader's Selected, as far as the metric cares
    memory_id: str
    fact: str = ""


def test_item_event_ids_memory_raw_event_and_provenance():
    event_dia = {"e1": "D1:1", "e2": "D1:2", "e3": "D2:1"}
    evidence = {"m1": {"e1", "e2"}, "m2": {"e3", "gone"}}
    # a memory reaches the events it is evidenced by (unknown ones ignored)
    assert item_event_ids(FakeSelected("m1"), evidence, event_dia) == {"e1", "e2"}
    assert item_event_ids(FakeSelected("m2"), evidence, event_dia) == {"e3"}
    # a raw event injected as itself, bare or prefixed
    assert item_event_ids(FakeSelected("e3"), evidence, event_dia) == {"e3"}
    assert item_event_ids(FakeSelected("event:e2"), evidence, event_dia) == {"e2"}
    # provenance carried on the entry (attribute or mapping)
    assert item_event_ids({"memory_id": "x", "event_ids": ["e1", "zz"]}, evidence, event_dia) == {"e1"}
    assert item_event_ids(FakeSelected("nothing"), evidence, event_dia) == set()
    items = [FakeSelected("m1"), FakeSelected("e3")]
    assert reached_dia_ids(items, evidence, event_dia) == {"D1:1", "D1:2", "D2:1"}


def test_evidence_recall_and_report():
    assert evidence_recall(["D1:1", "D1:2"], ["D1:1", "D5:5"]) == 0.5
    assert evidence_recall({"D1:1"}, set()) == 0.0
    with pytest.raises(ValueError):
        evidence_recall([], ["D1:1"])
    g = frozenset
    results = [
        QuestionResult(1, g({"a", "b"}), g({"a"}), tokens=100, items=2, read_ms=1.0),  # 0.5
        QuestionResult(4, g({"c"}), g({"c", "x"}), tokens=200, items=4, read_ms=3.0),  # 1.0, all
        QuestionResult(4, g({"d", "e", "f", "h"}), g({"d"}), tokens=300, items=6, read_ms=5.0),  # 0.25
        QuestionResult(5, g({"z"}), g(), tokens=50, items=0, read_ms=7.0),  # adversarial, apart
    ]
    r = report(results)
    assert r["n"] == 3
    assert r["evidence_recall"] == pytest.approx((0.5 + 1.0 + 0.25) / 3)
    assert r["all_evidence_rate"] == pytest.approx(1 / 3)
    assert r["mean_tokens"] == pytest.approx(200)
    assert r["max_tokens"] == 300
    assert r["mean_items"] == pytest.approx(4)
    assert r["p50_read_ms"] == pytest.approx(3.0)
    assert r["p95_read_ms"] == pytest.approx(3.0 + 0.9 * 2.0)  # linear between 3 and 5
    assert r["per_category"]["1"]["evidence_recall"] == 0.5
    assert r["per_category"]["4"]["evidence_recall"] == pytest.approx(0.625)
    assert r["per_category"]["4"]["all_evidence_rate"] == 0.5
    assert r["per_category"]["2"]["n"] == 0 and r["per_category"]["2"]["evidence_recall"] is None
    assert r["category_5"]["n"] == 1 and r["category_5"]["evidence_recall"] == 0.0


# -- rankings -----------------------------------------------------------------------------------


def test_bm25_ranking_and_score():
    docs = ["the cat sat on the mat", "dogs chase cats", "a cat and a cat", "nothing here"]
    bm = BM25(docs)
    # "cats" is "cat" (the plugin's tokens are stems); "the" and "a" are
    # query stopwords; the shorter doc 1 ranks above doc 0
    assert bm.rank("the cat") == [2, 1, 0]
    assert bm.rank("dog") == [1]
    assert bm.rank("zebra") == []
    # doc 2 by hand: N=4, df(cat)=3, |d|=5, avgdl=(6+3+5+2)/4=4
    idf = math.log(1 + (4 - 3 + 0.5) / (3 + 0.5))
    tf = 2
    expected = idf * tf * 2.5 / (tf + 1.5 * (1 - 0.75 + 0.75 * 5 / 4))
    assert bm.scores("cat")[2] == pytest.approx(expected)
    # equal scores keep corpus order
    assert BM25(["red fox", "red fox"]).rank("fox") == [0, 1]


def test_dense_rank():
    docs = np.array([[1, 0], [0.6, 0.8], [0, 1], [0.6, 0.8]], dtype=np.float32)
    assert dense_rank(np.array([0, 1], dtype=np.float32), docs) == [2, 1, 3, 0]
    assert dense_rank(np.array([1, 0], dtype=np.float32), np.zeros((0, 2), np.float32)) == []


def test_rrf_fusion_order():
    # 0: 1/61 + 1/62, 2: 1/63 + 1/61, 1: 1/62, 3: 1/63
    assert rrf([[0, 1, 2], [2, 0, 3]], k=60) == [0, 2, 1, 3]
    # a tie (1/61 each) goes to the better best rank, then the lower id
    assert rrf([[5], [4]], k=60) == [4, 5]
    assert rrf([[7, 8], [8, 7]], k=60) == [7, 8]
    assert rrf([[], [3]]) == [3]


# -- the budget ----------------------------------------------------------------------------------


def test_budget_cut_stops_at_first_line_that_does_not_fit():
    units = [
        Unit("one two three", frozenset({"D1:1"})),  # 3 words
        Unit("four five", frozenset({"D1:2"})),  # 2
        Unit("six seven eight nine ten", frozenset({"D1:3"})),  # 5
        Unit("x", frozenset({"D1:4"})),  # 1: would fit, but the cut has stopped
    ]
    frame = words(HEADER + "\n" + FOOTER)
    cut = budget_cut([0, 1, 2, 3], units, words, max_tokens=frame + 6)
    assert cut.chosen == [0, 1]
    assert cut.tokens == frame + 5 == words(cut.text)
    assert cut.text.splitlines() == [HEADER, "one two three", "four five", FOOTER]
    assert cut_reaches(cut, units) == {"D1:1", "D1:2"}
    # ranking order is respected, and max_items caps it
    assert budget_cut([3, 0], units, words, 100).chosen == [3, 0]
    assert budget_cut([3, 0, 1], units, words, 100, max_items=2).chosen == [3, 0]
    # the frame alone does not fit: nothing is injected
    assert budget_cut([0], units, words, frame - 1).chosen == []
    # room for the frame but not the first line
    empty = budget_cut([2, 3], units, words, frame + 1)
    assert empty.chosen == [] and empty.tokens == 0


def test_budget_cut_rechecks_the_whole_block():
    # A counter for which the whole costs more than its lines: the block is
    # shortened until it fits, as the plugin's reader does.
    def dear(text: str) -> int:
        return words(text) + (10 if text.count("\n") >= 3 else 0)

    units = [Unit("a b", frozenset({"1"})), Unit("c d", frozenset({"2"}))]
    cut = budget_cut([0, 1], units, dear, max_tokens=12)
    assert cut.chosen == [0] and cut.tokens == dear(cut.text) <= 12


# -- a whole (tiny) run through the plugin -----------------------------------------------------------


FIXTURE = [TINY_LOCOMO]


def test_load_conversations_fixture():
    (conv,) = locomo.load_conversations(FIXTURE)
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2", "D2:3"]
    turns = {t.dia_id: t for t in conv.turns}
    assert turns["D2:1"].text.endswith("[shares an image: a painting of a sunset over the sea]")
    assert turns["D1:3"].at - turns["D1:1"].at == locomo.timedelta(minutes=2)
    assert turns["D1:1"].at.isoformat() == "2023-05-08T13:56:00+00:00"
    assert [f.evidence for f in conv.facts] == [["D1:1"], ["D1:2"], ["D2:1", "D2:3"]]
    assert [q.evidence for q in conv.questions] == [["D1:1"], ["D1:2", "D1:3"], ["D2:1", "D2:3"], ["D2:2"], []]
    assert conv.questions[-1].unknown_evidence == ["D9:9"]


def test_whole_run_on_fixture(tmp_path):
    convs = locomo.load_conversations(FIXTURE)
    # Memories only, so that the figures below follow from the facts alone
    # (raw turns beside them are the reader's business, tested elsewhere).
    pin = ["read_policy.max_events=0"] if hasattr(ReadPolicy, "max_events") else []
    doc = asyncio.run(locomo.run(
        convs, max_tokens=800, max_items=15, embedder=HashEmbedder(), counter=EstimateCounter(),
        db_path=tmp_path / "tiny.db", overrides=pin,
    ))
    q = doc["questions"]
    assert (q["total"], q["scored"], q["categories_1_4"], q["category_5"]) == (5, 4, 3, 1)
    assert q["skipped_no_evidence"] == 1 and q["unknown_evidence_ids"] == ["D9:9"]
    # Write path: three recorded facts offered, each stored and active.
    assert doc["write"]["events"] == 6 and doc["write"]["facts_offered"] == 3
    assert sum(v for k, v in doc["write"]["items"].items() if k.startswith("active:")) == 3
    # Everything fits in 800 tokens, so the plugin injects all three facts,
    # which reach D1:1, D1:2, D2:1 and D2:3 — never D1:3 (no fact cites it)
    # nor D2:2: recall (1 + 1/2 + 1) / 3, all evidence for 2 of 3.
    ours = doc["ours"]
    assert ours["evidence_recall"] == pytest.approx(round(2.5 / 3, 4))
    assert ours["all_evidence_rate"] == pytest.approx(round(2 / 3, 4))
    assert ours["per_category"]["1"]["evidence_recall"] == 0.5
    assert ours["per_category"]["2"]["all_evidence_rate"] == 1.0
    assert ours["category_5"]["evidence_recall"] == 0.0
    assert 0 < ours["mean_tokens"] <= 800 and ours["p95_read_ms"] >= 0
    # The facts baselines see the same three facts; whole raw turns all fit.
    base = doc["baselines"]
    assert set(base) == {"bm25_turns", "dense_turns", "rrf_turns", "dense_facts", "bm25_facts"}
    assert base["dense_facts"]["evidence_recall"] == ours["evidence_recall"]
    assert base["dense_turns"]["evidence_recall"] == 1.0
    assert base["dense_turns"]["category_5"]["evidence_recall"] == 1.0
    assert base["rrf_turns"]["evidence_recall"] == 1.0
    # what the facts take, without the block's frame (header, note, footer)
    assert doc["full_context_tokens"] > ours["mean_tokens"] - EstimateCounter().count("\n".join(frame("en")))
    assert doc["settings"]["plugin_mode"].startswith(
        "hybrid" if locomo.engine_takes_embedder() else "keyword-only")


def test_recorded_extractor_links_every_cited_turn():
    (conv,) = locomo.load_conversations(FIXTURE)
    ex = locomo.RecordedExtractor(conv)

    @dataclass
    class Ev:
        event_id: str

    for n, t in enumerate(conv.turns):
        ex.recorded(t.dia_id, Ev(f"e{n}"))
    first = asyncio.run(ex.extract([Ev("e0"), Ev("e1"), Ev("e2")]))
    assert [c.event_ids for c in first.candidates] == [["e0"], ["e1"]]
    assert {c.confidence for c in first.candidates} == {0.9}
    # D2:3 alone brings the session-2 fact, with both of its turns; only once
    second = asyncio.run(ex.extract([Ev("e5")]))
    assert [c.event_ids for c in second.candidates] == [["e3", "e5"]]
    assert asyncio.run(ex.extract([Ev("e3")])).candidates == []


def test_fact_type_heuristic():
    assert conversations.fact_type("Alice loves hiking in the Alps.") == "preference"
    assert conversations.fact_type("Bob lives in Boston with his wife.") == "profile"
    assert conversations.fact_type("Alice went to a concert last Friday.") == "episode"


def test_parse_when():
    assert conversations.parse_when("1:56 pm on 8 May, 2023").isoformat() == "2023-05-08T13:56:00+00:00"
    assert conversations.parse_when("12:09 am on 13 September, 2023").hour == 0
    with pytest.raises(ValueError):
        conversations.parse_when("yesterday")


def test_answer_words_counts_the_answers_content_words_in_the_block():
    text = "[Long-term Memory]\n- Caroline: I researched adoption agencies last week\n[End Memory]"
    assert answer_words("Adoption agencies", text) == 1.0
    assert answer_words("adoption agency and a lawyer", text) == pytest.approx(2 / 3)  # "and", "a" are stopwords
    assert answer_words("The", text) is None  # no content word to look for
    assert answer_words(2022, "painted in 2022") == 1.0  # LoCoMo has numeric answers
    results = [
        QuestionResult(1, frozenset({"a"}), frozenset(), tokens=1, answer_words=0.5),
        QuestionResult(4, frozenset({"b"}), frozenset(), tokens=1, answer_words=1.0),
        QuestionResult(2, frozenset({"c"}), frozenset(), tokens=1),  # temporal: not counted
    ]
    assert report(results)["answer_words"] == pytest.approx(0.75)
    assert "answer_words" not in report(results)["per_category"]["2"]


def test_a_figure_comes_with_its_95_percent_interval_over_questions():
    from bench.metrics import QuestionResult, interval, summarise

    assert interval([1.0]) is None and interval([0.5, 0.5, 0.5]) == [0.5, 0.5]
    low, high = interval([0.0] * 50 + [1.0] * 50)
    assert 0.39 < low < 0.45 and 0.55 < high < 0.61  # about ±1.96·√(.25/100)
    assert interval([0.0, 1.0] * 50) == interval([0.0, 1.0] * 50)  # the same results, the same interval
    results = [QuestionResult(1, frozenset({"a"}), frozenset({"a"} if n % 4 else set()), 10) for n in range(40)]
    summary = summarise(results)
    assert summary["evidence_recall"] == 0.75
    assert summary["evidence_recall_ci"][0] < 0.75 < summary["evidence_recall_ci"][1]
