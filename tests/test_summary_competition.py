"""Which summaries compete for the block: those whose own turns are among
the read's candidates, never above the best of them (docs/decisions.md#d114)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from astrbot_plugin_ltm.config import ReadPolicy
from astrbot_plugin_ltm.enums import MemoryType
from astrbot_plugin_ltm.extension_points import Found
from astrbot_plugin_ltm.recalling.ranking import rank
from astrbot_plugin_ltm.recalling.read import Read
from astrbot_plugin_ltm.storing.tables import MemoryItem
from tests.helpers import event_row

NOW = datetime(2024, 3, 1, tzinfo=UTC)
DAY = [datetime(2024, 2, d, 12, tzinfo=UTC) for d in range(1, 29)]


def summary(n: int, day: datetime, text: str = "The user asked how many things there are now.") -> MemoryItem:
    return MemoryItem(id=n, memory_id=f"s{n}", scope="user", scope_id="x", type=MemoryType.SUMMARY, fact=text,
                      fact_key=f"summary_session_{n}", confidence=0.72, importance=0.6, valid_from=day,
                      updated_at=day)


def order(ranked) -> list[str]:
    return [r.memory.memory_id if r.memory is not None else r.turn.event_id for r in ranked]


def test_summaries_whose_turns_are_no_candidates_are_left_out_however_well_their_words_match():
    # The question's one rare word ("Instagram") is in turn 1 of day 0; twenty
    # summaries of other days share only its common words and lead the memory hits.
    turns = {1: event_row(1, "I have 1,200 followers on Instagram now", at=DAY[0]),
             2: event_row(2, "How many cups of flour now?", at=DAY[5])}
    items = {100 + n: summary(100 + n, DAY[n + 1]) for n in range(20)}
    evidence = {f"s{100 + n}": frozenset({f"e{1000 + n}"}) for n in range(20)}
    found = [Found(memories=list(items), turns=[1, 2])]
    ranked = rank(_read(found, items, evidence, turns))
    assert order(ranked) == ["e1", "e2"]


def test_a_summary_of_the_matching_turns_ranks_right_after_the_best_of_them():
    turns = {1: event_row(1, "I have 1,200 followers on Instagram now", at=DAY[0]),
             2: event_row(2, "Instagram is where I post my drawings", at=DAY[0] + timedelta(minutes=1)),
             3: event_row(3, "How many cups of flour now?", at=DAY[5])}
    items = {100: summary(100, DAY[0], "The user counts Instagram followers.")}
    # The summary is the best memory hit and covers turns 1 and 2; it would
    # outrank every turn on its importance alone.
    evidence = {"s100": frozenset({"e1", "e2"})}
    found = [Found(memories=[100], turns=[1, 2, 3])]
    ranked = rank(_read(found, items, evidence, turns))
    assert order(ranked)[:2] == ["e1", "s100"]
    assert ranked[1].score < ranked[0].score


def test_a_summary_never_passes_a_turn_of_another_session_that_matches_better():
    turns = {1: event_row(1, "I have 1,200 followers on Instagram now", at=DAY[0]),
             2: event_row(2, "How many cups of flour now?", at=DAY[5])}
    items = {100: summary(100, DAY[5], "The user baked bread and asked how many cups of flour.")}
    evidence = {"s100": frozenset({"e2"})}
    found = [Found(memories=[100], turns=[1, 2])]
    ranked = rank(_read(found, items, evidence, turns))
    assert order(ranked) == ["e1", "e2", "s100"]


def test_with_no_candidate_turn_summaries_rank_as_before():
    items = {100: summary(100, DAY[0]), 101: summary(101, DAY[1])}
    evidence = {"s100": frozenset({"e1"}), "s101": frozenset({"e2"})}
    found = [Found(memories=[101, 100], turns=[])]
    ranked = rank(_read(found, items, evidence, {}))
    assert order(ranked) == ["s101", "s100"]


def test_facts_are_not_held_back_by_the_summary_rule():
    fact = MemoryItem(id=200, memory_id="f200", scope="user", scope_id="x", type=MemoryType.PROFILE,
                      fact="User has 1,200 Instagram followers", fact_key="instagram_followers", confidence=0.9,
                      importance=0.5, updated_at=DAY[5])
    turns = {2: event_row(2, "How many cups of flour now?", at=DAY[5])}
    ranked = rank(_read([Found(memories=[200], turns=[2])], {200: fact}, {"f200": frozenset({"e9"})}, turns))
    assert order(ranked) == ["f200", "e2"]


def _read(found: list[Found], items: dict, evidence: dict[str, frozenset[str]], turns: dict) -> Read:
    return Read("", [], ReadPolicy(), now=NOW, found=found, items=items, evidence=evidence, turns=turns)
