"""How a /ltm reply shows things, in the reply's language: a state or type
in words, on or off, a memory's line, a scope's line of the status, a
policy version's line. Apart from commands.py, which decides what to reply.
"""

from __future__ import annotations

from typing import Any

from ..enums import PolicySource, Status
from ..i18n import CATALOGUE, SEPARATORS, Lang, say, translate
from ..operating.policy_words import change_lines
from ..storing.tables import MemoryItem


def word(kind: str, value: str, lang: Lang) -> str:
    """An enum value (a status, a memory type) in ``lang``; one with no
    catalogue entry as it is."""
    code = f"cmd.{kind}.{value}"
    return say(code, lang) if code in CATALOGUE else value


def on_off(on: bool, lang: Lang) -> str:
    return say("cmd.on" if on else "cmd.off", lang)


def item_line(item: MemoryItem, lang: Lang) -> str:
    """A memory in /ltm list: its short id, type and fact, and its state unless active."""
    line = f"{item.memory_id[:8]} [{word('type', item.type, lang)}] {item.fact}"
    if item.status == Status.ACTIVE:
        return line
    state = word("state", "awaiting_approval" if item.awaiting_approval else item.status, lang)
    return f"{line} ({state})" if lang == "en" else f"{line}（{state}）"


def scope_line(stats: dict[str, Any], lang: Lang) -> str:
    """A scope in /ltm status (``stats``: its row of admin.stats): its
    memories counted by state, and its turns waiting."""
    counts = SEPARATORS[lang].join(say("cmd.status.count", lang, n=n, state=word("state", status, lang))
                            for status, n in sorted(stats["by_status"].items()))
    return say("cmd.status.line", lang, kind=word("kind", stats["scope"], lang), scope_id=stats["scope_id"],
               counts=counts or say("cmd.status.no_memories", lang),
               pending=stats["events"]["pending"])


def version_line(row: dict, lang: Lang = "en") -> str:
    """One version and each setting it changed, in ``lang``."""
    changes = ("；" if lang == "zh" else "; ").join(change_lines(row["diff"][:4], lang))
    more = say("cmd.policy.more", lang, n=len(row["diff"]) - 4) if len(row["diff"]) > 4 else ""
    reason = say("cmd.policy.line_reason", lang, reason=translate(row["reason"], lang)) if row["reason"] else ""
    if not changes:
        changes = say("cmd.policy.initial" if row["source"] == PolicySource.STARTUP else "cmd.policy.no_change", lang)
    return say("cmd.policy.line", lang, version=row["version"], at=row["created_at"][:16].replace("T", " "),
               actor=row["actor"], source=say(f"policy.source.{row['source']}", lang)
               if f"policy.source.{row['source']}" in CATALOGUE else row["source"], reason=reason,
               changes=changes, more=more)
