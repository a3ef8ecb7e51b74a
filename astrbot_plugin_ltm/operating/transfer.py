"""Export and import of memories between bots.

An export is JSON: a format name and version, the filters used, every item
with its evidence and source events, a SHA-256 checksum per item and one
over the whole list. An import validates all of it before writing anything,
can be dry-run to report what would be added, merged or skipped, runs in
one transaction (all or nothing) and is idempotent: importing the same file
twice changes nothing the second time.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from ..clock import Clock, as_utc, utcnow
from ..enums import MEMORY_TYPES, SCOPE_KINDS, AuditAction, ExtractionStatus, Method, Status
from ..storing.audit import audit
from ..storing.database import Database
from ..storing.keyword_rows import index_turns
from ..storing.memory_rows import fact_written, memory_changed
from ..storing.tables import MemoryEvent, MemoryEvidence, MemoryItem, MemoryTombstone
from ..text import normalize_fact_key
from .errors import AdminError
from .queries import ItemFilter
from .serialize import EVENT_FIELDS, HISTORY_FIELDS, ITEM_FIELDS, evidence_dict, item_dict

FORMAT = "astrbot_plugin_ltm.export"
VERSION = 1
MAX_IMPORT_BYTES = 20 * 1024 * 1024
MAX_IMPORT_ITEMS = 100_000



def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def checksum(value: Any) -> str:
    return hashlib.sha256(canonical(value)).hexdigest()


def _iso(value: datetime) -> str:
    return value.isoformat()


async def export_items(db: Database, f: ItemFilter, now: datetime | None = None) -> dict[str, Any]:
    async with db.read() as session:
        items = (await session.execute(
            select(MemoryItem).where(*f.conditions()).order_by(MemoryItem.id))).scalars().all()
        links = (await session.execute(
            select(MemoryEvidence, MemoryEvent)
            .join(MemoryEvent, MemoryEvent.event_id == MemoryEvidence.event_id, isouter=True)
            .where(MemoryEvidence.memory_id.in_([i.memory_id for i in items]))
            .order_by(MemoryEvidence.id)
        )).all() if items else []
    by_item: dict[str, list[dict[str, Any]]] = {}
    for link, event in links:
        by_item.setdefault(link.memory_id, []).append(evidence_dict(link, event, EVENT_FIELDS))
    out_items = []
    for item in items:
        record = {**item_dict(item), "evidence": by_item.get(item.memory_id, [])}
        record["checksum"] = checksum(record)
        out_items.append(record)
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": _iso(now or utcnow()),
        "filters": {k: v for k, v in vars(f).items() if v is not None},
        "count": len(out_items),
        "items": out_items,
        "checksum": checksum([i["checksum"] for i in out_items]),
    }


@dataclass
class ImportReport:
    dry_run: bool
    added: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "added": len(self.added),
            "merged": len(self.merged),
            "skipped": len(self.skipped),
            "details": {"added": self.added, "merged": self.merged, "skipped": self.skipped},
        }


def _parse_time(value: Any, where: str) -> datetime:
    if not isinstance(value, str):
        raise AdminError(f"{where}: expected an ISO timestamp")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise AdminError(f"{where}: {exc}") from exc
    return parsed if parsed.utcoffset() is not None else parsed.replace(tzinfo=UTC)


def validate_export(payload: Any) -> list[dict[str, Any]]:
    """Check format, version, checksums and every field; return the items."""
    if not isinstance(payload, dict):
        raise AdminError("an export is a JSON object")
    if payload.get("format") != FORMAT:
        raise AdminError(f"not an export of this plugin (format must be {FORMAT!r})")
    if payload.get("version") != VERSION:
        raise AdminError(f"unsupported export version {payload.get('version')!r} (this plugin reads {VERSION})")
    items = payload.get("items")
    if not isinstance(items, list):
        raise AdminError("items must be a list")
    if len(items) > MAX_IMPORT_ITEMS:
        raise AdminError(f"too many items ({len(items)}; at most {MAX_IMPORT_ITEMS} per import)", 413)
    for n, item in enumerate(items):
        where = f"items[{n}]"
        if not isinstance(item, dict):
            raise AdminError(f"{where}: not an object")
        claimed = item.get("checksum")
        body = {k: v for k, v in item.items() if k != "checksum"}
        if claimed != checksum(body):
            raise AdminError(f"{where}: checksum mismatch (the file was changed after export)")
        missing = [k for k in ITEM_FIELDS if k not in item and k not in HISTORY_FIELDS]
        if missing:
            raise AdminError(f"{where}: missing {missing}")
        if item["type"] not in MEMORY_TYPES:
            raise AdminError(f"{where}: unknown type {item['type']!r}")
        if item["status"] not in tuple(Status):
            raise AdminError(f"{where}: unknown status {item['status']!r}")
        if item["scope"] not in SCOPE_KINDS or not isinstance(item["scope_id"], str) or not item["scope_id"]:
            raise AdminError(f"{where}: bad scope")
        if not isinstance(item["fact"], str) or not item["fact"].strip():
            raise AdminError(f"{where}: empty fact")
        if normalize_fact_key(item["fact_key"]) != item["fact_key"] or not item["fact_key"]:
            raise AdminError(f"{where}: fact_key is not normalised")
        for k in ("confidence", "importance"):
            v = item[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise AdminError(f"{where}: {k} must be a number from 0 to 1")
        count = item["evidence_count"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise AdminError(f"{where}: evidence_count must be a whole number ≥ 1")
        if item["ttl_days"] is not None and (not isinstance(item["ttl_days"], int) or item["ttl_days"] < 0):
            raise AdminError(f"{where}: ttl_days must be null or a whole number ≥ 0")
        for k in ("created_at", "updated_at"):
            _parse_time(item[k], f"{where}.{k}")
        for k in ("valid_from", "valid_to"):
            if item.get(k) is not None:
                _parse_time(item[k], f"{where}.{k}")
        for k in ("supersedes", "superseded_by"):
            if item.get(k) is not None and not isinstance(item[k], str):
                raise AdminError(f"{where}: {k} must be a memory id or null")
        if not isinstance(item.get("evidence", []), list):
            raise AdminError(f"{where}: evidence must be a list")
        for m, ev in enumerate(item.get("evidence", [])):
            if not isinstance(ev, dict) or not isinstance(ev.get("event_id"), str):
                raise AdminError(f"{where}.evidence[{m}]: needs an event_id")
            event = ev.get("event")
            if event is not None and (not isinstance(event, dict) or any(k not in event for k in EVENT_FIELDS)):
                raise AdminError(f"{where}.evidence[{m}].event: incomplete event")
    if payload.get("checksum") != checksum([i["checksum"] for i in items]):
        raise AdminError("file checksum mismatch (items were added, removed or reordered)")
    ids = [i["memory_id"] for i in items]
    if len(set(ids)) != len(ids):
        raise AdminError("duplicate memory_id in the export")
    return items


async def import_items(db: Database, payload: Any, actor: str, dry_run: bool,
                       clock: Clock = utcnow) -> ImportReport:
    """Validate everything first; then, unless dry-run, write in one transaction."""
    items = validate_export(payload)
    report = ImportReport(dry_run=dry_run)
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
                report.skipped.append({"memory_id": record["memory_id"], "reason": "already present"})
                continue
            if tomb is not None:
                report.skipped.append({"memory_id": record["memory_id"], "reason": "deleted here by an operator"})
                continue
            target = existing or same_key
            if target is not None:
                if not await _merge_changes_anything(session, target, record):
                    report.skipped.append({"memory_id": record["memory_id"], "reason": "already merged"})
                    continue
                report.merged.append(record["memory_id"])
                if not dry_run:
                    await _merge(session, target, record, actor, now)
                continue
            report.added.append(record["memory_id"])
            if not dry_run:
                await _add(session, record, actor, now)
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
                session.add(row)
                await session.flush()
                await index_turns(session, [row])
        linked.append((ev["event_id"], ev))
    return linked


async def _link(session: AsyncSession, memory_id: str, linked: list[tuple[str, dict[str, Any]]]) -> int:
    added = 0
    for event_id, ev in linked:
        exists = (
            await session.execute(
                select(MemoryEvidence.id)
                .where(MemoryEvidence.memory_id == memory_id, MemoryEvidence.event_id == event_id)
            )
        ).scalar_one_or_none()
        if exists is None:
            session.add(MemoryEvidence(
                memory_id=memory_id, event_id=event_id,
                extraction_method=ev.get("extraction_method") or Method.RULE,
                extraction_meta={**(ev.get("extraction_meta") or {}), "imported": True},
                created_at=_parse_time(ev.get("created_at") or utcnow().isoformat(), "evidence"),
            ))
            added += 1
    return added


async def _add(session: AsyncSession, record: dict[str, Any], actor: str, now: datetime) -> None:
    linked = await _ensure_events(session, record)
    times = ("created_at", "updated_at", "valid_from", "valid_to")
    given: dict[str, Any] = {k: record.get(k) for k in ITEM_FIELDS if k not in times}
    item = MemoryItem(
        **given,
        created_at=_parse_time(record["created_at"], "created_at"),
        updated_at=_parse_time(record["updated_at"], "updated_at"),
        valid_from=_parse_time(record.get("valid_from") or record["created_at"], "valid_from"),
        valid_to=_parse_time(record["valid_to"], "valid_to") if record.get("valid_to") else None,
    )
    session.add(item)
    await session.flush()
    await fact_written(session, item, created=True)
    await _link(session, item.memory_id, linked)
    audit(session, AuditAction.IMPORT, actor, "imported", item=item, now=now, fact=item.fact)


async def _merge_changes_anything(session: AsyncSession, target: MemoryItem, record: dict[str, Any]) -> bool:
    linked = set(
        (await session.execute(
            select(MemoryEvidence.event_id).where(MemoryEvidence.memory_id == target.memory_id))).scalars()
    )
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
    added = await _link(session, target.memory_id, linked)
    target.evidence_count = max(target.evidence_count, record["evidence_count"], target.evidence_count + added)
    target.confidence = max(target.confidence, record["confidence"])
    target.importance = max(target.importance, record["importance"])
    target.updated_at = max(as_utc(target.updated_at), _parse_time(record["updated_at"], "updated_at"))
    memory_changed(session, target)
    audit(session, AuditAction.IMPORT, actor, "merged from an import", item=target, now=now,
                imported_memory_id=record["memory_id"], imported_fact=record["fact"])
