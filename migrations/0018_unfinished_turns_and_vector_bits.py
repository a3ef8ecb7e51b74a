"""Turns by extraction status: only the unfinished ones; a vector space
names the bits of a component (issue 39).

Two indexes held every turn by its status (``ix_ltm_events_status_created``
and ``ix_ltm_events_scope_status_created``): 110 bytes a recorded turn,
almost all of them ``done``, which no query looks up by status. Their
places take two partial indexes of the same columns that hold only the
turns still waiting (pending, failed) or skipped: the extraction worker's
queue, the operators' lists of those, and a forget of a span of skipped
turns read them as before. A list of done turns walks the turns by time.

Dropping an index and building one hold the write lock for as long as
they take: 5 s on a store of 1.1 million turns (1.6 GB). A store of more
than SMALL_STORE turns keeps its two old indexes; docs/operating.md#storage
gives the statements to run by hand when the bot is idle. Every query works
with either.

``ltm_vector_spaces`` gains ``bits``: a turn's vectors are written in 5
bits a component from now on (storing.vector_rows.TURN_BITS,
docs/decisions.md#d165), those written before stay int8 in spaces of 8
bits, and both are read. The table, a row per model, is made again with
the column in its unique key.
"""

# Keep in step with storing.tables.UNFINISHED: SQLite uses a partial index
# for a query whose own conditions name one of these statuses.
UNFINISHED = "(extraction_status = 'pending' OR extraction_status = 'failed' OR extraction_status = 'skipped')"

# Up to this many turns the indexes change here in ~0.1 s (4 s a million turns).
SMALL_STORE = 20_000

INDEX_STATEMENTS = [
    "DROP INDEX IF EXISTS ix_ltm_events_status_created",
    "DROP INDEX IF EXISTS ix_ltm_events_scope_status_created",
    f"CREATE INDEX ix_ltm_events_unfinished ON ltm_events (extraction_status, created_at) WHERE {UNFINISHED}",
    "CREATE INDEX ix_ltm_events_scope_unfinished ON ltm_events (scope, scope_id, extraction_status, created_at) "
    f"WHERE {UNFINISHED}",
]

SPACE_STATEMENTS = [
    """CREATE TABLE ltm_vector_spaces_0018 (
        id INTEGER NOT NULL PRIMARY KEY,
        model VARCHAR(255) NOT NULL,
        dim INTEGER NOT NULL,
        bits INTEGER NOT NULL,
        CONSTRAINT uq_ltm_vector_spaces_model_dim_bits UNIQUE (model, dim, bits)
    )""",
    "INSERT INTO ltm_vector_spaces_0018 (id, model, dim, bits) SELECT id, model, dim, 8 FROM ltm_vector_spaces",
    "DROP TABLE ltm_vector_spaces",
    "ALTER TABLE ltm_vector_spaces_0018 RENAME TO ltm_vector_spaces",
]


def upgrade(conn) -> None:
    turns = conn.execute("SELECT count(*) FROM (SELECT 1 FROM ltm_events LIMIT ?)", [SMALL_STORE + 1]).fetchone()[0]
    for statement in (INDEX_STATEMENTS if turns <= SMALL_STORE else []) + SPACE_STATEMENTS:
        conn.execute(statement)
