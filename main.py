"""AstrBot entry point: wires AstrBot's hooks, commands and web routes to
the core in ``astrbot_plugin_ltm/``. No memory logic lives here."""

# No "from __future__ import annotations": AstrBot before 4.29 reads a
# command's parameter types from the raw annotations, and a string
# "GreedyStr" would take only the first word of "/ltm remember <fact>".

import asyncio
import json
import time
from pathlib import Path

from astrbot.api import AstrBotConfig, logger
from astrbot.api.event import AstrMessageEvent, filter
from astrbot.api.event.filter import CustomFilter
from astrbot.api.star import Context, Star
from astrbot.core.star.filter.command import GreedyStr

# AstrBot imports this file as a module of the plugin's package, so the core
# is imported relatively; mypy, checking the checkout, cannot follow these
# (the end-to-end tests load them in a real AstrBot).
from .astrbot_plugin_ltm import LTMEngine  # type: ignore[import-not-found]
from .astrbot_plugin_ltm.adapter import (  # type: ignore[import-not-found]
    AstrBotEmbedder,
    AstrBotModels,
    AstrBotReranker,
    astrbot_timezone,
    client_locale,
    history_texts,
    inject,
    is_woken,
    note_persona,
    origin_from_event,
    plugin_data_dir,
    switch_tools,
    tool_name,
    tool_result_payload,
)
from .astrbot_plugin_ltm.config import READ_SECONDS  # type: ignore[import-not-found]
from .astrbot_plugin_ltm.doors.api import MemoryAPI  # type: ignore[import-not-found]
from .astrbot_plugin_ltm.doors.commands import Commands, help_text  # type: ignore[import-not-found]
from .astrbot_plugin_ltm.doors.tools import MemoryTools  # type: ignore[import-not-found]
from .astrbot_plugin_ltm.i18n import say, translate  # type: ignore[import-not-found]
from .astrbot_plugin_ltm.operating.reply_language import reply_language  # type: ignore[import-not-found]
from .astrbot_plugin_ltm.removed_settings import carried_over  # type: ignore[import-not-found]
from .dashboard_routes import register as register_routes  # type: ignore[import-not-found]
from .dashboard_routes import unregister as unregister_routes


def _saved_settings() -> dict | None:
    """This plugin's settings file as it is now: AstrBot, once it has imported
    this file, rewrites it without the settings no longer in _conf_schema.json;
    what they held is carried over at start (removed_settings.carried_over)."""
    try:
        from astrbot.core.utils.astrbot_path import get_astrbot_config_path

        path = Path(get_astrbot_config_path()) / f"{Path(__file__).parent.name}_config.json"  # as AstrBot names it
        saved = json.loads(path.read_text(encoding="utf-8-sig"))
    except Exception:  # noqa: BLE001 - none yet (a first start) or unreadable: nothing to carry over
        return None
    return saved if isinstance(saved, dict) else None


# Read at import, before AstrBot builds the plugin's config; taken once.
_SAVED_SETTINGS = [_saved_settings()]


def _bare_ltm(event: AstrMessageEvent) -> bool:
    """The message is "/ltm" and nothing else (the wake prefix already taken off)."""
    return " ".join((event.message_str or "").split()) == "ltm"


class _NotBareLtm(CustomFilter):
    """Keeps the /ltm group from answering a bare "/ltm" with AstrBot's
    tree of English subcommands ("参数不足…"): ltm_bare answers it."""

    def filter(self, event: AstrMessageEvent, cfg: AstrBotConfig) -> bool:
        return not _bare_ltm(event)


class _BareLtm(CustomFilter):
    def filter(self, event: AstrMessageEvent, cfg: AstrBotConfig) -> bool:
        return bool(event.is_at_or_wake_command) and _bare_ltm(event)


class LTMPlugin(Star):
    def __init__(self, context: Context, config: AstrBotConfig | None = None) -> None:
        super().__init__(context)
        self.config = config
        self.engine: LTMEngine | None = None
        self.commands: Commands | None = None
        self.tools: MemoryTools | None = None
        self.api: MemoryAPI | None = None

    async def initialize(self) -> None:
        raw, notes = carried_over(_SAVED_SETTINGS.pop() if _SAVED_SETTINGS else None, dict(self.config or {}))
        for note in notes:  # a setting that is no more, and what its value became
            logger.warning(f"ltm config: {note} · {note.render('zh')}")
        if notes and self.config is not None:
            await self._save_config(raw)
        engine = LTMEngine(
            self.context.get_db().engine,
            raw,
            models=AstrBotModels(self.context),
            embedder=AstrBotEmbedder(self.context, str(raw.get("embedding_provider_id") or "")),
            rerankers=lambda provider_id: AstrBotReranker(self.context, provider_id),
            data_dir=plugin_data_dir("astrbot_plugin_ltm"),
            timezone=astrbot_timezone(self.context),
        )
        for message in engine.config_errors:  # an operator reads the log in either language
            logger.warning(f"ltm config: {message} · {translate(message, 'zh')}")
        try:
            await engine.start()
        except Exception as exc:
            logger.error(f"ltm: could not start, memory is off until this is fixed: {exc}", exc_info=True)
            return
        self.engine = engine
        self.commands = Commands(engine)
        self.tools = MemoryTools(engine)
        # The model is offered only the tools the operator switched on.
        cfg = engine.config
        switch_tools(self.context, {
            "memory_search": cfg.enable and cfg.tools.search,
            "memory_remember": cfg.enable and cfg.tools.remember,
            "memory_expand": cfg.enable and cfg.tools.expand,
        })
        self.api = MemoryAPI(engine, lambda: dict(self.config or {}), self._save_config)
        register_routes(self.context, lambda: self.api)
        logger.info(
            f"ltm: started (mode {engine.config.write_policy.mode}, "
            f"injection {engine.config.read_policy.injection_position}, "
            f"read-only {engine.config.emergency_read_only})"
        )

    async def _save_config(self, raw: dict) -> None:
        if self.config is not None:
            await asyncio.to_thread(self.config.save_config, raw)

    async def terminate(self) -> None:
        unregister_routes(self.context)
        self.api = None
        if self.engine is not None:
            await self.engine.stop()
            self.engine = None

    # -- hooks -------------------------------------------------------------

    @filter.on_agent_begin()
    async def ltm_inject(self, event: AstrMessageEvent, run_context) -> None:
        """调用模型前注入与这条消息相关的记忆 · Injects the memories this message is about before the model is called"""
        if self.engine is None:
            return
        started = time.perf_counter()
        try:
            if self.engine.config.identity.persona_scoped:
                await note_persona(self.context, event)
            block = await asyncio.wait_for(
                self.engine.memory_block(origin_from_event(event), event.message_str or "",
                                         history=history_texts(run_context.messages)),
                READ_SECONDS,
            )
            if block:
                inject(run_context, block.text, self.engine.config.read_policy.injection_position)
                logger.debug(
                    f"ltm: injected {len(block.items)} memories, {block.tokens} tokens "
                    f"in {1000 * (time.perf_counter() - started):.1f} ms"
                )
        except Exception as exc:
            logger.warning(f"ltm: no memory for this turn ({type(exc).__name__}: {exc})")

    @filter.on_agent_done()
    async def ltm_record_turn(self, event: AstrMessageEvent, run_context, resp) -> None:
        """记录这一轮对话（用户的话和机器人的回复）· Records the turn: the person's message and the bot's reply"""
        if self.engine is None:
            return
        try:
            self.engine.record_turn(
                origin_from_event(event), event.message_str or "", getattr(resp, "completion_text", "") or ""
            )
        except Exception as exc:
            logger.warning(f"ltm: turn not recorded ({type(exc).__name__}: {exc})")

    @filter.event_message_type(filter.EventMessageType.GROUP_MESSAGE)
    async def ltm_hear_group(self, event: AstrMessageEvent) -> None:
        """记录群里未唤醒机器人的消息（需开启）· Records group messages that did not wake the bot (when switched on)"""
        if self.engine is None or is_woken(event):
            return  # a message that woke the bot is recorded with its reply (ltm_record_turn)
        try:
            self.engine.record_heard(origin_from_event(event), event.message_str or "")
        except Exception as exc:
            logger.warning(f"ltm: group message not recorded ({type(exc).__name__}: {exc})")

    @filter.on_llm_tool_respond()
    async def ltm_record_tool(self, event: AstrMessageEvent, tool, tool_args, tool_result) -> None:
        """记录工具调用的结果 · Records a tool's result"""
        if self.engine is None:
            return
        try:
            self.engine.record_tool(
                origin_from_event(event), tool_name(tool), tool_args or {}, tool_result_payload(tool_result)
            )
        except Exception as exc:
            logger.warning(f"ltm: tool result not recorded ({type(exc).__name__}: {exc})")

    # -- tools the model may call --------------------------------------------

    async def _tool(self, event: AstrMessageEvent, name: str, call) -> str:
        if self.tools is None:
            return "Long-term memory is not running."
        try:
            return await call(self.tools, origin_from_event(event))
        except Exception as exc:
            logger.error(f"ltm: {name} failed: {exc}", exc_info=True)
            return f"{name} failed: {type(exc).__name__}"

    @filter.llm_tool(name="memory_search")
    async def memory_search(self, event: AstrMessageEvent, query: str, period: str = "", type: str = "") -> str:
        """Search long-term memory about the people in this chat (what they told you in earlier
        conversations). Use it when you need more than the memory block gave you.

        Args:
            query(string): what to look for, in the user's words
            period(string): optional; only what was said then: YYYY-MM-DD, YYYY-MM, YYYY or START..END
            type(string): optional; only memories of this type: profile, preference, task_state, constraint, episode
        """
        return await self._tool(event, "memory_search", lambda t, o: t.search(o, query, period, type))

    @filter.llm_tool(name="memory_remember")
    async def memory_remember(self, event: AstrMessageEvent, fact: str) -> str:
        """Store a durable fact about the user you are talking to (what they asked you to remember).
        It may need an operator's review before it is used.

        Args:
            fact(string): the fact, one sentence, naming the person it is about
        """
        return await self._tool(event, "memory_remember", lambda t, o: t.remember(o, fact))

    @filter.llm_tool(name="memory_expand")
    async def memory_expand(self, event: AstrMessageEvent, id: str) -> str:
        """Show the conversation turns a memory was drawn from, by the id its memory block line ends with.

        Args:
            id(string): the memory's id, e.g. #42
        """
        return await self._tool(event, "memory_expand", lambda t, o: t.expand(o, id))

    # -- commands ------------------------------------------------------------

    @filter.custom_filter(_NotBareLtm)
    @filter.command_group("ltm")
    def ltm(self) -> None:
        """长期记忆 · Long-term memory (/ltm help)"""

    @filter.custom_filter(_BareLtm)
    async def ltm_bare(self, event: AstrMessageEvent):
        """长期记忆的用法 · How to use /ltm (a bare /ltm)"""
        async for reply in self.ltm_help(event):
            yield reply

    async def _reply(self, event: AstrMessageEvent, make) -> str:
        said, locale = event.message_str or "", client_locale(event)
        if self.commands is None:
            return say("common.not_running", reply_language(said, locale=locale))
        with self.commands.hearing(said, locale):
            try:
                return await make(self.commands, origin_from_event(event))
            except Exception as exc:
                logger.error(f"ltm command failed: {exc}", exc_info=True)
                return self.commands.failed(exc)

    # Each subcommand has a Chinese alias: sent with it, the reply is in Chinese.
    @ltm.command("help", alias={"帮助"})
    async def ltm_help(self, event: AstrMessageEvent):
        """用法 · How to use /ltm"""
        if self.commands is None:  # help needs no engine
            yield event.plain_result(help_text(reply_language(event.message_str or "", locale=client_locale(event))))
            return
        yield event.plain_result(await self._reply(event, lambda c, o: c.help(o)))

    # status, list, forget and forget-all take an operator's target (another
    # scope); Commands checks the admin permission for those.
    @ltm.command("status", alias={"状态"})
    async def ltm_status(self, event: AstrMessageEvent, target: str = ""):
        """记住了多少、写入模式 · What is remembered about you, in numbers"""
        yield event.plain_result(await self._reply(event, lambda c, o: c.status(o, target)))

    @ltm.command("list", alias={"列表"})
    async def ltm_list(self, event: AstrMessageEvent, target: str = ""):
        """列出关于你的记忆 · Lists the memories about you"""
        yield event.plain_result(await self._reply(event, lambda c, o: c.list(o, target)))

    @ltm.command("remember", alias={"记住"})
    async def ltm_remember(self, event: AstrMessageEvent, fact: GreedyStr):
        """记住一条事实 · Remembers a fact"""
        yield event.plain_result(await self._reply(event, lambda c, o: c.remember(o, str(fact))))

    # An id left out ("/ltm 忘记") is answered in the user's language by
    # Commands, not with AstrBot's "必要参数缺失…memory_id(str)".
    @ltm.command("forget", alias={"忘记"})
    async def ltm_forget(self, event: AstrMessageEvent, memory_id: str = ""):
        """按编号忘记一条记忆 · Forgets one memory, by its id"""
        yield event.plain_result(await self._reply(event, lambda c, o: c.forget(o, memory_id)))

    @ltm.command("forget-all", alias={"全部忘记"})
    async def ltm_forget_all(self, event: AstrMessageEvent, target: str = "", confirm: str = ""):
        """忘记关于你的全部记忆（需确认）· Forgets everything about you (asks to confirm)"""
        # "/ltm forget-all confirm" arrives as target="confirm"; Commands sorts it out.
        yield event.plain_result(await self._reply(event, lambda c, o: c.forget_all(o, target, confirm)))

    @filter.permission_type(filter.PermissionType.ADMIN)
    @ltm.command("pending", alias={"待审"})
    async def ltm_pending(self, event: AstrMessageEvent):
        """待审核的记忆（管理员）· Memories waiting for review (operators)"""
        yield event.plain_result(await self._reply(event, lambda c, o: c.pending(o)))

    @filter.permission_type(filter.PermissionType.ADMIN)
    @ltm.command("approve", alias={"批准"})
    async def ltm_approve(self, event: AstrMessageEvent, memory_id: str = ""):
        """批准一条待审记忆（管理员）· Approves a memory (operators)"""
        yield event.plain_result(await self._reply(event, lambda c, o: c.review(o, memory_id, "approve")))

    @filter.permission_type(filter.PermissionType.ADMIN)
    @ltm.command("reject", alias={"驳回"})
    async def ltm_reject(self, event: AstrMessageEvent, memory_id: str = ""):
        """驳回一条待审记忆（管理员）· Rejects a memory (operators)"""
        yield event.plain_result(await self._reply(event, lambda c, o: c.review(o, memory_id, "reject")))

    @filter.permission_type(filter.PermissionType.ADMIN)
    @ltm.command("policy", alias={"策略"})
    async def ltm_policy(self, event: AstrMessageEvent, action: str = "", version: str = ""):
        """写入策略、历史版本与回滚（管理员）· The write policy, its versions, a rollback (operators)"""
        # "/ltm policy", "/ltm policy history", "/ltm policy rollback <version>"
        yield event.plain_result(await self._reply(event, lambda c, o: c.policy(o, action, version)))

    @filter.permission_type(filter.PermissionType.ADMIN)
    @ltm.command("writes", alias={"写入"})
    async def ltm_writes(self, event: AstrMessageEvent, state: str = "", target: str = ""):
        """停止或恢复某个用户或群的写入（管理员）· Stops or resumes a user's or group's writes (operators)"""
        yield event.plain_result(await self._reply(event, lambda c, o: c.writes(o, state, target)))

    @ltm.command("pause", alias={"暂停"})
    async def ltm_pause(self, event: AstrMessageEvent):
        """暂停记住你 · Stops remembering you"""
        yield event.plain_result(await self._reply(event, lambda c, o: c.pause(o)))

    @ltm.command("resume", alias={"恢复"})
    async def ltm_resume(self, event: AstrMessageEvent, target: str = ""):
        """恢复记住你（管理员可为他人恢复）· Remembers you again (operators: someone else)"""
        # "/ltm resume" for yourself; an operator's "/ltm resume <target>" lifts a user's pause.
        yield event.plain_result(await self._reply(event, lambda c, o: c.resume(o, target)))
