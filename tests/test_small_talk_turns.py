"""A turn extraction read and kept nothing of has no importance: it ranks
below one a fact was made of (docs/decisions.md#d73)."""

from __future__ import annotations

from datetime import UTC, datetime

from astrbot_plugin_ltm.config import ReadPolicy
from astrbot_plugin_ltm.enums import Role
from astrbot_plugin_ltm.extension_points import Found
from astrbot_plugin_ltm.recalling.ranking import rank
from astrbot_plugin_ltm.recalling.read import Read
from astrbot_plugin_ltm.recalling.rows import EventRow, load_turns
from astrbot_plugin_ltm.scope import Scope
from tests.helpers import event_row

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
ALICE = Scope("user", "qq:alice")


def _turn(n: int, text: str, nothing_kept: bool) -> EventRow:
    return event_row(n, text, scope_id="qq:alice", at=NOW, nothing_kept=nothing_kept)


def test_a_turn_nothing_was_kept_of_ranks_below_an_equal_turn_a_fact_was_made_of():
    chat = _turn(1, "Thanks, Mel! Talk soon!", nothing_kept=True)
    news = _turn(2, "I signed up for a pottery class", nothing_kept=False)
    found = [Found(turns=[1, 2]), Found(turns=[2, 1])]  # the two retrievers disagree: equal similarity
    ranked = rank(_read(found, {}, {}, {1: chat, 2: news}))
    assert [r.turn.event_id for r in ranked if r.turn is not None] == ["e2", "e1"]
    policy = ReadPolicy()
    assert ranked[0].score - ranked[1].score >= policy.importance_weight * policy.event_importance - 1e-9


def test_a_turn_nothing_was_kept_of_still_outranks_a_worse_match():
    chat = _turn(1, "Pottery was fun, thanks!", nothing_kept=True)
    other = _turn(2, "Lunch was fine", nothing_kept=False)
    ranked = rank(_read([Found(turns=[1])], {}, {}, {1: chat, 2: other}))
    assert ranked[0].turn is chat  # what matches the message still comes first


async def test_the_reader_flags_the_turns_extraction_kept_nothing_of(ltm, origin):
    a = origin("alice")
    await ltm.turn(a, "Thanks, see you!", "Bye!")  # extracted: nothing kept
    await ltm.turn(a, "I love green tea", "Noted.", {"fact": "Alice loves green tea", "type": "preference"})
    await ltm.record(a, "Still waiting to be read")  # not extracted yet: not judged
    events = [e for e in await ltm.events() if e.source_role == Role.USER]
    rows = await ltm.engine.db.run(lambda conn: load_turns(conn, [ALICE], [e.id for e in events], True))
    assert {row.content["text"]: row.nothing_kept for row in rows.values()} == {
        "Thanks, see you!": True, "I love green tea": False, "Still waiting to be read": False,
    }


def _read(found: list[Found], items: dict, evidence: dict[str, frozenset[str]], turns: dict) -> Read:
    return Read("", [], ReadPolicy(), now=NOW, found=found, items=items, evidence=evidence, turns=turns)
