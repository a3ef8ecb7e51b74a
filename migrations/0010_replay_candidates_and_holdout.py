"""What a policy replay needs: the candidates the write gate saw, and the
holdout set of sessions replays default to.

- ``ltm_gate_log``: one row per extracted candidate that reached the write
  gate: the gate's inputs (type, confidence, evidence count, new or not,
  explicit, instruction-like), the plan's action, where it went (memory id,
  or none when refused) and the status it got. A refused candidate was
  only an audit row without its confidence or events, so a replay could not
  ask the gate about it again (docs/decisions.md#d53).
- ``ltm_holdout``: the sessions of the holdout replay set, frozen when first
  drawn; redrawing replaces them in one transaction.

New tables only: instant on any store; history before this migration has
no gate log (a replay says how many candidates it found).
"""

STATEMENTS = [
    """CREATE TABLE ltm_gate_log (
        id INTEGER PRIMARY KEY,
        created_at DATETIME NOT NULL,
        scope VARCHAR(16) NOT NULL,
        scope_id VARCHAR(255) NOT NULL,
        session_id VARCHAR(255),
        memory_id VARCHAR(36),
        fact_key VARCHAR(128) NOT NULL,
        action VARCHAR(32) NOT NULL,
        type VARCHAR(32) NOT NULL,
        fact VARCHAR NOT NULL,
        confidence FLOAT NOT NULL,
        evidence_count INTEGER NOT NULL,
        is_new BOOLEAN NOT NULL,
        explicit BOOLEAN NOT NULL,
        instruction VARCHAR,
        event_ids JSON NOT NULL,
        status VARCHAR(16) NOT NULL,
        awaiting_approval BOOLEAN NOT NULL,
        reason VARCHAR NOT NULL
    )""",
    "CREATE INDEX ix_ltm_gate_log_session ON ltm_gate_log (session_id, created_at)",
    "CREATE INDEX ix_ltm_gate_log_scope ON ltm_gate_log (scope, scope_id, created_at)",
    "CREATE INDEX ix_ltm_gate_log_created ON ltm_gate_log (created_at)",
    """CREATE TABLE ltm_holdout (
        session_id VARCHAR(255) NOT NULL PRIMARY KEY,
        scope VARCHAR(16) NOT NULL,
        scope_id VARCHAR(255) NOT NULL,
        drawn_at DATETIME NOT NULL,
        rule JSON NOT NULL
    )""",
]


def upgrade(conn) -> None:
    for statement in STATEMENTS:
        conn.execute(statement)
