"""A turn found through the reply after it: the message each matched turn answers
joins the candidates as one more fused ranking. A turn is indexed with the turn
before it (docs/decisions.md#d08); this is the other way, at read time.
"""

from __future__ import annotations

import json

from sqlalchemy import Connection

from ..extension_points import Found
from ..storing.driver_rows import fetch_rows
from .ranking import fuse
from .read import Read
from .rows import load_turns

# The event just before in the same session: the message a reply answers, as storing.turns reads it.
_BEFORE = ("SELECT h.id, p.id FROM ltm_events h JOIN ltm_events p ON p.id = h.id - 1 "
           "AND p.session_id = h.session_id AND p.scope = h.scope AND p.scope_id = h.scope_id "
           "WHERE h.id IN (SELECT value FROM json_each(:ids))")


def answered_turns(conn: Connection, read: Read, unbacked: bool) -> Found:
    """The turns just before the read's matched turns, in their order, and loads those
    that may be shown into ``read.turns``."""
    scores = fuse([[r for r in f.turns if r in read.turns] for f in read.found])
    matched = sorted(scores, key=lambda rowid: (-scores[rowid], rowid))
    before = {int(h): int(p) for h, p in fetch_rows(conn, _BEFORE, {"ids": json.dumps(matched)})}
    ranking = list(dict.fromkeys(before[h] for h in matched if h in before))
    read.turns.update(load_turns(conn, read.scopes, [p for p in ranking if p not in read.turns], unbacked))
    return Found(turns=[p for p in ranking if p in read.turns])
