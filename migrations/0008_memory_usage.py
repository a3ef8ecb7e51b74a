"""How often each memory was used, and when last.

``ltm_items`` gains ``injected_count`` (put into a memory block before a
model call), ``tool_count`` (returned by the memory search tool),
``use_count`` (the two together, kept as one column so the operators' lists
can sort on it through an index) and ``last_used_at``. Counted in memory
by ``recalling/usage.py`` and added in batches; never part of
``updated_at``, which says when the memory itself changed.

Adding columns with constant defaults rewrites no rows (SQLite stores the
default in the schema), so this is instant on any store. Existing memories
start at 0, never used.
"""

STATEMENTS = [
    "ALTER TABLE ltm_items ADD COLUMN injected_count INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE ltm_items ADD COLUMN tool_count INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE ltm_items ADD COLUMN use_count INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE ltm_items ADD COLUMN last_used_at DATETIME",
    # the operators' lists sorted by use (operating.queries.SORTS), whole store or one scope
    "CREATE INDEX ix_ltm_items_use ON ltm_items (use_count, last_used_at)",
    "CREATE INDEX ix_ltm_items_scope_use ON ltm_items (scope, scope_id, use_count, last_used_at)",
    "CREATE INDEX ix_ltm_items_status_use ON ltm_items (status, use_count, last_used_at)",
]


def upgrade(conn) -> None:
    for statement in STATEMENTS:
        conn.execute(statement)
