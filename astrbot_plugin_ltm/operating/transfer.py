"""Export and import of memories between bots (the file itself is export_format.py's).

An import runs in one transaction (all or nothing) and is idempotent:
importing the same file twice changes nothing the second time.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from ..audience import stricter
from ..clock import Clock, as_utc, utcnow
from ..enums import AuditAction, ExtractionStatus, Method, Status, Visibility
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
from ..withholding import withhold
from .export_format import FORMAT, VERSION, checksum, parse_time, validate_export
from .queries import ItemFilter
from .serialize import EVENT_FIELDS, ITEM_FIELDS, evidence_dict, item_dict

# The status imported memories get: the one they were exported with, or
# shadow awaiting approval ("import for review": nothing is used until approved).
AS_EXPORTED, FOR_REVIEW = "as_exported", "shadow"
IMPORT_STATUSES = (AS_EXPORTED, FOR_REVIEW)
REVIEW_REASON = str(msg("audit.imported_for_review"))


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
    """(status, awaiting approval, held reason) of an imported memory. Text
    that would steer the bot waits for a reviewer (a file is none)."""
    if record["status"] == Status.SUPERSEDED:
        return record["status"], bool(record["awaiting_approval"]), record.get("held_reason")
    held = instruction_reason(record["fact"])
    if held:
        return Status.SHADOW, True, str(msg("held.for_review", why=held))
    if status == FOR_REVIEW and record["status"] in (Status.ACTIVE, Status.SHADOW):
        return Status.SHADOW, True, None
    return record["status"], bool(record["awaiting_approval"]), record.get("held_reason")




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
                                  created_at=parse_time(event["created_at"], "event"),
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
            parse_time(ev.get("created_at") or utcnow().isoformat(), "evidence"))
    return added


async def _add(session: AsyncSession, record: dict[str, Any], actor: str, now: datetime,
               status: str = AS_EXPORTED) -> None:
    linked = await _ensure_events(session, record)
    times = ("created_at", "updated_at", "valid_from", "valid_to")
    given: dict[str, Any] = {k: record.get(k) for k in ITEM_FIELDS if k not in times}
    given["visibility"] = record.get("visibility") or Visibility.SHARED
    item = MemoryItem(
        **given,
        created_at=parse_time(record["created_at"], "created_at"),
        updated_at=parse_time(record["updated_at"], "updated_at"),
        valid_from=parse_time(record.get("valid_from") or record["created_at"], "valid_from"),
        valid_to=parse_time(record["valid_to"], "valid_to") if record.get("valid_to") else None,
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
        or parse_time(record["updated_at"], "updated_at") > as_utc(target.updated_at)
    )


async def _merge(session: AsyncSession, target: MemoryItem, record: dict[str, Any], actor: str,
                 now: datetime) -> None:
    """Keep the local item; add the import's evidence and take the stronger support."""
    linked = await _ensure_events(session, record)
    added = await _link(session, target, linked)
    target.evidence_count = max(target.evidence_count, record["evidence_count"], target.evidence_count + added)
    target.confidence = max(target.confidence, record["confidence"])
    target.importance = max(target.importance, record["importance"])
    target.updated_at = max(as_utc(target.updated_at), parse_time(record["updated_at"], "updated_at"))
    # Private on either side stays private; the import's groups join the local ones.
    await keep_private(session, target, stricter(target.visibility, record.get("visibility") or Visibility.SHARED))
    for group in record.get("said_in", []):
        await share(session, target, Scope(*group.split(":", 1)), created=False)
    memory_changed(session, target)
    audit(session, AuditAction.IMPORT, actor, "merged from an import", item=target, now=now,
                imported_memory_id=record["memory_id"], imported_fact=record["fact"])
