"""Reserved for the policy-versions branch (issue 18), which owns 0009.

A no-op here so that 0010 can follow while both branches are apart; at the
merge the versions branch's 0009 replaces this file.
"""


def upgrade(conn) -> None:
    del conn
