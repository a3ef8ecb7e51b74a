"""A read looks for a summary's turns only among its candidate turns: a
summary of a busy day cites thousands, and the read only compares it with
the turns it found (storing.evidence.evidence_of)."""

from __future__ import annotations

import sqlite3

from sqlalchemy import create_engine

from astrbot_plugin_ltm.storing.evidence import evidence_of
from astrbot_plugin_ltm.storing.migrate import migrate


def test_a_summarys_evidence_is_its_turns_among_the_candidates_and_a_facts_is_whole(tmp_path):
    path = tmp_path / "links.db"
    migrate(str(path))
    conn = sqlite3.connect(path)
    for rowid in range(1, 6):
        conn.execute("INSERT INTO ltm_events (id, event_id, scope, scope_id, source_type, source_role, content, "
                     "created_at) VALUES (?, ?, 'user', 'qq:a', 'message', 'user', '{}', '2026-12-01 10:00:00')",
                     (rowid, f"e{rowid}"))
    for item_id, memory_id, kind in ((1, "day", "summary"), (2, "quiet", "summary"), (3, "fact", "profile")):
        conn.execute("INSERT INTO ltm_items (id, memory_id, scope, scope_id, type, fact, fact_key, confidence, "
                     "importance, evidence_count, status, created_at, updated_at) VALUES (?, ?, 'user', 'qq:a', ?, "
                     "'x', ?, 1, 1, 1, 'active', '2026-12-01', '2026-12-01')", (item_id, memory_id, kind, memory_id))
    conn.executemany("INSERT INTO ltm_summary_links (item_id, event_rowid) VALUES (?, ?)",
                     [(1, 1), (1, 2), (1, 3), (1, 4), (2, 5)])
    conn.executemany("INSERT INTO ltm_evidence (memory_id, event_id, extraction_method, extraction_meta, created_at) "
                     "VALUES (?, ?, 'llm', '{}', '2026-12-01')", [("fact", "e1"), ("fact", "e5")])
    conn.commit()
    conn.close()

    engine = create_engine(f"sqlite:///{path}")
    with engine.connect() as sql:
        found = evidence_of(sql, ["day", "quiet", "fact"], [2, 4])
    engine.dispose()
    assert found == {"day": frozenset({"e2", "e4"}), "quiet": frozenset(), "fact": frozenset({"e1", "e5"})}
