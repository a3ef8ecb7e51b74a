"""Keyword indexes whose terms belong to a scope, and indexes for the
operators' lists.

The reader searched the keyword indexes across every scope and checked each
hit's scope afterwards, so a query cost as much as its matches in the whole
database. Each indexed token is now also stored prefixed with its row's
scope (``storing.keyword_rows.scope_prefix``, repeated here so the
migration stands alone), in a ``scoped`` column: a scope's terms have their
own postings, a query reads only its scopes' rows, and bm25 weighs terms by
how common they are in that scope. The items' plain ``tokens`` column stays
for the operators' search across scopes. FTS5 has no ADD COLUMN, so both
tables are rebuilt from the old ones (their tokens kept as they are) and
renamed. ``fts5vocab`` tables expose each term's document count, which the
reader uses to leave out terms too common to be worth their cost.

The item, event and audit lists of the dashboard sort a whole store by
update time, confidence, importance or creation time, optionally within a
scope or status; each such order gets an index so a page is read from an
index instead of by sorting the table.
"""

import hashlib


def scope_prefix(scope: str, scope_id: str) -> str:
    return hashlib.blake2b(f"{scope}\x1f{scope_id}".encode(), digest_size=8).hexdigest()


def scoped_tokens(scope: str, scope_id: str, tokens: str) -> str:
    prefix = scope_prefix(scope, scope_id)
    return " ".join(prefix + token for token in (tokens or "").split())


STATEMENTS = [
    "CREATE VIRTUAL TABLE ltm_items_fts_new USING fts5(tokens, scoped, tokenize='unicode61')",
    "INSERT INTO ltm_items_fts_new (rowid, tokens, scoped) "
    "SELECT f.rowid, f.tokens, ltm_scoped_tokens(i.scope, i.scope_id, f.tokens) "
    "FROM ltm_items_fts f JOIN ltm_items i ON i.id = f.rowid",
    "DROP TABLE ltm_items_fts",
    "ALTER TABLE ltm_items_fts_new RENAME TO ltm_items_fts",
    "CREATE VIRTUAL TABLE ltm_events_fts_new USING fts5(scoped, tokenize='unicode61')",
    "INSERT INTO ltm_events_fts_new (rowid, scoped) "
    "SELECT f.rowid, ltm_scoped_tokens(e.scope, e.scope_id, f.tokens) "
    "FROM ltm_events_fts f JOIN ltm_events e ON e.id = f.rowid",
    "DROP TABLE ltm_events_fts",
    "ALTER TABLE ltm_events_fts_new RENAME TO ltm_events_fts",
    "CREATE VIRTUAL TABLE ltm_items_fts_vocab USING fts5vocab(ltm_items_fts, 'row')",
    "CREATE VIRTUAL TABLE ltm_events_fts_vocab USING fts5vocab(ltm_events_fts, 'row')",
    "CREATE INDEX ix_ltm_items_updated ON ltm_items (updated_at)",
    "CREATE INDEX ix_ltm_items_created ON ltm_items (created_at)",
    "CREATE INDEX ix_ltm_items_confidence ON ltm_items (confidence)",
    "CREATE INDEX ix_ltm_items_importance ON ltm_items (importance)",
    "CREATE INDEX ix_ltm_items_approval ON ltm_items (awaiting_approval, updated_at)",
    "CREATE INDEX ix_ltm_items_scope_confidence ON ltm_items (scope, scope_id, confidence)",
    "CREATE INDEX ix_ltm_items_scope_importance ON ltm_items (scope, scope_id, importance)",
    "CREATE INDEX ix_ltm_items_scope_created ON ltm_items (scope, scope_id, created_at)",
    "CREATE INDEX ix_ltm_events_created ON ltm_events (created_at)",
    "CREATE INDEX ix_ltm_events_status_created ON ltm_events (extraction_status, created_at)",
    "CREATE INDEX ix_ltm_items_status_confidence ON ltm_items (status, confidence)",
    "CREATE INDEX ix_ltm_items_status_importance ON ltm_items (status, importance)",
    "CREATE INDEX ix_ltm_items_status_created ON ltm_items (status, created_at)",
    "CREATE INDEX ix_ltm_items_scope_status_updated ON ltm_items (scope, scope_id, status, updated_at)",
    "CREATE INDEX ix_ltm_items_type_updated ON ltm_items (type, updated_at)",
    "CREATE INDEX ix_ltm_audit_action ON ltm_audit (action, created_at)",
    "CREATE INDEX ix_ltm_audit_scope_created ON ltm_audit (scope, scope_id, created_at)",
    "CREATE INDEX ix_ltm_audit_session_created ON ltm_audit (session_id, created_at)",
    "CREATE INDEX ix_ltm_audit_actor ON ltm_audit (actor, created_at)",
]


def upgrade(conn) -> None:
    conn.create_function("ltm_scoped_tokens", 3, scoped_tokens, deterministic=True)
    for statement in STATEMENTS:
        conn.execute(statement)
