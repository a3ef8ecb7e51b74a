"""Shared fixtures for the unit tests.

The engine runs without AstrBot: a temp-file SQLite database, a scripted
model gateway and a clock the test moves by hand. Everything a test needs is
reached through fixtures (not ``from conftest import``): ``tests/e2e`` may
have a conftest of its own, and pytest would then hand out the wrong module.

- ``clock``: a :class:`FakeClock` (aware UTC datetimes, ``advance(...)``).
- ``gateway``: a :class:`FakeGateway` (canned replies, exceptions, slow
  replies, malformed output; records every call).
- ``make_ltm(config_overrides, ...)``: a started engine wrapped in an
  :class:`LTM` harness (recording, draining, row inspection).
- ``ltm``: ``make_ltm`` in write mode ``auto``.
- ``origin(user, group=..., ...)``: an :class:`Origin` for a private or a
  group chat.
- ``make_api(config_overrides, ...)``: an :class:`Api` (the operator API the
  way the dashboard routes call it) over a new engine; ``api_of(ltm)``: one
  over an engine the test already has.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections import deque
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import create_async_engine

from astrbot_plugin_ltm import LTMEngine, Origin
from astrbot_plugin_ltm.doors.api import MemoryAPI
from astrbot_plugin_ltm.doors.requests import request_lang, without_lang
from astrbot_plugin_ltm.indexes import embeddings, keywords
from astrbot_plugin_ltm.storing.tables import (
    MemoryAudit,
    MemoryEvent,
    MemoryEvidence,
    MemoryItem,
    MemoryTombstone,
)
from tests.helpers import START


class FakeClock:
    """A clock that only moves when told to. Always aware UTC."""

    def __init__(self, start: datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now = self.now + timedelta(**delta)
        return self.now


class Slow:
    """A scripted reply that arrives only after ``seconds`` (real time)."""

    def __init__(self, seconds: float, reply: Any = "[]") -> None:
        self.seconds = seconds
        self.reply = reply


class FakeGateway:
    """A ModelGateway with scripted answers.

    Each call to the completion function takes the next scripted reply:
    a string (returned as is, so malformed output is just a bad string), an
    exception instance (raised), a :class:`Slow` (awaited, then handled like
    its reply) or a callable ``(system, prompt) -> reply``. With nothing
    scripted, ``default`` is returned.
    """

    FACT_DEFAULTS = {"type": "preference", "confidence": 0.9, "importance": 0.5, "lines": [1]}

    def __init__(self) -> None:
        self.replies: deque[Any] = deque()
        self.default: Any = "[]"
        self.calls: list[dict[str, Any]] = []
        self.completer_calls: list[tuple[str, str | None]] = []
        self.available = True
        self.model = "fake:model"

    # -- scripting --------------------------------------------------------

    def reply(self, *replies: Any) -> FakeGateway:
        self.replies.extend(replies)
        return self

    def slow(self, seconds: float, reply: Any = "[]") -> FakeGateway:
        """Script a reply that takes ``seconds`` of real time to arrive."""
        self.replies.append(Slow(seconds, reply))
        return self

    @staticmethod
    def facts_json(*specs: dict[str, Any]) -> str:
        return json.dumps([{**FakeGateway.FACT_DEFAULTS, **spec} for spec in specs], ensure_ascii=False)

    def facts(self, *specs: dict[str, Any]) -> FakeGateway:
        """Script one reply: a JSON array of facts, defaults filled in."""
        self.replies.append(self.facts_json(*specs))
        return self

    # -- the ModelGateway protocol ---------------------------------------

    async def completer(self, provider_id: str, session_id: str | None):
        self.completer_calls.append((provider_id, session_id))
        if not self.available:
            return None

        async def complete(system: str, prompt: str) -> str:
            self.calls.append({"system": system, "prompt": prompt, "session_id": session_id})
            item = self.replies.popleft() if self.replies else self.default
            if isinstance(item, Slow):
                await asyncio.sleep(item.seconds)
                item = item.reply
            if callable(item) and not isinstance(item, str):
                item = item(system, prompt)
            if isinstance(item, BaseException):
                raise item
            return item

        return complete, self.model


def deep_merge(base: dict[str, Any], over: dict[str, Any] | None) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in (over or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


class LTM:
    """A started LTMEngine with helpers to drive it and look at its tables."""

    def __init__(self, engine: LTMEngine, gateway: FakeGateway, clock: FakeClock, raw_config: dict, path: str):
        self.engine = engine
        self.gateway = gateway
        self.clock = clock
        self.raw_config = raw_config
        self.path = path

    # -- driving ----------------------------------------------------------

    def configure(self, overrides: dict[str, Any]) -> list[str]:
        """Switch to the current config merged with ``overrides``."""
        self.raw_config = deep_merge(self.raw_config, overrides)
        return self.engine.apply_config(self.raw_config)

    async def record(self, origin: Origin, user: str, assistant: str = "OK.") -> list[MemoryEvent]:
        events = self.engine.record_turn(origin, user, assistant)
        await self.engine.recorder.flush()
        return events

    async def turn(self, origin: Origin, user: str, assistant: str = "OK.", *facts: dict[str, Any]):
        """Record a turn; script ``facts`` as the model's answer and extract."""
        events = await self.record(origin, user, assistant)
        if facts:
            self.gateway.facts(*facts)
        results = await self.engine.worker.drain()
        return events, results

    async def block(self, origin: Origin, query: str = ""):
        return await self.engine.memory_block(origin, query)

    # -- inspecting -------------------------------------------------------

    async def rows(self, model, *where, order_by=None) -> list:
        async with self.engine.db.read() as session:
            query = select(model).where(*where) if where else select(model)
            query = query.order_by(order_by if order_by is not None else _default_order(model))
            return list((await session.execute(query)).scalars())

    async def items(self, *where) -> list[MemoryItem]:
        return await self.rows(MemoryItem, *where)

    async def item(self, *where) -> MemoryItem:
        found = await self.items(*where)
        assert len(found) == 1, f"expected one item, found {[i.fact for i in found]}"
        return found[0]

    async def events(self, *where) -> list[MemoryEvent]:
        return await self.rows(MemoryEvent, *where)

    async def evidence(self, *where) -> list[MemoryEvidence]:
        """Rows of ltm_evidence: a fact's links (a summary's are ``links``)."""
        return await self.rows(MemoryEvidence, *where)

    async def links(self, item: MemoryItem) -> list[MemoryEvidence]:
        """Every evidence link of ``item``, a fact's or a summary's (storing.evidence)."""
        from astrbot_plugin_ltm.storing.evidence import links_of

        async with self.engine.db.read() as session:
            return [link for link, _ in await links_of(session, [item])]

    async def audit(self, *where) -> list[MemoryAudit]:
        return await self.rows(MemoryAudit, *where)

    async def tombstones(self, *where) -> list[MemoryTombstone]:
        return await self.rows(MemoryTombstone, *where, order_by=MemoryTombstone.fact_key)

    async def sql(self, statement: str, params: dict | None = None) -> list[tuple]:
        async with self.engine.db.read() as session:
            return [tuple(r) for r in (await session.execute(text(statement), params or {}))]

    async def execute(self, statement: str, params: dict | None = None) -> None:
        """A raw write that bypasses the engine (test setup only)."""
        async with self.engine.db.sql_engine.begin() as conn:
            await conn.execute(text(statement), params or {})

    async def table_counts(self) -> dict[str, int]:
        """Row counts of every ltm_ table (FTS shadow tables included)."""
        names = [
            r[0]
            for r in await self.sql(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'ltm\\_%' ESCAPE '\\' "
                "ORDER BY name"
            )
        ]
        counts = {}
        for name in names:
            counts[name] = (await self.sql(f'SELECT count(*) FROM "{name}"'))[0][0]
        return counts

    async def table_snapshot(self) -> dict[str, list[str]]:
        """Every row of every ltm_ table: detects updates as well as inserts."""
        names = (await self.table_counts()).keys()
        return {name: sorted(map(repr, await self.sql(f'SELECT * FROM "{name}"'))) for name in names}


class Api:
    """A MemoryAPI over a test engine, with the plugin config it would save.

    ``ok`` and ``err`` check the HTTP status and the envelope; an error's
    message must be readable (never a stack trace).
    """

    def __init__(self, ltm: LTM) -> None:
        self.ltm = ltm
        self.raw: dict[str, Any] = copy.deepcopy(ltm.raw_config)
        self.saved: list[dict[str, Any]] = []
        self.api = MemoryAPI(ltm.engine, lambda: self.raw, self._save)

    async def _save(self, raw: dict[str, Any]) -> None:
        self.saved.append(copy.deepcopy(raw))
        self.raw = copy.deepcopy(raw)

    async def call(self, method: str, *args: Any):
        # As the dashboard routes do: a ``lang`` in the query or body is the
        # answer's language, taken out of what the method sees.
        asked = [a.get("lang") for a in args if isinstance(a, dict)]
        args = tuple(without_lang(a)[0] if isinstance(a, dict) else a for a in args)
        lang = request_lang({}, next((x for x in asked if x), None))
        return await self.api.call(getattr(self.api, method), *args, lang=lang)

    async def ok(self, method: str, *args: Any) -> Any:
        response = await self.call(method, *args)
        assert response.status == 200, response
        assert response.body["status"] == "ok" and "data" in response.body, response.body
        return response.body["data"]

    async def err(self, status: int, method: str, *args: Any) -> str:
        response = await self.call(method, *args)
        assert response.status == status, (method, args, response)
        assert response.body["status"] == "error", response.body
        message = response.body["message"]
        assert isinstance(message, str) and message.strip(), response.body
        assert "Traceback" not in message and 'File "' not in message, message
        return message


def _default_order(model):
    if model is MemoryTombstone:
        return MemoryTombstone.fact_key
    return model.id


@pytest.fixture(autouse=True)
def patient_cold_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A read waits for a namespace that is not loaded yet at most COLD_WAIT
    (1 s), then goes on without it: on a loaded CI machine a load or rebuild
    can take longer, and a test would read without it (CI failed so once).
    The tests of that wait set their own."""
    monkeypatch.setattr(keywords, "COLD_WAIT", 30.0)
    monkeypatch.setattr(embeddings, "COLD_WAIT", 30.0)


@pytest.fixture
def namespace_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every vector namespace kept in a file, as only inverted files (past
    20,000 vectors) are: the tests of files use small ones."""
    from astrbot_plugin_ltm.indexes import faiss_files

    monkeypatch.setattr(faiss_files, "FILES_ABOVE", 0)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def gateway() -> FakeGateway:
    return FakeGateway()


@pytest.fixture
async def make_ltm(tmp_path, gateway, clock):
    """Factory: ``await make_ltm({"write_policy": {"mode": "auto"}}, name=..., **engine_kwargs)``.

    Every engine gets its own SQLite file under ``tmp_path``; all are stopped
    and disposed of after the test.
    """
    made: list[tuple[LTMEngine, Any]] = []
    counter = [0]

    async def factory(
        overrides: dict[str, Any] | None = None,
        *,
        name: str | None = None,
        gateway_: FakeGateway | None = None,
        clock_: FakeClock | None = None,
        start: bool = True,
        **engine_kwargs: Any,
    ) -> LTM:
        counter[0] += 1
        path = tmp_path / (name or f"ltm{counter[0]}.db")
        raw = deep_merge({}, overrides)
        gw = gateway_ or gateway
        ck = clock_ or clock
        sa_engine = create_async_engine(f"sqlite+aiosqlite:///{path}")
        engine = LTMEngine(sa_engine, raw, models=gw, clock=ck, **engine_kwargs)
        made.append((engine, sa_engine))
        if start:
            await engine.start(background=False)
        return LTM(engine, gw, ck, raw, str(path))

    yield factory
    for engine, sa_engine in made:
        try:
            await engine.stop()
        finally:
            await sa_engine.dispose()


@pytest.fixture
async def ltm(make_ltm) -> LTM:
    return await make_ltm({"write_policy": {"mode": "auto"}})


@pytest.fixture
def api_of() -> Callable[[LTM], Api]:
    """``api_of(ltm)`` → an :class:`Api` over that engine."""
    return Api


@pytest.fixture
async def make_api(make_ltm):
    """Factory: ``await make_api({"write_policy": {"mode": "auto"}}, **make_ltm_kwargs)``."""

    async def factory(overrides: dict[str, Any] | None = None, **kwargs: Any) -> Api:
        return Api(await make_ltm(overrides or {}, **kwargs))

    return factory


@pytest.fixture
def origin() -> Callable[..., Origin]:
    """``origin("alice")`` → a private chat on platform qq;
    ``origin("alice", group="g1")`` → alice speaking in group g1."""

    def make(
        user: str = "alice",
        *,
        name: str | None = None,
        group: str | None = None,
        platform: str = "qq",
        umo: str | None = None,
        admin: bool = False,
    ) -> Origin:
        if umo is None:
            umo = f"{platform}:GroupMessage:{group}" if group else f"{platform}:FriendMessage:{user}"
        return Origin(
            platform_id=platform,
            unified_msg_origin=umo,
            sender_id=user,
            sender_name=user.capitalize() if name is None else name,
            group_id=group,
            is_admin=admin,
        )

    return make
