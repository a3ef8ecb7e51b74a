"""The operator API behind the dashboard routes, independent of any web
framework: each method takes plain values (path parameters, query strings,
a JSON body, the dashboard user) and returns an :class:`ApiResponse`.

Bad input never produces a stack trace, every field goes through
``validators``, and nothing is written unless the whole request is valid.
Each request is answered in one language (:func:`requests.request_lang`).

Over 400 lines: one method per route, each a few lines over the engine; the replay
routes live in replay_api.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from .. import validators as v
from ..config import POLICY_KEYS, policy_of, policy_schema
from ..engine import LTMEngine
from ..enums import (
    MEMORY_TYPES,
    SCOPE_KINDS,
    ExtractionStatus,
    PolicySource,
    ScopeKind,
    SourceType,
    Status,
    WriteMode,
)
from ..errors import AdminError
from ..i18n import Lang, code_of, msg, say, translate
from ..logs import log
from ..operating import rollback_preview
from ..operating.drift_monitor import MIN_ITEMS_FOR_ALARM
from ..operating.export_format import MAX_IMPORT_BYTES, file_bytes, file_name
from ..operating.meaning_search import search_by_meaning
from ..operating.pauses import Pause
from ..operating.policy_change import PUT_POLICY, refuse_unknown_keys
from ..operating.policy_versions import reason_text
from ..operating.policy_words import in_words
from ..operating.queries import SORTS, AuditFilter, EventFilter, ItemFilter
from ..operating.serialize import audience_dict, audit_dict, event_dict, item_api_dict, shown
from ..operating.storage import compact_days, compact_plan, start_compact
from ..operating.transfer import AS_EXPORTED, FOR_REVIEW, export_items, import_items
from ..scope import Scope
from ..storing.database import DatabaseBusyError, ReadOnlyError, is_full
from ..storing.tables import MemoryItem
from .preview import preview as preview_block
from .replay_api import ReplayAPI
from .requests import (
    ANSWER_LANG,
    ApiResponse,
    actor,
    answer_lang,
    error,
    import_request,
    known_scope,
    named_scope,
    object_body,
    ok,
    query_choice,
    query_page,
    query_text,
    version_number,
)

POLICY_CHANGE_SOURCES = (PolicySource.API.value, PolicySource.PAGE.value)
MAX_SEARCH_CHARS = 500
USER_VIEW_ROWS = 20  # events and audit rows on a user's page, newest first
SEARCH_KINDS = ("words", "meaning")  # GET items: by the words of q (keyword rows), or by its meaning (embeddings)
READ_ONLY_NOTE = str(msg("api.import_read_only"))


def _pause_dict(pause: Pause, lang: Lang) -> dict[str, Any]:
    return {**pause.as_dict(), "reason": translate(pause.reason, lang), "reason_code": code_of(pause.reason)}


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
        # Policy changes (this API's, the commands', rollbacks) save to the plugin config.
        engine.policy_versions.bind(raw_config, save_config)
        self.replay = ReplayAPI(engine, raw_config)  # policy replay, tuning, the holdout set

    async def call(self, method: Callable[..., Awaitable[Any]], *args: Any, lang: Lang = "en",
                   localize: bool = True) -> ApiResponse:
        """Run one API method, every failure a clear answer in ``lang``.
        ``localize`` is off for an export: its checksums cover its text as stored."""
        token = ANSWER_LANG.set(lang)
        try:
            data = await method(*args)
            return ok(shown(data, lang) if localize and method != self.export else data)
        except AdminError as exc:
            return error(exc.status, exc.message(lang), code=exc.code or code_of(str(exc)) or "api.error")
        except ReadOnlyError as exc:
            return error(409, translate(str(exc), lang), code=code_of(str(exc)) or "api.read_only")
        except DatabaseBusyError as exc:  # another program kept the write lock: nothing changed
            return error(503, translate(str(exc), lang), code="fault.db_busy_gave_up")
        except Exception as exc:  # never a stack trace to the client
            if is_full(exc):  # nothing changed (the transaction rolled back)
                return error(507, say("fault.nothing_changed_disk_full", lang), code="fault.nothing_changed_disk_full")
            log.exception("ltm: API error")
            return error(500, say("api.internal", lang, kind=type(exc).__name__), code="api.internal")
        finally:
            ANSWER_LANG.reset(token)

    # -- items -------------------------------------------------------------

    async def list_items(self, query: Mapping[str, Any]) -> dict[str, Any]:
        page, size = query_page(query)
        min_conf = query.get("min_confidence")
        try:
            min_confidence = float(min_conf) if min_conf not in (None, "") else None
        except ValueError:
            raise AdminError(msg("api.number", name="min_confidence")) from None
        if min_confidence is not None and not 0 <= min_confidence <= 1:
            raise AdminError(msg("api.between", name="min_confidence", lo=0, hi=1))
        scope = query_choice(query, "scope", SCOPE_KINDS)
        f = ItemFilter(
            scope=scope,
            scope_id=query_text(query, "scope_id", v.MAX_SCOPE_ID_CHARS),
            type=query_choice(query, "type", MEMORY_TYPES),
            status=query_choice(query, "status", (*Status, "pending")),
            min_confidence=min_confidence,
        )
        sort = query_choice(query, "sort", tuple(SORTS)) or "updated"
        text = (query_text(query, "q", MAX_SEARCH_CHARS) or "").strip()
        offset = (page - 1) * size
        if query_choice(query, "search", SEARCH_KINDS) == "meaning":  # nearest first (operating/meaning_search.py)
            if not text:
                raise AdminError(msg("search.no_words"))
            near, total = await search_by_meaning(self.engine.db, self.engine.embeddings, f, text, offset, size)
            shown = await self._items([i for i, _ in near])
            return {"items": [{**d, "similarity": round(sim, 4)} for d, (_, sim) in zip(shown, near, strict=True)],
                    "total": total, "page": page, "page_size": size, "search": "meaning"}
        if text:  # ranked by relevance
            items, total = await self.engine.admin.search_items(f, text, offset, size)
        else:
            items, total = await self.engine.admin.list_items(f, sort=sort, offset=offset, limit=size)
        return {"items": await self._items(items), "total": total, "page": page, "page_size": size}

    async def _items(self, items: Sequence[MemoryItem]) -> list[dict[str, Any]]:
        """Memories as the page shows them: with where each was said and who may see it."""
        said_in, lang = await self.engine.admin.said_in(items), answer_lang()
        return [{**item_api_dict(i), **audience_dict(i, said_in.get(i.id or 0, []), lang)} for i in items]

    async def _full_id(self, memory_id: Any) -> str:
        """The id a whole id or a unique prefix names."""
        return (await self.engine.admin.find_by_prefix(v.memory_id(memory_id))).memory_id

    async def get_item(self, memory_id: str) -> dict[str, Any]:
        return await self.engine.admin.get_item(await self._full_id(memory_id), answer_lang())

    async def patch_item(self, memory_id: str, body: Any, user: str | None) -> dict[str, Any]:
        changes = object_body(body, msg("api.what.changes"))
        item = await self.engine.admin.update_item(await self._full_id(memory_id), changes, actor(user))
        return item_api_dict(item)

    async def delete_item(self, memory_id: str, user: str | None) -> dict[str, Any]:
        return await self.engine.admin.delete(await self._full_id(memory_id), actor(user),
                                              str(msg("audit.deleted_dashboard")))

    async def review(self, body: Any, user: str | None) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise AdminError(msg("api.send_review"))
        v.json_depth(body)
        ids = body.get("memory_ids")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise AdminError(msg("api.ids_list"))
        if len(ids) > 1000:
            raise AdminError(msg("api.review_max", max=1000))
        decision = v.choice(body.get("decision"), "decision", ("approve", "reject"))
        reason = "" if body.get("reason") is None else v.text(body["reason"], "reason")
        full = [await self._full_id(i) for i in ids]
        results = await self.engine.admin.review(list(dict.fromkeys(full)), decision, actor(user), reason)
        return {"reviewed": results}

    async def preview(self, body: Any) -> dict[str, Any]:
        """The block the bot would be given for a message from a user:
        same reader, nothing written or counted."""
        if isinstance(body, dict) and isinstance(body.get("scope"), str) and body["scope"].strip():
            body = {**body, "scope": str(await known_scope(self.engine, body["scope"], (ScopeKind.USER,)))}
        return await preview_block(self.engine, body, answer_lang())

    # -- events, stats, audit --------------------------------------------------

    async def list_events(self, query: Mapping[str, Any]) -> dict[str, Any]:
        page, size = query_page(query)
        f = EventFilter(
            scope=query_choice(query, "scope", SCOPE_KINDS),
            scope_id=query_text(query, "scope_id", v.MAX_SCOPE_ID_CHARS),
            status=query_choice(query, "status", tuple(ExtractionStatus)),
            source_type=query_choice(query, "source_type", tuple(SourceType)),
            session_id=query_text(query, "session_id", v.MAX_SCOPE_ID_CHARS),
        )
        events, total = await self.engine.admin.list_events(f, (page - 1) * size, size)
        return {"events": [event_dict(e) for e in events], "total": total, "page": page, "page_size": size}

    async def stats(self, query: Mapping[str, Any]) -> dict[str, Any]:
        scope = query_choice(query, "scope", SCOPE_KINDS)
        scope_id = query_text(query, "scope_id", v.MAX_SCOPE_ID_CHARS)
        scopes = [Scope(scope, scope_id)] if scope and scope_id else None
        per_scope = await self.engine.admin.stats(scopes, kind=scope)
        # Measured first, so its notice is among the notices.
        storage = (await self.engine.storage.report()).as_dict()
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
            "summary_calls": {**self.engine.summaries.stats.calls, "failed": self.engine.summaries.stats.failed},
            "emergency_read_only": self.engine.config.emergency_read_only,
            "mode": self.engine.config.write_policy.mode,
            "drift": await self.engine.drift.status(),
            "notices": [{"code": n.code, "message": n.render(answer_lang())}
                        for n in self.engine.notices()],
            "providers": self.engine.providers(),
            "storage": storage,
            "retention_days_turns": self.engine.config.turns_retention_days,
        }

    # -- compact: old turns no memory cites, freed ---------------------------------

    async def compact_plan(self, query: Mapping[str, Any]) -> dict[str, Any]:
        """What compacting would free (``days``: turns older than that; by
        default retention_days.turns), nothing written."""
        days = compact_days(query.get("days"), self.engine.config.turns_retention_days)
        return await compact_plan(self.engine.db, self.engine.vector_index.files, days, self.engine.clock())

    async def start_compact(self, body: Any, user: str | None) -> dict[str, Any]:
        """Free it, in the background (``GET compact/<job_id>`` follows it)."""
        body = {} if body is None else body
        if not isinstance(body, dict):
            raise AdminError(msg("api.send_object", what=msg("api.what.compact")))
        unknown = set(body) - {"days"}
        if unknown:
            raise AdminError(msg("api.unknown_fields_known", fields=", ".join(sorted(unknown))[:200], known="days"))
        days = compact_days(body.get("days"), self.engine.config.turns_retention_days)
        job = start_compact(self.engine.jobs, self.engine.db, self.engine.vector_index.files, days,
                            self.engine.clock(), actor(user), self.engine.config.emergency_read_only)
        return {"job_id": job.id, "days": days}

    async def audit_log(self, query: Mapping[str, Any]) -> dict[str, Any]:
        page, size = query_page(query)
        f = AuditFilter(**{name: query_text(query, name, v.MAX_SCOPE_ID_CHARS)
                           for name in ("action", "memory_id", "scope", "scope_id", "session_id", "actor")},
                        flagged=v.optional_flag(query.get("flagged"), "flagged"))
        entries, total = await self.engine.admin.audit_log(f, (page - 1) * size, size)
        return in_words({"entries": [audit_dict(a) for a in entries], "total": total, "page": page,
                         "page_size": size}, answer_lang())

    # -- policy --------------------------------------------------------------

    async def get_policy(self) -> dict[str, Any]:
        cfg = self.engine.config
        return {
            **policy_of(cfg),
            "config_warnings": self.engine.config_errors,
            "version": await self.engine.policy_versions.current_version(),
            # The page's forms take their bounds, types and the import limit from here.
            "schema": {**policy_schema(), "max_import_bytes": MAX_IMPORT_BYTES},
        }

    async def put_policy(self, body: Any, user: str | None) -> dict[str, Any]:
        """Change the policy: a new policy version (operating/policy_versions.py).
        ``reason`` (text) and ``source`` ("api" or "page") go with it."""
        body = dict(object_body(body, msg("api.what.settings")))
        reason = body.pop("reason", None)
        source = PolicySource(v.choice(body.pop("source", "api"), "source", POLICY_CHANGE_SOURCES))
        refuse_unknown_keys(body, PUT_POLICY)
        if not body:
            raise AdminError(msg("api.policy_nothing", keys=", ".join(POLICY_KEYS)))
        for key, value in body.items():
            if key in ("write_policy", "read_policy") and not isinstance(value, dict):
                raise AdminError(msg("api.policy_object", key=key))
        await self.engine.policy_versions.change(body, actor(user), source, reason, refusals=PUT_POLICY)
        return await self.get_policy()

    async def policy_history(self, query: Mapping[str, Any]) -> dict[str, Any]:
        page, size = query_page(query)
        versions = self.engine.policy_versions
        return in_words({"versions": await versions.history((page - 1) * size, size),
                         "total": await versions.count(), "current": await versions.current_version(),
                         "page": page, "page_size": size}, answer_lang())

    async def policy_version(self, version: str) -> dict[str, Any]:
        found = await self.engine.policy_versions.get(version_number(version))
        if found is None:
            raise AdminError(msg("api.no_version", version=version), 404)
        return in_words(found, answer_lang())

    async def policy_rollback(self, body: Any, user: str | None) -> dict[str, Any]:
        """``{"version", "reason"}`` rolls back; with ``"dry_run": true`` only
        the diff it would apply and warnings about it (writes nothing)."""
        if not isinstance(body, dict) or "version" not in body:
            raise AdminError(msg("api.send_rollback"))
        v.json_depth(body)
        unknown = set(body) - {"version", "reason", "dry_run"}
        if unknown:
            raise AdminError(msg("api.unknown_fields", fields=", ".join(v.shown(k) for k in sorted(unknown)[:5])))
        # Present, it must say yes or no: an unreadable flag is no reason to roll back for real.
        if "dry_run" in body and v.flag(body["dry_run"], "dry_run"):
            return in_words(await rollback_preview.preview(self.engine.policy_versions, self.engine.config,
                                                           version_number(body["version"]), answer_lang()),
                            answer_lang())
        result = await self.engine.policy_versions.rollback(
            version_number(body["version"]), actor(user), body.get("reason"))
        return {**result, "current": await self.get_policy()}

    async def policy_writes(self, body: Any, user: str | None) -> dict[str, Any]:
        """``{"scope": "user:<id>" | "group:<id>", "writes": "on" | "off", "reason"}``:
        one scope's write switch, changed atomically (a new policy version)."""
        if not isinstance(body, dict):
            raise AdminError(msg("api.send_writes"))
        v.json_depth(body)
        unknown = set(body) - {"scope", "writes", "reason", "source"}
        if unknown:
            raise AdminError(msg("api.unknown_fields", fields=", ".join(v.shown(k) for k in sorted(unknown)[:5])))
        writes = v.choice(body.get("writes"), "writes", ("on", "off"))
        source = PolicySource(v.choice(body.get("source", "page"), "source", POLICY_CHANGE_SOURCES))
        scope = await named_scope(self.engine, body.get("scope"))
        result = await self.engine.policy_versions.set_writes(
            str(scope), writes == "on", actor(user), source, body.get("reason"))
        return {**result, "disabled_scopes": self.engine.config.write_policy.disabled_scopes}

    # -- users' own pauses (operating/pauses.py) ----------------------------------

    async def pauses(self, query: Mapping[str, Any]) -> dict[str, Any]:
        """Every user's pause, newest first."""
        lang = answer_lang()
        return {"items": [_pause_dict(p, lang) for p in self.engine.pauses.listing()]}

    async def lift_pause(self, body: Any, user: str | None) -> dict[str, Any]:
        """``{"scope": "user:<id>", "reason"}``: an operator lifts one user's
        pause, audited as such. ``{"lifted": false}``: there was none."""
        if not isinstance(body, dict) or "scope" not in body:
            raise AdminError(msg("pause.api.lift_body"))
        v.json_depth(body)
        unknown = set(body) - {"scope", "reason"}
        if unknown:
            raise AdminError(msg("api.unknown_fields", fields=", ".join(v.shown(k) for k in sorted(unknown)[:5])))
        scope = await named_scope(self.engine, body["scope"])
        if scope.kind != ScopeKind.USER:
            raise AdminError(msg("pause.users_only", scope=scope))
        reason = reason_text(body.get("reason"))
        why = msg("pause.reason.lift_why", reason=reason) if reason else msg("pause.reason.lift")
        return {"lifted": await self.engine.pauses.resume(scope, actor(user), str(why), lifted=True)}

    async def user_view(self, query: Mapping[str, Any]) -> dict[str, Any]:
        """One user's (or group's) page: pause, write switch, memories, the
        latest events and audit rows."""
        if not query.get("scope"):
            raise AdminError(msg("pause.api.scope_query"))
        scope, lang = await known_scope(self.engine, query.get("scope")), answer_lang()
        page, size = query_page(query)
        items, total = await self.engine.admin.list_items(ItemFilter(scope=scope.kind, scope_id=scope.id),
                                                          offset=(page - 1) * size, limit=size)
        events, _ = await self.engine.admin.list_events(EventFilter(scope=scope.kind, scope_id=scope.id), 0,
                                                        USER_VIEW_ROWS)
        audits, _ = await self.engine.admin.audit_log(AuditFilter(scope=scope.kind, scope_id=scope.id), 0,
                                                      USER_VIEW_ROWS)
        pause = self.engine.pauses.get(scope) if scope.kind == ScopeKind.USER else None
        paused = None if pause is None else {k: x for k, x in _pause_dict(pause, lang).items() if k != "scope"}
        return {
            "scope": str(scope),
            "paused": paused,
            "writes_off": self.engine.config.write_policy.writes_off(scope),  # the operator's switch
            "memories": {"items": await self._items(items), "total": total},
            "events": [event_dict(e) for e in events],
            "audit": in_words([audit_dict(a) for a in audits], lang),
        }

    # -- drift ---------------------------------------------------------------

    async def drift(self, query: Mapping[str, Any]) -> dict[str, Any]:
        """Snapshots newest first (paginated), the latest alarms and the settings."""
        page, size = query_page(query)
        kind = query_choice(query, "scope", SCOPE_KINDS)
        snapshots, total = await self.engine.drift.listing(kind, (page - 1) * size, size)
        return {"snapshots": snapshots, "total": total, "page": page, "page_size": size,
                "alarms": await self.engine.drift.alarms(), "min_items_for_alarm": MIN_ITEMS_FOR_ALARM,
                **await self.engine.drift.status()}

    # -- export / import ---------------------------------------------------------

    async def export(self, query: Mapping[str, Any]) -> dict[str, Any]:
        """The export document (the data of :meth:`export_file`)."""
        f = ItemFilter(
            scope=query_choice(query, "scope", SCOPE_KINDS),
            scope_id=query_text(query, "scope_id", v.MAX_SCOPE_ID_CHARS),
            status=query_choice(query, "status", tuple(Status)),
            type=query_choice(query, "type", MEMORY_TYPES),
        )
        return await export_items(self.engine.db, f, self.engine.clock())

    async def export_file(self, query: Mapping[str, Any], lang: Lang = "en") -> ApiResponse:
        """The export as a download: the document itself (no envelope), named
        ltm-export-<date>.json; a refused request is an error envelope."""
        answer = await self.call(self.export, query, lang=lang, localize=False)
        if answer.status != 200:
            return answer
        document = answer.body["data"]
        return ApiResponse(200, document, file=await asyncio.to_thread(file_bytes, document), headers={
            "Content-Type": "application/json; charset=utf-8",
            "Content-Disposition": f'attachment; filename="{file_name(document)}"',
            "Cache-Control": "no-store",
        })

    async def import_(self, raw_body: bytes | None, query: Mapping[str, Any], user: str | None,
                      preview: bool = False) -> dict[str, Any]:
        """Import an export, bare or in an envelope. ``preview`` or ``?dry_run=1``
        only reports; ``raw_body`` None: the request could not be read."""
        payload, dry_run, status = await import_request(raw_body, query, preview)
        lang = answer_lang()
        max_fact_chars = self.engine.config.extraction.max_fact_chars
        report = await import_items(self.engine.db, payload, actor(user), dry_run, self.engine.clock,
                                    max_fact_chars, status)
        out = report.as_dict()
        out["status_message"] = say("import.for_review" if status == FOR_REVIEW else "import.as_exported", lang)
        mode = self.engine.config.write_policy.mode
        if status == AS_EXPORTED and mode != WriteMode.AUTO and out["added_by_status"].get(Status.ACTIVE):
            # This bot reviews what it learns; the file's active memories would skip that.
            out["warnings"] = [{"code": "import.active_past_review", "message": say(
                "import.active_past_review", lang, count=out["added_by_status"][Status.ACTIVE], mode=mode)}]
        if dry_run and self.engine.config.emergency_read_only:
            out["read_only"] = True
            out["message"] = READ_ONLY_NOTE
        return out
