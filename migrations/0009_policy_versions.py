"""Policy versions: every effective change of the write or read policy,
``enable`` or ``emergency_read_only`` is kept as a numbered version — the
whole policy, who changed it, from where, why, and the difference to the
version before (``operating/policy_versions.py``).

The version number is the row id (AUTOINCREMENT: never reused, so a
version named in the audit trail or a rollback always means the same
policy). ``rollback_of`` names the version a rollback restored.
"""

STATEMENTS = [
    """CREATE TABLE ltm_policy_versions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        created_at DATETIME NOT NULL,
        actor VARCHAR(255) NOT NULL,
        source VARCHAR(32) NOT NULL,
        reason VARCHAR NOT NULL,
        policy JSON NOT NULL,
        diff JSON NOT NULL,
        rollback_of INTEGER
    )""",
    "CREATE INDEX ix_ltm_policy_versions_created ON ltm_policy_versions (created_at)",
]


def upgrade(conn) -> None:
    for statement in STATEMENTS:
        conn.execute(statement)
