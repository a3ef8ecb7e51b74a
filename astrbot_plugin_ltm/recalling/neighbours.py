"""A turn found through the one beside it: the answer to a question the message
matches ("Did you see them live?" / "Yes, at the music event") often shares no
word with the message. The turns just before and after each matched turn, in the
same chat on the same day, are one more ranking, in their matched turn's order.
"""

from __future__ import annotations

import json

from sqlalchemy import Connection

from ..clock import as_utc
from ..extension_points import Found
from ..storing.driver_rows import fetch_rows
from .ranking import fuse
from .read import Read
from .rows import EventRow, load_turns

# The events just before and after each of :ids in its chat and scope: by rowid, as
# storing.turns finds the message a reply answers.
_BESIDE = """
SELECT h.id, n.id FROM ltm_events h CROSS JOIN ltm_events n
  ON n.id IN (h.id - 1, h.id + 1) AND n.session_id IS h.session_id AND n.scope = h.scope AND n.scope_id = h.scope_id
WHERE h.id IN (SELECT value FROM json_each(:ids))
"""


def neighbours(conn: Connection, read: Read, unbacked: bool) -> tuple[Found, dict[int, EventRow]]:
    """The matched turns' showable neighbours of the same day, as a ranking (the order of
    the turn each is beside), and the rows of those not yet candidates."""
    fused = fuse([[r for r in f.turns if r in read.turns] for f in read.found])
    matched = sorted(fused, key=lambda rowid: (-fused[rowid], rowid))
    if not matched:
        return Found(), {}
    beside: dict[int, list[int]] = {}
    for rowid, n in fetch_rows(conn, _BESIDE, {"ids": json.dumps(matched)}):
        beside.setdefault(rowid, []).append(n)
    wanted = list(dict.fromkeys(n for rowid in matched for n in sorted(beside.get(rowid, ()))))
    rows = {**load_turns(conn, read.scopes, [n for n in wanted if n not in read.turns], unbacked), **read.turns}
    ranking: list[int] = []
    for rowid in matched:
        day = as_utc(read.turns[rowid].created_at).date()
        for n in sorted(beside.get(rowid, ())):  # the turn before, then the one after
            # Another day is another sitting: its first turn does not answer this one's last.
            if n in rows and as_utc(rows[n].created_at).date() == day and n not in ranking:
                ranking.append(n)
    return Found(turns=ranking), {n: rows[n] for n in ranking if n not in read.turns}
