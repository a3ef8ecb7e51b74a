"""Placeholder for a migration number reserved by a parallel branch
(0009: policy versions, 0010: the replay holdout set). The drift branch
needs 0011 and the runner refuses gaps, so this no-op keeps the numbering
whole until the merge, where the real migration replaces this file.
"""


def upgrade(conn) -> None:
    pass
