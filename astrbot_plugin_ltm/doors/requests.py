"""A dashboard API request read and checked (its language, query, JSON body,
the scope it names, an import's file, who acts) and the envelope its answer
goes back in; apart from api.py, whose routes then read as what each does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from .. import validators as v
from ..engine import LTMEngine
from ..enums import SCOPE_KINDS, ScopeKind
from ..errors import AdminError
from ..i18n import Lang, Message, lang_of, msg
from ..operating import targets
from ..operating.export_format import MAX_IMPORT_BYTES, parse_file, unwrap
from ..operating.transfer import AS_EXPORTED, FOR_REVIEW, IMPORT_STATUSES
from ..scope import Scope

MAX_PAGE_SIZE = 200


@dataclass(frozen=True)
class ApiResponse:
    status: int
    body: dict[str, Any]
    # A file answer (the export): these bytes with these headers, not the body.
    file: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)


def ok(data: Any) -> ApiResponse:
    return ApiResponse(200, {"status": "ok", "data": data})


def error(status: int, message: str, data: Any = None, code: str = "api.error") -> ApiResponse:
    body: dict[str, Any] = {"status": "error", "code": code, "message": message}
    if data is not None:
        body["data"] = data
    return ApiResponse(status, body)


def request_lang(query: Mapping[str, Any] | None, body_lang: Any = None, accept_language: Any = None) -> Lang:
    """``lang`` in the query, else the body's, else Accept-Language's first,
    else English. Anything not Chinese is English."""
    for asked in ((query or {}).get("lang"), body_lang):
        if isinstance(asked, str) and asked.strip():
            return lang_of(asked[:20])
    if isinstance(accept_language, str) and accept_language.strip():
        return lang_of(accept_language.split(",")[0].split(";")[0][:20])
    return "en"


# The language of the request being answered, for a method that renders
# text itself (most need not: MemoryAPI.call translates the answer).
ANSWER_LANG: ContextVar[Lang] = ContextVar("ltm_answer_lang", default="en")


def answer_lang() -> Lang:
    """The language the current request is answered in."""
    return ANSWER_LANG.get()


def without_lang(body: Any) -> tuple[Any, Any]:
    """A JSON body without its top-level ``lang`` (the answer's language,
    not a field of the request), and that ``lang``."""
    if isinstance(body, dict) and "lang" in body:
        body = dict(body)
        return body, body.pop("lang")
    return body, None


def _int(query: Mapping[str, Any], name: str, default: int, lo: int, hi: int) -> int:
    raw = query.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(str(raw)[:20])  # longer is out of range anyway
    except ValueError:
        raise AdminError(msg("api.whole_number", name=name)) from None
    if len(str(raw)) > 20 or not lo <= value <= hi:
        raise AdminError(msg("api.between", name=name, lo=lo, hi=hi))
    return value


def query_page(query: Mapping[str, Any]) -> tuple[int, int]:
    page = _int(query, "page", 1, 1, 10**9)
    size = _int(query, "page_size", 50, 1, MAX_PAGE_SIZE)
    return page, size


def query_choice(query: Mapping[str, Any], name: str, choices: tuple[str, ...]) -> str | None:
    value = query.get(name)
    return None if value is None or value == "" else v.choice(value, name, choices)


def query_text(query: Mapping[str, Any], name: str, max_chars: int = v.MAX_TEXT_CHARS) -> str | None:
    return v.optional_text(query.get(name), name, max_chars)


def object_body(body: Any, what: Message) -> dict[str, Any]:
    """A JSON object body, not nested beyond reason."""
    if not isinstance(body, dict) or not body:
        raise AdminError(msg("api.send_object", what=what))
    v.json_depth(body)
    return body


def version_number(raw: Any) -> int:
    if isinstance(raw, bool) or not isinstance(raw, (int, str)) or not str(raw).strip().isdigit() \
            or len(str(raw).strip()) > 12 or int(raw) < 1:
        raise AdminError(msg("api.version_number"))
    return int(raw)


def _import_status(asked: list[Any]) -> str:
    """The status an import gives its memories: any place asking for review
    makes it one (the safe reading)."""
    given = [a for a in asked if a is not None and a != ""]
    if any(a not in IMPORT_STATUSES for a in given):
        raise AdminError(msg("import.bad_status"))
    return FOR_REVIEW if FOR_REVIEW in given else AS_EXPORTED


async def import_request(raw_body: bytes | None, query: Mapping[str, Any], preview: bool) -> tuple[Any, bool, str]:
    """An import request's file, whether it is a dry run, and the status it gives."""
    if raw_body is None:
        raise AdminError(msg("api.upload_unreadable"))
    if len(raw_body) > MAX_IMPORT_BYTES:
        raise AdminError(msg("api.import_too_large", mib=MAX_IMPORT_BYTES // (1024 * 1024)), 413)
    dry_run = preview or v.optional_flag(query.get("dry_run"), "dry_run")
    asked = [query.get("status")]
    payload = unwrap(await asyncio.to_thread(parse_file, raw_body))  # up to 20 MiB: off the event loop
    if isinstance(payload, dict) and "export" in payload and "format" not in payload:
        # Either flag asking for a dry run makes it one (the safe reading).
        dry_run = v.optional_flag(payload.get("dry_run"), "dry_run") or dry_run
        asked.append(payload.get("status"))
        payload = payload["export"]
    if isinstance(payload, dict) and "format" in payload:  # set beside the file's own keys (it has neither)
        asked.append(payload.get("status"))
    return payload, dry_run, _import_status(asked)


async def named_scope(engine: LTMEngine, raw: Any, kinds: tuple[str, ...] = SCOPE_KINDS) -> Scope:
    """The scope named, in any form the page or a chat shows it (operating/targets.py)."""
    return await targets.resolve(engine.db, raw, kinds, what="scope")


async def known_scope(engine: LTMEngine, raw: Any, kinds: tuple[str, ...] = SCOPE_KINDS) -> Scope:
    """As named_scope, refused (404) with suggestions when nothing is known of
    it and known scopes read like it (a typo)."""
    scope = await named_scope(engine, raw, kinds)
    switched = (scope.kind == ScopeKind.USER and engine.pauses.get(scope) is not None) \
        or engine.config.write_policy.writes_off(scope)
    if not switched and not await targets.is_known(engine.db, scope):
        near = await targets.similar(engine.db, scope)
        if near:
            raise AdminError(msg("target.unknown", target=str(scope), matches=", ".join(map(str, near))), 404)
    return scope


def actor(user: str | None) -> str:
    """Who a dashboard user acts as, in the audit trail."""
    return f"operator:{user or 'dashboard'}"
