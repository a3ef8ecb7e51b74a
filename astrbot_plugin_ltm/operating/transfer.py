"""Export and import of memories between bots.

An export is a JSON file: a format name and version, the filters used, every
item with its evidence and source events, a SHA-256 checksum per item and one
over the whole list. Checksums are taken over a canonical form of the values
(sorted keys, whole numbers written alike whether they came as 1 or 1.0), so
any JSON serialisation of the same values imports: a file re-saved by an
editor, a browser or ``json.dump`` still matches (docs/decisions.md#d30).

An import accepts the document itself or AstrBot's answer envelope around it
(``{"status": "ok", "data": {…}}``), validates all of it with the same field
validators as edits, can be dry-run to report what would be added, merged or
skipped, runs in one transaction (all or nothing) and is idempotent:
importing the same file twice changes nothing the second time.

Over 400 lines: export and import share the file format, the canonical checksums and
the validation of every field, which must agree byte for byte.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from .. import validators as v
from ..audience import stricter
from ..clock import Clock, as_utc, utcnow
from ..enums import AuditAction, ExtractionStatus, MemoryType, Method, Role, ScopeKind, SourceType, Status, Visibility
from ..errors import AdminError
from ..i18n import msg
from ..instructions import instruction_reason
from ..scope import Scope
from ..storing.audit import audit
from ..storing.database import Database
from ..storing.evidence import add_link, event_ids_of, links_of
from ..storing.keyword_rows import index_turns
from ..storing.memory_rows import fact_written, keep_private, memory_changed, share
from ..storing.tables import MemoryContext, MemoryEvent, MemoryItem, MemoryTombstone
from ..text import normalize_fact_key
from ..withholding import withhold
from .queries import ItemFilter
from .serialize import EVENT_FIELDS, HISTORY_FIELDS, ITEM_FIELDS, evidence_dict, item_dict

FORMAT = "astrbot_plugin_ltm.export"
VERSION = 1
MAX_IMPORT_BYTES = 20 * 1024 * 1024
MAX_IMPORT_ITEMS = 100_000
MAX_EVIDENCE_PER_ITEM = 10_000
SUMMARY_MAX_CHARS = 8000  # the upper bound of summaries.max_chars: a summary is longer than a fact
# The status imported memories get: the one they were exported with, or
# shadow awaiting approval ("import for review": nothing is used until approved).
AS_EXPORTED, FOR_REVIEW = "as_exported", "shadow"
IMPORT_STATUSES = (AS_EXPORTED, FOR_REVIEW)
REVIEW_REASON = str(msg("audit.imported_for_review"))


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


def _iso(value: datetime) -> str:
    return value.isoformat()


async def export_items(db: Database, f: ItemFilter, now: datetime | None = None) -> dict[str, Any]:
    async with db.read() as session:
        items = (await session.execute(
            select(MemoryItem).where(*f.conditions()).order_by(MemoryItem.id))).scalars().all()
        links = await links_of(session, items)
        said = (await session.execute(
            select(MemoryContext.item_id, MemoryContext.scope, MemoryContext.scope_id)
            .where(MemoryContext.item_id.in_([i.id for i in items])))).all() if items else []
    by_item: dict[str, list[dict[str, Any]]] = {}
    for link, event in links:
        by_item.setdefault(link.memory_id, []).append(evidence_dict(link, event, EVENT_FIELDS))
    said_in: dict[int, list[str]] = {}
    for item_id, kind, scope_id in said:
        said_in.setdefault(item_id, []).append(f"{kind}:{scope_id}")
    # Where each was said travels with it: who may hear it again (audience.py).
    records = [{**item_dict(item), "said_in": sorted(said_in.get(item.id or 0, [])),
                "evidence": by_item.get(item.memory_id, [])} for item in items]
    out_items = await asyncio.to_thread(_sealed, records)  # checksums off the event loop
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": _iso(now or utcnow()),
        "filters": {k: v for k, v in vars(f).items() if v is not None},
        "count": len(out_items),
        "items": out_items,
        "checksum": checksum([i["checksum"] for i in out_items]),
    }


def _sealed(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for record in records:
        record["checksum"] = checksum(record)
    return records


@dataclass
class ImportReport:
    dry_run: bool
    status: str = AS_EXPORTED  # what imported memories get: AS_EXPORTED or FOR_REVIEW
    added: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    # Each memory of the file: its fact, what the import does with it and the status it has after.
    memories: list[dict[str, Any]] = field(default_factory=list)

    def note(self, record: dict[str, Any], action: str, status: str, awaiting_approval: bool,
             reason: str | None = None) -> None:
        entry = {"memory_id": record["memory_id"], "fact": record["fact"], "type": record["type"],
                 "scope": f"{record['scope']}:{record['scope_id']}", "action": action, "status": status,
                 "awaiting_approval": awaiting_approval}
        self.memories.append({**entry, "reason": reason} if reason else entry)

    def as_dict(self) -> dict[str, Any]:
        by_status: dict[str, int] = {}
        for m in self.memories:
            if m["action"] == "add":
                by_status[m["status"]] = by_status.get(m["status"], 0) + 1
        return {
            "dry_run": self.dry_run,
            "status": self.status,
            "added": len(self.added),
            "merged": len(self.merged),
            "skipped": len(self.skipped),
            "added_by_status": by_status,
            "memories": self.memories,
            "details": {"added": self.added, "merged": self.merged, "skipped": self.skipped},
        }


def status_on_import(record: dict[str, Any], status: str) -> tuple[str, bool, str | None]:
    """(status, awaiting approval, held reason) a memory the import adds
    gets. History stays history; text that would steer the bot waits for
    a reviewer (a file is none); with FOR_REVIEW an active or shadow
    memory waits as shadow until approved (disabled and expired stay so)."""
    if record["status"] == Status.SUPERSEDED:
        return record["status"], bool(record["awaiting_approval"]), record.get("held_reason")
    held = instruction_reason(record["fact"])
    if held:
        return Status.SHADOW, True, str(msg("held.for_review", why=held))
    if status == FOR_REVIEW and record["status"] in (Status.ACTIVE, Status.SHADOW):
        return Status.SHADOW, True, None
    return record["status"], bool(record["awaiting_approval"]), record.get("held_reason")


def _parse_time(value: Any, where: str) -> datetime:
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
        "created_at": _parse_time(event["created_at"], "created_at").isoformat(),
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
        "created_at": _parse_time(ev["created_at"], "created_at").isoformat() if ev.get("created_at") else None,
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
        "created_at": _parse_time(item["created_at"], "created_at").isoformat(),
        "updated_at": _parse_time(item["updated_at"], "updated_at").isoformat(),
        # a memory's history; absent from files exported before it had one
        "valid_from": _parse_time(item.get("valid_from") or item["created_at"], "valid_from").isoformat(),
        "valid_to": _parse_time(item["valid_to"], "valid_to").isoformat() if item.get("valid_to") else None,
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


async def import_items(db: Database, payload: Any, actor: str, dry_run: bool,
                       clock: Clock = utcnow, max_fact_chars: int = 2000, status: str = AS_EXPORTED) -> ImportReport:
    """Validate everything first; then, unless dry-run, write in one
    transaction. ``status``: AS_EXPORTED, or FOR_REVIEW (status_on_import)."""
    if status not in IMPORT_STATUSES:
        raise AdminError(msg("import.bad_status"))
    # Checksums and fields of up to 100,000 items: CPU work, off the event loop.
    items = await asyncio.to_thread(validate_export, payload, max_fact_chars)
    report = ImportReport(dry_run=dry_run, status=status)
    now = clock()
    # A dry run reads; a real import holds the write lock for the whole plan,
    # so what it reports is exactly what it writes.
    context = db.read() if dry_run else db.write()
    async with context as session:
        for record in items:
            existing = (
                await session.execute(select(MemoryItem).where(MemoryItem.memory_id == record["memory_id"]))
            ).scalar_one_or_none()
            # History (a superseded value) is added as it is; a current
            # value merges with the current memory of its key.
            same_key = None if record["status"] == Status.SUPERSEDED else (
                await session.execute(
                    select(MemoryItem).where(
                        MemoryItem.scope == record["scope"], MemoryItem.scope_id == record["scope_id"],
                        MemoryItem.fact_key == record["fact_key"], MemoryItem.status != Status.SUPERSEDED,
                    )
                )
            ).scalar_one_or_none()
            tomb = await session.get(MemoryTombstone, (record["scope"], record["scope_id"], record["fact_key"]))
            if existing is not None and existing.fact == record["fact"]:
                why = str(msg("import.already_present"))
                report.skipped.append({"memory_id": record["memory_id"], "reason": why})
                report.note(record, "skip", existing.status, existing.awaiting_approval, why)
                continue
            if tomb is not None:  # the person's own wish, or an operator's: said as such
                why = str(msg("import.forgotten_here" if tomb.actor.startswith("user:") else "import.deleted_here"))
                report.skipped.append({"memory_id": record["memory_id"], "reason": why})
                report.note(record, "skip", "deleted", False, why)
                continue
            target = existing or same_key
            if target is not None:
                if not await _merge_changes_anything(session, target, record):
                    why = str(msg("import.already_merged"))
                    report.skipped.append({"memory_id": record["memory_id"], "reason": why})
                    report.note(record, "skip", target.status, target.awaiting_approval, why)
                    continue
                report.merged.append(record["memory_id"])
                # The local memory stays as it is, with the import's support added.
                report.note(record, "merge", target.status, target.awaiting_approval)
                if not dry_run:
                    await _merge(session, target, record, actor, now)
                continue
            report.added.append(record["memory_id"])
            given, waiting, _ = status_on_import(record, status)
            report.note(record, "add", given, waiting)
            if not dry_run:
                await _add(session, record, actor, now, status)
    return report


async def _ensure_events(session: AsyncSession, record: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    linked = []
    for ev in record.get("evidence", []):
        event = ev.get("event")
        if event is not None:
            exists = (
                await session.execute(select(MemoryEvent.id).where(MemoryEvent.event_id == event["event_id"]))
            ).scalar_one_or_none()
            if exists is None:
                row = MemoryEvent(**{k: event[k] for k in EVENT_FIELDS if k != "created_at"},
                                  created_at=_parse_time(event["created_at"], "event"),
                                  extraction_status=ExtractionStatus.DONE)
                await asyncio.to_thread(withhold, [row])
                session.add(row)
                await session.flush()
                await index_turns(session, [row])
        linked.append((ev["event_id"], ev))
    return linked


async def _link(session: AsyncSession, item: MemoryItem, linked: list[tuple[str, dict[str, Any]]]) -> int:
    added = 0
    for event_id, ev in linked:
        added += await add_link(
            session, item, event_id, ev.get("extraction_method") or Method.RULE,
            {**(ev.get("extraction_meta") or {}), "imported": True},
            _parse_time(ev.get("created_at") or utcnow().isoformat(), "evidence"))
    return added


async def _add(session: AsyncSession, record: dict[str, Any], actor: str, now: datetime,
               status: str = AS_EXPORTED) -> None:
    linked = await _ensure_events(session, record)
    times = ("created_at", "updated_at", "valid_from", "valid_to")
    given: dict[str, Any] = {k: record.get(k) for k in ITEM_FIELDS if k not in times}
    given["visibility"] = record.get("visibility") or Visibility.SHARED
    item = MemoryItem(
        **given,
        created_at=_parse_time(record["created_at"], "created_at"),
        updated_at=_parse_time(record["updated_at"], "updated_at"),
        valid_from=_parse_time(record.get("valid_from") or record["created_at"], "valid_from"),
        valid_to=_parse_time(record["valid_to"], "valid_to") if record.get("valid_to") else None,
    )
    # A file is no reviewer: text that would steer the bot waits for one
    # here, and "import for review" makes every memory wait.
    item.status, item.awaiting_approval, item.held_reason = status_on_import(record, status)
    reason = item.held_reason if item.held_reason and item.held_reason != record.get("held_reason") else \
        REVIEW_REASON if item.awaiting_approval and status == FOR_REVIEW else str(msg("audit.imported"))
    session.add(item)
    await session.flush()
    await fact_written(session, item, created=True)
    for group in record.get("said_in", []):
        await share(session, item, Scope(*group.split(":", 1)), created=True)
    await _link(session, item, linked)
    audit(session, AuditAction.IMPORT, actor, reason, item=item, now=now, fact=item.fact)


async def _merge_changes_anything(session: AsyncSession, target: MemoryItem, record: dict[str, Any]) -> bool:
    linked = set(await event_ids_of(session, [target.memory_id]))
    if any(ev["event_id"] not in linked for ev in record.get("evidence", [])):
        return True
    return (
        record["confidence"] > target.confidence
        or record["importance"] > target.importance
        or record["evidence_count"] > target.evidence_count
        or _parse_time(record["updated_at"], "updated_at") > as_utc(target.updated_at)
    )


async def _merge(session: AsyncSession, target: MemoryItem, record: dict[str, Any], actor: str,
                 now: datetime) -> None:
    """Keep the local item; add the import's evidence and take the stronger support."""
    linked = await _ensure_events(session, record)
    added = await _link(session, target, linked)
    target.evidence_count = max(target.evidence_count, record["evidence_count"], target.evidence_count + added)
    target.confidence = max(target.confidence, record["confidence"])
    target.importance = max(target.importance, record["importance"])
    target.updated_at = max(as_utc(target.updated_at), _parse_time(record["updated_at"], "updated_at"))
    # Private on either side stays private; the import's groups join the local ones.
    await keep_private(session, target, stricter(target.visibility, record.get("visibility") or Visibility.SHARED))
    for group in record.get("said_in", []):
        await share(session, target, Scope(*group.split(":", 1)), created=False)
    memory_changed(session, target)
    audit(session, AuditAction.IMPORT, actor, "merged from an import", item=target, now=now,
                imported_memory_id=record["memory_id"], imported_fact=record["fact"])
