"""The settings that are no more (docs/decisions.md#d169), and what a saved value of
one becomes; a value other than its old default of one now constant is dropped aloud.
AstrBot drops keys no longer in ``_conf_schema.json`` when it loads the plugin, so
main.py reads the file first and :func:`carried_over` carries them over.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .errors import AdminError
from .i18n import Message, msg
from .validators import flag, shown

# In write_policy.disabled_scopes: learning is off for every scope.
EVERY_SCOPE = "*"
# The memory tools the model may be offered (doors/tools.py), tools.offered.
TOOLS = ("search", "remember", "expand")

# Each setting that went, with its default then (tests/test_config.py holds their constants).
REMOVED: dict[str, Any] = {
    "write_policy.enable": True, "read_policy.event_importance": 0.5, "read_policy.day_weight": 0.5,
    "extraction.poll_seconds": 5.0, "extraction.max_attempts": 6, "extraction.max_fact_chars": 300,
    "recording.record_tool_results": True, "recording.tool_result_max_chars": 2000,
    "recording.max_message_chars": 8000, "vectors.max_loaded_namespaces": 256, "rerank.timeout_seconds": 1.0,
    "rerank.candidates": 60, "tools.search": True, "tools.remember": True, "tools.expand": True,
    "tools.search_max_tokens": 600, "drift.threshold": 0.9, "summaries.max_events": 60, "summaries.rollups": True,
    "summaries.keep_parts_days": 30, "summaries.last_session_in_block": True, "summaries.max_chars": 1200,
}
# What the worker's poll follows now (config.ExtractionConfig.poll_seconds).
_POLL = "extraction.idle_seconds / 3, ≤ 5"


def upgraded(raw: Mapping[str, Any]) -> tuple[dict[str, Any], list[Message]]:
    """A copy of the settings ``raw`` without the settings that went, each
    carried over or dropped; a note for each value that changes what the plugin does."""
    out = copy.deepcopy(dict(raw))
    notes: list[Message] = []
    for path, default in REMOVED.items():
        section, _, name = path.partition(".")
        part = out.get(section)
        if not isinstance(part, dict) or name not in part:
            continue
        value = on = part.pop(name)
        if section == "write_policy" or name in TOOLS:
            try:
                on = flag(value, path)
            except AdminError:
                on = default  # not a yes/no: dropped, as it was then
            where = section + "." + (_carry(part, "disabled_scopes", EVERY_SCOPE, add=not on)
                                     if section == "write_policy" else _carry(part, "offered", name, add=on))
            if not on:
                notes.append(msg("config.removed_to", name=path, value=shown(value), to=where))
                continue
        if on != default:
            fixed = _POLL if name == "poll_seconds" else shown(default)
            notes.append(msg("config.removed", name=path, value=shown(value), fixed=fixed))
    return out, notes


def _carry(part: dict[str, Any], name: str, entry: str, *, add: bool) -> str:
    """Puts ``entry`` in the list ``part[name]`` (or takes it out); says where it went."""
    given = part.get(name, [] if name == "disabled_scopes" else list(TOOLS))
    entries = [v.strip() for v in given.split(",")] if isinstance(given, str) else \
        list(given) if isinstance(given, list) else []
    entries = [v for v in entries if v != entry] + ([entry] if add else [])
    part[name] = [t for t in TOOLS if t in entries] if name == "offered" else entries
    return f"{name} {part[name]}"


def carried_over(saved: Mapping[str, Any] | None, current: Mapping[str, Any]) -> tuple[dict[str, Any], list[Message]]:
    """AstrBot's settings ``current`` with what ``saved`` (the file before
    AstrBot dropped the settings that went) held in them carried over; a note for each."""
    left: dict[str, dict[str, Any]] = {}
    for path in REMOVED:
        section, _, name = path.partition(".")
        part = (saved or {}).get(section)
        if isinstance(part, dict) and name in part:
            left.setdefault(section, {})[name] = part[name]
    out, notes = upgraded(merged(current, left))
    return {k: v for k, v in out.items() if k in current or v != {}}, notes  # no empty section that went


def merged(raw: Mapping[str, Any], changes: Mapping[str, Any], *, replace: bool = False) -> dict[str, Any]:
    """The settings ``raw`` with ``changes``, a section merged (``replace``: as given)."""
    out = copy.deepcopy(dict(raw))
    for key, value in changes.items():
        if isinstance(value, dict) and not replace:
            out[key] = {**(out[key] if isinstance(out.get(key), dict) else {}), **copy.deepcopy(value)}
        else:
            out[key] = copy.deepcopy(value)
    return out
