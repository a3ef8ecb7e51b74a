"""Users' own pauses (``/ltm pause``; operating/pauses.py).

``ltm_user_pauses``: one row per user who asked that nothing new be learnt
about them, with since when, who set it (``user:<id>``) and why. It is the
user's state, not the operator's policy, so no policy rollback, replay,
tuning or config save touches it. A new table only: nothing existing is
touched, so it is instant on any store. Pauses made before, which live in
``write_policy.disabled_scopes`` (in AstrBot's plugin config, which a
migration cannot reach), are moved here at the first start
(``Pauses.adopt_policy_pauses``).
"""

STATEMENTS = [
    """CREATE TABLE ltm_user_pauses (
        scope VARCHAR(16) NOT NULL,
        scope_id VARCHAR(255) NOT NULL,
        since DATETIME NOT NULL,
        actor VARCHAR(255) NOT NULL,
        reason VARCHAR NOT NULL,
        PRIMARY KEY (scope, scope_id)
    )""",
]


def upgrade(conn) -> None:
    for statement in STATEMENTS:
        conn.execute(statement)
