"""The compact storage layout (issue 39; docs/decisions.md#d158–d160).

- ``ltm_turn_terms``: a turn's own keyword terms as 4-byte hashes
  (storing.terms), in place of its row in the FTS5 table ``ltm_events_fts``,
  whose scope-prefixed tokens, the turn before's included, took five times
  the turn's text.
- ``ltm_turn_vectors``: a turn's vectors as int8 (a quarter of float32),
  naming their model by a number (``ltm_vector_spaces``) and their scope
  through the event, in place of ``ltm_event_vectors``.
- ``ltm_item_vectors`` keeps its rows; each becomes int8 in place.
- ``ltm_summary_links``: a summary's links to the turns it covers, as two
  row ids, in place of its rows in ``ltm_evidence`` (two uuids, a method,
  a time and two indexes: 260 bytes a link, ~2 links a turn).

Three indexes no statement needs (EXPLAIN QUERY PLAN over every statement
of the test suite, 2026-12-07) are dropped: events by extraction status and
next attempt, items by status and importance (a named period's memories
took it, and its tie order, by chance: that query now orders its ties
itself), audit rows by session and action.

Only the new, empty tables are made here, and those indexes dropped:
instant on any store. The
existing rows are moved after start by storing.relayout, in batches that
hold the write lock a few dozen milliseconds each, resumable
after a crash; the reads take both layouts meanwhile. A store with nothing
to move (a new one) loses the old tables here at once.
"""

STATEMENTS = [
    """CREATE TABLE ltm_turn_terms (
        event_rowid INTEGER NOT NULL PRIMARY KEY,
        terms BLOB NOT NULL
    )""",
    """CREATE TABLE ltm_vector_spaces (
        id INTEGER NOT NULL PRIMARY KEY,
        model VARCHAR(255) NOT NULL,
        dim INTEGER NOT NULL,
        CONSTRAINT uq_ltm_vector_spaces_model_dim UNIQUE (model, dim)
    )""",
    """CREATE TABLE ltm_turn_vectors (
        event_rowid INTEGER NOT NULL PRIMARY KEY,
        space INTEGER NOT NULL,
        vector BLOB NOT NULL
    )""",
    """CREATE TABLE ltm_summary_links (
        item_id INTEGER NOT NULL,
        event_rowid INTEGER NOT NULL,
        PRIMARY KEY (item_id, event_rowid)
    ) WITHOUT ROWID""",
    "CREATE INDEX ix_ltm_summary_links_event ON ltm_summary_links (event_rowid)",
    "DROP INDEX IF EXISTS ix_ltm_events_extraction",
    "DROP INDEX IF EXISTS ix_ltm_items_status_importance",
    "DROP INDEX IF EXISTS ix_ltm_audit_session_action",
]


def _empty(conn, table: str) -> bool:
    return bool(conn.execute(f"SELECT NOT EXISTS (SELECT 1 FROM {table})").fetchone()[0])


def upgrade(conn) -> None:
    for statement in STATEMENTS:
        conn.execute(statement)
    # The old tables go now if empty (at no cost); a store with nothing in
    # any of them, nor a memory vector, is in the compact layout already.
    moving = False
    for table in ("ltm_events_fts", "ltm_event_vectors"):
        if _empty(conn, table):
            conn.execute(f"DROP TABLE {table}")
        else:
            moving = True
    if not moving and _empty(conn, "ltm_events") and _empty(conn, "ltm_item_vectors") and _empty(conn, "ltm_audit") \
            and _empty(conn, "ltm_evidence"):
        conn.execute("INSERT INTO ltm_index_builds (name, built_with, built_at) "
                     "VALUES ('storage_layout', 'compact 1', datetime('now'))")
