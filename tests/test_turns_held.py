"""A scope's turn namespaces hold its newest turns only
(storing.turns.TURNS_HELD, docs/decisions.md#d164): a search costs what
the last weeks of a year-long group cost, the namespaces drop their oldest
as new turns come, and an older turn is still found through the period a
message names."""

from __future__ import annotations

from datetime import timedelta

from astrbot_plugin_ltm.enums import Corpus
from astrbot_plugin_ltm.storing import turns
from astrbot_plugin_ltm.text import query_tokens
from tests.helpers import HashEmbedder

TOPICS = ["violin", "harbor", "tulip", "granite", "lantern", "meadow", "copper", "saffron", "glacier", "orchid"]


async def test_a_scope_holds_its_newest_turns_and_finds_an_older_one_by_its_day(make_ltm, origin, monkeypatch):
    monkeypatch.setattr(turns, "TURNS_HELD", 4)
    ltm = await make_ltm({"write_policy": {"mode": "auto"}}, embedder=HashEmbedder())
    alice = origin("alice")
    said: dict[str, int] = {}
    for topic in TOPICS[:6]:
        (event,) = await ltm.record(alice, f"I talked about the {topic} today", "")
        said[topic] = event.id
        ltm.clock.advance(days=1)
    await ltm.engine.worker.fill_vectors()
    scope = ltm.engine.resolver.user_scope(alice)

    async def found(topic: str) -> tuple[bool, bool]:
        words = await ltm.engine.keyword_index.search([scope], Corpus.TURNS, query_tokens(topic), 10)
        near = (await ltm.engine.embeddings.query([scope], f"I talked about the {topic} today", 10)).turns
        return said.get(topic) in {r for r, _ in words}, said.get(topic) in near

    assert await found("meadow") == (True, True)  # among the newest four
    assert await found("violin") == (False, False)  # older than the four the scope holds
    # the namespaces follow new turns and drop their oldest (a quarter past the window at most)
    for topic in TOPICS[6:]:
        (event,) = await ltm.record(alice, f"I talked about the {topic} today", "")
        said[topic] = event.id
        ltm.clock.advance(days=1)
    await ltm.engine.worker.fill_vectors()
    assert await found("orchid") == (True, True)
    (ns,) = [n for key, n in ltm.engine.keyword_index._cache.loaded() if key == (scope, Corpus.TURNS)]
    assert ns.size <= 5 and not ns.holds(said["granite"] * 8)
    # a message naming the day of an old turn still brings it
    day = ltm.clock() - timedelta(days=len(TOPICS))
    block = await ltm.block(alice, f"what did I talk about on {day:%B} {day.day}?")
    assert "violin" in block.text
    await ltm.engine.stop()
