"""The read pipeline: the token budget is a hard limit, item caps, what is
never injected, TTL, ranking and keyword search (Chinese and English)."""

from __future__ import annotations

import itertools
import random
import re
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from astrbot_plugin_ltm.config import ReadPolicy
from astrbot_plugin_ltm.enums import MEMORY_TYPES, MemoryType
from astrbot_plugin_ltm.extension_points import Query
from astrbot_plugin_ltm.instructions import neutralise
from astrbot_plugin_ltm.recalling.block import (
    CUT_MIN_TOKENS,
    FOOTER,
    HEADER,
    NOTES,
    BlockBuilder,
    frame,
)
from astrbot_plugin_ltm.recalling.ranking import Ranked
from astrbot_plugin_ltm.recalling.read import Focus, Read, language_of
from astrbot_plugin_ltm.recalling.retrieval import KeywordRetriever
from astrbot_plugin_ltm.recalling.summary_lines import ELLIPSIS
from astrbot_plugin_ltm.recalling.tokens import EstimateCounter, default_counter
from astrbot_plugin_ltm.scope import Scope
from astrbot_plugin_ltm.storing.memory_rows import fact_written
from astrbot_plugin_ltm.storing.tables import MemoryItem
from tests.helpers import START, event_row

ALICE = Scope("user", "qq:alice")
_keys = itertools.count()


async def add(ltm, fact, *, scope=ALICE, type="preference", status="active", confidence=0.9,
              importance=0.5, ttl_days=None, age=timedelta(0), awaiting_approval=False) -> MemoryItem:
    """Insert an item directly (with its keyword-index row)."""
    when = ltm.clock() - age
    async with ltm.engine.db.write() as session:
        item = MemoryItem(
            scope=scope.kind, scope_id=scope.id, type=type, fact=fact, fact_key=f"k{next(_keys)}",
            confidence=confidence, importance=importance, ttl_days=ttl_days, status=status,
            awaiting_approval=awaiting_approval, created_at=when, updated_at=when,
        )
        session.add(item)
        await session.flush()
        await fact_written(session, item, created=True)
    return item


FOCUSED_SUMMARY = re.compile(r"- \[summary \d{4}-\d{2}-\d{2}\] (.*) \(confidence: ")


def check_block(block, policy: ReadPolicy, counter):
    """The invariants every memory block must satisfy."""
    if not block:
        assert block.text == "" and block.tokens == 0
        return
    assert block.tokens == counter.count(block.text)
    assert block.tokens <= policy.max_tokens
    assert len(block.items) <= policy.max_items
    assert len(block.events) <= policy.max_events
    per_type: dict[str, int] = {}
    for s in block.items:
        per_type[s.type] = per_type.get(s.type, 0) + 1
    assert max(per_type.values(), default=0) <= policy.max_per_type
    lines = block.text.split("\n")
    assert lines[0] == HEADER and lines[1] in NOTES.values() and lines[-1] == FOOTER
    for line, s in zip(lines[2:], block.items, strict=False):
        focused = FOCUSED_SUMMARY.match(line)
        if s.type == MemoryType.SUMMARY and focused:  # its day and some of its sentences, in order
            shown = [p.strip() for p in focused.group(1).split(ELLIPSIS) if p.strip()]
            whole = neutralise(s.fact)
            assert shown and all(p in whole for p in shown)
        else:
            assert line.startswith(f"- [{s.type}] {neutralise(s.fact)} (confidence: ")
    # then the raw turns, each under its day's heading, oldest first
    turns, day = [], None
    for line in lines[2 + len(block.items):-1]:
        if line.startswith("[said "):
            day = line
        else:
            assert day is not None and line.startswith("- ")
            turns.append(f"{day} {line[2:]}")
    assert turns == [s.fact for s in block.events]


# -- the budget ---------------------------------------------------------------

WORDS = [
    "Alice", "Bob", "tea", "coffee", "Paris", "London", "python", "rust", "deadline", "friday", "meeting", "nurse",
    "guitar", "cat", "dog", "allergic", "peanuts", "vegetarian", "marathon", "2025-03-01", "v2", "API", "🍵", "🐱",
    "naïve", "café"
]
CJK = "小明住在上海喜欢喝绿茶周五开会猫狗程序员北京咖啡马拉松素食对花生过敏東京ラーメン한국어"


def random_fact(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 25)):
        if rng.random() < 0.4:
            start = rng.randrange(len(CJK) - 1)
            parts.append(CJK[start : start + rng.randint(1, 8)])
        else:
            parts.append(rng.choice(WORDS))
    sep = "" if rng.random() < 0.3 else " "
    return sep.join(parts)


async def test_budget_is_never_exceeded_random_facts_and_budgets(ltm, origin):
    rng = random.Random(20250301)
    a = origin("alice")
    for _ in range(90):
        await add(ltm, random_fact(rng), type=rng.choice(MEMORY_TYPES), confidence=rng.uniform(0.5, 1.0),
                  importance=rng.random(), age=timedelta(days=rng.uniform(0, 60)))
    counter = ltm.engine.reader.counter
    budgets = [0, 1, 5, 10, 11, 12, 13, 15, 20, 25, 30] + [rng.randint(0, 400) for _ in range(80)]
    nonempty = 0
    for max_tokens in budgets:
        raw = {"read_policy": {"max_tokens": max_tokens, "max_items": rng.randint(1, 30),
                               "max_per_type": rng.randint(1, 8)}}
        assert ltm.configure(raw) == []
        policy = ltm.engine.config.read_policy
        query = random_fact(rng)
        block = await ltm.block(a, query)
        check_block(block, policy, counter)
        nonempty += bool(block)
        if max_tokens < counter.count("\n".join(frame(language_of(query)))):
            assert not block.items
    assert nonempty > len(budgets) // 2  # the loop really exercised non-empty blocks


async def test_budget_fills_up_with_shorter_lower_ranked_lines(make_ltm, origin):
    ltm = await make_ltm({"read_policy": {"max_items": 10}, "tools": {"expand": False}})  # lines without ids
    long_fact = "Alice once explained at great length " + "and in much detail " * 20 + "her tea ritual"
    await add(ltm, long_fact, importance=1.0)
    short = await add(ltm, "Alice likes tea", importance=0.1)
    counter = ltm.engine.reader.counter
    frame_cost = counter.count("\n".join(frame("en")))
    budget = frame_cost + counter.count("\n- [preference] Alice likes tea (confidence: 0.90)") + 2
    assert counter.count(long_fact) > budget
    ltm.configure({"read_policy": {"max_tokens": budget}})
    block = await ltm.block(origin("alice"), "tea")
    assert [s.memory_id for s in block.items] == [short.memory_id]
    assert block.tokens <= budget
    ltm.configure({"read_policy": {"max_tokens": frame_cost}})  # room for the frame only
    assert not await ltm.block(origin("alice"), "tea")


def _turn(n: int, said: str) -> Ranked:
    return Ranked(1.0 - n / 10, turn=event_row(n, said, at=START + timedelta(minutes=n)))


def test_the_first_turn_that_does_not_fit_is_cut_to_the_room_left():
    counter = default_counter()
    builder = BlockBuilder(counter)
    short = _turn(0, "I keep bees in Kent")
    long_ = _turn(1, "My garden in Kent has " + "many old apple trees and " * 30)
    whole = builder.fit([short], Read("", [], ReadPolicy(max_tokens=800)))
    for room, cut in ((40, True), (CUT_MIN_TOKENS - 1, False)):
        policy = ReadPolicy(max_tokens=whole.tokens + room)
        block = builder.fit([short, long_], Read("", [], policy))
        assert block.tokens <= policy.max_tokens
        if cut:
            assert [s.memory_id for s in block.events] == ["e0", "e1"]
            line = block.text.split("\n")[-2]
            assert line.startswith("- Alice: My garden in Kent has many old apple trees") and line.endswith("trees…")
            assert block.tokens > whole.tokens + room - CUT_MIN_TOKENS  # the room is used
        else:
            assert [s.memory_id for s in block.events] == ["e0"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    entries=st.lists(
        st.tuples(
            # stored facts and turns are whitespace-normalised by every write path
            st.text(min_size=1, max_size=160).map(lambda s: " ".join(s.split())).filter(bool),
            st.sampled_from([*MEMORY_TYPES, "turn"]),
            st.floats(0, 1),
            st.integers(0, 3),  # the day a turn was said
        ),
        min_size=0, max_size=30,
    ),
    links=st.lists(st.tuples(st.integers(0, 29), st.integers(0, 29)), max_size=20),  # memory backs turn
    max_tokens=st.integers(0, 300),
    max_items=st.integers(0, 20),
    max_per_type=st.integers(1, 6),
    max_events=st.integers(0, 10),
)
def test_fit_respects_every_cap_and_the_budget_for_arbitrary_text(entries, links, max_tokens, max_items,
                                                                   max_per_type, max_events):
    counter = default_counter()
    builder = BlockBuilder(counter)
    policy = ReadPolicy(max_tokens=max_tokens, max_items=max_items, max_per_type=max_per_type,
                        max_events=max_events)
    ranked = []
    for n, (text_, kind, score, day) in enumerate(entries):
        if kind == "turn":
            turn = event_row(n, text_, at=START + timedelta(days=day, minutes=n))
            ranked.append(Ranked(score, turn=turn))
        else:
            covers = frozenset(f"e{t}" for m, t in links if m == n and t < len(entries) and entries[t][1] == "turn")
            ranked.append(Ranked(score, memory=MemoryItem(id=n, memory_id=f"m{n}", scope="user", scope_id="x",
                                                          type=kind, fact=text_, fact_key=f"k{n}",
                                                          confidence=0.9), covers=covers))
    ranked.sort(key=lambda r: -r.score)
    block = builder.fit(ranked, Read("", [], policy))
    check_block(block, policy, counter)
    days = [s.fact.split("] ")[0] for s in block.events]
    assert days == sorted(days)
    shown = {s.memory_id for s in block.items}
    # A summary only sketches the turns it spans, so they may still be shown beside it.
    behind = {e for r in ranked if r.memory is not None and r.memory.memory_id in shown
              and r.memory.type != MemoryType.SUMMARY for e in r.covers}
    assert not behind & {s.memory_id for s in block.events}  # nothing said twice


class _Unbounded:
    """The default counter with no lower bound known to the block: every
    line it tries is counted."""

    def __init__(self) -> None:
        self._counter = default_counter()
        self.name = "unbounded"

    def count(self, text: str) -> int:
        return self._counter.count(text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), max_tokens=st.integers(20, 400), bot_share=st.booleans())
def test_lines_left_uncounted_change_nothing_in_the_block(seed, max_tokens, bot_share):
    """The walk skips counting a line that cannot fit (tokens.fewest_tokens,
    docs/decisions.md#d133): the block is the same as when every line is counted."""
    rng = random.Random(seed)
    ranked = []
    for n in range(rng.randint(20, 60)):
        fact = " ".join(random_fact(rng) for _ in range(rng.choice((1, 1, 2, 4))))
        if rng.random() < 0.5:
            turn = event_row(n, fact, at=START + timedelta(days=rng.randint(0, 3), minutes=n),
                             role="assistant" if bot_share and rng.random() < 0.5 else "user")
            ranked.append(Ranked(rng.random(), turn=turn))
        else:
            ranked.append(Ranked(rng.random(), memory=MemoryItem(
                id=n, memory_id=f"m{n}", scope="user", scope_id="x", type=rng.choice(MEMORY_TYPES), fact=fact,
                fact_key=f"k{n}", confidence=0.9)))
    ranked.sort(key=lambda r: -r.score)
    policy = ReadPolicy(max_tokens=max_tokens, max_items=50, max_per_type=50, max_events=50)  # the budget binds
    about = Focus(frozenset(Query.of(random_fact(rng)).tokens))
    bounded = BlockBuilder(default_counter()).fit(ranked, Read("", [], policy, focus=about))
    counted = BlockBuilder(_Unbounded()).fit(ranked, Read("", [], policy, focus=about))
    assert (bounded.text, bounded.tokens) == (counted.text, counted.tokens)


def test_estimate_counter_errs_high_for_cjk():
    real, estimate = default_counter(), EstimateCounter()
    for text in ["小明住在上海，喜欢喝绿茶。", "東京ラーメン", "한국어 텍스트", "hello world, this is Alice"]:
        assert estimate.count(text) >= real.count(text)


async def test_budget_holds_with_the_estimate_counter(make_ltm, origin):
    ltm = await make_ltm(counter=EstimateCounter())
    rng = random.Random(7)
    for _ in range(30):
        await add(ltm, random_fact(rng), type=rng.choice(MEMORY_TYPES))
    for max_tokens in (0, 10, 30, 60, 120, 500):
        ltm.configure({"read_policy": {"max_tokens": max_tokens}})
        block = await ltm.block(origin("alice"), "tea")
        check_block(block, ltm.engine.config.read_policy, EstimateCounter())
        assert default_counter().count(block.text) <= max_tokens  # the real tokenizer agrees


# -- item caps ------------------------------------------------------------------


async def test_max_items_and_max_per_type(make_ltm, origin):
    ltm = await make_ltm({"read_policy": {"max_items": 15, "max_per_type": 3}})
    for n in range(8):
        await add(ltm, f"Alice likes fruit {n} {'x' * n}", type="preference", importance=0.9 - n / 100)
    for n in range(4):
        await add(ltm, f"Alice's job number {n} is {'y' * n}", type="profile", importance=0.5 - n / 100)
    await add(ltm, "Alice never uses sudo", type="constraint")
    a = origin("alice")
    block = await ltm.block(a, "")
    types = [s.type for s in block.items]
    assert types.count("preference") == 3 and types.count("profile") == 3 and types.count("constraint") == 1
    # the three most important preferences are the ones kept
    assert sorted(s.fact for s in block.items if s.type == "preference") == [
        "Alice likes fruit 0 ", "Alice likes fruit 1 x", "Alice likes fruit 2 xx",
    ]

    ltm.configure({"read_policy": {"max_items": 4}})
    block = await ltm.block(a, "")
    assert len(block.items) == 4 and block.items[0].fact == "Alice likes fruit 0 "

    ltm.configure({"read_policy": {"max_items": 0}})
    assert not await ltm.block(a, "")


async def test_near_duplicates_are_injected_once(ltm, origin):
    await add(ltm, "Alice loves green tea", importance=0.9)
    await add(ltm, "Alice loves green tea!", importance=0.8)
    await add(ltm, "Alice lives in Paris", importance=0.7)
    block = await ltm.block(origin("alice"), "")
    assert [s.fact for s in block.items] == ["Alice loves green tea", "Alice lives in Paris"]


async def test_ranked_by_score_with_provenance(ltm, origin):
    await add(ltm, "Alice is a nurse", type="profile", importance=0.2)
    await add(ltm, "Alice never uses sudo", type="constraint", importance=0.9)
    await add(ltm, "Alice likes tea", importance=0.5, age=timedelta(days=300))
    block = await ltm.block(origin("alice"), "")
    assert [s.fact for s in block.items] == ["Alice never uses sudo", "Alice is a nurse", "Alice likes tea"]
    assert all(s.scope == "user:qq:alice" for s in block.items)
    scores = [s.score for s in block.items]
    assert scores == sorted(scores, reverse=True)
    assert "- [constraint] Alice never uses sudo (confidence: 0.90)" in block.text


async def test_a_match_lifts_what_was_said_on_its_day(make_ltm, origin, monkeypatch):
    ltm = await make_ltm({"read_policy": {"max_items": 2}})
    await add(ltm, "went hiking at the lake", age=timedelta(days=5))
    await add(ltm, "brought the dog along", age=timedelta(days=5, minutes=10))
    await add(ltm, "bought new shoes", age=timedelta(days=4))  # more recent, same importance
    a = origin("alice")
    block = await ltm.block(a, "where did she hike?")
    assert [s.fact for s in block.items] == ["went hiking at the lake", "brought the dog along"]
    assert ReadPolicy().day_weight > 0  # the default lifts it

    monkeypatch.setattr(ReadPolicy, "day_weight", 0)
    ltm.configure({"read_policy": {"max_items": 2}})
    block = await ltm.block(a, "where did she hike?")
    assert [s.fact for s in block.items] == ["went hiking at the lake", "bought new shoes"]


# -- what is never injected --------------------------------------------------------


async def test_only_active_confident_unexpired_items_are_injected(ltm, origin):
    good = await add(ltm, "Alice drinks green tea daily")
    await add(ltm, "Alice drinks green tea shadow", status="shadow")
    await add(ltm, "Alice drinks green tea pending", status="shadow", awaiting_approval=True)
    await add(ltm, "Alice drinks green tea disabled", status="disabled")
    await add(ltm, "Alice drinks green tea expired", status="expired")
    await add(ltm, "Alice drinks green tea unsure", confidence=0.4)
    await add(ltm, "Alice drinks green tea stale", ttl_days=1, age=timedelta(days=2))  # not swept yet
    a = origin("alice")
    for query in ("green tea", "shadow pending disabled expired unsure stale", ""):
        block = await ltm.block(a, query)
        assert [s.memory_id for s in block.items] == [good.memory_id], query

    # the read threshold is the operator's
    ltm.configure({"read_policy": {"min_confidence": 0.3}})
    facts = {s.fact for s in (await ltm.block(a, "green tea")).items}
    assert facts == {"Alice drinks green tea daily", "Alice drinks green tea unsure"}


async def test_read_policy_and_plugin_switches(ltm, origin):
    await add(ltm, "Alice likes tea")
    a = origin("alice")
    assert await ltm.block(a, "tea")
    ltm.configure({"read_policy": {"enable": False}})
    assert not await ltm.block(a, "tea")
    ltm.configure({"read_policy": {"enable": True}, "enable": False})
    assert not await ltm.block(a, "tea")
    ltm.configure({"enable": True})
    assert await ltm.block(a, "tea")


async def test_ttl_expiry_on_read_follows_the_clock(ltm, origin):
    await add(ltm, "Alice is fixing the login bug", type="task_state", ttl_days=7)
    a = origin("alice")
    assert await ltm.block(a, "bug")
    ltm.clock.advance(days=7, seconds=1)
    assert not await ltm.block(a, "bug")  # expired even before the sweep marks it
    assert await ltm.engine.worker.sweep_expired() == 1
    assert (await ltm.item()).status == "expired"
    assert not await ltm.block(a, "bug")


# -- keyword search ----------------------------------------------------------------


async def test_chinese_keyword_search(ltm, origin):
    target = await add(ltm, "小明住在上海", importance=0.5)
    await add(ltm, "小红住在北京", importance=0.6)
    await add(ltm, "小明喜欢喝绿茶", importance=0.6)
    await add(ltm, "天气很好", importance=0.7)
    found = await KeywordRetriever(ltm.engine.keyword_index).search([ALICE], Query.of("小明住在哪里"), 10)
    assert found.memories[0] == target.id and len(found.memories) == 3  # "天气很好" shares nothing

    ltm.configure({"read_policy": {"max_items": 1}})
    block = await ltm.block(origin("alice"), "小明住在哪里")
    assert [s.fact for s in block.items] == ["小明住在上海"]


async def test_english_keyword_search(ltm, origin):
    target = await add(ltm, "Alice's favourite drink is green tea", importance=0.3)
    await add(ltm, "Alice works as a nurse", importance=0.6)
    await add(ltm, "Bob plays the guitar", importance=0.7)
    retriever = KeywordRetriever(ltm.engine.keyword_index)
    found = await retriever.search([ALICE], Query.of("What drink should I order for Alice?"), 10)
    assert found.memories[0] == target.id
    ltm.configure({"read_policy": {"max_items": 1}})
    block = await ltm.block(origin("alice"), "What drinks should I order? Tea?")
    assert [s.fact for s in block.items] == ["Alice's favourite drink is green tea"]


async def test_mixed_script_facts_are_found_by_each_part(ltm):
    # Chinese users write Latin words without spaces: "我喜欢Python编程".
    item = await add(ltm, "小明喜欢Python编程")
    await add(ltm, "小红喜欢画画")
    retriever = KeywordRetriever(ltm.engine.keyword_index)
    for query in ("Python", "编程", "小明会什么编程语言", "who likes python"):
        found = await retriever.search([ALICE], Query.of(query), 10)
        assert item.id in found.memories, query


async def test_keyword_search_stays_in_its_scopes_and_only_active_items_are_injected(ltm, origin):
    shadow = await add(ltm, "Alice likes green tea", status="shadow")
    await add(ltm, "Bob likes green tea", scope=Scope("user", "qq:bob"))
    mine = await add(ltm, "Alice loves green tea")
    found = await KeywordRetriever(ltm.engine.keyword_index).search([ALICE], Query.of("green tea"), 10)
    assert set(found.memories) == {shadow.id, mine.id}  # the reader checks status
    block = await ltm.block(origin("alice"), "green tea")
    assert [s.memory_id for s in block.items] == [mine.memory_id]


async def test_keyword_index_follows_edits_and_deletes(ltm, origin):
    item = await add(ltm, "Alice lives in Paris")
    await ltm.engine.admin.update_item(item.memory_id, {"fact": "Alice lives in Lisbon"}, "operator:root")
    retriever = KeywordRetriever(ltm.engine.keyword_index)
    assert (await retriever.search([ALICE], Query.of("Paris"), 10)).memories == []
    assert (await retriever.search([ALICE], Query.of("Lisbon"), 10)).memories == [item.id]
    await ltm.engine.admin.delete(item.memory_id, "operator:root")
    assert (await KeywordRetriever(ltm.engine.keyword_index).search([ALICE], Query.of("Lisbon"), 10)).memories == []
    assert await ltm.sql("SELECT count(*) FROM ltm_items_fts") == [(0,)]


@pytest.mark.parametrize("query", ['"', "a OR b", "NEAR(x y)", "*", "tea AND", "'; DROP TABLE ltm_items; --", "🍵"])
async def test_queries_with_fts_syntax_are_safe(ltm, origin, query):
    await add(ltm, "Alice likes tea")
    block = await ltm.block(origin("alice"), query)
    assert [s.fact for s in block.items] == ["Alice likes tea"]  # found via the importance baseline


def test_the_turns_of_one_day_make_room_for_a_nearly_as_good_turn_of_another():
    from astrbot_plugin_ltm.recalling.ranking import DAY_SPREAD, spread

    def said(n: int, day: int, score: float) -> Ranked:
        return Ranked(score, turn=event_row(n, f"turn {n}", at=START + timedelta(days=day, minutes=n)))

    # four turns of day 0 lead a turn of day 1 by less than three spreads
    ranked = [said(n, 0, 1.0 - n * 0.001) for n in range(4)] + [said(9, 1, 1.0 - 2.5 * DAY_SPREAD)]
    order = [r.turn.event_id for r in spread(ranked)]
    assert order == ["e0", "e1", "e2", "e9", "e3"]
    # the best turn of a day keeps its score
    assert ranked[0].score == 1.0
