"""A store of the layout before migration 0017 (the schema at 0015: turns'
scoped tokens in ``ltm_events_fts``, float32 vectors with their scope in
``ltm_event_vectors`` and ``ltm_item_vectors``, JSON with ``\\u`` escapes)
moves into the compact layout in place, in batches, after start
(storing/relayout.py), reads alike before, during and after the move, and
goes on after the process stops at any batch (docs/decisions.md#d161).
``bench/relayout.py`` does the same to a store of a gigabyte, with kill -9."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from astrbot_plugin_ltm import LTMEngine
from astrbot_plugin_ltm.enums import Corpus
from astrbot_plugin_ltm.recalling.rows import load_evidence
from astrbot_plugin_ltm.scope import Scope
from astrbot_plugin_ltm.storing.keyword_rows import scoped_text, scoped_tokens
from astrbot_plugin_ltm.storing.migrate import migrate
from astrbot_plugin_ltm.storing.terms import decode, encode
from astrbot_plugin_ltm.storing.turns import (
    CONTEXT_WINDOW,
    PASSAGE_BREAK,
    PASSAGE_LAYOUT,
    shown_turns_among,
    turn_passages,
    turn_tokens,
)
from astrbot_plugin_ltm.storing.vector_rows import TURN_BITS, row_bytes
from astrbot_plugin_ltm.text import index_text, query_tokens

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
DIM = 32
TURNS = [
    ("alice", "We hiked up the mountains at dawn and saw the sunrise.", "That sounds wonderful, how high was it?"),
    ("bob", "我们周末去西湖划船，吃了西湖醋鱼。", "听起来很惬意！醋鱼好吃吗？"),
    ("alice", "My sister Jane moved to Lisbon for a job in robotics.", "Lisbon is lovely, does she like it?"),
    ("bob", "I am training for the Berlin marathon in September.", "Good luck with the training!"),
    ("alice", "Jane says the pastel de nata in Lisbon is the best.", "I would love to try one."),
    ("bob", "下个月我要去成都看大熊猫。", "成都的火锅也很有名。"),
]
QUERIES = ["mountains sunrise", "西湖 醋鱼", "Jane Lisbon robotics", "marathon Berlin", "成都 熊猫", "wonderful high"]
WITHHELD = 2  # the bot's question, withheld as small talk: never searched, yet the context of the answer after it


def embed(texts: list[str]) -> np.ndarray:
    """Deterministic bag-of-words vectors: texts sharing words are close."""
    out = np.zeros((len(texts), DIM), np.float32)
    for i, said in enumerate(texts):
        for token in re.findall(r"\w", said.lower()) + re.findall(r"\w+", said.lower()):
            out[i, int(hashlib.md5(token.encode()).hexdigest(), 16) % DIM] += 1
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


class Embedder:
    model_id = "hash-32"

    async def embed(self, texts: list[str]) -> np.ndarray:
        return embed(texts)


def stored(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def store_of_0015(path: Path) -> dict[int, tuple[str, dict[str, str]]]:
    """The turns, a memory and its audit row as the plugin wrote them at
    migration 0015; returns each turn's row id -> (scope id, content)."""
    assert migrate(str(path), target=15) == list(range(1, 16))
    conn = sqlite3.connect(path)
    turns: dict[int, tuple[str, dict[str, str]]] = {}
    before: dict[str, tuple[datetime, dict[str, str]]] = {}
    rowid = 0
    for n, (user, said, reply) in enumerate(TURNS):
        scope_id, session = f"test:{user}", f"test:FriendMessage:{user}"
        for role, words in (("user", said), ("assistant", reply)):
            rowid += 1
            at = START + timedelta(minutes=10 * n, seconds=rowid)
            content = {"text": words}
            conn.execute(
                "INSERT INTO ltm_events (id, event_id, scope, scope_id, source_type, source_role, content, "
                "platform_id, session_id, sender_id, sender_name, created_at, extraction_status, attempts, withheld) "
                "VALUES (?, ?, 'user', ?, 'message', ?, ?, 'test', ?, ?, ?, ?, 'done', 0, ?)",
                (rowid, str(uuid.uuid4()), scope_id, role, json.dumps(content), session, user, user.title(),
                 stored(at), rowid == WITHHELD))
            previous = before.get(session)
            context = previous[1] if previous is not None and at - previous[0] <= CONTEXT_WINDOW else None
            before[session] = (at, content)
            turns[rowid] = (scope_id, content)
            if rowid == WITHHELD:
                continue  # no keyword row, no vector
            conn.execute("INSERT INTO ltm_events_fts (rowid, scoped) VALUES (?, ?)",
                         (rowid, scoped_tokens("user", scope_id, turn_tokens(content, context))))
            vectors = embed(turn_passages("message", content, user.title() if role == "user" else "Assistant"))
            conn.execute("INSERT INTO ltm_event_vectors (event_rowid, scope, scope_id, model, dim, vector, updated_at) "
                         "VALUES (?, 'user', ?, 'hash-32', ?, ?, ?)",
                         (rowid, scope_id, DIM, vectors.astype(np.float32).tobytes(), stored(at)))
    fact = "Alice's sister Jane lives in Lisbon"
    conn.execute(
        "INSERT INTO ltm_items (id, memory_id, scope, scope_id, type, fact, fact_key, confidence, importance, "
        "evidence_count, status, awaiting_approval, created_at, updated_at, injected_count, tool_count, use_count) "
        "VALUES (1, 'm-1', 'user', 'test:alice', 'profile', ?, 'alice_sister_city', 0.9, 0.6, 1, 'active', 0, ?, ?, "
        "0, 0, 0)", (fact, stored(START), stored(START)))
    conn.execute("INSERT INTO ltm_items_fts (rowid, tokens, scoped) VALUES (1, ?, ?)",
                 (index_text(fact), scoped_text("user", "test:alice", fact)))
    conn.execute("INSERT INTO ltm_item_vectors (item_id, scope, scope_id, model, dim, vector, updated_at) "
                 "VALUES (1, 'user', 'test:alice', 'hash-32', ?, ?, ?)",
                 (DIM, embed([fact]).astype(np.float32).tobytes(), stored(START)))
    # bob's session summary, linked to each of his turns as 0015 linked it (a row of ltm_evidence each)
    conn.execute(
        "INSERT INTO ltm_items (id, memory_id, scope, scope_id, type, fact, fact_key, confidence, importance, "
        "evidence_count, status, awaiting_approval, created_at, updated_at, valid_from, valid_to, injected_count, "
        "tool_count, use_count) VALUES (2, 'm-2', 'user', 'test:bob', 'summary', 'Bob rowed on West Lake', "
        "'summary_session_20250301t120000', 0.8, 0.6, 6, 'active', 0, ?, ?, ?, ?, 0, 0, 0)",
        (stored(START), stored(START), stored(START), stored(START + timedelta(hours=1))))
    for rowid, (scope_id, _) in turns.items():
        if scope_id == "test:bob":
            conn.execute("INSERT INTO ltm_evidence (memory_id, event_id, extraction_method, extraction_meta, "
                         "created_at) SELECT 'm-2', event_id, 'summary', '{\"level\": \"session\"}', ? "
                         "FROM ltm_events WHERE id = ?", (stored(START), rowid))
    conn.execute("INSERT INTO ltm_audit (created_at, action, memory_id, scope, scope_id, actor, reason, detail) "
                 "VALUES (?, 'create', 'm-1', 'user', 'test:alice', 'system:extractor', '', ?)",
                 (stored(START), json.dumps({"fact": "杰恩住在里斯本"})))
    # what the plugin's start recorded at 0015 (storing.keyword_rows.match_turn_passages)
    conn.execute("INSERT INTO ltm_index_builds (name, built_with, built_at) VALUES ('turn_passages', ?, ?)",
                 (PASSAGE_LAYOUT, stored(START)))
    conn.commit()
    conn.close()
    return turns


async def open_engine(path: Path, tmp_path: Path) -> LTMEngine:
    engine = LTMEngine(create_async_engine(f"sqlite+aiosqlite:///{path}"),
                       {"write_policy": {"mode": "auto"}}, embedder=Embedder(), data_dir=tmp_path / "plugin")
    await engine.start(background=False)  # the move is run by the test, batch by batch
    return engine


async def reads(engine: LTMEngine) -> dict[str, list[int]]:
    """What each query finds, by keywords and by meaning, from namespaces
    loaded afresh from the store as it is now."""
    engine.keyword_index.clear()
    engine.vector_index.clear()
    scopes = [Scope("user", "test:alice"), Scope("user", "test:bob")]
    found: dict[str, list[Any]] = {}
    for query in QUERIES:
        hits = await engine.keyword_index.search(scopes, Corpus.TURNS, query_tokens(query), 3)
        found[f"keywords {query}"] = [rowid for rowid, _ in hits]
        near = (await engine.embeddings.query(scopes, query, 3)).turns
        found[f"meaning {query}"] = sorted(near, key=lambda r: (-round(near[r], 2), r))[:2]
    memories = await engine.keyword_index.search(scopes, Corpus.MEMORIES, query_tokens("Jane Lisbon"), 3)
    found["memory"] = [rowid for rowid, _ in memories]
    every = list(range(1, 2 * len(TURNS) + 1))
    found["summary evidence"] = sorted(
        (await engine.db.run(lambda conn: load_evidence(conn, ["m-2"], every))).get("m-2", frozenset()))
    # in mode shadow a turn is shown only when a live memory cites it: bob's, through the summary
    found["shown"] = sorted(r[0] for r in await engine.db.run(lambda conn: shown_turns_among(conn, every, False)))
    return found


async def legacy_tables(engine: LTMEngine) -> set[str]:
    async with engine.db.read() as session:
        return set((await session.execute(text(
            "SELECT name FROM sqlite_master WHERE name IN ('ltm_events_fts', 'ltm_event_vectors')"))).scalars())


async def test_a_store_of_the_0015_layout_moves_in_place_in_batches_and_reads_alike_throughout(tmp_path):
    path = tmp_path / "data_v4.db"
    turns = store_of_0015(path)
    engine = await open_engine(path, tmp_path)
    assert await legacy_tables(engine) == {"ltm_events_fts", "ltm_event_vectors"}  # 0017 moved nothing itself
    before = await reads(engine)
    assert all(before.values()), before  # every query finds its turns in the old layout
    assert before["keywords 西湖 醋鱼"][0] == 3 and before["memory"] == [1]
    assert len(before["summary evidence"]) == 6 and before["shown"] == [3, 4, 7, 8, 11, 12]
    assert before["keywords wonderful high"] == [5]  # by the withheld question before it

    engine.relayout._size = 2  # small batches: the store is read between them
    for _ in range(5):
        assert await engine.relayout.step()
        assert await reads(engine) == before  # half moved, half not: found alike
    await engine.stop()

    # A new process (the first one gone after its fifth batch) goes on where it stopped.
    engine = await open_engine(path, tmp_path)
    assert await engine.relayout.needed()
    progress = await engine.relayout.run()
    assert progress.done and not await engine.relayout.needed()
    assert await legacy_tables(engine) == set()
    assert await reads(engine) == before

    async with engine.db.read() as session:
        rows = {r[0]: r[1:] for r in await session.execute(text(
            "SELECT e.id, t.terms, e.content FROM ltm_events e LEFT JOIN ltm_turn_terms t ON t.event_rowid = e.id"))}
        vectors = dict((await session.execute(text("SELECT event_rowid, vector FROM ltm_turn_vectors"))).all())
        memory = (await session.execute(text("SELECT vector FROM ltm_item_vectors"))).scalar_one()
        detail = (await session.execute(text("SELECT detail FROM ltm_audit WHERE memory_id = 'm-1'"))).scalar_one()
    for rowid, (_, content) in turns.items():
        terms, raw = rows[rowid]
        assert terms == encode(turn_tokens(content), PASSAGE_BREAK)  # its own tokens, as their hashes
        assert "\\u" not in raw and json.loads(raw) == content  # UTF-8, the same content
        # in TURN_BITS bits a component (a memory's: int8, a byte a component)
        assert rowid == WITHHELD or len(vectors[rowid]) % row_bytes(DIM, TURN_BITS) == 0
    assert len(memory) == DIM and "\\u" not in detail and json.loads(detail) == {"fact": "杰恩住在里斯本"}
    async with engine.db.read() as session:  # the summary's links moved to their own table
        assert (await session.execute(text("SELECT count(*) FROM ltm_evidence"))).scalar_one() == 0
        assert (await session.execute(text("SELECT count(*) FROM ltm_summary_links"))).scalar_one() == 6
    assert all(len(decode(rows[r][0])) for r in turns)
    await engine.stop()


async def test_a_batch_that_fails_midway_moves_nothing_and_is_done_again(tmp_path, monkeypatch):
    path = tmp_path / "data_v4.db"
    store_of_0015(path)
    engine = await open_engine(path, tmp_path)
    original = engine.relayout._steps[:]
    name, prepare, apply = original[0]

    async def fails_after_writing(session, batch):
        await apply(session, batch)  # written, then the process fails
        raise RuntimeError("disk I/O error")

    engine.relayout._steps[0] = (name, prepare, fails_after_writing)
    with pytest.raises(RuntimeError):
        await engine.relayout.step()
    async with engine.db.read() as session:
        moved = (await session.execute(text("SELECT count(*) FROM ltm_turn_vectors"))).scalar_one()
        left = (await session.execute(text("SELECT count(*) FROM ltm_event_vectors"))).scalar_one()
    assert (moved, left) == (0, 2 * len(TURNS) - 1)  # rolled back whole
    engine.relayout._steps = original
    await engine.relayout.run()
    async with engine.db.read() as session:
        assert (await session.execute(text("SELECT count(*) FROM ltm_turn_vectors"))).scalar_one() == 2 * len(TURNS) - 1
    await engine.stop()


async def test_a_new_store_starts_in_the_compact_layout_with_nothing_to_move(tmp_path):
    engine = await open_engine(tmp_path / "new.db", tmp_path)
    assert await legacy_tables(engine) == set() and not await engine.relayout.needed()
    await engine.stop()
