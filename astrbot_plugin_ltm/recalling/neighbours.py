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

# The events just before and after each of :ids in its chat (session_id) and scope, by time then id.
_BESIDE = """
SELECT h.id,
  (SELECT p.id FROM ltm_events p WHERE p.session_id = h.session_id AND p.scope = h.scope AND p.scope_id = h.scope_id
     AND (p.created_at < h.created_at OR (p.created_at = h.created_at AND p.id < h.id))
     ORDER BY p.created_at DESC, p.id DESC LIMIT 1),
  (SELECT n.id FROM ltm_events n WHERE n.session_id = h.session_id AND n.scope = h.scope AND n.scope_id = h.scope_id
     AND (n.created_at > h.created_at OR (n.created_at = h.created_at AND n.id > h.id))
     ORDER BY n.created_at, n.id LIMIT 1)
FROM ltm_events h WHERE h.id IN (SELECT value FROM json_each(:ids))
"""


def neighbours(conn: Connection, read: Read, unbacked: bool) -> tuple[Found, dict[int, EventRow]]:
    """The matched turns' showable neighbours of the same day, as a ranking (the order of
    the turn each is beside), and the rows of those not yet candidates."""
    fused = fuse([[r for r in f.turns if r in read.turns] for f in read.found])
    matched = sorted(fused, key=lambda rowid: (-fused[rowid], rowid))
    if not matched:
        return Found(), {}
    beside = {row[0]: (row[1], row[2]) for row in fetch_rows(conn, _BESIDE, {"ids": json.dumps(matched)})}
    wanted = list(dict.fromkeys(n for rowid in matched for n in beside.get(rowid, ()) if n is not None))
    rows = {**load_turns(conn, read.scopes, [n for n in wanted if n not in read.turns], unbacked), **read.turns}
    ranking: list[int] = []
    for rowid in matched:
        day = as_utc(read.turns[rowid].created_at).date()
        for n in beside.get(rowid, ()):
            # Another day is another sitting: its first turn does not answer this one's last.
            if n is not None and n in rows and as_utc(rows[n].created_at).date() == day and n not in ranking:
                ranking.append(n)
    return Found(turns=ranking), {n: rows[n] for n in ranking if n not in read.turns}
