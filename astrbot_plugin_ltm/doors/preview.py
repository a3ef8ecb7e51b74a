"""The injection preview: the block the bot would be given for a message from
a chosen user, read by the bot's own reader so what the operator sees is what
the bot sees. It writes nothing and counts no memory as used."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from .. import validators as v
from ..config import PERSONA_MARK
from ..engine import LTMEngine
from ..enums import SCOPE_KINDS, ScopeKind
from ..errors import AdminError
from ..i18n import Lang, msg, say
from ..operating.serialize import audience_dict
from ..persona import persona_name
from ..recalling.trace import Trace
from ..scope import Origin, Scope, with_persona
from ..storing.tables import MemoryItem

MAX_MESSAGE_CHARS = 4000  # a message to preview; longer is refused, not cut
MAX_CUT_SHOWN = 100  # cut lines listed, best-scored first as the reader met them
FIELDS = ("scope", "message", "group", "persona")


def _scope(raw: Any) -> tuple[str, str | None]:
    """(the user's scope id without a persona, the persona the id names)."""
    if not isinstance(raw, str) or len(raw) > v.MAX_SCOPE_ID_CHARS + 8:
        raise AdminError(msg("preview.bad_scope", scope=v.shown(raw)))
    kind, _, scope_id = raw.strip().partition(":")
    if kind not in SCOPE_KINDS or not scope_id.strip():
        raise AdminError(msg("preview.bad_scope", scope=v.shown(raw)))
    if kind != ScopeKind.USER:
        raise AdminError(msg("preview.user_only"))
    base, mark, persona = scope_id.strip().partition(PERSONA_MARK)
    return base, (persona if mark else None)


def origin_for(engine: LTMEngine, scope_text: Any, group: Any = None, persona: Any = None) -> tuple[Origin, Scope]:
    """A message's Origin from the user ``scope_text``, in ``group`` playing
    ``persona``, and the user's scope; refused unless the bot reads that scope."""
    base, named_persona = _scope(scope_text)
    identity = engine.config.identity
    aliases = [account for account, alias in identity.alias_map().items() if alias == base]
    umo: str | None = None
    if aliases:  # one person's accounts joined: any of them reads the same scopes
        platform, _, sender = aliases[0].partition(":")
    elif identity.user_scope_strategy == "unified_msg_origin" and base.count(":") >= 2:
        umo = base
        platform, _, rest = base.partition(":")
        sender = rest.partition(":")[2]
    else:
        platform, _, sender = base.partition(":")
    if not platform or not sender:
        raise AdminError(msg("preview.bad_scope", scope=v.shown(scope_text)))
    group_id = None
    if group not in (None, ""):
        group_id = v.scope_id(group, "group").removeprefix(f"{ScopeKind.GROUP}:").removeprefix(f"{platform}:")
    chosen = persona_name(v.optional_text(persona, "persona", v.MAX_SCOPE_ID_CHARS) or named_persona)
    if umo is None or group_id:
        umo = f"{platform}:GroupMessage:{group_id}" if group_id else f"{platform}:FriendMessage:{sender}"
    origin = Origin(platform_id=platform, unified_msg_origin=umo, sender_id=sender, group_id=group_id,
                    persona=chosen)
    user = Scope(ScopeKind.USER, base)
    # In a group the speaker's own scope is not read (audience.py): they are who speaks.
    speaks = [engine.resolver.user_scope(origin)] if group_id else engine.resolver.read_scopes(origin)
    if user not in speaks and with_persona(user, chosen or "") not in speaks:
        raise AdminError(msg("preview.not_read", scope=str(user)))
    return origin, user


def message_of(raw: Any) -> str:
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        raise AdminError(msg("preview.empty_message"))
    if isinstance(raw, str) and len(raw) > MAX_MESSAGE_CHARS:
        raise AdminError(msg("preview.long_message", chars=len(raw), max_chars=MAX_MESSAGE_CHARS))
    return v.text(raw, "message", MAX_MESSAGE_CHARS, required=True)


async def preview(engine: LTMEngine, body: Any, lang: Lang = "en") -> dict[str, Any]:
    """The answer of ``POST preview`` (docs/api.md)."""
    if not isinstance(body, dict) or not body:
        raise AdminError(msg("preview.send"))
    v.json_depth(body)
    unknown = set(body) - set(FIELDS)
    if unknown:
        raise AdminError(msg("preview.unknown_fields", fields=", ".join(v.shown(k) for k in sorted(unknown)[:5])))
    origin, user = origin_for(engine, body.get("scope"), body.get("group"), body.get("persona"))
    message = message_of(body.get("message"))
    if engine.reader is None:
        raise AdminError(msg("preview.not_started"), 503)
    read_scopes = engine.resolver.read_scopes(origin)
    notices = []
    if not (engine.config.enable and engine.config.read_policy.enable):
        notices.append({"code": "preview.reading_off", "message": say("preview.reading_off", lang)})
    trace = Trace()
    block = await engine.memory_block(origin, message, trace=trace)
    taken = {line.id for line in trace.lines}
    cut, seen = [], set()
    for c in trace.cut:
        if c.id in taken or c.id in seen:
            continue  # left out at one step, taken at a later one (or noted twice)
        seen.add(c.id)
        cut.append({"text": c.text, "source": c.source, "id": c.id, "score": c.score, "why_code": c.why_code,
                    "why": say(c.why_code, lang, **dict(c.why_params))})
    audiences = await _audiences(engine, [line.id for line in trace.lines], read_scopes, origin, lang)
    return {
        "scope": str(user),
        "read_scopes": [str(s) for s in read_scopes],
        "group": origin.group_id,
        "persona": origin.persona,
        "text": block.text,
        "tokens": block.tokens,
        "max_tokens": engine.config.read_policy.max_tokens,
        "lines": [{"text": line.text, "source": line.source, "id": line.id, "score": line.score,
                   "tokens": line.tokens, **audiences.get(line.id, {})} for line in trace.lines] if block.text else [],
        "cut": cut[:MAX_CUT_SHOWN],
        "cut_total": len(cut),
        "notices": notices,
    }


async def _audiences(engine: LTMEngine, ids: list[str], reading: list[Scope], origin: Origin,
                     lang: Lang) -> dict[str, dict[str, Any]]:
    """Each memory line's context: where it was said and who may see it (audience.py)."""
    async with engine.db.read() as session:
        items = list((await session.scalars(select(MemoryItem).where(MemoryItem.memory_id.in_(ids)))).all())
    said_in = await engine.admin.said_in(items)
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        where = said_in.get(item.id or 0, [])
        shown = audience_dict(item, where, lang)
        if Scope(item.scope, item.scope_id) not in reading and not set(where) & set(reading):
            shown["audience"] = say("audience.follows", lang, chats=shown["audience"], person=origin.speaker)
            shown["follows"] = True
        out[item.memory_id] = shown
    return out
