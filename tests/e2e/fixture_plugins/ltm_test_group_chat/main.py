"""A fixture plugin for the end-to-end tests: a platform adapter,
``ltm_test_group``, that AstrBot loads like any other and that brings
scripted messages from several members of a group (or from one person in
a private chat), which the Open API cannot send.

It listens on ``127.0.0.1:<port>`` (its platform config). A test sends one
JSON line per connection::

    {"group_id": "g1" or null, "sender_id": "10001", "sender_name": "Alice", "text": "...", "timeout": 60}

and gets one JSON line back once the bot has replied (or the timeout has
passed): ``{"ok": true, "replies": [...], "umo": "..."}``, or
``{"ok": false, "error": "..."}`` for a malformed message. A group message
mentions the bot (an At), as a member does to wake it in a real group.
With ``unique_session`` in the platform config, each member of a group has
their own AstrBot conversation (``<sender>_<group>``, as AstrBot's own
``unique_session`` does for aiocqhttp), so nothing one member said reaches
another through AstrBot's conversation history.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from asyncio import Queue
from typing import Any

from astrbot.api import logger
from astrbot.api.event import AstrMessageEvent, MessageChain
from astrbot.api.message_components import At, Plain
from astrbot.api.platform import (
    AstrBotMessage,
    Group,
    MessageMember,
    MessageType,
    Platform,
    PlatformMetadata,
    register_platform_adapter,
)
from astrbot.api.star import Context, Star

ADAPTER = "ltm_test_group"
BOT_ID = "ltm-test-bot"
MAX_LINE = 1 << 20


class GroupChatTestEvent(AstrMessageEvent):
    """An event whose replies are handed back to the test that sent it."""

    def __init__(self, message_str: str, message_obj: AstrBotMessage, platform_meta: PlatformMetadata,
                 session_id: str, replied: asyncio.Future) -> None:
        super().__init__(message_str, message_obj, platform_meta, session_id)
        self.replies: list[str] = []
        self._replied = replied

    async def send(self, message: MessageChain) -> None:
        if message is not None and message.chain:
            self.replies.append(message.get_plain_text())
            if not self._replied.done():
                self._replied.set_result(None)
        await super().send(message)


@register_platform_adapter(
    ADAPTER,
    "Test-only group chat for the astrbot_plugin_ltm end-to-end tests (loopback socket).",
    default_config_tmpl={"port": 0, "unique_session": True},
    support_streaming_message=False,
)
class GroupChatTestAdapter(Platform):
    def __init__(self, platform_config: dict, platform_settings: dict, event_queue: Queue) -> None:
        super().__init__(platform_config, event_queue)
        self.settings = platform_settings
        self.port = int(platform_config.get("port") or 0)
        self.unique_session = bool(platform_config.get("unique_session", True))
        self._server: asyncio.Server | None = None

    def meta(self) -> PlatformMetadata:
        return PlatformMetadata(
            name=ADAPTER,
            description="Test-only group chat for the astrbot_plugin_ltm end-to-end tests.",
            id=self.config.get("id") or ADAPTER,
            support_streaming_message=False,
        )

    async def run(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, limit=MAX_LINE)
        port = self._server.sockets[0].getsockname()[1]
        logger.info(f"{ADAPTER}: listening on 127.0.0.1:{port}")
        async with self._server:
            await self._server.serve_forever()

    async def terminate(self) -> None:
        if self._server is not None:
            self._server.close()

    async def send_by_session(self, session: Any, message_chain: MessageChain) -> None:
        # Proactive messages have no test waiting for them.
        await super().send_by_session(session, message_chain)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                answer = await self._handle(json.loads(await reader.readline()))
            except (ValueError, TypeError, KeyError) as exc:
                answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            writer.write(json.dumps(answer, ensure_ascii=False).encode() + b"\n")
            await writer.drain()
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _handle(self, msg: dict) -> dict:
        text, sender_id = str(msg["text"]), str(msg["sender_id"])
        if not text.strip() or not sender_id:
            raise ValueError("text and sender_id must not be empty")
        group_id = str(msg["group_id"]) if msg.get("group_id") else None
        message = AstrBotMessage()
        message.self_id = BOT_ID
        message.sender = MessageMember(user_id=sender_id, nickname=msg.get("sender_name"))
        message.message_id = uuid.uuid4().hex
        message.message_str = text
        message.raw_message = msg
        if group_id:
            message.type = MessageType.GROUP_MESSAGE
            message.group = Group(group_id=group_id)
            message.message = [At(qq=BOT_ID), Plain(text)]  # a member mentions the bot to wake it
            message.session_id = f"{sender_id}_{group_id}" if self.unique_session else group_id
        else:
            message.type = MessageType.FRIEND_MESSAGE
            message.message = [Plain(text)]
            message.session_id = sender_id
        replied: asyncio.Future = asyncio.get_running_loop().create_future()
        event = GroupChatTestEvent(text, message, self.meta(), message.session_id, replied)
        self.commit_event(event)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(replied), float(msg.get("timeout", 60)))
        return {"ok": True, "replies": list(event.replies), "umo": event.unified_msg_origin}


class LtmTestGroupChat(Star):
    """The adapter above registers itself on import; nothing else to do."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
