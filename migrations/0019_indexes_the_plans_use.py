"""Only the indexes a query plan uses (issue 39, docs/decisions.md#d172).

On a 200,000-turn soak the memories' and audit rows' indexes held 122 MB
(305 bytes a recorded turn), several of them read by no hot query:

- ``ltm_audit`` by action, by actor and by scope and action: the rate limits
  count a scope's or session's writes through ``ix_ltm_audit_scope_created``
  and ``ix_ltm_audit_session_created``, the drift monitor and the hour's
  writes a time range through ``ix_ltm_audit_created``; an operator's filter
  by action or actor walks the newest rows. ``ix_ltm_audit_memory`` keeps
  only the memory id: a memory's few rows are sorted after the look-up.
- ``ltm_items`` by confidence, importance and use over the whole store: a
  list of every memory by one of those sorts the memories (the list of one
  scope or one status still reads its index). By key alone: every look-up
  by key names the scope too, and reads ``uq_ltm_items_scope_key``.
- the approval queue and the successor links become partial: only the
  memories awaiting approval, only the superseded ones.

Dropping and building indexes holds the write lock for as long as it takes:
1 to 3 s on a store of 400,000 turns (1 GB). As in migration 0018, a
store of more than SMALL_STORE turns keeps its indexes and
docs/operating.md#storage gives the statements to run by hand when the bot
is idle. Every query works with either set.
"""

# Keep in step with storing.tables.AWAITING.
AWAITING = "awaiting_approval IS 1"

SMALL_STORE = 20_000

STATEMENTS = [
    "DROP INDEX IF EXISTS ix_ltm_audit_action",
    "DROP INDEX IF EXISTS ix_ltm_audit_actor",
    "DROP INDEX IF EXISTS ix_ltm_audit_scope_action",
    "DROP INDEX IF EXISTS ix_ltm_audit_memory",
    "CREATE INDEX ix_ltm_audit_memory ON ltm_audit (memory_id)",
    "DROP INDEX IF EXISTS ix_ltm_items_confidence",
    "DROP INDEX IF EXISTS ix_ltm_items_importance",
    "DROP INDEX IF EXISTS ix_ltm_items_use",
    "DROP INDEX IF EXISTS ix_ltm_items_fact_key",
    "DROP INDEX IF EXISTS ix_ltm_items_approval",
    f"CREATE INDEX ix_ltm_items_approval ON ltm_items (awaiting_approval, updated_at) WHERE {AWAITING}",
    "DROP INDEX IF EXISTS ix_ltm_items_superseded_by",
    "CREATE INDEX ix_ltm_items_superseded_by ON ltm_items (superseded_by) WHERE superseded_by IS NOT NULL",
]


def upgrade(conn) -> None:
    turns = conn.execute("SELECT count(*) FROM (SELECT 1 FROM ltm_events LIMIT ?)", [SMALL_STORE + 1]).fetchone()[0]
    if turns <= SMALL_STORE:
        for statement in STATEMENTS:
            conn.execute(statement)
