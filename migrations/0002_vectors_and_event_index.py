"""Item vectors in SQLite (FAISS namespaces are rebuilt from them, never the
other way round), and a keyword index over raw events for the reader. The
engine indexes events recorded before this migration when it starts."""

STATEMENTS = [
    """CREATE TABLE ltm_item_vectors (
        item_id INTEGER PRIMARY KEY,
        scope VARCHAR(16) NOT NULL,
        scope_id VARCHAR(255) NOT NULL,
        model VARCHAR(255) NOT NULL,
        dim INTEGER NOT NULL,
        vector BLOB NOT NULL,
        updated_at DATETIME NOT NULL
    )""",
    "CREATE INDEX ix_ltm_item_vectors_scope ON ltm_item_vectors (scope, scope_id, model)",
    "CREATE VIRTUAL TABLE ltm_events_fts USING fts5(tokens, tokenize='unicode61')",
]


def upgrade(conn) -> None:
    for statement in STATEMENTS:
        conn.execute(statement)
