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
    """Too few words to be a recommendation, advice or a promise."""
    return len(search_tokens(text)) < MIN_TOKENS


def echoes(reply: str, message: str) -> bool:
    """The reply's words are mostly the message's."""
    said = set(search_tokens(reply))
    return bool(said) and len(said & set(search_tokens(message))) / len(said) >= ECHO_SHARE


def without_echoes(conn: Connection, turns: dict[int, Any]) -> dict[int, Any]:
    """``turns`` (rowid -> a reader's row) less the bot's replies that echo
    the person's message recorded just before them (one query)."""
    replies = [rowid for rowid, t in turns.items() if is_bot(t)]
    if not replies:
        return turns
    rows = conn.execute(
        text("SELECT p.id + 1, p.content FROM ltm_events p JOIN ltm_events x ON x.id = p.id + 1 "
             "WHERE x.id IN (SELECT value FROM json_each(:ids)) AND p.session_id IS x.session_id "
             f"AND p.source_role = '{Role.USER}'"),
        {"ids": json.dumps(replies)},
    )
    echoed = set()
    for rowid, content in rows:
        message = (json.loads(content) if isinstance(content, str) else content or {}).get("text", "")
        if echoes(str(turns[rowid].content.get("text", "")), str(message)):
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
