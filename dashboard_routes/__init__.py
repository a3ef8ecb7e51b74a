"""The plugin's dashboard API routes, registered with AstrBot.

Each route adapts AstrBot's request object to :class:`MemoryAPI` (the core,
framework-free) and returns its answer. Routes live under the plugin's name,
as AstrBot's plugin-page bridge requires, and answer at
``/api/v1/plugins/extensions/astrbot_plugin_ltm/<route>`` (every method) and
``/api/plug/astrbot_plugin_ltm/<route>`` (GET and POST); AstrBot refuses
both without a dashboard login. The page bridge can only GET and POST, so
updates and deletions also have POST forms, and its uploads carry no query,
so an import's dry run has its own route (``import/preview``).

Every request is answered in one language: ``lang`` in the query, or a
top-level ``lang`` in a JSON body (taken out before the API sees the body),
or Accept-Language; English otherwise (``MemoryAPI.call``).

Answers are JSON envelopes, except a successful export: the file itself,
with a download name (AstrBot passes a ``(bytes, status, headers)`` view
result through as it is, in both its ASGI and its Quart dashboards).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from importlib import import_module
from pathlib import Path
from typing import Any

PLUGIN = "astrbot_plugin_ltm"
# The locale files AstrBot's dashboard reads: the plugin's root is this package's parent in both layouts.
I18N_DIR = Path(__file__).resolve().parents[1] / ".astrbot-plugin" / "i18n"


def _core(module: str) -> Any:
    """A module of the core: inside AstrBot this package sits in the
    plugin's package beside it; in the checkout both are top-level."""
    parent = (__package__ or "").rpartition(".")[0]
    return import_module(f"{parent}.{PLUGIN}.{module}" if parent else f"{PLUGIN}.{module}")


say: Callable[..., str] = _core("i18n").say
request_lang: Callable[..., str] = _core("doors.requests").request_lang
without_lang: Callable[[Any], tuple[Any, Any]] = _core("doors.requests").without_lang


class _WebRequest:
    """Newer AstrBot (an ASGI dashboard): the plugin web API's request proxy."""

    def __init__(self, request: Any) -> None:
        self.r = request

    def query(self) -> dict[str, Any]:
        # The proxy's query is a multi-dict whose iteration is not its keys.
        return {k: self.r.query.get(k) for k in self.r.query.keys()}  # noqa: SIM118

    async def json(self) -> Any:
        return await self.r.json(default=None)

    async def files(self) -> Any:
        return await self.r.files()

    async def body(self) -> bytes:
        return await self.r.body()

    async def upload(self, file: Any) -> bytes:
        return bytes(await file.read())

    def user(self) -> str | None:
        return getattr(self.r, "username", None)


class _QuartRequest:
    """Older AstrBot: the dashboard runs on Quart."""

    def __init__(self, request: Any) -> None:
        self.r = request

    def query(self) -> dict[str, Any]:
        return dict(self.r.args)

    async def json(self) -> Any:
        return await self.r.get_json(silent=True)

    async def files(self) -> Any:
        return await self.r.files

    async def body(self) -> bytes:
        return await self.r.get_data()

    async def upload(self, file: Any) -> bytes:
        return bytes(file.read())  # werkzeug's FileStorage reads synchronously

    def user(self) -> str | None:
        from quart import g

        return g.get("username")  # the dashboard's login, set by its auth check


try:
    from astrbot.api.web import request as _request

    req: _WebRequest | _QuartRequest = _WebRequest(_request)
except ImportError:
    from quart import request as _request

    req = _QuartRequest(_request)


# This request's JSON body without its ``lang``, read once by the route's view.
_BODY: ContextVar[tuple[Any] | None] = ContextVar("ltm_request_body", default=None)


async def _read_json() -> Any:
    try:
        return await req.json()
    except Exception:  # a body that is not JSON is answered as missing
        return None


async def _json() -> Any:
    read = _BODY.get()
    return read[0] if read is not None else await _read_json()


async def _lang(read_body: bool) -> Any:
    """The request's language; reading the JSON body (not an upload) for
    its ``lang`` keeps the body without it for the route."""
    body_lang = None
    if read_body and _method() not in ("GET", "HEAD"):
        body, body_lang = without_lang(await _read_json())
        _BODY.set((body,))
    else:
        _BODY.set(None)
    try:
        accept = req.r.headers.get("accept-language")
    except Exception:
        accept = None
    return request_lang(req.query(), body_lang, accept)


def page_texts(locale: Any) -> dict[str, Any]:
    """The review page's texts (``views.review``) in ``locale`` and in
    en-US, shaped as the dashboard bridge's catalogue: for a dashboard that
    hands the page none. An unknown locale is left out."""
    out: dict[str, Any] = {}
    for name in dict.fromkeys(["en-US", str(locale or "")]):
        path = I18N_DIR / f"{name}.json"
        if name and path.parent == I18N_DIR and path.is_file():
            review = json.loads(path.read_text(encoding="utf-8")).get("views", {}).get("review", {})
            out[name] = {"views": {"review": review}}
    return out


def _not_running(lang: Any) -> dict[str, Any]:
    return {"status": "error", "code": "common.not_running", "message": say("common.not_running", lang)}


async def _raw_body() -> bytes | None:
    """An uploaded file (multipart field ``file``) or the request body; None
    if the request cannot be read (a broken multipart body: the API says so)."""
    try:
        if req.r.headers.get("content-type", "").startswith("multipart/"):
            upload = (await req.files()).get("file")
            return await req.upload(upload) if upload is not None else b""
        return bytes(await req.body())
    except Exception:
        return None


def _user() -> str | None:
    return req.user()


def _method() -> str:
    return str(req.r.method).upper()


def routes(api: Callable[[], Any]) -> list[tuple[str, Callable[..., Awaitable[Any]], list[str], str]]:
    """(route, handler, methods, description) for every API route.

    ``api`` returns the current MemoryAPI, or None while the plugin is not
    running (then every route answers 503).
    """

    def handler(run: Callable[..., Awaitable[Any]], upload: bool = False) -> Callable[..., Awaitable[Any]]:
        """``upload``: the body is a file, not JSON (its language comes from
        the query or Accept-Language)."""

        async def view(**path: str) -> Any:
            lang = await _lang(read_body=not upload)
            current = api()
            if current is None:
                return _not_running(lang), 503
            response = await current.call(lambda: run(current, **path), lang=lang)
            return response.body, response.status

        return view

    def file_handler(run: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def view(**path: str) -> Any:
            lang = await _lang(read_body=False)
            current = api()
            if current is None:
                return _not_running(lang), 503
            response = await run(current, lang, **path)
            if response.file is None:
                return response.body, response.status
            return response.file, response.status, response.headers

        return view

    async def texts(**_: str) -> Any:
        # No engine needed: the page asks before (and whether or not) the plugin runs.
        return {"status": "ok", "data": page_texts(req.query().get("locale"))}, 200

    async def list_items(a, **_):
        return await a.list_items(req.query())

    async def review(a, **_):
        return await a.review(await _json(), _user())

    async def get_item(a, memory_id: str):
        return await a.get_item(memory_id)

    async def change_item(a, memory_id: str):
        if _method() == "DELETE":
            return await a.delete_item(memory_id, _user())
        return await a.patch_item(memory_id, await _json(), _user())

    async def update_item(a, memory_id: str):
        return await a.patch_item(memory_id, await _json(), _user())

    async def delete_item(a, memory_id: str):
        return await a.delete_item(memory_id, _user())

    async def preview(a, **_):
        return await a.preview(await _json())

    async def events(a, **_):
        return await a.list_events(req.query())

    async def stats(a, **_):
        return await a.stats(req.query())

    async def compact(a, **_):
        if _method() == "GET":
            return await a.compact_plan(req.query())
        return await a.start_compact(await _json(), _user())

    async def compact_job(a, job_id: str):
        return await a.replay.job(job_id)

    async def compact_cancel(a, job_id: str):
        return await a.replay.cancel(job_id)

    async def policy(a, **_):
        if _method() == "GET":
            return await a.get_policy()
        return await a.put_policy(await _json(), _user())

    async def policy_history(a, **_):
        return await a.policy_history(req.query())

    async def policy_version(a, version: str):
        return await a.policy_version(version)

    async def policy_rollback(a, **_):
        return await a.policy_rollback(await _json(), _user())

    async def policy_writes(a, **_):
        return await a.policy_writes(await _json(), _user())

    async def pauses(a, **_):
        return await a.pauses(req.query())

    async def pauses_lift(a, **_):
        return await a.lift_pause(await _json(), _user())

    async def user_view(a, **_):
        return await a.user_view(req.query())

    async def audit(a, **_):
        return await a.audit_log(req.query())

    async def drift(a, **_):
        return await a.drift(req.query())

    async def export(a, lang, **_):
        return await a.export_file(req.query(), lang)

    async def import_(a, **_):
        return await a.import_(await _raw_body(), req.query(), _user())

    async def import_preview(a, **_):
        return await a.import_(await _raw_body(), req.query(), _user(), preview=True)

    async def replay(a, **_):
        return await a.replay.start_replay(await _json())

    async def replay_job(a, job_id: str):
        return await a.replay.job(job_id)

    async def replay_cancel(a, job_id: str):
        return await a.replay.cancel(job_id)

    async def tune(a, **_):
        return await a.replay.start_tune(await _json())

    async def holdout(a, **_):
        return await a.replay.get_holdout()

    async def holdout_redraw(a, **_):
        return await a.replay.draw_holdout(await _json())

    p = f"/{PLUGIN}"
    # Order matters: AstrBot takes the first route that matches, so the
    # fixed "items/review" comes before "items/<memory_id>".
    return [
        (f"{p}/texts", texts, ["GET"], "the review page's texts in a locale and in English"),
        (f"{p}/items", handler(list_items), ["GET"], "list memories"),
        (f"{p}/items/review", handler(review), ["POST"], "approve or reject memories"),
        (f"{p}/items/<memory_id>", handler(get_item), ["GET"], "one memory with its evidence"),
        (f"{p}/items/<memory_id>", handler(change_item), ["PATCH", "DELETE"], "edit or delete a memory"),
        (f"{p}/items/<memory_id>/update", handler(update_item), ["POST"], "edit a memory (page bridge)"),
        (f"{p}/items/<memory_id>/delete", handler(delete_item), ["POST"], "delete a memory (page bridge)"),
        (f"{p}/preview", handler(preview), ["POST"], "the memory block the bot would be given; writes nothing"),
        (f"{p}/events", handler(events), ["GET"], "list raw events"),
        (f"{p}/stats", handler(stats), ["GET"], "statistics per scope, and what memory costs on disk"),
        (f"{p}/compact", handler(compact), ["GET", "POST"], "what freeing old uncited turns would free; free it"),
        (f"{p}/compact/<job_id>", handler(compact_job), ["GET"], "a compact job and its report"),
        (f"{p}/compact/<job_id>/cancel", handler(compact_cancel), ["POST"], "cancel a compact job"),
        (f"{p}/policy", handler(policy), ["GET", "PUT", "POST"], "read or change the policy"),
        (f"{p}/policy/history", handler(policy_history), ["GET"], "policy versions, newest first"),
        (f"{p}/policy/history/<version>", handler(policy_version), ["GET"], "one policy version, whole"),
        (f"{p}/policy/rollback", handler(policy_rollback), ["POST"], "make a policy version current again"),
        (f"{p}/policy/writes", handler(policy_writes), ["POST"], "switch one scope's writes off or on"),
        (f"{p}/pauses", handler(pauses), ["GET"], "users who paused learning about themselves"),
        (f"{p}/pauses/lift", handler(pauses_lift), ["POST"], "lift one user's pause (audited)"),
        (f"{p}/user", handler(user_view), ["GET"], "one user's or group's memories, pause, events, audit"),
        (f"{p}/policy/replay", handler(replay), ["POST"], "start a policy replay (writes nothing)"),
        (f"{p}/policy/replay/<job_id>", handler(replay_job), ["GET"], "a replay or tuning job and its report"),
        (f"{p}/policy/replay/<job_id>/cancel", handler(replay_cancel), ["POST"], "cancel a replay or tuning job"),
        (f"{p}/policy/tune", handler(tune), ["POST"], "start tuning thresholds on the replay set"),
        (f"{p}/policy/tune/<job_id>", handler(replay_job), ["GET"], "a tuning job and its report"),
        (f"{p}/policy/holdout", handler(holdout), ["GET"], "the holdout replay set"),
        (f"{p}/policy/holdout/redraw", handler(holdout_redraw), ["POST"], "draw the holdout replay set again"),
        (f"{p}/audit", handler(audit), ["GET"], "the audit log"),
        (f"{p}/drift", handler(drift), ["GET"], "drift snapshots and alarms"),
        (f"{p}/export", file_handler(export), ["GET"], "export memories: the file ltm-export-<date>.json"),
        (f"{p}/import", handler(import_, upload=True), ["POST"], "import an export (dry_run=1 to preview)"),
        (f"{p}/import/preview", handler(import_preview, upload=True), ["POST"],
         "what an import would do; writes nothing"),
    ]


def register(context: Any, api: Callable[[], Any]) -> None:
    for route, view, methods, desc in routes(api):
        context.register_web_api(route, view, methods, desc)


def unregister(context: Any) -> None:
    """AstrBot never removes plugin routes; drop ours so none outlives us."""
    registered = getattr(context, "registered_web_apis", None)
    if isinstance(registered, list):
        registered[:] = [r for r in registered if not str(r[0]).lstrip("/").startswith(PLUGIN + "/")]
