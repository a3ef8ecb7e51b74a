"""The one module of the core that imports AstrBot, so the rest stays testable on its own.

Inside the core, not beside ``main.py``: a module there reaches the core only by
relative imports, which neither mypy nor the unit tests can follow.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from .extension_points import Complete
from .logs import log
from .persona import persona_name
from .scope import Origin


def origin_from_event(event: Any) -> Origin:
    scheduled = is_scheduled(event)
    group_id = event.get_group_id() or None
    if scheduled and not group_id and _message_type(event) == "GroupMessage":
        # A cron job's event has no group; its session names it ("<group>", or "<user>_<group>").
        group_id = str(event.session_id).split("_")[-1] or None
    name = str(event.get_sender_name() or "")
    if name and name == str(event.get_self_id() or "") or scheduled:
        name = ""  # the bot's own account, or "Scheduler", is never a person's name
    return Origin(
        platform_id=event.get_platform_id() or event.get_platform_name() or "unknown",
        unified_msg_origin=event.unified_msg_origin,
        sender_id=str(event.get_sender_id() or ""),
        sender_name=name,
        group_id=str(group_id) if group_id else None,
        is_admin=bool(event.is_admin()),
        persona=_persona_of(event),
        scheduled=scheduled,
    )


# AstrBot's scheduler runs the agent with a made-up event of this class: a cron job, a task's result.
SCHEDULED_EVENT = "CronMessageEvent"


def is_scheduled(event: Any) -> bool:
    """Whether no person sent this: AstrBot's scheduler made it up."""
    if type(event).__name__ == SCHEDULED_EVENT:
        return True
    try:
        return str(event.get_platform_name() or "") == "cron"
    except Exception:
        return False


def _message_type(event: Any) -> str:
    try:
        kind = event.get_message_type()
    except Exception:
        return ""
    return str(getattr(kind, "value", kind) or "")


def is_woken(event: Any) -> bool:
    """Whether the message woke the bot (an @, a wake word, a command)."""
    return bool(getattr(event, "is_at_or_wake_command", True))


def client_locale(event: Any) -> str | None:
    """The chat client's language ("zh-CN"), noted by AstrBot's web chat (4.29; None on 4.25)."""
    try:
        locale = event.get_extra("locale")
    except Exception:
        return None
    return locale if isinstance(locale, str) and locale else None


# Where AstrBot (4.29; not 4.25) notes the persona it chose, and where note_persona notes it otherwise.
TRACE_PERSONA_KEY = "_trace_persona_id"
OWN_PERSONA_KEY = "ltm_persona_id"


def _persona_of(event: Any) -> str | None:
    """The persona AstrBot resolved for this turn's request; None before that, or for none."""
    try:
        extras = event.get_extra()
        key = TRACE_PERSONA_KEY if TRACE_PERSONA_KEY in extras else OWN_PERSONA_KEY
        return persona_name(extras.get(key))
    except Exception:  # an AstrBot without extras
        return None


async def note_persona(context: Any, event: Any) -> None:
    """On an AstrBot that does not note its persona (4.25), work it out as its agent does (docs/decisions.md#d66)."""
    try:
        extras = event.get_extra()
        if not isinstance(extras, dict) or TRACE_PERSONA_KEY in extras or OWN_PERSONA_KEY in extras:
            return
        umo = event.unified_msg_origin
        conversations = context.conversation_manager
        cid = await conversations.get_curr_conversation_id(umo)
        conversation = await conversations.get_conversation(umo, cid) if cid else None
        persona_id, *_ = await context.persona_manager.resolve_selected_persona(
            umo=umo,
            conversation_persona_id=getattr(conversation, "persona_id", None),
            platform_name=event.get_platform_name(),
            provider_settings=context.get_config(umo=umo).get("provider_settings") or {},
        )
        event.set_extra(OWN_PERSONA_KEY, persona_id)
    except Exception as exc:  # no persona: the turn's memory is the shared scope's
        log.warning("ltm: could not tell which persona this turn plays (%s: %s)", type(exc).__name__, exc)


def astrbot_timezone(context: Any) -> str | None:
    """AstrBot's ``timezone`` setting (an IANA name); None when unset or unreadable."""
    try:
        value = context.get_config().get("timezone")
    except Exception as exc:
        log.debug("ltm: no AstrBot timezone (%s)", exc)
        return None
    return str(value) if value else None


class AstrBotModels:
    """ModelGateway over AstrBot's providers; ``llm_generate`` skips plugin hooks, so never re-enters ours."""

    def __init__(self, context: Any) -> None:
        self._context = context

    def provider_exists(self) -> bool:
        """AstrBot has a chat provider loaded."""
        try:
            return bool(self._context.get_all_providers())
        except Exception as exc:  # an AstrBot without the call: assume one, as completer() finds out
            log.debug("ltm: cannot list chat providers (%s)", exc)
            return True

    async def completer(self, provider_id: str, session_id: str | None) -> tuple[Complete, str] | None:
        ctx = self._context
        if not provider_id and session_id:
            try:
                provider_id = await ctx.get_current_chat_provider_id(session_id) or ""
            except Exception as exc:  # ProviderNotFoundError: none loaded yet (the worker starts first)
                log.debug("ltm: no chat provider for %s yet (%s)", session_id, exc)
                provider_id = ""
        provider = ctx.get_provider_by_id(provider_id) if provider_id else None
        if provider is None:
            providers = ctx.get_all_providers()
            if provider_id:
                log.warning("ltm: extraction provider %r not found; using the default", provider_id)
            provider = providers[0] if providers else None
        if provider is None:
            return None
        pid = provider.meta().id

        async def complete(system: str, prompt: str) -> str:
            resp = await ctx.llm_generate(chat_provider_id=pid, prompt=prompt, system_prompt=system)
            if getattr(resp, "role", "") == "err":
                raise RuntimeError(f"provider {pid} answered with an error: {resp.completion_text}")
            return resp.completion_text or ""

        return complete, f"{pid}:{provider.get_model()}"


def inject(run_context: Any, block: str, position: str) -> bool:
    """Put the block into this turn's messages, never into saved history. ``context_message``:
    a temporary part of the user message, so the prompt-cache prefix stays byte-identical."""
    from astrbot.core.agent.message import Message, TextPart

    messages = run_context.messages
    if position == "system_prompt":
        if messages and messages[0].role == "system" and isinstance(messages[0].content, str):
            messages[0].content = block + "\n\n" + messages[0].content
        else:
            messages.insert(0, Message(role="system", content=block))
        return True
    for message in reversed(messages):
        if message.role == "user":
            content = message.content
            parts = [TextPart(text=content)] if isinstance(content, str) else list(content or [])
            message.content = [TextPart(text=block).mark_as_temp(), *parts]
            return True
    return False


def history_texts(messages: Any) -> list[str]:
    """The texts of the history AstrBot sends with this request, for the block to leave out
    (recalling/history.py). A tool message counts: its result is recorded too."""
    items = list(messages or [])
    texts: list[str] = []
    if items and _field(items[-1], "role") == "user":
        # AstrBot's group chat context (group_icl_enable) rides in the message being answered.
        texts += group_context_texts(_field(items.pop(), "content"))
    for message in items:
        if _field(message, "role") not in ("user", "assistant", "tool"):
            continue
        content = _field(message, "content")
        if isinstance(content, str):
            texts.append(content)
            continue
        for part in content if isinstance(content, list) else []:
            if getattr(part, "_no_save", False) or (isinstance(part, dict) and part.get("_no_save")):
                continue
            text = _field(part, "text") if _field(part, "type") == "text" else None
            if isinstance(text, str):
                texts.append(text)
    return texts


# AstrBot's group chat context (builtin_stars/astrbot/group_chat_context.py,
# 4.25 and 4.29): a text part of the current message, one line per message.
GROUP_CONTEXT_OPENING = "<system_reminder>You are in a group chat."
_GROUP_CONTEXT_LINE = re.compile(r"^\[[^\]\n]*/\d{2}:\d{2}:\d{2}\]:\s*(?:⚠️\[DIRECTED AT YOU\]\s*)?(.*)$")
_AT = re.compile(r"\s*\[At: [^\]]*\]")


def group_context_texts(content: Any) -> list[str]:
    """The messages of AstrBot's group chat context, its "[name/time]:" and "[At: …]" marks off."""
    parts = content if isinstance(content, list) else []
    texts: list[str] = []
    for part in parts:
        text = _field(part, "text") if _field(part, "type") == "text" else None
        if not isinstance(text, str) or not text.startswith(GROUP_CONTEXT_OPENING):
            continue
        for line in text.splitlines():
            match = _GROUP_CONTEXT_LINE.match(line.strip())
            said = _AT.sub("", match.group(1)).strip() if match else ""
            if said:
                texts.append(said)
    return texts


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def tool_result_payload(tool_result: Any) -> Any:
    """The text (or structured content) of an MCP CallToolResult."""
    if tool_result is None:
        return ""
    content = getattr(tool_result, "content", None)
    if content is None:
        return str(tool_result)
    texts = []
    for part in content:
        text = getattr(part, "text", None)
        texts.append(text if text is not None else f"<{getattr(part, 'type', 'content')}>")
    payload: Any = "\n".join(texts)
    if getattr(tool_result, "isError", False):
        payload = f"[tool error] {payload}"
    return payload


def tool_name(tool: Any) -> str:
    return str(getattr(tool, "name", None) or tool)


class AstrBotEmbedder:
    """Resolved at each call: AstrBot loads providers after plugins, and operators switch
    them at run time. With none, calls raise and retrieval is keyword-only."""

    def __init__(self, context: Any, provider_id: str) -> None:
        self._context = context
        self._provider_id = provider_id
        self.model_id = ""

    def _provider(self) -> Any:
        provider = self._context.get_provider_by_id(self._provider_id) if self._provider_id else None
        if provider is None or not hasattr(provider, "get_embeddings"):
            providers = self._context.get_all_embedding_providers()
            provider = providers[0] if providers else None
        return provider

    def provider_exists(self) -> bool:
        """AstrBot has an embedding provider now (else search is keyword-only)."""
        try:
            return self._provider() is not None
        except Exception as exc:
            log.debug("ltm: cannot list embedding providers (%s)", exc)
            return False

    async def embed(self, texts: list[str]) -> Any:
        import numpy as np

        provider = self._provider()
        if provider is None:
            self.model_id = ""
            raise LookupError("no embedding provider is configured in AstrBot")
        vectors = np.asarray(await provider.get_embeddings(texts), dtype=np.float32)
        meta = provider.meta()
        self.model_id = f"{meta.id}:{getattr(meta, 'model', '') or ''}:{vectors.shape[-1]}"
        return vectors


class AstrBotReranker:
    """Resolved at each call (providers load after plugins); a missing or malformed
    answer raises, and the reader keeps the retrievers' order."""

    # TEI's default limit; a cross-encoder scores each pair alone, so requests' scores compare.
    BATCH = 32
    # AstrBot logs every lookup of a missing id: look again after this long, not at every read.
    MISSING_RECHECK_SECONDS = 60.0

    def __init__(self, context: Any, provider_id: str) -> None:
        self._context = context
        self._provider_id = provider_id
        self._missing_since: float | None = None

    def _provider(self) -> Any:
        now = time.monotonic()
        if self._missing_since is not None and now - self._missing_since < self.MISSING_RECHECK_SECONDS:
            return None
        provider = self._context.get_provider_by_id(self._provider_id)
        found = provider is not None and hasattr(provider, "rerank")
        self._missing_since = None if found else now
        return provider if found else None

    async def rerank(self, query: str, documents: list[str]) -> list[float]:
        provider = self._provider()
        if provider is None:
            raise LookupError(f"AstrBot has no rerank provider {self._provider_id!r}")
        given: dict[int, float] = {}
        batches = [range(start, min(start + self.BATCH, len(documents)))
                   for start in range(0, len(documents), self.BATCH)]
        answers = await asyncio.gather(*(provider.rerank(query, [documents[i] for i in batch]) for batch in batches))
        for batch, results in zip(batches, answers, strict=True):
            for r in results:
                if 0 <= r.index < len(batch):
                    given[batch[r.index]] = float(r.relevance_score)
        if not given:
            raise ValueError("the rerank provider scored none of the candidates")
        floor = min(given.values()) - 1.0  # a candidate it left out ranks last
        return [given.get(i, floor) for i in range(len(documents))]


def plugin_data_dir(name: str) -> Any:
    from astrbot.api.star import StarTools

    return StarTools.get_data_dir(name)


def switch_tools(context: Any, wanted: dict[str, bool]) -> None:
    """AstrBot keeps a tool's switch in its own settings, so ours is applied there at every start."""
    for name, on in wanted.items():
        try:
            ok = context.activate_llm_tool(name) if on else context.deactivate_llm_tool(name)
        except Exception as exc:  # an AstrBot without these calls: the tools stay as AstrBot has them
            log.warning("ltm: could not switch the %s tool %s: %s", name, "on" if on else "off", exc)
            continue
        if not ok:
            log.warning("ltm: AstrBot does not know the %s tool", name)
