"""Bot-side episodes: what the bot recommended, advised, promised or agreed to do,
accepted only as an episode evidenced by the bot's own lines and saying it is the
bot's. Everything else only the bot said stays refused (docs/decisions.md#d57).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..enums import MemoryType, Role
from ..storing.tables import MemoryEvent

BY_BOT = "bot"
# How a fact names the bot: a word for it, or a persona name with "AI" in it.
_NAMES_BOT = re.compile(r"(?i:\b(?:the bot|bot|assistant|chatbot)\b)|AI|机器人|助手|助理")
# A fact that puts the bot's words in a person's mouth.
_PERSON_SAID = re.compile(
    r"\b(the user|user|he|she|they)\s+(said|says|told|stated|mentioned)\b|用户(说|表示|提到|告诉)", re.I)


def check_bot_episode(mtype: str, fact: str, lines: object,
                      events: Sequence[MemoryEvent]) -> tuple[str, list[MemoryEvent]]:
    """("", the bot's cited events) for a valid bot-side episode, else (why it is refused, [])."""
    if mtype != MemoryType.EPISODE:
        return f"a fact by the bot must be an episode, not {mtype!r}", []
    if not isinstance(lines, list) or not lines or not all(
        isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= len(events) for n in lines
    ):
        return f"a fact by the bot must cite the bot's lines; lines {lines!r} do not", []
    sources = [events[n - 1] for n in dict.fromkeys(lines) if events[n - 1].source_role == Role.ASSISTANT]
    if not sources:
        return "a fact by the bot cites none of the bot's lines", []
    if not _NAMES_BOT.search(fact):
        return "a fact by the bot must say it is the bot's (e.g. 'the bot recommended …')", []
    if _PERSON_SAID.search(fact):
        return "a fact by the bot must not say a person stated it", []
    return "", sources
