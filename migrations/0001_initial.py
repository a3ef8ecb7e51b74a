"""Events, items, evidence, audit, tombstones and the items' keyword index."""

STATEMENTS = [
    """CREATE TABLE ltm_events (
        id INTEGER PRIMARY KEY,
        event_id VARCHAR(36) NOT NULL UNIQUE,
        scope VARCHAR(16) NOT NULL,
        scope_id VARCHAR(255) NOT NULL,
        source_type VARCHAR(16) NOT NULL,
        source_role VARCHAR(16) NOT NULL,
        content JSON NOT NULL,
        platform_id VARCHAR(255),
        session_id VARCHAR(255),
        sender_id VARCHAR(255),
        sender_name VARCHAR(255),
        created_at DATETIME NOT NULL,
        extraction_status VARCHAR(16) NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at DATETIME,
        last_error VARCHAR
    )""",
    "CREATE INDEX ix_ltm_events_scope_created ON ltm_events (scope, scope_id, created_at)",
    "CREATE INDEX ix_ltm_events_extraction ON ltm_events (extraction_status, next_attempt_at)",
    "CREATE INDEX ix_ltm_events_session ON ltm_events (session_id, created_at)",
    """CREATE TABLE ltm_items (
        id INTEGER PRIMARY KEY,
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
        CONSTRAINT uq_ltm_items_scope_key UNIQUE (scope, scope_id, fact_key)
    )""",
    "CREATE INDEX ix_ltm_items_scope_status ON ltm_items (scope, scope_id, status, importance)",
    "CREATE INDEX ix_ltm_items_scope_updated ON ltm_items (scope, scope_id, updated_at)",
    "CREATE INDEX ix_ltm_items_fact_key ON ltm_items (fact_key)",
    "CREATE INDEX ix_ltm_items_status_updated ON ltm_items (status, updated_at)",
    """CREATE TABLE ltm_evidence (
        id INTEGER PRIMARY KEY,
        memory_id VARCHAR(36) NOT NULL,
        event_id VARCHAR(36) NOT NULL,
        extraction_method VARCHAR(16) NOT NULL,
        extraction_meta JSON NOT NULL,
        created_at DATETIME NOT NULL,
        CONSTRAINT uq_ltm_evidence_link UNIQUE (memory_id, event_id)
    )""",
    "CREATE INDEX ix_ltm_evidence_event ON ltm_evidence (event_id)",
    """CREATE TABLE ltm_audit (
        id INTEGER PRIMARY KEY,
        created_at DATETIME NOT NULL,
        action VARCHAR(32) NOT NULL,
        memory_id VARCHAR(36),
        scope VARCHAR(16),
        scope_id VARCHAR(255),
        session_id VARCHAR(255),
        actor VARCHAR(255) NOT NULL,
        reason VARCHAR NOT NULL,
        detail JSON NOT NULL
    )""",
    "CREATE INDEX ix_ltm_audit_created ON ltm_audit (created_at)",
    "CREATE INDEX ix_ltm_audit_memory ON ltm_audit (memory_id, created_at)",
    "CREATE INDEX ix_ltm_audit_scope_action ON ltm_audit (scope, scope_id, action, created_at)",
    "CREATE INDEX ix_ltm_audit_session_action ON ltm_audit (session_id, action)",
    """CREATE TABLE ltm_tombstones (
        scope VARCHAR(16) NOT NULL,
        scope_id VARCHAR(255) NOT NULL,
        fact_key VARCHAR(128) NOT NULL,
        fact VARCHAR NOT NULL,
        created_at DATETIME NOT NULL,
        actor VARCHAR(255) NOT NULL,
        reason VARCHAR NOT NULL,
        PRIMARY KEY (scope, scope_id, fact_key)
    )""",
    # The keyword index holds each fact's search tokens (CJK as bigrams, see
    # text.search_tokens) under the item's rowid; unicode61 then only has to
    # split on the spaces we put in.
    "CREATE VIRTUAL TABLE ltm_items_fts USING fts5(tokens, tokenize='unicode61')",
]


def upgrade(conn) -> None:
    for statement in STATEMENTS:
        conn.execute(statement)
