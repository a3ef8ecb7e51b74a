"""An index for the extraction worker's question "which events of this scope
still wait, oldest first". Without it SQLite answered by walking the whole
scope's events in time order (ix_ltm_events_scope_created) and reading each
row's status: 40–240 ms per batch in a scope of 100k events, nearly all of
them long extracted."""

STATEMENTS = [
    "CREATE INDEX ix_ltm_events_scope_status_created ON ltm_events (scope, scope_id, extraction_status, created_at)",
]


def upgrade(conn) -> None:
    for statement in STATEMENTS:
        conn.execute(statement)
