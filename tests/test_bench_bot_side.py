"""bench.locomo on data with a ``bot_speaker`` (MemoryBank-CN's shape): the
bot's turns are replayed as the bot's replies, and recall is reported by
``evidence_role``. A tiny fixture, the HashEmbedder and the estimate
counter: nothing is loaded."""

from __future__ import annotations

import asyncio
import sqlite3

from astrbot_plugin_ltm.recalling.tokens import EstimateCounter
from bench import locomo
from bench.embedders import HashEmbedder

FIXTURE = [{
    "sample_id": "bot-1",
    "bot_speaker": "AI伴侣",
    "conversation": {
        "speaker_a": "张三",
        "speaker_b": "AI伴侣",
        "session_1_date_time": "10:00 am on 27 April, 2023",
        "session_1": [
            {"speaker": "AI伴侣", "dia_id": "D1:1", "text": "早上好！今天想聊点什么？"},
            {"speaker": "张三", "dia_id": "D1:2", "text": "我最近在学做川菜，你有什么书可以推荐吗？"},
            {"speaker": "AI伴侣", "dia_id": "D1:3", "text": "我推荐你读《小王子》，这本书很温暖。"},
            {"speaker": "张三", "dia_id": "D1:4", "text": "我养了一只叫豆豆的猫。"},
        ],
    },
    "observation": {"session_1_observation": {"张三": [["张三在学做川菜。", "D1:2"]]}},
    "qa": [
        {"question": "你给我推荐过哪本书？", "answer": "《小王子》", "evidence": ["D1:3"], "category": 4,
         "evidence_role": "assistant"},
        {"question": "我的猫叫什么名字？", "answer": "豆豆", "evidence": ["D1:4"], "category": 4,
         "evidence_role": "user"},
    ],
}]


def test_bot_turns_pair_with_the_persons_turn_before_them():
    (conv,) = locomo.load_conversations(FIXTURE)
    assert conv.bot_speaker == "AI伴侣" and conv.user == "张三" and conv.language == "zh"
    assert [q.evidence_role for q in conv.questions] == ["assistant", "user"]
    pairs = [(a.dia_id if a else None, b.dia_id if b else None)
             for a, b in locomo.exchanges(conv, conv.sessions[0])]
    # a greeting before anyone spoke is a reply to nothing; the last turn has no reply
    assert pairs == [(None, "D1:1"), ("D1:2", "D1:3"), ("D1:4", None)]


def test_without_a_bot_speaker_every_turn_is_a_persons():
    (conv,) = locomo.load_conversations([{**FIXTURE[0], "bot_speaker": None}])
    assert conv.bot_speaker is None
    assert all(b is None for _, b in locomo.exchanges(conv, conv.sessions[0]))


def test_replay_records_the_bots_turns_as_its_replies_and_reports_by_role(tmp_path):
    convs = locomo.load_conversations(FIXTURE)
    db = tmp_path / "bot.db"
    doc = asyncio.run(locomo.run(convs, embedder=HashEmbedder(), counter=EstimateCounter(), db_path=db))
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT source_role, sender_id, json_extract(content, '$.text') FROM ltm_events "
                            "ORDER BY id").fetchall()
    assert [(role, sender) for role, sender, _ in rows] == [
        ("assistant", None), ("user", "张三"), ("assistant", None), ("user", "张三")]
    assert rows[2][2] == "我推荐你读《小王子》，这本书很温暖。"
    ours = doc["ours"]
    assert set(ours["by_evidence_role"]) == {"assistant", "user"}
    assert ours["by_evidence_role"]["user"]["n"] == 1 and ours["by_evidence_role"]["assistant"]["n"] == 1
    assert ours["by_evidence_role"]["user"]["evidence_recall"] == 1.0
    # the recommendation is reached through the bot's own line, and its tokens are counted
    assert ours["by_evidence_role"]["assistant"]["evidence_recall"] == 1.0
    assert ours["mean_bot_tokens"] > 0 and 0 < ours["bot_token_share"] < 1
    assert doc["settings"]["bot_speakers"] == ["AI伴侣"] and doc["settings"]["languages"] == ["zh"]
    # the baselines search every turn, the bot's too
    assert doc["baselines"]["bm25_turns"]["by_evidence_role"]["assistant"]["evidence_recall"] == 1.0
    assert "by evidence role" in locomo.table(doc)
