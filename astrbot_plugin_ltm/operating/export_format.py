"""The export file: its format, canonical checksums, reading an uploaded one,
and the check of every field it holds.

Checksums are taken over a canonical form of the values, so a file re-saved
by an editor, a browser or ``json.dump`` still matches (docs/decisions.md#d30).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .. import validators as v
from ..enums import MemoryType, Method, Role, ScopeKind, SourceType, Visibility
from ..errors import AdminError
from ..i18n import msg
from ..text import normalize_fact_key
from .serialize import EVENT_FIELDS, HISTORY_FIELDS, ITEM_FIELDS

FORMAT = "astrbot_plugin_ltm.export"
VERSION = 1
MAX_IMPORT_BYTES = 20 * 1024 * 1024
MAX_IMPORT_ITEMS = 100_000
MAX_EVIDENCE_PER_ITEM = 10_000
# A summary is longer than a fact: the most the summaries.max_chars setting allowed (it is a
# constant of 1,200 now), so an export from before imports.
SUMMARY_MAX_CHARS = 8000


def _normal_number(value: Any) -> Any:
    """1.0 and 1 are one value in JSON (JavaScript cannot tell them apart)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise AdminError(msg("api.not_finite"))
        if value.is_integer():
            return int(value)
    return value


def canonical(value: Any) -> bytes:
    """The bytes a checksum is taken over: sorted keys, no spaces, numbers
    normalised. Callers bound the depth first (validators.json_depth)."""
    def normal(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: normal(x) for k, x in node.items()}
        if isinstance(node, list):
            return [normal(x) for x in node]
        return node if isinstance(node, bool) else _normal_number(node)

    # surrogatepass: a file may spell half a surrogate pair ("\ud800"); it gets a
    # checksum like any text, and the field's validator refuses it.
    return json.dumps(normal(value), sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "surrogatepass")


def _legacy_canonical(value: Any) -> bytes:
    """How files exported before 1.0 and 1 were made equal were checksummed."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "surrogatepass")


def checksum(value: Any) -> str:
    return hashlib.sha256(canonical(value)).hexdigest()


def _checksum_matches(claimed: Any, value: Any) -> bool:
    if not isinstance(claimed, str):
        return False
    return claimed == checksum(value) or claimed == hashlib.sha256(_legacy_canonical(value)).hexdigest()


def file_name(document: dict[str, Any]) -> str:
    """The download's name: ltm-export-<the export's UTC date>.json."""
    return f"ltm-export-{str(document.get('exported_at', ''))[:10] or 'undated'}.json"


def file_bytes(document: dict[str, Any]) -> bytes:
    """The export as a file: the document itself, readable (indented, UTF-8)."""
    return json.dumps(document, ensure_ascii=False, indent=1).encode()


def parse_file(raw: bytes) -> Any:
    """The JSON of an uploaded file or request body, bounded in depth; a
    clear AdminError for anything that is not JSON."""
    try:
        textual = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise AdminError(msg("api.not_utf8", why=exc.reason, at=exc.start)) from None
    if not textual.strip():
        raise AdminError(msg("api.empty_body"))

    def no_constants(name: str) -> Any:
        raise AdminError(msg("api.json_constant", name=name))

    try:
        payload = json.loads(textual, parse_constant=no_constants)
    except json.JSONDecodeError as exc:
        raise AdminError(msg("api.bad_json", error=str(exc))) from None
    except RecursionError:
        raise AdminError(msg("api.json_depth", limit=v.MAX_JSON_DEPTH)) from None
    v.json_depth(payload)
    return payload


def unwrap(payload: Any) -> Any:
    """The export inside AstrBot's answer envelope, or the payload itself."""
    if (isinstance(payload, dict) and "format" not in payload and payload.get("status") == "ok"
            and isinstance(payload.get("data"), dict)):
        return payload["data"]
    return payload


def parse_time(value: Any, where: str) -> datetime:
    if not isinstance(value, str) or len(value) > 64:
        raise AdminError(msg("api.at", where=where, error=msg("api.iso_time")))
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise AdminError(msg("api.at", where=where, error=str(exc))) from exc
    return parsed if parsed.utcoffset() is not None else parsed.replace(tzinfo=UTC)


def _field(where: str, check: Callable[[], Any]) -> Any:
    """Run one field's validator; its message says which item it was."""
    try:
        return check()
    except AdminError as exc:
        raise AdminError(msg("api.at", where=where, error=exc.text)) from None


def _clean_event(event: Any, where: str) -> dict[str, Any]:
    if not isinstance(event, dict) or any(k not in event for k in EVENT_FIELDS):
        raise AdminError(msg("api.at", where=where, error=msg("api.incomplete_event", fields=", ".join(EVENT_FIELDS))))
    return _field(where, lambda: {
        "event_id": v.memory_id(event["event_id"], "event_id"),
        "scope": v.scope_kind(event["scope"]),
        "scope_id": v.scope_id(event["scope_id"]),
        "source_type": v.choice(event["source_type"], "source_type", tuple(SourceType)),
        "source_role": v.choice(event["source_role"], "source_role", tuple(Role)),
        "content": v.json_object(event["content"], "content"),
        **{k: v.stored_as_given(event[k], k, v.MAX_SCOPE_ID_CHARS)
           for k in ("platform_id", "session_id", "sender_id", "sender_name")},
        "created_at": parse_time(event["created_at"], "created_at").isoformat(),
    })


def _not_object(name: str) -> Any:
    raise AdminError(msg("api.must_be_object", name=name))


def _clean_evidence(ev: Any, where: str) -> dict[str, Any]:
    if not isinstance(ev, dict):
        raise AdminError(msg("api.at", where=where, error=msg("api.not_an_object")))
    meta = ev.get("extraction_meta")
    method = ev.get("extraction_method")
    return _field(where, lambda: {
        "event_id": v.memory_id(ev.get("event_id"), "event_id"),
        "extraction_method": v.choice(Method.RULE if method is None else method, "extraction_method", tuple(Method)),
        "extraction_meta": meta if meta is None or isinstance(meta, dict) else _not_object("extraction_meta"),
        "created_at": parse_time(ev["created_at"], "created_at").isoformat() if ev.get("created_at") else None,
        "event": None if ev.get("event") is None else _clean_event(ev["event"], "event"),
    })


def _clean_item(item: dict[str, Any], where: str, max_fact_chars: int) -> dict[str, Any]:
    """The item's fields through the shared validators; whole-number floats
    become ints, so what is stored is what an edit would store."""
    missing = [k for k in ITEM_FIELDS if k not in item and k not in HISTORY_FIELDS]
    if missing:
        raise AdminError(msg("api.at", where=where, error=msg("api.missing_fields", fields=missing)))
    evidence = item.get("evidence", [])
    if not isinstance(evidence, list):
        raise AdminError(msg("api.at", where=where, error=msg("api.evidence_list")))
    if len(evidence) > MAX_EVIDENCE_PER_ITEM:
        raise AdminError(msg("api.at", where=where, error=msg("api.evidence_max", max=MAX_EVIDENCE_PER_ITEM)))

    def fact() -> str:
        limit = SUMMARY_MAX_CHARS if item.get("type") == MemoryType.SUMMARY else max_fact_chars
        v.fact(item["fact"], limit)  # checked as an edit is; stored as exported
        return str(item["fact"])

    def fact_key() -> str:
        key = v.text(item["fact_key"], "fact_key", v.MAX_TEXT_CHARS, required=True)
        if normalize_fact_key(key) != key:
            raise AdminError(msg("api.fact_key_normal"))
        return key

    clean = _field(where, lambda: {
        "memory_id": v.memory_id(item["memory_id"], "memory_id"),
        "scope": v.scope_kind(item["scope"]),
        "scope_id": v.scope_id(item["scope_id"]),
        "type": v.memory_type(item["type"]),
        "fact": fact(),
        "fact_key": fact_key(),
        "confidence": v.unit(item["confidence"], "confidence"),
        "importance": v.unit(item["importance"], "importance"),
        "evidence_count": v.evidence_count(item["evidence_count"]),
        "ttl_days": v.ttl_days(item["ttl_days"]),
        "status": v.status(item["status"]),
        "awaiting_approval": v.flag(item["awaiting_approval"], "awaiting_approval"),
        "created_at": parse_time(item["created_at"], "created_at").isoformat(),
        "updated_at": parse_time(item["updated_at"], "updated_at").isoformat(),
        # a memory's history; absent from files exported before it had one
        "valid_from": parse_time(item.get("valid_from") or item["created_at"], "valid_from").isoformat(),
        "valid_to": parse_time(item["valid_to"], "valid_to").isoformat() if item.get("valid_to") else None,
        "supersedes": v.memory_id(item["supersedes"], "supersedes") if item.get("supersedes") else None,
        "superseded_by": v.memory_id(item["superseded_by"], "superseded_by") if item.get("superseded_by") else None,
        "held_reason": v.text(item["held_reason"], "held_reason") if item.get("held_reason") else None,
        # Who may hear it; a group's memory from a file of before cannot be placed: it counts as private.
        "visibility": v.choice(item["visibility"], "visibility", tuple(Visibility)) if item.get("visibility")
        else Visibility.PRIVATE if item["scope"] == ScopeKind.GROUP else Visibility.SHARED,
        "said_in": _said_in(item.get("said_in", [])),
    })
    clean["evidence"] = [_clean_evidence(ev, f"{where}.evidence[{m}]") for m, ev in enumerate(evidence)]
    return clean


def _said_in(value: Any) -> list[str]:
    """The groups a memory was said in: ``group:<id>`` each."""
    if not isinstance(value, list) or len(value) > MAX_EVIDENCE_PER_ITEM:
        raise AdminError(msg("import.said_in"))
    groups = [v.scope_id(g, "said_in") for g in value]
    if any(not g.startswith(f"{ScopeKind.GROUP}:") or not g.partition(":")[2] for g in groups):
        raise AdminError(msg("import.said_in"))
    return groups


def validate_export(payload: Any, max_fact_chars: int = 2000) -> list[dict[str, Any]]:
    """Check format, version, checksums and every field; return the items,
    their values as they will be stored."""
    v.json_depth(payload)
    payload = unwrap(payload)
    if not isinstance(payload, dict):
        raise AdminError(msg("api.export_object"))
    if payload.get("format") != FORMAT:
        raise AdminError(msg("api.export_format", format=repr(FORMAT)))
    if payload.get("version") != VERSION:
        raise AdminError(msg("api.export_version", version=v.shown(payload.get("version")), supported=VERSION))
    items = payload.get("items")
    if not isinstance(items, list):
        raise AdminError(msg("api.items_list"))
    if len(items) > MAX_IMPORT_ITEMS:
        raise AdminError(msg("api.too_many_items", count=len(items), max=MAX_IMPORT_ITEMS), 413)
    cleaned = []
    for n, item in enumerate(items):
        where = f"items[{n}]"
        if not isinstance(item, dict):
            raise AdminError(msg("api.at", where=where, error=msg("api.not_an_object")))
        body = {k: x for k, x in item.items() if k != "checksum"}
        if not _checksum_matches(item.get("checksum"), body):
            raise AdminError(msg("api.at", where=where, error=msg("api.item_checksum")))
        cleaned.append(_clean_item(item, where, max_fact_chars))
    if not _checksum_matches(payload.get("checksum"), [i["checksum"] for i in items]):
        raise AdminError(msg("api.file_checksum"))
    ids = [i["memory_id"] for i in cleaned]
    if len(set(ids)) != len(ids):
        raise AdminError(msg("api.duplicate_id"))
    return cleaned
