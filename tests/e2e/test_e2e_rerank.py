"""A rerank provider of AstrBot's, against a real AstrBot: with
``rerank.provider_id`` set, each read's best candidates go through AstrBot's
``vllm_rerank`` provider (served by the fake model) before the block is
fitted; when the provider fails, the turn still gets its block, and the log
one warning (docs/decisions.md#d151)."""

from __future__ import annotations

import pytest

from astrbot_plugin_ltm.recalling.ranking import fuse
from devtools import fake_openai

pytestmark = pytest.mark.e2e

USER = "rita"
FACTS = {"I live in Lisbon": "Lisbon", "I like green tea": "green tea", "I like jazz": "jazz"}


@pytest.fixture(scope="module")
def bot(bot_factory):
    # The reranker gets RerankConfig.timeout_seconds (1 s), within what is left of the read's 3 s.
    config = {"write_policy": {"mode": "auto"}, "rerank": {"provider_id": "fake_rerank"}}
    with bot_factory("rerank", config, rerank=True) as b:
        for n, said in enumerate(FACTS):
            b.chat(said, USER, f"{USER}-{n}")
        b.wait_for(lambda: len([i for i in b.items(USER) if i["status"] == "active"]) >= len(FACTS),
                   what=f"{USER}'s facts learnt")
        yield b


def _reranks(bot, since: int) -> list[dict]:
    return [r["body"] for r in bot.requests(since) if r["path"].endswith("/rerank")]


def test_the_rerank_provider_reads_the_question_and_the_candidates_and_its_order_is_fused(bot):
    question = "What should I drink tonight?"
    bot.control(rerank_prefers="green tea")
    since = bot.mark()
    try:
        assert bot.chat(question, USER, f"{USER}-ask") == f"ECHO: {question}"
    finally:
        bot.control(rerank_prefers="")
    (call,) = _reranks(bot, since)
    assert call["query"] == question and call["model"] == "fake-rerank"
    documents = call["documents"]
    assert 2 <= len(documents) <= 60
    assert all(any(word in d for d in documents) for word in FACTS.values()), documents  # every fact read
    # The block's memories come in the order fused from the candidates' and
    # the provider's (fake_openai.rerank, through AstrBot's vllm_rerank).
    scores = {r["index"]: r["relevance_score"] for r in fake_openai.rerank(question, documents, "green tea")}
    fused = fuse([list(range(len(documents))), sorted(scores, key=lambda i: (-scores[i], i))])
    facts = [i for i, d in enumerate(documents) if not d.startswith(f"{USER}:")]  # the memories, not the turns
    expected = sorted(FACTS.values(), key=lambda word: min(-fused[i] for i in facts if word in documents[i]))
    (block,) = bot.memory_blocks(bot.turn_request(question, since))
    shown = [word for line in block["lines"] for word in FACTS.values() if word in line and "[" in line]
    retrieved = [word for i in facts for word in FACTS.values() if word in documents[i]]
    assert expected != retrieved, (expected, retrieved)  # the provider's order changes the block here
    assert shown == expected, (documents, block["text"])
    bot.assert_log_clean()


def test_a_failing_rerank_provider_leaves_the_block_in_the_retrievers_order_with_one_warning(bot):
    start = bot.log_size()
    bot.control(rerank="error")
    try:
        for n in range(2):
            question = f"Where do I live? ({n})"
            since = bot.mark()
            assert bot.chat(question, USER, f"{USER}-down-{n}") == f"ECHO: {question}"
            assert _reranks(bot, since)  # asked, and failed
            (block,) = bot.memory_blocks(bot.turn_request(question, since))
            assert "lives in Lisbon" in block["text"], block["text"]
    finally:
        bot.control(rerank="ok")
    question = "Where do I live, again?"
    since = bot.mark()
    bot.chat(question, USER, f"{USER}-back")
    assert _reranks(bot, since)
    log = bot.log_text(start)
    assert log.count("reranking unavailable") == 1, bot.diag("expected one warning while it was down")
    assert "reranking available again" in log, bot.diag("its return is not logged")
    bot.assert_log_clean(start, allow=("reranking unavailable",))
