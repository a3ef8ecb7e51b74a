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

from ..config import parse_config
from ..engine import LTMEngine
from ..enums import MEMORY_TYPES, SCOPE_KINDS, ExtractionStatus, SourceType, Status
from ..logs import log
from ..scope import Scope
from ..storing.database import ReadOnlyError
from .errors import AdminError
from .queries import SORTS, AuditFilter, EventFilter, ItemFilter
from .serialize import audit_dict, event_dict, item_dict
from .transfer import MAX_IMPORT_BYTES, export_items, import_items

MAX_PAGE_SIZE = 200
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
        sort = _choice(query, "sort", tuple(SORTS)) or "updated"
        text = (query.get("q") or "").strip()
        offset = (page - 1) * size
        if text:  # ranked by relevance
            items, total = await self.engine.admin.search_items(f, text, offset, size)
        else:
            items, total = await self.engine.admin.list_items(f, sort=sort, offset=offset, limit=size)
        return {"items": [item_dict(i) for i in items], "total": total, "page": page, "page_size": size}

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
        f = EventFilter(
            scope=_choice(query, "scope", SCOPE_KINDS),
            scope_id=query.get("scope_id") or None,
            status=_choice(query, "status", tuple(ExtractionStatus)),
            source_type=_choice(query, "source_type", tuple(SourceType)),
            session_id=query.get("session_id") or None,
        )
        events, total = await self.engine.admin.list_events(f, (page - 1) * size, size)
        return {"events": [event_dict(e) for e in events], "total": total, "page": page, "page_size": size}

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
        f = AuditFilter(**{name: query.get(name) or None
                           for name in ("action", "memory_id", "scope", "scope_id", "session_id", "actor")})
        entries, total = await self.engine.admin.audit_log(f, (page - 1) * size, size)
        return {"entries": [audit_dict(a) for a in entries], "total": total, "page": page, "page_size": size}

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
            reasons = "; ".join(p.split("; using the default")[0] for p in problems)
            raise AdminError(f"invalid settings, nothing changed: {reasons}")
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
        await self.engine.admin.audit_config(changes, _actor(user))
        log.info("ltm: policy changed by %s: %s", _actor(user), json.dumps(changes, ensure_ascii=False))

    # -- export / import ---------------------------------------------------------

    async def export(self, query: Mapping[str, Any]) -> dict[str, Any]:
        f = ItemFilter(
            scope=_choice(query, "scope", SCOPE_KINDS),
            scope_id=query.get("scope_id") or None,
            status=_choice(query, "status", tuple(Status)),
            type=_choice(query, "type", MEMORY_TYPES),
        )
        return await export_items(self.engine.db, f, self.engine.clock())

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
        report = await import_items(self.engine.db, payload, _actor(user), dry_run, self.engine.clock)
        return report.as_dict()
