"""Where a memory was said, and who may hear it again (audience.py).

``ltm_items.visibility``: ``shared`` (recalled where it was said),
``private`` (only in its person's private chat) or ``secret`` (the speaker
asked to keep it: only in their private chat, never shown in a group).
Every memory so far is ``shared``: a person's memories were only ever read
in their own chats, a group's in the group.

``ltm_item_contexts``: the groups a memory kept in a person's own scope was
said in. Empty here: memories that groups learnt about one member are moved
to that member's scope at the first start, with the group as their context
(``operating/contexts.py``: it needs the identity settings, which a
migration cannot read). A column with a constant default and a new table:
instant on any store.
"""

STATEMENTS = [
    "ALTER TABLE ltm_items ADD COLUMN visibility VARCHAR(16) NOT NULL DEFAULT 'shared'",
    """CREATE TABLE ltm_item_contexts (
        scope VARCHAR(16) NOT NULL,
        scope_id VARCHAR(255) NOT NULL,
        item_id INTEGER NOT NULL,
        PRIMARY KEY (scope, scope_id, item_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX ix_ltm_item_contexts_item ON ltm_item_contexts (item_id)",
]


def upgrade(conn) -> None:
    for statement in STATEMENTS:
        conn.execute(statement)
