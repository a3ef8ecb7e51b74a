"""Rows as JSON, one way for the API, the review page and export files."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any

from ..audience import seen_in
from ..enums import ScopeKind, Visibility
from ..i18n import CATALOGUE, Lang, code_of, say, translate
from ..scope import Scope
from ..storing.tables import MemoryAudit, MemoryEvent, MemoryEvidence, MemoryItem

ITEM_FIELDS = ("memory_id", "scope", "scope_id", "type", "fact", "fact_key", "confidence", "importance",
               "evidence_count", "ttl_days", "status", "awaiting_approval", "created_at", "updated_at",
               "valid_from", "valid_to", "supersedes", "superseded_by", "held_reason", "visibility")
# A memory's history and why it waits (0.2), who may hear it (0.3): files exported before lack these fields.
HISTORY_FIELDS = ("valid_from", "valid_to", "supersedes", "superseded_by", "held_reason", "visibility")
# How often a memory was used (recalling.usage): shown by the API, not
# exported (a count of this store's reads, not part of the memory).
USAGE_FIELDS = ("injected_count", "tool_count", "use_count", "last_used_at")
EVENT_FIELDS = ("event_id", "scope", "scope_id", "source_type", "source_role", "content", "platform_id",
                "session_id", "sender_id", "sender_name", "created_at")
EVENT_API_FIELDS = (*EVENT_FIELDS, "extraction_status", "attempts", "last_error")
AUDIT_FIELDS = ("id", "created_at", "action", "memory_id", "scope", "scope_id", "session_id", "actor",
                "reason", "detail")


def _json_value(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def row_dict(row: object, fields: tuple[str, ...]) -> dict[str, Any]:
    return {name: _json_value(getattr(row, name)) for name in fields}


def item_dict(item: MemoryItem) -> dict[str, Any]:
    return row_dict(item, ITEM_FIELDS)


def item_api_dict(item: MemoryItem) -> dict[str, Any]:
    """A memory as the API and the review page show it: with its usage."""
    return row_dict(item, (*ITEM_FIELDS, *USAGE_FIELDS))


def audience_dict(item: MemoryItem | Any, said_in: list[Scope], lang: Lang) -> dict[str, Any]:
    """Where a memory was said and which chats may recall it (audience.py),
    in words for the reader."""
    kept_in = Scope(item.scope, item.scope_id)
    chats = seen_in(kept_in, item.visibility, said_in)
    words = [say("audience.private_chat", lang, person=c.id) if c.kind == ScopeKind.USER
             else say("audience.group", lang, group=c.id) for c in chats]
    text = ("、" if lang == "zh" else ", ").join(words) or say("audience.nowhere", lang)
    if item.visibility == Visibility.SECRET:
        text = say("audience.secret", lang, chats=text)
    return {"visibility": item.visibility, "said_in": [str(s) for s in said_in],
            "seen_in": [str(c) for c in chats], "audience": text}


def event_dict(event: MemoryEvent) -> dict[str, Any]:
    return row_dict(event, EVENT_API_FIELDS)


def audit_dict(entry: MemoryAudit) -> dict[str, Any]:
    return row_dict(entry, AUDIT_FIELDS)


def evidence_dict(link: MemoryEvidence, event: MemoryEvent | None,
                  event_fields: tuple[str, ...] = EVENT_API_FIELDS) -> dict[str, Any]:
    """An evidence link with the event it points to (None: not stored here)."""
    return {
        "event_id": link.event_id,
        "extraction_method": link.extraction_method,
        "extraction_meta": link.extraction_meta,
        "created_at": _json_value(link.created_at),
        "event": None if event is None else row_dict(event, event_fields),
    }


# -- answers in the reader's language ------------------------------------------

# Fields whose text a person reads, stored in English from catalogue
# templates (reasons, verdicts, notes): shown translated, with "<field>_code".
SHOWN_TEXT_FIELDS = ("reason", "held_reason", "message", "verdict", "why")
# What people said, recorded as they said it: never translated, whatever its keys.
KEPT_AS_SAID_FIELDS = ("content", "extraction_meta")
# Lists of such texts: shown translated, with "<field>_codes" (GET policy's warnings).
SHOWN_TEXT_LISTS = ("config_warnings",)


@lru_cache(maxsize=4096)
def _code(text: str) -> str | None:
    return code_of(text)


def _progress_text(progress: dict[str, Any], lang: Lang) -> dict[str, Any]:
    """A job's progress with its stage as words ("replaying 6 / 6")."""
    code = f"progress.{progress.get('stage') or 'waiting'}"
    if code not in CATALOGUE:
        return progress
    return {**progress, "stage_code": code,
            "text": say(code, lang, done=progress.get("done", 0), total=progress.get("total", 0))}


def shown(data: Any, lang: Lang) -> Any:
    """An API answer with every stored reason in ``lang``, its code beside it.
    Old rows translate too: the code is found from the stored English."""
    if isinstance(data, list):
        return [shown(value, lang) for value in data]
    if not isinstance(data, dict):
        return data
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in KEPT_AS_SAID_FIELDS:
            out[key] = value
        elif key in SHOWN_TEXT_FIELDS and isinstance(value, str | None):
            out[key] = translate(value, lang) if value else value
            # {"code", "message"} already names its text
            if f"{key}_code" not in data and not (key == "message" and "code" in data):
                out[f"{key}_code"] = _code(value) if value else None
        elif key in SHOWN_TEXT_LISTS and isinstance(value, list) and all(isinstance(t, str) for t in value):
            out[key] = [translate(t, lang) for t in value]
            out[f"{key}_codes"] = [_code(t) for t in value]
        elif key == "progress" and isinstance(value, dict) and "stage" in value:
            out[key] = _progress_text(value, lang)
        else:
            out[key] = shown(value, lang)
    return out
