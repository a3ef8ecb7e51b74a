"""The read path's statements find their rows by key or index, never by
walking a table or a whole conversation: the cost of a read must not grow
with the store. Every statement a read sends (bot replies among the
candidates, a named day, "last time we talked") is explained and sorted
with the list benchmark's rules (``bench/lists.py: plan_problems``).

A read once looked up the message each bot reply answers through the
session index, walking every turn of the conversation: 2,000 turns in one
chat cost 6 ms a read (docs/decisions.md#d67).
"""

from __future__ import annotations

import sqlite3

from bench.lists import PROBLEM_KINDS, StatementLog, explain, plan_problems


async def read_statements(ltm, origin, query: str) -> list[tuple[str, object]]:
    log = StatementLog(ltm.engine.db.read_pool, ltm.engine.db.sql_engine.sync_engine)
    with log:
        log.current = "read"
        await ltm.block(origin, query)
    return log.of("read")


async def test_no_read_statement_walks_a_table_or_a_conversation(ltm, origin):
    ltm.configure({"write_policy": {"mode": "auto"}, "summaries": {"enable": True, "min_events": 1}})
    a = origin("alice")
    replies = [
        ("Can you recommend a book about the sea?", "Try The Old Man and the Sea by Hemingway, a short classic."),
        ("I adopted a kitten named Miso", "Miso is a lovely name; kittens need two meals of wet food a day."),
        ("Any tips for Lisbon?", "Try the custard tarts at Belém and ride tram 28 across the old town."),
        ("我想学做饭", "可以先从番茄炒蛋开始，简单又好吃，周末试试看。"),
    ]
    for user, bot in replies * 3:
        await ltm.turn(a, user, bot)
        ltm.clock.advance(minutes=2)
    statements = []
    for query in ("Which book did you recommend about the sea?", "What did we talk about yesterday?",
                  "上周五我们聊了什么？", "Miso kitten food"):
        statements += await read_statements(ltm, a, query)
    assert any("ltm_events" in s for s, _ in statements)  # the turns were read
    assert plan_problems_of(ltm, statements) == {}


def plan_problems_of(ltm, statements: list[tuple[str, object]]) -> dict[str, dict[str, list[str]]]:
    """Statement (its start) -> its plan's problems, for those that have any."""
    conn = sqlite3.connect(ltm.engine.db.path)
    try:
        problems = {}
        for statement, params in statements:
            if not statement.lstrip().upper().startswith("SELECT"):
                continue
            found = plan_problems(statement, explain(conn, statement, params))
            bad = {k: found[k] for k in PROBLEM_KINDS if found[k]}
            if bad:
                problems[" ".join(statement.split())[:200]] = bad
    finally:
        conn.close()
    return problems


async def test_no_statement_of_an_extraction_batch_walks_a_table_or_a_scope(ltm, origin):
    """The known facts shown to the model with a batch, the writer's
    decisions and the evidence links: by key or index, whatever the scope's size."""
    ltm.configure({"write_policy": {"mode": "auto"}})
    a = origin("alice")
    await ltm.turn(a, "My name is Alice", "Nice to meet you, Alice.",
                   {"type": "profile", "fact": "Alice's name is Alice", "fact_key": "name"})
    said = [("I live in Paris", "Alice lives in Paris"), ("我喜欢喝茶", "Alice喜欢喝茶")]
    # enough near facts that SQLite weighs a walk of the scope against their keys
    said += [(f"I went to the Paris museum number {n}", f"Alice visited Paris museum number {n}") for n in range(12)]
    for n, (user, fact) in enumerate(said):
        ltm.clock.advance(minutes=5)
        await ltm.turn(a, user, "OK.", {"type": "episode", "fact": fact, "fact_key": f"fact_{n}"})
    log = StatementLog(ltm.engine.db.read_pool, ltm.engine.db.sql_engine.sync_engine)
    with log:
        log.current = "batch"
        ltm.clock.advance(minutes=5)
        await ltm.turn(a, "I moved from Paris to Berlin last week", "Berlin is a great city.",
                       {"type": "profile", "fact": "Alice lives in Berlin", "fact_key": "fact_0"})
    statements = log.of("batch")
    assert any("ltm_items" in s for s, _ in statements)
    assert plan_problems_of(ltm, statements) == {}
