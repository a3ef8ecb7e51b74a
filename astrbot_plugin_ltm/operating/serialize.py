"""Rows as JSON, one way for the API, the review page and export files."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..storing.tables import MemoryAudit, MemoryEvent, MemoryEvidence, MemoryItem

ITEM_FIELDS = ("memory_id", "scope", "scope_id", "type", "fact", "fact_key", "confidence", "importance",
               "evidence_count", "ttl_days", "status", "awaiting_approval", "created_at", "updated_at",
               "valid_from", "valid_to", "supersedes", "superseded_by", "held_reason")
# A memory's history and why it waits (0.2): files exported before lack these fields.
HISTORY_FIELDS = ("valid_from", "valid_to", "supersedes", "superseded_by", "held_reason")
# How often a memory was used (recalling.usage): shown by the API, not
# exported (a count of this store's reads, not part of the memory).
USAGE_FIELDS = ("injected_count", "tool_count", "use_count", "last_used_at")
# What an export carries of an event: what it was, who said it, when.
EVENT_FIELDS = ("event_id", "scope", "scope_id", "source_type", "source_role", "content", "platform_id",
                "session_id", "sender_id", "sender_name", "created_at")
# The API adds where extraction stands.
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
