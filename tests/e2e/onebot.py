"""A fake OneBot v11 implementation (what NapCat or Lagrange are to a real
QQ account) for the end-to-end tests: it connects to AstrBot's ``aiocqhttp``
platform as a reverse-WebSocket client, pushes message events as QQ users
would send them, and answers AstrBot's API calls, recording each one.

AstrBot listens (``ws_reverse_host``/``ws_reverse_port``); the client
connects to ``ws://127.0.0.1:<port>/ws`` with the headers a OneBot
implementation sends (``X-Self-ID``, ``X-Client-Role: Universal``,
``Authorization: Bearer <token>``). Events go up as JSON with ``post_type``;
AstrBot's calls come down as ``{"action", "params", "echo"}`` and are
answered ``{"status": "ok", "retcode": 0, "data": ..., "echo": <echo>}``.
``send_private_msg``/``send_group_msg`` are the bot's replies.

The tests are synchronous, so the client runs its own event loop in a
daemon thread; every public method is called from the test's thread::

    with OneBot(port, token, self_id=BOT_QQ) as qq:
        reply = qq.private(10001, "hello", nickname="Alice")      # "ECHO: hello"
        reply = qq.group(20001, 10001, "hi all", nickname="Alice")  # @s the bot
        qq.push_group(20001, 10002, "not for the bot", at_bot=False)
        qq.calls("send_group_msg")

It reconnects whenever the connection drops (AstrBot restarted);
``wait_connected(after=n)`` waits for a connection newer than the n-th.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

Diag = Callable[[str], str]
Answer = Callable[[dict[str, Any]], Any]
SENDS = ("send_private_msg", "send_group_msg", "send_msg")


@dataclass(frozen=True)
class Call:
    """One API call AstrBot made: ``index`` orders all calls (see ``mark``)."""

    index: int
    action: str
    params: dict[str, Any]
    at: float

    @property
    def text(self) -> str:
        """The text segments of a sent message, joined."""
        return message_text(self.params.get("message"))

    @property
    def segments(self) -> list[dict[str, Any]]:
        message = self.params.get("message")
        return message if isinstance(message, list) else [{"type": "text", "data": {"text": str(message or "")}}]


@dataclass
class Person:
    """What the fake knows of a QQ user (for get_stranger_info / get_group_member_info)."""

    user_id: int
    nickname: str
    cards: dict[int, str] = field(default_factory=dict)  # group id -> group card


def message_text(message: Any) -> str:
    """The text of a OneBot message (an array of segments or a string)."""
    if isinstance(message, list):
        return "".join(str(s.get("data", {}).get("text", "")) for s in message
                       if isinstance(s, dict) and s.get("type") == "text")
    return str(message or "")


def text_segment(text: str) -> dict[str, Any]:
    return {"type": "text", "data": {"text": text}}


def at_segment(qq: int | str) -> dict[str, Any]:
    return {"type": "at", "data": {"qq": str(qq)}}


class OneBot:
    """A fake OneBot v11 client connected to one AstrBot aiocqhttp platform.

    User and group ids are ints (QQ numbers): AstrBot only sends to a
    numeric user or group id."""

    def __init__(self, port: int, token: str, self_id: int = 3_000_000_001, *, host: str = "127.0.0.1",
                 bot_nickname: str = "LtmBot", diag: Diag | None = None) -> None:
        self.url = f"ws://{host}:{port}/ws"
        self.token = token
        self.self_id = self_id
        self.bot_nickname = bot_nickname
        self._diag = diag or (lambda message: message)
        self._cond = threading.Condition()
        self._calls: list[Call] = []
        self._events: list[dict[str, Any]] = []  # every event pushed, by message id for get_msg
        self._people: dict[int, Person] = {}
        self._answers: dict[str, Answer] = {}
        self._connections = 0
        self._ws: ClientConnection | None = None
        self._last_error: str = ""
        self._message_ids = itertools.count(1_000)
        self._loop = asyncio.new_event_loop()
        self._stopping = asyncio.Event()  # bound to the client's loop when first awaited there
        self._thread = threading.Thread(target=self._run, name=f"onebot-{port}", daemon=True)

    # -- lifecycle ------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> OneBot:
        """Start the client and wait for its first connection."""
        self._thread.start()
        self.wait_connected(timeout=timeout)
        return self

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(10)

    def __enter__(self) -> OneBot:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connections(self) -> int:
        """How many times the client has connected (1 after start)."""
        with self._cond:
            return self._connections

    @property
    def connected(self) -> bool:
        with self._cond:
            return self._ws is not None

    def wait_connected(self, after: int = 0, timeout: float = 30.0) -> int:
        """Wait until connected for (at least) the ``after + 1``-th time; the
        connection count. After an AstrBot restart: ``wait_connected(after=n)``
        with ``n`` the count before it."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not (self._ws is not None and self._connections > after):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(self._diag(
                        f"the fake OneBot client could not connect to AstrBot at {self.url} in {timeout}s "
                        f"(connections so far: {self._connections}; last error: {self._last_error or 'none'})"))
                self._cond.wait(min(left, 0.2))
            return self._connections

    def drop(self, timeout: float = 10.0) -> int:
        """Close the connection, as a OneBot implementation that restarts
        does; the client connects again by itself. The connection count
        before: ``wait_connected(after=<it>)`` waits for the new one."""
        before = self.wait_connected(timeout=timeout)
        ws = self._ws
        if ws is not None:
            asyncio.run_coroutine_threadsafe(ws.close(), self._loop).result(timeout)
        return before

    # -- what the fake knows about people ---------------------------------------------

    def person(self, user_id: int, nickname: str | None = None, group_id: int | None = None,
               card: str | None = None) -> Person:
        """Remember (or update) a user's nickname and group card; events
        name their sender this way and AstrBot's look-ups answer with it."""
        with self._cond:
            known = self._people.setdefault(user_id, Person(user_id, nickname or str(user_id)))
            if nickname is not None:
                known.nickname = nickname
            if group_id is not None and card is not None:
                known.cards[group_id] = card
            return known

    def answer(self, action: str, handler: Answer) -> None:
        """Answer ``action`` with ``handler(params)`` (its return value is the
        call's ``data``) instead of the default."""
        with self._cond:
            self._answers[action] = handler

    # -- pushing events ----------------------------------------------------------------

    def push(self, event: dict[str, Any], timeout: float = 30.0) -> None:
        """Send one raw OneBot event (``post_type`` set by the caller)."""
        self.wait_connected(timeout=timeout)
        with self._cond:
            self._events.append(event)
        future = asyncio.run_coroutine_threadsafe(self._send(event), self._loop)
        try:
            future.result(timeout)
        except Exception as exc:
            raise AssertionError(self._diag(f"pushing a OneBot event failed: {exc!r}\nevent: {event}")) from exc

    def push_private(self, user_id: int, text: str, *, nickname: str | None = None,
                     segments: list[dict[str, Any]] | None = None) -> int:
        """A private (friend) message from ``user_id``; its message id."""
        person = self.person(user_id, nickname)
        message = segments if segments is not None else [text_segment(text)]
        message_id = next(self._message_ids)
        self.push({
            "time": int(time.time()), "self_id": self.self_id, "post_type": "message",
            "message_type": "private", "sub_type": "friend", "message_id": message_id,
            "user_id": user_id, "message": message, "raw_message": _raw(message), "font": 0,
            "sender": {"user_id": user_id, "nickname": person.nickname, "sex": "unknown", "age": 0},
        })
        return message_id

    def push_group(self, group_id: int, user_id: int, text: str, *, at_bot: bool = True,
                   nickname: str | None = None, card: str | None = None, role: str = "member",
                   group_name: str | None = None, segments: list[dict[str, Any]] | None = None) -> int:
        """A message from ``user_id`` in group ``group_id``, starting with an
        @ of the bot unless ``at_bot=False`` (a message the bot is not
        woken by); its message id. ``segments`` replaces the whole message."""
        person = self.person(user_id, nickname, group_id, card)
        if segments is not None:
            message = segments
        else:
            # As QQ clients send it: the @, then the text after a space.
            message = [at_segment(self.self_id), text_segment(" " + text)] if at_bot else [text_segment(text)]
        message_id = next(self._message_ids)
        event: dict[str, Any] = {
            "time": int(time.time()), "self_id": self.self_id, "post_type": "message",
            "message_type": "group", "sub_type": "normal", "message_id": message_id,
            "group_id": group_id, "user_id": user_id, "anonymous": None,
            "message": message, "raw_message": _raw(message), "font": 0,
            "sender": {"user_id": user_id, "nickname": person.nickname, "card": person.cards.get(group_id, ""),
                       "role": role, "sex": "unknown", "age": 0},
        }
        if group_name is not None:
            event["group_name"] = group_name
        self.push(event)
        return message_id

    def private(self, user_id: int, text: str, *, nickname: str | None = None, timeout: float = 60.0) -> str:
        """A private message the bot must answer: the reply's text."""
        since = self.mark()
        self.push_private(user_id, text, nickname=nickname)
        return self.wait_reply(user_id=user_id, since=since, timeout=timeout, said=text).text

    def group(self, group_id: int, user_id: int, text: str, *, at_bot: bool = True, nickname: str | None = None,
              card: str | None = None, timeout: float = 60.0) -> str:
        """A group message the bot must answer (it @s the bot by default):
        the reply's text."""
        since = self.mark()
        self.push_group(group_id, user_id, text, at_bot=at_bot, nickname=nickname, card=card)
        return self.wait_reply(group_id=group_id, since=since, timeout=timeout, said=text).text

    # -- what AstrBot called -----------------------------------------------------------

    def mark(self) -> int:
        """The number of calls so far: pass it as ``since``."""
        with self._cond:
            return len(self._calls)

    def calls(self, action: str | None = None, since: int = 0) -> list[Call]:
        """Every API call AstrBot made (of ``action``), oldest first."""
        with self._cond:
            return [c for c in self._calls[since:] if action is None or c.action == action]

    def sent(self, since: int = 0) -> list[Call]:
        """The messages the bot sent (private and group), oldest first."""
        return [c for c in self.calls(since=since) if c.action in SENDS]

    def wait_call(self, predicate: Callable[[Call], bool], *, since: int = 0, timeout: float = 60.0,
                  what: str = "an API call") -> Call:
        """The first call from ``since`` on for which ``predicate`` holds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = next((c for c in self._calls[since:] if predicate(c)), None)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [(c.action, c.params) for c in self._calls[since:]]
                    raise AssertionError(self._diag(
                        f"timed out after {timeout}s waiting for {what}; AstrBot's calls since: {seen}"))
                self._cond.wait(min(left, 0.5))

    def wait_reply(self, *, user_id: int | None = None, group_id: int | None = None, since: int = 0,
                   timeout: float = 60.0, said: str = "") -> Call:
        """The first message the bot sent to ``group_id`` (or privately to
        ``user_id``) from call ``since`` on."""
        if (user_id is None) == (group_id is None):
            raise ValueError("give exactly one of user_id (private) and group_id")
        where = f"group {group_id}" if group_id is not None else f"user {user_id} (private)"
        return self.wait_call(lambda c: _sent_to(c, user_id, group_id), since=since, timeout=timeout,
                              what=f"the bot's reply to {where}" + (f" after {said!r}" if said else ""))

    def assert_no_reply(self, *, since: int, seconds: float = 2.0) -> None:
        """Nothing is sent for ``seconds`` (and nothing was since ``since``)."""
        deadline = time.monotonic() + seconds
        with self._cond:
            while True:
                sent = [c for c in self._calls[since:] if c.action in SENDS]
                assert not sent, self._diag(f"the bot sent {[(c.action, c.params) for c in sent]}")
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)

    # -- the connection (on the client's own loop) -------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
        finally:
            self._loop.close()

    async def _main(self) -> None:
        headers = {"X-Self-ID": str(self.self_id), "X-Client-Role": "Universal",
                   "Authorization": f"Bearer {self.token}", "User-Agent": "ltm-e2e-fake-onebot/1"}
        while not self._stopping.is_set():
            try:
                async with connect(self.url, additional_headers=headers, open_timeout=5, ping_interval=None,
                                   max_size=None, proxy=None) as ws:
                    with self._cond:
                        self._ws = ws
                        self._connections += 1
                        self._cond.notify_all()
                    # What NapCat sends first; AstrBot logs the adapter as connected.
                    await ws.send(json.dumps({"time": int(time.time()), "self_id": self.self_id,
                                              "post_type": "meta_event", "meta_event_type": "lifecycle",
                                              "sub_type": "connect"}))
                    await self._serve(ws)
            except (OSError, ConnectionClosed, InvalidStatus, TimeoutError) as exc:
                self._last_error = repr(exc)
            finally:
                with self._cond:
                    self._ws = None
                    self._cond.notify_all()
            # AstrBot not listening yet, or restarting: try again shortly.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), 0.2)

    async def _serve(self, ws: ClientConnection) -> None:
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            while True:
                receive = asyncio.ensure_future(ws.recv())
                done, _ = await asyncio.wait({receive, stop}, return_when=asyncio.FIRST_COMPLETED)
                if stop in done:
                    receive.cancel()
                    await ws.close()
                    return
                try:
                    payload = json.loads(receive.result())
                except ValueError:
                    continue
                if isinstance(payload, dict) and "action" in payload:
                    await ws.send(json.dumps(self._handle(payload), ensure_ascii=False))
        finally:
            stop.cancel()

    async def _send(self, event: dict[str, Any]) -> None:
        ws = self._ws
        if ws is None:
            raise ConnectionError("not connected")
        await ws.send(json.dumps(event, ensure_ascii=False))

    def _handle(self, request: dict[str, Any]) -> dict[str, Any]:
        action = str(request.get("action") or "")
        params = request.get("params") if isinstance(request.get("params"), dict) else {}
        assert isinstance(params, dict)
        with self._cond:
            handler = self._answers.get(action)
        try:
            data = handler(params) if handler is not None else self._default_answer(action, params)
            answer = {"status": "ok", "retcode": 0, "data": data}
        except Exception as exc:  # a test's handler failed: AstrBot sees a failed call
            answer = {"status": "failed", "retcode": 100, "data": None, "msg": repr(exc)}
        with self._cond:
            self._calls.append(Call(len(self._calls), action, params, time.time()))
            self._cond.notify_all()
        return {**answer, "echo": request.get("echo")}

    def _default_answer(self, action: str, params: dict[str, Any]) -> Any:
        with self._cond:
            if action in SENDS:
                return {"message_id": next(self._message_ids)}
            if action == "get_login_info":
                return {"user_id": self.self_id, "nickname": self.bot_nickname}
            user_id = _int(params.get("user_id"))
            group_id = _int(params.get("group_id"))
            if action in ("get_stranger_info", "get_group_member_info"):
                if user_id == self.self_id:
                    nickname, card = self.bot_nickname, ""
                else:
                    person = self._people.get(user_id) if user_id is not None else None
                    nickname = person.nickname if person else str(user_id)
                    card = person.cards.get(group_id, "") if person and group_id is not None else ""
                info: dict[str, Any] = {"user_id": user_id, "nickname": nickname, "sex": "unknown", "age": 0}
                if action == "get_group_member_info":
                    info.update({"group_id": group_id, "card": card, "role": "member"})
                return info
            if action == "get_group_info":
                return {"group_id": group_id, "group_name": f"group {group_id}", "member_count": 0,
                        "max_member_count": 200}
            if action == "get_msg":
                wanted = _int(params.get("message_id"))
                return next((e for e in self._events if e.get("message_id") == wanted), {})
        return {}  # anything else: ok, nothing to say


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _sent_to(call: Call, user_id: int | None, group_id: int | None) -> bool:
    if call.action not in SENDS:
        return False
    if group_id is not None:
        return _int(call.params.get("group_id")) == group_id and call.params.get("message_type") != "private"
    return (_int(call.params.get("user_id")) == user_id and call.params.get("group_id") is None
            and call.params.get("message_type") != "group")


def _raw(message: list[dict[str, Any]]) -> str:
    """The CQ-code form OneBot puts in ``raw_message`` (for logs only)."""
    parts = []
    for segment in message:
        data = segment.get("data") or {}
        if segment.get("type") == "text":
            parts.append(str(data.get("text", "")))
        else:
            args = ",".join(f"{k}={v}" for k, v in data.items())
            parts.append(f"[CQ:{segment.get('type')}{',' + args if args else ''}]")
    return "".join(parts)

