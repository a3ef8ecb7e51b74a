"""Memories that change keep their history.

A newer value of a fact (moved city, new job) becomes a new memory and the
old one is kept, closed, as ``superseded``; before, the fact was rewritten
in place and the old value lost. So:

- ``ltm_items`` gains ``valid_from`` (when the value was stated),
  ``valid_to`` (when a newer one replaced it), ``supersedes`` and
  ``superseded_by`` (the memory ids before and after).
- Only current memories need a unique key: the table-level
  ``UNIQUE (scope, scope_id, fact_key)`` becomes a partial unique index over
  the rows that are not superseded. SQLite cannot drop a table constraint,
  so the table is rebuilt with the same row ids (the keyword index and the
  vectors are keyed by them) and its indexes are made again.
- Row ids are never reused (AUTOINCREMENT): the keyword and vector
  indexes are keyed by them, and a deleted memory's id must not come back
  as another memory's.
- ``held_reason``: why a memory waits for approval (the mode, its type,
  or text that reads as an instruction), shown in the review page.
- Existing memories are valid from their creation.
"""

COLUMNS = (
    "id, memory_id, scope, scope_id, type, fact, fact_key, confidence, importance, evidence_count, "
    "ttl_days, status, awaiting_approval, created_at, updated_at"
)

INDEXES = {
    "ix_ltm_items_scope_status": "scope, scope_id, status, importance",
    "ix_ltm_items_scope_updated": "scope, scope_id, updated_at",
    "ix_ltm_items_fact_key": "fact_key",
    "ix_ltm_items_status_updated": "status, updated_at",
    "ix_ltm_items_updated": "updated_at",
    "ix_ltm_items_created": "created_at",
    "ix_ltm_items_confidence": "confidence",
    "ix_ltm_items_importance": "importance",
    "ix_ltm_items_approval": "awaiting_approval, updated_at",
    "ix_ltm_items_scope_confidence": "scope, scope_id, confidence",
    "ix_ltm_items_scope_importance": "scope, scope_id, importance",
    "ix_ltm_items_scope_created": "scope, scope_id, created_at",
    "ix_ltm_items_status_confidence": "status, confidence",
    "ix_ltm_items_status_importance": "status, importance",
    "ix_ltm_items_status_created": "status, created_at",
    "ix_ltm_items_scope_status_updated": "scope, scope_id, status, updated_at",
    "ix_ltm_items_type_updated": "type, updated_at",
    "ix_ltm_items_superseded_by": "superseded_by",
}

STATEMENTS = [
    """CREATE TABLE ltm_items_new (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        memory_id VARCHAR(36) NOT NULL UNIQUE,
        scope VARCHAR(16) NOT NULL,
        scope_id VARCHAR(255) NOT NULL,
        type VARCHAR(16) NOT NULL,
        fact VARCHAR NOT NULL,
        fact_key VARCHAR(128) NOT NULL,
        confidence FLOAT NOT NULL,
        importance FLOAT NOT NULL,
        evidence_count INTEGER NOT NULL,
        ttl_days INTEGER,
        status VARCHAR(16) NOT NULL,
        awaiting_approval BOOLEAN NOT NULL DEFAULT 0,
        created_at DATETIME NOT NULL,
        updated_at DATETIME NOT NULL,
        held_reason VARCHAR,
        valid_from DATETIME,
        valid_to DATETIME,
        supersedes VARCHAR(36),
        superseded_by VARCHAR(36)
    )""",
    f"INSERT INTO ltm_items_new ({COLUMNS}, valid_from) SELECT {COLUMNS}, created_at FROM ltm_items",
    "DROP TABLE ltm_items",
    "ALTER TABLE ltm_items_new RENAME TO ltm_items",
    "CREATE UNIQUE INDEX uq_ltm_items_scope_key ON ltm_items (scope, scope_id, fact_key) "
    "WHERE status != 'superseded'",
    *(f"CREATE INDEX {name} ON ltm_items ({cols})" for name, cols in INDEXES.items()),
]


def upgrade(conn) -> None:
    for statement in STATEMENTS:
        conn.execute(statement)
