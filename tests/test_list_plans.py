"""The dashboard's item, event and audit lists read a page from an index,
never the whole table (issue 5). ``bench/lists.py`` sends the benchmark's
matrix of list requests through ``MemoryAPI``, records every statement and
explains it; here the same matrix runs on a small store and each request's
plan is pinned:

- no row query or count scans an ``ltm_`` table without an index;
- no row query sorts its rows in a temp b-tree (relevance ranking of
  keyword matches aside: no index can deliver bm25, see ``bench/lists.py``);
- no statement that names its rows by id reads them through another index.

The planner has no statistics here (nothing runs ANALYZE on the plugin's
tables; the test checks there are none), so it plans exactly as it does for
the same statements on a store of 100,000 items: the size of the store does
not enter. ``python -m bench.scale`` runs the matrix at that size and prints
the timings.

Requests whose plan is known to be wrong in the core are listed in
``KNOWN_PROBLEMS`` with the reason: the test fails when one of them is
fixed too, so the list is kept honest. Walks along an index that test a
filter row by row are allowed but pinned as well (``FILTERED_WALKS``).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import insert

from astrbot_plugin_ltm.doors.api import MemoryAPI
from astrbot_plugin_ltm.enums import MEMORY_TYPES
from astrbot_plugin_ltm.storing.keyword_rows import index_turns_after, rebuild_fact_rows
from astrbot_plugin_ltm.storing.tables import MemoryAudit, MemoryEvent, MemoryEvidence, MemoryItem
from bench.lists import PROBLEM_KINDS, REPORTED_KINDS, Request, measure_lists, plan_problems

BIG = ("user", "qq:big")
BIG_SESSION = "qq:FriendMessage:big"
SMALL = ("user", "qq:small03")
WORD = "violin"
VOCABULARY = ("harbor", "violin", "tulip", "granite", "lantern", "meadow", "copper", "saffron", "glacier", "orchid",
              "falcon")

WHOLE_STORE_SORT = "no index of every memory by confidence, importance or use (migration 0019)"
AUDIT_FILTER = "no index of the audit rows by action or actor (migration 0019)"

# request name -> {problem kind: why}: requests known to read a whole table
# or sort rows. An entry needs its reason.
KNOWN_PROBLEMS: dict[str, dict[str, str]] = {
    # Its rows walk the turns by time (nearly all are done); only the count
    # reads every row.
    "events status=done": {"full_scans": "only unfinished turns are indexed by status: an index of every turn's "
                                         "status cost 110 B a turn (migration 0018, issue 39)"},
    # Whole-store lists by a score sort every memory: one pass over ltm_items,
    # as long as the store has memories (not turns): 74k memories of a
    # 400k-turn store in 40-90 ms. Their three indexes cost 6 MB there, 15 B a
    # turn (migration 0019, decisions.md#d172); one scope's or one status's
    # lists still read an index (the requests below that are not listed).
    **{f"items sort={sort}": {"full_scans": WHOLE_STORE_SORT, "temp_sorts": WHOLE_STORE_SORT}
       for sort in ("confidence", "importance", "least_used", "most_used")},
    "items min_confidence=0.9 sort=confidence": {"full_scans": WHOLE_STORE_SORT, "temp_sorts": WHOLE_STORE_SORT},
    # An operator's filter by action or actor: the page walks the newest rows
    # (FILTERED_WALKS), the count reads every audit row (126k rows of a
    # 400k-turn store: ~35 ms). Their indexes cost 22 MB there, 56 B a turn.
    **{name: {"full_scans": AUDIT_FILTER} for name in ("audit action=create", "audit action=status",
                                                        "audit actor=operator:nobody")},
}

# Walks along an index in the requested order that test a filter row by row
# (reported by bench/lists.py, not problems by the definition above): each
# reads as many rows as it takes to fill a page, all of them when the value
# is rare. Pinned so a new one is noticed; the figures are at 100k items
# (python -m bench.scale --sizes 100000).
FILTERED_WALKS: dict[str, str] = {
    "items min_confidence=0.9": "ix_ltm_items_updated, testing confidence (a quarter of the items pass: 3 ms)",
    "events status=done": "ix_ltm_events_created, testing the status (nearly every turn is done)",
    **{name: "ix_ltm_audit_created, testing the action or actor (a rare one reads them all: 85 ms at 126k rows)"
       for name in ("audit action=create", "audit action=status", "audit actor=operator:nobody")},
}


async def build_store(ltm, origin) -> dict[str, int]:
    """A few memories through the real pipeline (events, evidence, the
    writer's audit rows, an approval queue, an operator's edit), then a big
    scope of 400 items and 12 small scopes of 5, written in bulk like the
    scale benchmark's store: each item with its recorded turn, evidence link
    and ``create`` audit row. Returns the bulk items per scope."""
    await ltm.turn(origin("alice"), "I live in Paris", "Nice.",
                   {"type": "profile", "fact": "Alice lives in Paris", "fact_key": "city"})
    ltm.clock.advance(minutes=1)
    await ltm.turn(origin("bob", group="g1"), "我喜欢喝茶", "好的",
                   {"type": "preference", "fact": "Bob喜欢喝茶", "fact_key": "tea"})
    ltm.configure({"write_policy": {"mode": "manual"}})
    ltm.clock.advance(minutes=1)
    await ltm.turn(origin("carol"), "I play the violin", "Lovely.",
                   {"type": "profile", "fact": "Carol plays the violin", "fact_key": "instrument"})
    ltm.configure({"write_policy": {"mode": "auto"}})
    paris = await ltm.item(MemoryItem.fact_key == "city")
    await ltm.engine.admin.update_item(paris.memory_id, {"status": "disabled"}, "operator:root")

    plan = [(BIG, 400)] + [(("user", f"qq:small{n:02d}"), 5) for n in range(12)]
    items, events, links, audits = [], [], [], []
    k = 0
    for (kind, scope_id), n in plan:
        sender = scope_id.split(":", 1)[1]
        for i in range(n):
            k += 1
            when = ltm.clock() - timedelta(hours=k * 7 % 1000, minutes=k)
            memory_id, event_id = f"00000000-0000-4000-8000-{k:012d}", f"00000000-0000-4000-9000-{k:012d}"
            fact = (f"{sender.capitalize()} mentioned {VOCABULARY[k % len(VOCABULARY)]} "
                    f"and {VOCABULARY[k * 7 % len(VOCABULARY)]} on day {k}")
            status = "shadow" if k % 17 == 0 else "disabled" if k % 23 == 0 else "active"
            items.append({
                "memory_id": memory_id, "scope": kind, "scope_id": scope_id, "type": MEMORY_TYPES[k % 5],
                "fact": fact, "fact_key": f"bulk_{i}", "confidence": round(0.5 + (k * 37 % 50) / 100, 2),
                "importance": round((k * 53 % 100) / 100, 2), "evidence_count": 1, "ttl_days": None,
                "status": status, "awaiting_approval": k % 41 == 0, "created_at": when, "updated_at": when,
            })
            events.append({
                "event_id": event_id, "scope": kind, "scope_id": scope_id, "source_type": "message",
                "source_role": "user", "content": {"text": fact}, "platform_id": "qq",
                "session_id": f"qq:FriendMessage:{sender}", "sender_id": sender, "sender_name": sender,
                "created_at": when, "extraction_status": "pending" if k % 13 == 0 else "done", "attempts": 0,
            })
            links.append({"memory_id": memory_id, "event_id": event_id, "extraction_method": "llm_extract",
                          "extraction_meta": {}, "created_at": when})
            audits.append({"created_at": when, "action": "create", "memory_id": memory_id, "scope": kind,
                           "scope_id": scope_id, "session_id": f"qq:FriendMessage:{sender}",
                           "actor": "system:extractor", "reason": "mode auto: thresholds met", "detail": {}})
    async with ltm.engine.db.write() as session:
        await session.execute(insert(MemoryItem), items)
        await session.execute(insert(MemoryEvent), events)
        await session.execute(insert(MemoryEvidence), links)
        await session.execute(insert(MemoryAudit), sorted(audits, key=lambda a: a["created_at"]))
        await rebuild_fact_rows(session)
        await index_turns_after(session, 0)
    return {scope_id: n for (_, scope_id), n in plan}


@pytest.fixture
async def lists(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}})
    sizes = await build_store(ltm, origin)
    api = MemoryAPI(ltm.engine, lambda: ltm.raw_config, None)
    result = await measure_lists(ltm.engine, api, BIG, BIG_SESSION, repeats=0, small_scope=SMALL,
                                 search_words=[WORD], rare_action="status", rare_actor="operator:nobody")
    stats = await ltm.sql("SELECT count(*) FROM sqlite_master WHERE name LIKE 'sqlite_stat%'")
    return ltm, sizes, result, stats[0][0]


async def test_every_list_request_answers_with_the_right_totals(lists):
    ltm, sizes, result, _ = lists
    assert result["errors"] == []
    requests = result["requests"]
    assert len(requests) >= 35 and all(r["statements"] for r in requests.values())
    everything = (await ltm.sql("SELECT count(*) FROM ltm_items"))[0][0]
    assert requests["items"]["total"] == everything == sum(sizes.values()) + 3
    assert requests["items page 200 of 50"]["rows"] == 0  # past the end: an empty page, not an error
    assert requests["items big scope sort=updated"]["total"] == sizes[BIG[1]]
    assert requests["items small scope"]["total"] == requests["items small scope"]["rows"] == sizes[SMALL[1]]
    assert requests["items status=pending"]["total"] == (
        await ltm.sql("SELECT count(*) FROM ltm_items WHERE awaiting_approval"))[0][0] > 1
    assert requests[f"items q={WORD}"]["total"] > requests[f"items q={WORD} big scope"]["total"] > 0
    assert requests["events session_id"]["total"] == sizes[BIG[1]]
    assert requests["audit"]["total"] == (await ltm.sql("SELECT count(*) FROM ltm_audit"))[0][0] > everything
    assert requests["audit memory_id"]["total"] == 1
    assert requests["audit actor=operator:nobody"]["total"] == 0


async def test_list_requests_read_pages_from_indexes(lists):
    _, _, result, stats = lists
    # Without statistics the planner plans as it would for 100k rows; with
    # them (ANALYZE) it may choose otherwise — see the module docstring.
    assert stats == 0
    unexpected, fixed = [], []
    for name, r in result["requests"].items():
        found = {kind: r[kind] for kind in PROBLEM_KINDS if r[kind]}
        known = KNOWN_PROBLEMS.get(name, {})
        for kind, steps in found.items():
            if kind not in known:
                unexpected += [f"{name}: {kind}: {step}" for step in steps]
        fixed += [f"{name}: {kind} ({why})" for kind, why in known.items() if kind not in found]
    assert not unexpected, "list requests reading whole tables or sorting rows:\n" + "\n".join(unexpected)
    assert not fixed, "fixed — remove from KNOWN_PROBLEMS:\n" + "\n".join(fixed)
    assert set(KNOWN_PROBLEMS) <= set(result["requests"])


async def test_filtered_walks_are_the_known_ones(lists):
    _, _, result, _ = lists
    walking = {name for name, r in result["requests"].items() if any("(filtered" in w for w in r["walks"])}
    assert walking == set(FILTERED_WALKS), {
        "new": {n: result["requests"][n]["walks"] for n in walking - set(FILTERED_WALKS)},
        "gone": sorted(set(FILTERED_WALKS) - walking),
    }


async def test_paging_a_whole_list_walks_an_index_in_order(lists):
    _, _, result, _ = lists
    r = result["requests"]
    for name in ("items", "items sort=created", "items big scope sort=updated", "items big scope sort=confidence",
                 "items big scope sort=importance", "items big scope sort=least_used",
                 "items status=active sort=confidence", "events", "events big scope", "events session_id", "audit",
                 "audit big scope", "audit session_id"):
        # the page's rows; the memories' contexts (where each was said, audience.py) are a look-up by id
        rows = [s for s in r[name]["statements"] if not s["count"] and "ltm_item_contexts" not in s["sql"]]
        assert len(rows) == 1 and any("USING INDEX" in step for step in rows[0]["plan"]), (name, rows)


async def test_a_failed_request_is_an_error_not_a_figure(make_ltm):
    ltm = await make_ltm()
    api = MemoryAPI(ltm.engine, lambda: ltm.raw_config, None)
    result = await measure_lists(ltm.engine, api, BIG, BIG_SESSION, repeats=2, requests=[
        Request("bad sort", "list_items", {"sort": "random"}), Request("items", "list_items", {})])
    assert result["errors"] == ["bad sort: HTTP 400: sort must be one of updated, confidence, importance, created, "
                                "least_used, most_used"]
    assert result["requests"]["bad sort"]["p50_ms"] is None
    assert result["requests"]["items"]["total"] == 0 and result["requests"]["items"]["p50_ms"] is not None


# -- the classification itself, on plans as SQLite prints them ------------------------

ROWS = "SELECT t.id, t.fact FROM ltm_items AS t WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?"


@pytest.mark.parametrize(
    ("statement", "plan", "expected"),
    [
        ("SELECT count(*) AS count_1 FROM ltm_items WHERE ltm_items.type = ?", ["SCAN ltm_items"],
         {"full_scans": 1}),
        ("SELECT count(*) AS count_1 FROM ltm_items WHERE 1 = 1",
         ["SCAN ltm_items USING COVERING INDEX ix_ltm_items_importance"], {}),
        (ROWS.format(where="1 = 1", order="t.updated_at DESC, t.id DESC"),
         ["SCAN t USING INDEX ix_ltm_items_updated"], {}),
        (ROWS.format(where="t.status = ?", order="t.confidence DESC, t.id DESC"),
         ["SEARCH t USING INDEX ix_ltm_items_status_updated (status=?)", "USE TEMP B-TREE FOR ORDER BY"],
         {"temp_sorts": 1}),
        (ROWS.format(where="t.status = ?", order="t.confidence DESC, t.id DESC"),
         ["SEARCH t USING INDEX ix_a (status=?)", "USE TEMP B-TREE FOR RIGHT PART OF ORDER BY"],
         {"temp_sorts": 1}),
        (ROWS.format(where="t.type = ?", order="t.updated_at DESC, t.id DESC"),
         ["SCAN t USING INDEX ix_ltm_items_updated"], {"walks": 1}),
        (ROWS.format(where="t.scope = ? AND t.scope_id = ? AND t.status = ?", order="t.updated_at DESC"),
         ["SEARCH t USING INDEX ix_ltm_items_status_updated (status=?)"], {"walks": 1}),
        (ROWS.format(where="t.scope = ? AND t.scope_id = ?", order="t.updated_at DESC"),
         ["SEARCH t USING INDEX ix_ltm_items_scope_updated (scope=? AND scope_id=?)"], {}),
        ("SELECT a.id FROM ltm_audit a WHERE 1 = 1 ORDER BY a.id DESC LIMIT ? OFFSET ?",
         ["SCAN a"], {"walks": 1}),
        ("SELECT a.id FROM ltm_audit a WHERE 1 = 1 ORDER BY a.created_at DESC",
         ["SCAN a", "USE TEMP B-TREE FOR ORDER BY"], {"full_scans": 1, "temp_sorts": 1}),
        ("SELECT ltm_items.id FROM ltm_items WHERE ltm_items.id IN (?, ?) AND ltm_items.status = ?",
         ["SEARCH ltm_items USING INDEX ix_ltm_items_status_updated (status=?)"], {"ignored_ids": 1}),
        ("SELECT ltm_items.id FROM ltm_items WHERE ltm_items.id IN (?, ?) AND +ltm_items.status = ?",
         ["SEARCH ltm_items USING INTEGER PRIMARY KEY (rowid=?)"], {}),
        # rows named by a key, the table unsaid, found through a status or a type index: the whole store's
        ("SELECT id FROM ltm_items WHERE id IN (SELECT c.item_id FROM ltm_item_contexts c) AND status = ?",
         ["SEARCH ltm_items USING INDEX ix_ltm_items_status_use (status=?)", "LIST SUBQUERY 1",
          "SEARCH c USING PRIMARY KEY (scope=? AND scope_id=?)"], {"ignored_ids": 1}),
        ("SELECT memory_id FROM ltm_items WHERE type = 'summary' AND memory_id IN (SELECT value FROM json_each(?))",
         ["SEARCH ltm_items USING INDEX ix_ltm_items_type_updated (type=?)"], {"ignored_ids": 1}),
        ("SELECT memory_id FROM ltm_items WHERE +type = 'summary' AND memory_id IN (SELECT value FROM json_each(?))",
         ["SEARCH ltm_items USING INDEX sqlite_autoindex_ltm_items_1 (memory_id=?)"], {}),
        ("SELECT id FROM ltm_items WHERE id IN (SELECT value FROM json_each(?)) UNION ALL SELECT id FROM ltm_items "
         "WHERE scope = ? AND scope_id = ? AND status = ?",
         ["SEARCH ltm_items USING INTEGER PRIMARY KEY (rowid=?)",
          "SEARCH ltm_items USING INDEX ix_ltm_items_scope_status (scope=? AND scope_id=? AND status=?)"], {}),
        # the rows a statement names, sorted: those only
        ("SELECT id FROM ltm_items WHERE +status = ? AND (memory_id IN (SELECT v.memory_id FROM ltm_evidence v "
         "WHERE v.event_id = ?) OR id IN (SELECT ?)) ORDER BY importance DESC LIMIT ?",
         ["MULTI-INDEX OR", "  INDEX 1", "    LIST SUBQUERY 1",
          "      SEARCH v USING INDEX ix_ltm_evidence_event (event_id=?)",
          "    SEARCH ltm_items USING INDEX sqlite_autoindex_ltm_items_1 (memory_id=?)", "  INDEX 2",
          "    SEARCH ltm_items USING INTEGER PRIMARY KEY (rowid=?)", "USE TEMP B-TREE FOR ORDER BY"], {}),
        # ... but a union's arm that sorts a whole scope is a sort, whatever another arm names
        ("SELECT id FROM ltm_items WHERE id IN (SELECT value FROM json_each(?)) UNION ALL SELECT * FROM (SELECT id "
         "FROM ltm_items WHERE scope = ? AND scope_id = ? AND status = ? ORDER BY importance DESC LIMIT ?)",
         ["COMPOUND QUERY", "  LEFT-MOST SUBQUERY", "    SEARCH ltm_items USING INTEGER PRIMARY KEY (rowid=?)",
          "  UNION ALL", "    CO-ROUTINE (subquery-2)",
          "      SEARCH ltm_items USING INDEX ix_ltm_items_scope_confidence (scope=? AND scope_id=?)",
          "      USE TEMP B-TREE FOR ORDER BY", "    SCAN (subquery-2)"], {"temp_sorts": 1}),
        ("SELECT a.id FROM ltm_items a JOIN ltm_evidence e ON e.memory_id = a.memory_id",
         ["SCAN a", "SEARCH e USING AUTOMATIC COVERING INDEX (memory_id=?)"], {"full_scans": 2}),
        ("SELECT rowid FROM ltm_items_fts WHERE ltm_items_fts MATCH ? ORDER BY bm25(ltm_items_fts) LIMIT ?",
         ["SCAN ltm_items_fts VIRTUAL TABLE INDEX 0:M1", "USE TEMP B-TREE FOR ORDER BY"], {"rank_sorts": 1}),
        ("SELECT term, doc FROM ltm_items_fts_vocab WHERE term IN (?, ?)",
         ["SCAN ltm_items_fts_vocab VIRTUAL TABLE INDEX 1:"], {}),
        ("SELECT name FROM sqlite_master ORDER BY name", ["SCAN sqlite_master", "USE TEMP B-TREE FOR ORDER BY"],
         {"temp_sorts": 1}),
        ("WITH top AS (SELECT rowid AS id FROM ltm_items_fts WHERE ltm_items_fts MATCH ?) "  # noqa: ISC004
         "SELECT x.id FROM top CROSS JOIN ltm_items x ON x.id = top.id",
         ["SCAN top", "BLOOM FILTER ON x (id=?)", "SEARCH x USING INTEGER PRIMARY KEY (rowid=?)"],
         {"full_scans": 1}),
    ],
)
def test_plan_problems_sorts_plan_steps(statement, plan, expected):
    found = plan_problems(statement, plan)
    assert set(found) == {*PROBLEM_KINDS, *REPORTED_KINDS}
    assert {kind: len(steps) for kind, steps in found.items() if steps} == expected
