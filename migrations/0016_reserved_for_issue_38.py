"""Reserved: migration 0016 is issue 38's (privacy by context: ``subject``
and ``visibility`` on ``ltm_items``), written on another branch. This
placeholder keeps the numbering whole on the branch of issue 39; it is
replaced by the real 0016 when both are merged, and changes nothing."""


def upgrade(conn) -> None:
    return None
