"""The bot's own replies among a block's turns: what they may take.

The bot's lines are candidates like anyone's (storing.turns: RECALLED_ROLES)
and read as the bot's (storing.turns.BOT_LABEL). A model's replies run
longer than what people type, so they are kept from crowding out what
people said: each is cut shorter than a person's turn, and together they
take at most a share of the token budget (docs/decisions.md#d57).
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, text

from ..enums import Role
from ..text import search_tokens

# A line of the bot's is cut to this many characters (a person's to
# block.EVENT_CHARS): what it recommended or promised comes early.
BOT_CHARS = 100
# The bot's lines together take at most this share of read_policy.max_tokens.
BOT_SHARE = 0.5
# A reply with fewer search tokens than this ("OK.", "How nice!", "当然了")
# is small talk: it says nothing to remember and is never shown.
MIN_TOKENS = 4
# A reply whose words are at least this share the words of the message it
# answers only says it back ("ECHO: …", "So you live in Paris!"): what the
# person said, or the memory made of it, already stands for it.
ECHO_SHARE = 0.8


def is_bot(turn: Any) -> bool:
    """A reply of the bot's own (a MemoryEvent or a reader's row)."""
    return getattr(turn, "source_role", None) == Role.ASSISTANT


def small_talk(text: str) -> bool:
    """Too few words to be a recommendation, advice or a promise (judged on
    the reply's start: a long one never is)."""
    return len(search_tokens(text[:SMALL_TALK_CHARS])) < MIN_TOKENS


SMALL_TALK_CHARS = 120


def echoes(reply: str, message: str) -> bool:
    """The reply's words are mostly the message's."""
    said = set(search_tokens(reply))
    return bool(said) and len(said & set(search_tokens(message))) / len(said) >= ECHO_SHARE


# A recorded turn never changes: whether a reply echoes its message is
# judged once per reply (tokenising both costs about 0.2 ms), not per read.
_ECHOED: dict[str, bool] = {}  # by event_id, unique in every store
ECHO_CACHE = 20_000


def without_echoes(conn: Connection, turns: dict[int, Any]) -> dict[int, Any]:
    """``turns`` (rowid -> a reader's row) less the bot's replies that echo
    the person's message recorded just before them (one query)."""
    replies = [rowid for rowid, t in turns.items() if is_bot(t)]
    if not replies:
        return turns
    known = {rowid for rowid in replies if turns[rowid].event_id in _ECHOED}
    echoed = {rowid for rowid in known if _ECHOED[turns[rowid].event_id]}
    replies = [rowid for rowid in replies if rowid not in known]
    if not replies:
        return {k: t for k, t in turns.items() if k not in echoed}
    rows = conn.execute(
        # CROSS JOIN and "p.id = x.id - 1" look the message up by its
        # primary key; "x.id = p.id + 1" let SQLite walk the whole session.
        text("SELECT x.id, p.content FROM ltm_events x CROSS JOIN ltm_events p ON p.id = x.id - 1 "
             "WHERE x.id IN (SELECT value FROM json_each(:ids)) AND p.session_id IS x.session_id "
             f"AND p.source_role = '{Role.USER}'"),
        {"ids": json.dumps(replies)},
    )
    if len(_ECHOED) > ECHO_CACHE:
        _ECHOED.clear()
    for rowid in replies:
        _ECHOED[turns[rowid].event_id] = False  # no message before it: not an echo
    for rowid, content in rows:
        message = (json.loads(content) if isinstance(content, str) else content or {}).get("text", "")
        if echoes(str(turns[rowid].content.get("text", "")), str(message)):
            _ECHOED[turns[rowid].event_id] = True
            echoed.add(rowid)
    return {k: t for k, t in turns.items() if k not in echoed}


class BotAllowance:
    """The tokens the bot's lines of one block may still take."""

    def __init__(self, max_tokens: int, share: float | None = None) -> None:
        self.limit = int(max_tokens * (BOT_SHARE if share is None else share))
        self.used = 0

    def admits(self, cost: int) -> bool:
        return self.used + cost <= self.limit

    def take(self, cost: int) -> None:
        self.used += cost

    def give_back(self, cost: int) -> None:
        self.used = max(0, self.used - cost)
