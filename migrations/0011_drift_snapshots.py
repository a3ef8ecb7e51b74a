"""Drift snapshots (operating/drift_monitor.py).

``ltm_drift_snapshots``: one row per scope kind (user, group) each time the
memory distribution is photographed (daily, right before and right after a
policy version, or on request): the features (counts by type and status,
writes per hour, mean confidence) as JSON, the centroid of the memories'
embeddings as float32 bytes where vectors exist, the cosine similarity to
the kind's previous snapshot and whether it fell below the threshold (an
alarm). A new table only: nothing existing is touched, so it is instant on
any store.
"""

STATEMENTS = [
    """CREATE TABLE ltm_drift_snapshots (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        created_at DATETIME NOT NULL,
        scope_kind VARCHAR(16) NOT NULL,
        trigger VARCHAR(16) NOT NULL,
        policy_version INTEGER,
        features JSON NOT NULL,
        centroid BLOB,
        similarity FLOAT,
        previous_id INTEGER,
        threshold FLOAT NOT NULL,
        alarm BOOLEAN NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX ix_ltm_drift_snapshots_kind ON ltm_drift_snapshots (scope_kind, id)",
    "CREATE INDEX ix_ltm_drift_snapshots_alarm ON ltm_drift_snapshots (alarm, id)",
    "CREATE INDEX ix_ltm_drift_snapshots_trigger ON ltm_drift_snapshots (trigger, created_at)",
]


def upgrade(conn) -> None:
    for statement in STATEMENTS:
        conn.execute(statement)
