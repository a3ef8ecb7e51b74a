"""The operator API behind the dashboard routes, independent of any web
framework: each method takes plain values (path parameters, query strings,
a JSON body, the dashboard user) and returns an :class:`ApiResponse`.

Every answer is ``{"status": "ok", "data": …}`` or ``{"status": "error",
"message": …}`` with a fitting HTTP status; bad input never produces a stack
trace, and nothing is written unless the whole request is valid.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import and_, func, select

from .logs import log
from .admin import AdminError, ItemFilter, event_dict, item_dict
from .config import parse_config
from .db import ReadOnlyError, fts_search
from .engine import LTMEngine
from .models import ExtractionStatus, MemoryAudit, MemoryEvent, MemoryItem
from .policy import MEMORY_TYPES, Status
from .scope import SCOPE_KINDS, Scope
from .text import query_tokens
from .transfer import MAX_IMPORT_BYTES, export_items, import_items
from .writer import audit


MAX_PAGE_SIZE = 200
SEARCH_LIMIT = 1000  # text-search hits considered, best first
EDITABLE_POLICY_KEYS = ("enable", "emergency_read_only", "write_policy", "read_policy")


@dataclass(frozen=True)
class ApiResponse:
    status: int
    body: dict[str, Any]


def ok(data: Any) -> ApiResponse:
    return ApiResponse(200, {"status": "ok", "data": data})


def error(status: int, message: str, data: Any = None) -> ApiResponse:
    body: dict[str, Any] = {"status": "error", "message": message}
    if data is not None:
        body["data"] = data
    return ApiResponse(status, body)


def _int(query: Mapping[str, Any], name: str, default: int, lo: int, hi: int) -> int:
    raw = query.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(str(raw))
    except ValueError:
        raise AdminError(f"{name} must be a whole number") from None
    if not lo <= value <= hi:
        raise AdminError(f"{name} must be between {lo} and {hi}")
    return value


def _page(query: Mapping[str, Any]) -> tuple[int, int]:
    page = _int(query, "page", 1, 1, 10**9)
    size = _int(query, "page_size", 50, 1, MAX_PAGE_SIZE)
    return page, size


def _choice(query: Mapping[str, Any], name: str, choices: tuple[str, ...]) -> str | None:
    value = query.get(name) or None
    if value is not None and value not in choices:
        raise AdminError(f"{name} must be one of {', '.join(choices)}")
    return value


def _actor(user: str | None) -> str:
    return f"operator:{user or 'dashboard'}"


class MemoryAPI:
    def __init__(
        self,
        engine: LTMEngine,
        raw_config: Callable[[], dict[str, Any]],
        save_config: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> None:
        self.engine = engine
        self._raw_config = raw_config
        self._save_config = save_config

    async def call(self, method: Callable[..., Awaitable[Any]], *args: Any) -> ApiResponse:
        """Run one API method, turning every failure into a clear answer."""
        try:
            return ok(await method(*args))
        except AdminError as exc:
            return error(exc.status, str(exc))
        except ReadOnlyError as exc:
            return error(409, str(exc))
        except Exception as exc:  # never a stack trace to the client
            log.exception("ltm: API error")
            return error(500, f"internal error ({type(exc).__name__}); see the AstrBot log")

    # -- items -------------------------------------------------------------

    async def list_items(self, query: Mapping[str, Any]) -> dict[str, Any]:
        page, size = _page(query)
        min_conf = query.get("min_confidence")
        try:
            min_confidence = float(min_conf) if min_conf not in (None, "") else None
        except ValueError:
            raise AdminError("min_confidence must be a number") from None
        if min_confidence is not None and not 0 <= min_confidence <= 1:
            raise AdminError("min_confidence must be between 0 and 1")
        scope = _choice(query, "scope", SCOPE_KINDS)
        f = ItemFilter(
            scope=scope,
            scope_id=query.get("scope_id") or None,
            type=_choice(query, "type", MEMORY_TYPES),
            status=_choice(query, "status", (*Status, "pending")),
            min_confidence=min_confidence,
        )
        sort = _choice(query, "sort", ("updated", "confidence", "importance", "created")) or "updated"
        text = (query.get("q") or "").strip()
        if text:  # ranked by relevance
            return await self._search_items(f, text, page, size)
        items, total = await self.engine.admin.list_items(f, sort=sort, offset=(page - 1) * size, limit=size)
        return {"items": [item_dict(i) for i in items], "total": total, "page": page, "page_size": size}

    async def _search_items(self, f: ItemFilter, text: str, page: int, size: int) -> dict[str, Any]:
        """Text search through the keyword index (no full scan), CJK included."""
        tokens = query_tokens(text)
        if not tokens:
            raise AdminError("the search text has no searchable words")
        scopes = [(f.scope, f.scope_id)] if f.scope and f.scope_id else None
        statuses = tuple(Status) if f.status in (None, "pending") else (f.status,)
        conditions = f.conditions(by_id=True)
        hits = await self.engine.db.run(
            lambda conn: fts_search(conn, tokens, scopes, statuses, SEARCH_LIMIT)
        )
        async with self.engine.db.read() as session:
            ids = [rowid for rowid, _ in hits]
            passing = set((await session.execute(select(MemoryItem.id).where(MemoryItem.id.in_(ids), *conditions))).scalars())
            ranked = [i for i in ids if i in passing]
            window = ranked[(page - 1) * size : page * size]  # only a page is loaded as objects
            rows = await session.execute(select(MemoryItem).where(MemoryItem.id.in_(window)))
            found = {i.id: i for i in rows.scalars()}
        return {"items": [item_dict(found[i]) for i in window if i in found], "total": len(ranked),
                "page": page, "page_size": size}

    async def get_item(self, memory_id: str) -> dict[str, Any]:
        return await self.engine.admin.get_item(memory_id)

    async def patch_item(self, memory_id: str, body: Any, user: str | None) -> dict[str, Any]:
        if not isinstance(body, dict) or not body:
            raise AdminError("send a JSON object with the fields to change")
        item = await self.engine.admin.update_item(memory_id, body, _actor(user))
        return item_dict(item)

    async def delete_item(self, memory_id: str, user: str | None) -> dict[str, Any]:
        return await self.engine.admin.delete(memory_id, _actor(user), "deleted in the dashboard")

    async def review(self, body: Any, user: str | None) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise AdminError('send {"memory_ids": [...], "decision": "approve" | "reject"}')
        ids = body.get("memory_ids")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise AdminError("memory_ids must be a list of ids")
        if len(ids) > 1000:
            raise AdminError("at most 1000 memories per review")
        reason = body.get("reason") or ""
        if not isinstance(reason, str):
            raise AdminError("reason must be text")
        results = await self.engine.admin.review(ids, body.get("decision", ""), _actor(user), reason)
        return {"reviewed": results}

    # -- events, stats, audit --------------------------------------------------

    async def list_events(self, query: Mapping[str, Any]) -> dict[str, Any]:
        page, size = _page(query)
        conditions = []
        scope = _choice(query, "scope", SCOPE_KINDS)
        if scope:
            conditions.append(MemoryEvent.scope == scope)
        if query.get("scope_id"):
            conditions.append(MemoryEvent.scope_id == query["scope_id"])
        status = _choice(query, "status", (ExtractionStatus.PENDING, ExtractionStatus.DONE,
                                           ExtractionStatus.FAILED, ExtractionStatus.SKIPPED))
        if status:
            conditions.append(MemoryEvent.extraction_status == status)
        source = _choice(query, "source_type", ("message", "tool_result", "system"))
        if source:
            conditions.append(MemoryEvent.source_type == source)
        if query.get("session_id"):
            conditions.append(MemoryEvent.session_id == query["session_id"])
        where = and_(True, *conditions)
        async with self.engine.db.read() as session:
            total = (await session.execute(select(func.count()).select_from(MemoryEvent).where(where))).scalar_one()
            rows = await session.execute(
                select(MemoryEvent).where(where).order_by(MemoryEvent.created_at.desc(), MemoryEvent.id.desc())
                .offset((page - 1) * size).limit(size)
            )
            events = [event_dict(e) for e in rows.scalars()]
        return {"events": events, "total": total, "page": page, "page_size": size}

    async def stats(self, query: Mapping[str, Any]) -> dict[str, Any]:
        scope = _choice(query, "scope", SCOPE_KINDS)
        scopes = [Scope(scope, query["scope_id"])] if scope and query.get("scope_id") else None
        per_scope = await self.engine.admin.stats(scopes, kind=scope)
        return {
            "scopes": per_scope,
            "totals": {
                "items": sum(sum(s["by_status"].values()) for s in per_scope),
                "awaiting_approval": sum(s["awaiting_approval"] for s in per_scope),
                "shadow": sum(s["by_status"].get("shadow", 0) for s in per_scope),
                "pending_events": sum(s["events"]["pending"] for s in per_scope),
                "failed_events": sum(s["events"]["failed"] for s in per_scope),
                "writes_last_hour": sum(s["writes_last_hour"] for s in per_scope),
            },
            "events_not_recorded_read_only": self.engine.recorder.dropped_read_only,
            "emergency_read_only": self.engine.config.emergency_read_only,
            "mode": self.engine.config.write_policy.mode,
        }

    async def audit_log(self, query: Mapping[str, Any]) -> dict[str, Any]:
        page, size = _page(query)
        conditions = []
        for name in ("action", "memory_id", "scope", "scope_id", "session_id"):
            if query.get(name):
                conditions.append(getattr(MemoryAudit, name) == query[name])
        if query.get("actor"):
            conditions.append(MemoryAudit.actor == query["actor"])
        where = and_(True, *conditions)
        async with self.engine.db.read() as session:
            total = (await session.execute(select(func.count()).select_from(MemoryAudit).where(where))).scalar_one()
            rows = (
                await session.execute(
                    select(MemoryAudit).where(where).order_by(MemoryAudit.created_at.desc(), MemoryAudit.id.desc())
                    .offset((page - 1) * size).limit(size)
                )
            ).scalars()
            entries = [
                {"id": a.id, "created_at": a.created_at.isoformat(), "action": a.action, "memory_id": a.memory_id,
                 "scope": a.scope, "scope_id": a.scope_id, "session_id": a.session_id, "actor": a.actor,
                 "reason": a.reason, "detail": a.detail}
                for a in rows
            ]
        return {"entries": entries, "total": total, "page": page, "page_size": size}

    # -- policy --------------------------------------------------------------

    async def get_policy(self) -> dict[str, Any]:
        cfg = self.engine.config
        return {
            "enable": cfg.enable,
            "emergency_read_only": cfg.emergency_read_only,
            "write_policy": asdict(cfg.write_policy),
            "read_policy": asdict(cfg.read_policy),
            "config_warnings": self.engine.config_errors,
        }

    async def put_policy(self, body: Any, user: str | None) -> dict[str, Any]:
        if not isinstance(body, dict) or not body:
            raise AdminError("send a JSON object with the settings to change")
        unknown = set(body) - set(EDITABLE_POLICY_KEYS)
        if unknown:
            raise AdminError(f"cannot change {sorted(unknown)} here; changeable: {', '.join(EDITABLE_POLICY_KEYS)}")
        raw = copy.deepcopy(self._raw_config())
        for key, value in body.items():
            if isinstance(value, dict):
                if not isinstance(raw.get(key), dict):
                    raw[key] = {}
                raw[key].update(value)
            else:
                raw[key] = value
        _, problems = parse_config(raw)
        if problems:
            # Through the API an invalid value is refused, not defaulted.
            raise AdminError("invalid settings, nothing changed: " + "; ".join(p.split("; using the default")[0] for p in problems))
        before = await self.get_policy()
        turning_read_only = self.engine.config.emergency_read_only is False and raw.get("emergency_read_only") is True
        if turning_read_only:  # the last write before the store closes
            await self._audit_policy(before, raw, user)
        await self._save_config(raw)
        self.engine.apply_config(raw)
        after = await self.get_policy()
        if not self.engine.config.emergency_read_only:
            await self._audit_policy(before, raw, user)
        return after

    async def _audit_policy(self, before: dict[str, Any], raw: dict[str, Any], user: str | None) -> None:
        new, _ = parse_config(raw)
        after = {"enable": new.enable, "emergency_read_only": new.emergency_read_only,
                 "write_policy": asdict(new.write_policy), "read_policy": asdict(new.read_policy)}
        changes = {k: [before[k], after[k]] for k in after if before[k] != after[k]}
        async with self.engine.db.write() as session:
            await audit(session, "config", _actor(user), "policy changed in the dashboard", changes=changes)
        log.info("ltm: policy changed by %s: %s", _actor(user), json.dumps(changes, ensure_ascii=False))

    # -- export / import ---------------------------------------------------------

    async def export(self, query: Mapping[str, Any]) -> dict[str, Any]:
        f = ItemFilter(
            scope=_choice(query, "scope", SCOPE_KINDS),
            scope_id=query.get("scope_id") or None,
            status=_choice(query, "status", tuple(Status)),
            type=_choice(query, "type", MEMORY_TYPES),
        )
        return await export_items(self.engine.db, f)

    async def import_(self, raw_body: bytes, query: Mapping[str, Any], user: str | None) -> dict[str, Any]:
        if len(raw_body) > MAX_IMPORT_BYTES:
            raise AdminError(f"import is larger than {MAX_IMPORT_BYTES // (1024 * 1024)} MiB", 413)
        try:
            payload = json.loads(raw_body.decode("utf-8-sig") or "null")
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise AdminError(f"not valid JSON: {exc}") from None
        dry_run = str(query.get("dry_run", "")).lower() in ("1", "true", "yes")
        # The review page posts {"dry_run": …, "export": {…}}; files and
        # scripts send the export itself.
        if isinstance(payload, dict) and "export" in payload and "format" not in payload:
            dry_run = dry_run or payload.get("dry_run") is True
            payload = payload["export"]
        report = await import_items(self.engine.db, payload, _actor(user), dry_run)
        return report.as_dict()
