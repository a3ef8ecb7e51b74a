"""The bot's own replies among a block's turns: what they may take.

The bot's lines are candidates like anyone's (storing.turns: RECALLED_ROLES)
and read as the bot's (storing.turns.BOT_LABEL). A model's replies run
longer than what people type, so they are kept from crowding out what
people said: each is cut shorter than a person's turn, and together they
take at most a share of the token budget (docs/decisions.md#d57). Small
talk and echoes are never shown: the recorder withholds them
(storing.turns.withhold).
"""

from __future__ import annotations

from typing import Any

from ..enums import Role

# A line of the bot's is cut to this many characters (a person's to
# block.EVENT_CHARS): what it recommended or promised comes early.
BOT_CHARS = 100
# The bot's lines together take at most this share of read_policy.max_tokens.
BOT_SHARE = 0.5


def is_bot(turn: Any) -> bool:
    """A reply of the bot's own (a MemoryEvent or a reader's row)."""
    return getattr(turn, "source_role", None) == Role.ASSISTANT


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
