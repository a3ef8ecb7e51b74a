"""Raw turns as first-class retrieval candidates.

- ``ltm_event_vectors``: each raw turn's embedding (FAISS namespaces of
  turns are rebuilt from it, as for items).
- ``ltm_events.withheld``: a turn never to be shown to the model again.
  The reader may now show turns no memory covers (mode auto), so the turns
  behind memories an operator or user deleted must stay hidden; until now
  deleting a memory only dropped its evidence links. Those links are gone
  for earlier deletions, so every turn with no evidence link is withheld if
  a memory of its scope was deleted or rejected after it was recorded.
- The events' keyword index is rebuilt: only the turns the reader may show
  (the bot's own lines were indexed and never searched), each followed by
  the first words of the event before it in the same conversation within
  the hour (``storing.turns.CONTEXT_TOKENS``/``CONTEXT_WINDOW``,
  repeated here so the migration stands alone; julianday's rounding gets a
  few microseconds of slack, so a gap of exactly an hour counts, as it does
  there). The old index's tokens are
  reused: no text is tokenised again here.
- The fts5vocab tables go: the reader now ranks in memory, per scope
  (``indexes/keywords.py``), and no longer counts terms in SQLite.
"""

import hashlib

CONTEXT_TOKENS = 60
PREFIX_CHARS = 16  # storing.keyword_rows.scope_prefix: 8 bytes as hex

STATEMENTS = [
    """CREATE TABLE ltm_event_vectors (
        event_rowid INTEGER PRIMARY KEY,
        scope VARCHAR(16) NOT NULL,
        scope_id VARCHAR(255) NOT NULL,
        model VARCHAR(255) NOT NULL,
        dim INTEGER NOT NULL,
        vector BLOB NOT NULL,
        updated_at DATETIME NOT NULL
    )""",
    "CREATE INDEX ix_ltm_event_vectors_scope ON ltm_event_vectors (scope, scope_id, model)",
    "ALTER TABLE ltm_events ADD COLUMN withheld BOOLEAN NOT NULL DEFAULT 0",
    """UPDATE ltm_events SET withheld = 1
       WHERE NOT EXISTS (SELECT 1 FROM ltm_evidence v WHERE v.event_id = ltm_events.event_id)
         AND EXISTS (SELECT 1 FROM ltm_audit a
                     WHERE a.scope = ltm_events.scope AND a.scope_id = ltm_events.scope_id
                       AND a.action IN ('delete', 'reject') AND a.created_at >= ltm_events.created_at)""",
    "CREATE VIRTUAL TABLE ltm_events_fts_new USING fts5(scoped, tokenize='unicode61')",
    """INSERT INTO ltm_events_fts_new (rowid, scoped)
       WITH ordered AS (
           SELECT id, scope, scope_id, source_role, session_id, created_at,
                  lag(id) OVER turns AS prev_id, lag(created_at) OVER turns AS prev_at
           FROM ltm_events WINDOW turns AS (PARTITION BY session_id ORDER BY created_at, id))
       SELECT o.id, ltm_with_context(o.scope, o.scope_id, f.scoped, CASE
                  WHEN o.session_id IS NOT NULL AND o.prev_id IS NOT NULL
                       AND julianday(o.created_at) - julianday(o.prev_at) <= 1.0 / 24 + 1e-9 THEN p.scoped END)
       FROM ordered o JOIN ltm_events_fts f ON f.rowid = o.id
       LEFT JOIN ltm_events_fts p ON p.rowid = o.prev_id
       WHERE o.source_role IN ('user', 'tool')""",
    "DROP TABLE ltm_events_fts_vocab",
    "DROP TABLE ltm_items_fts_vocab",
    "DROP TABLE ltm_events_fts",
    "ALTER TABLE ltm_events_fts_new RENAME TO ltm_events_fts",
]


def scope_prefix(scope: str, scope_id: str) -> str:
    return hashlib.blake2b(f"{scope}\x1f{scope_id}".encode(), digest_size=8).hexdigest()


def with_context(scope: str, scope_id: str, scoped: str | None, context: str | None) -> str:
    """An event's scoped tokens, then the first CONTEXT_TOKENS of the event
    before it, prefixed with this event's scope."""
    tokens = (scoped or "").split()
    if context:
        prefix = scope_prefix(scope, scope_id)
        tokens += [prefix + t[PREFIX_CHARS:] for t in context.split()[:CONTEXT_TOKENS]]
    return " ".join(tokens)


def upgrade(conn) -> None:
    conn.create_function("ltm_with_context", 4, with_context, deterministic=True)
    for statement in STATEMENTS:
        conn.execute(statement)
