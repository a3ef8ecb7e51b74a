"""The `/ltm` chat commands, as text in → text out over the engine.

A user's commands act on their own memory only. The operator variants of
status, list, forget and forget-all share their command with the users' one,
so ``origin.is_admin`` checked here is what guards them.

Over 400 lines: one method per `/ltm` command, each a few lines over the engine; the
commands share the reply language, targets and confirmations. How a reply
shows a memory, a scope or a policy version is command_lines.py's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta

from .. import validators
from ..audience import may_recall
from ..engine import LTMEngine
from ..enums import Outcome, PolicySource, ScopeKind, Status
from ..errors import AdminError
from ..i18n import SEPARATORS, Lang, Message, msg, say, translate
from ..operating import targets
from ..operating.queries import ItemFilter
from ..operating.reply_language import reply_language, said_in
from ..operating.storage import status_lines
from ..scope import Origin, Scope
from ..storing.database import DatabaseBusyError, ReadOnlyError, is_full
from ..storing.tables import MemoryItem
from .command_lines import item_line, on_off, scope_line, version_line, word

CONFIRM_WINDOW = timedelta(seconds=120)
LIST_LIMIT = 20
# A command's keywords, as typed in either language.
CONFIRM_WORDS = ("confirm", "确认")
POLICY_ACTIONS = {"history": "history", "历史": "history", "rollback": "rollback", "回滚": "rollback"}
SWITCH_WORDS = {"on": "on", "off": "off", "开": "on", "开启": "on", "关": "off", "关闭": "off"}


def help_text(lang: Lang) -> str:
    return say("cmd.help", lang, target=msg("cmd.target_syntax"))


@dataclass(frozen=True)
class Heard:
    """The command being answered, as main.py hands it over."""

    text: str = ""  # event.message_str: "ltm 记住 我养了一只猫"
    locale: str | None = None  # the chat client's language, when it sends one (AstrBot's web chat)


# Per task, so concurrent commands each see their own; every reply's
# language reads it through Commands._lang.
_heard: ContextVar[Heard | None] = ContextVar("ltm_command_heard", default=None)


def _in_scope(scope: Scope, told_by: str | None = None) -> ItemFilter:
    return ItemFilter(scope=scope.kind, scope_id=scope.id, told_by=told_by)


def _said_in(person: Scope, group: Scope) -> ItemFilter:
    """A person's memories that ``group`` may recall."""
    return ItemFilter(scope=person.kind, scope_id=person.id, said_in=str(group))


class Commands:
    def __init__(self, engine: LTMEngine) -> None:
        self.engine = engine
        # (scope, actor) → when forget-all was asked: only the one who asked,
        # in the same role, can confirm.
        self._forget_all_asked: dict[tuple[Scope, str], datetime] = {}

    # -- the reply language ----------------------------------------------------

    @staticmethod
    @contextmanager
    def hearing(text: str, locale: str | None = None) -> Iterator[None]:
        """Answer the commands run inside in the language ``text`` (the
        command as sent) and the client's ``locale`` call for."""
        token = _heard.set(Heard(text or "", locale))
        try:
            yield
        finally:
            _heard.reset(token)

    def _lang(self, origin: Origin, text: str = "") -> Lang:
        """The language to answer ``origin`` in: see reply_language.py.
        ``text`` is the command as sent; by default what main.py heard."""
        heard = _heard.get() or Heard()
        said = text or heard.text
        languages = self.engine.languages
        asked = said_in(said) if said else None
        if asked:  # what they write a command in is what they write in
            languages.set(origin, asked)
        return reply_language(said, last=languages.last(origin), locale=heard.locale,
                              setting=self.engine.config.reply_language)

    def failed(self, exc: Exception) -> str:
        """The reply to a command that raised, in the language the command
        itself shows (its sender may be what failed to be read)."""
        heard = _heard.get() or Heard()
        lang = reply_language(heard.text, locale=heard.locale, setting=self.engine.config.reply_language)
        if is_full(exc):  # never SQLite's own words ("database or disk is full [SQL: …]")
            return say("common.failed", lang, error=say("fault.nothing_changed_disk_full", lang))
        return say("common.failed", lang, error=exc.message(lang) if isinstance(exc, AdminError) else
                   translate(str(exc), lang) if isinstance(exc, DatabaseBusyError) else str(exc))

    async def help(self, origin: Origin) -> str:
        return help_text(self._lang(origin))

    # -- users' commands -----------------------------------------------------------

    def _own_scope(self, origin: Origin) -> Scope:
        return self.engine.resolver.user_scope(origin)

    async def _target(self, origin: Origin, target: str, verb: str) -> Scope | None:
        """The scope an operator's target names; None without a target. A
        user's target is refused (AdminError) before anything is read."""
        if not target.strip():
            return None
        if not origin.is_admin:
            raise AdminError(msg(f"cmd.operator_only.{verb}"))
        return await targets.resolve(self.engine.db, target)

    async def _target_or_refusal(self, origin: Origin, target: str, verb: str) -> tuple[Lang, Scope | None, str]:
        """The reply's language and ``_target``, with a refused target as the
        reply to send instead."""
        lang = self._lang(origin)
        try:
            return lang, await self._target(origin, target, verb), ""
        except AdminError as exc:
            return lang, None, exc.message(lang)

    async def _nothing_in(self, scope: Scope, lang: Lang) -> str:
        """Nothing kept in ``scope``; the known scopes it may have meant."""
        nothing = say("cmd.nothing_in", lang, scope=scope, target=msg("cmd.target_syntax"))
        near = await targets.similar(self.engine.db, scope)
        return nothing + ("\n" + targets.suggestion(near).render(lang) if near else "")

    async def status(self, origin: Origin, target: str = "") -> str:
        reply = await self._status(origin, target)
        lang = self._lang(origin)
        if not target.strip():
            if self.engine.paused(origin):
                reply += "\n" + say("pause.status", lang, since=self.engine.pauses_since(origin))
        elif origin.is_admin:
            try:
                pause = self.engine.pauses.get(await targets.resolve(self.engine.db, target))
            except AdminError:
                pause = None
            if pause is not None:
                reply += "\n" + say("pause.status_target", lang, scope=pause.scope, since=pause.since_text)
        return reply

    async def _status(self, origin: Origin, target: str = "") -> str:
        lang, scope, refused = await self._target_or_refusal(origin, target, "see")
        if refused:
            return refused
        stats = await self.engine.admin.stats([scope] if scope else self.engine.resolver.read_scopes(origin))
        # What limits memory right now, to admins: the operator can fix it.
        notices = self.engine.notices() if origin.is_admin else []
        if not stats:  # what goes wrong now (a full disk …) is said even before anything is kept
            faults = [n for n in notices if n.code.startswith("fault.")]
            return "\n".join([await self._nothing_in(scope, lang) if scope else say("cmd.status.nothing", lang),
                              *(n.render(lang) for n in faults), *await self._disk_lines(origin, faults, lang, target)])
        lines = [scope_line(s, lang) for s in stats]
        last = say("cmd.status.mode", lang, mode=self.engine.config.write_policy.mode)
        if self.engine.config.emergency_read_only:
            last += ("" if lang == "zh" else " ") + say("cmd.status.read_only", lang)
        lines += [notice.render(lang) for notice in notices] + await self._disk_lines(origin, notices, lang, target)
        return "\n".join(lines) + "\n" + last

    async def _disk_lines(self, origin: Origin, said: list[Message], lang: Lang, target: str) -> list[str]:
        """To an admin's own ``/ltm status``: what memory costs on disk, less
        the notices ``said`` already."""
        if not origin.is_admin or target.strip():
            return []
        shown = {notice.code for notice in said}
        return [line.render(lang) for line in status_lines(await self.engine.storage.report())
                if line.code not in shown]

    def _own_filters(self, origin: Origin) -> list[ItemFilter]:
        """A user's memories; in a group only what the group may recall, as
        everyone there reads the reply (audience.py)."""
        if not origin.is_group:
            return [_in_scope(self._own_scope(origin))]
        group = self.engine.resolver.group_scope(origin)
        return [_said_in(self._own_scope(origin), group), _in_scope(group, told_by=origin.sender_id)]

    async def list(self, origin: Origin, target: str = "") -> str:
        lang, scope, refused = await self._target_or_refusal(origin, target, "see")
        if refused:
            return refused
        items, total = [], 0
        if scope is not None and origin.is_group and scope.kind == ScopeKind.USER:
            # an operator's look at someone in a group: what the group may recall of them
            filters = [_said_in(scope, self.engine.resolver.group_scope(origin))]
        else:
            filters = [_in_scope(scope)] if scope else self._own_filters(origin)
        for f in filters:
            found, count = await self.engine.admin.list_items(f, sort="importance", limit=LIST_LIMIT)
            items.extend(found)
            total += count
        if not items:
            return await self._nothing_in(scope, lang) if scope else say("cmd.list.nothing", lang)
        lines = [item_line(i, lang) for i in items[:LIST_LIMIT]]
        more = "\n" + say("cmd.list.more", lang, n=total - len(lines)) if total > len(lines) else ""
        return "\n".join(lines) + more

    async def remember(self, origin: Origin, fact: str) -> str:
        lang = self._lang(origin)
        if not fact.strip():
            return say("cmd.remember.usage", lang)
        if self.engine.paused(origin):
            return say("pause.status", lang, since=self.engine.pauses_since(origin))
        try:
            fact = validators.fact(fact, self.engine.config.extraction.max_fact_chars)
            outcome = await self.engine.remember(origin, fact)
        except AdminError as exc:
            return say("cmd.remember.refused", lang, error=exc.message(lang))
        except ReadOnlyError:
            return say("cmd.remember.read_only", lang)
        if outcome.action == Outcome.DROPPED:
            return say("cmd.remember.dropped", lang, reason=translate(outcome.reason, lang))
        short_id, status = (outcome.memory_id or "")[:8], outcome.status
        if status == Status.ACTIVE:
            return say("cmd.remember.done", lang, id=short_id, fact=outcome.fact)
        return say("cmd.remember.done_held", lang, id=short_id, fact=outcome.fact,
                   state=word("state", str(status), lang))

    async def forget(self, origin: Origin, memory_id: str) -> str:
        """A user forgets one of their own memories; an operator any memory."""
        lang = self._lang(origin)
        if not memory_id.strip():  # "/ltm 忘记" alone: AstrBot would answer with its parameter list
            return say("cmd.forget.usage", lang)
        role = "operator" if origin.is_admin else "user"
        try:
            item = await self._forgettable(origin, memory_id)
            await self.engine.admin.delete(item.memory_id, f"{role}:{origin.sender_id}", f"forgotten by the {role}")
        except AdminError as exc:
            return exc.message(lang)
        except ReadOnlyError:
            return say("cmd.read_only.nothing_deleted", lang)
        # In a group, a memory the group may not recall is not repeated there.
        if origin.is_group and not await self._recalled_here(item, origin):
            return say("cmd.forget.done_private", lang)
        # An operator may reach into any scope: say whose it was.
        if origin.is_admin:
            return say("cmd.forget.done_in", lang, fact=item.fact, scope=f"{item.scope}:{item.scope_id}")
        return say("cmd.forget.done", lang, fact=item.fact)

    async def _recalled_here(self, item: MemoryItem, origin: Origin) -> bool:
        """Whether the group ``origin`` speaks in may recall ``item`` (audience.py)."""
        reading = self.engine.resolver.read_scopes(origin)
        said_in = (await self.engine.admin.said_in([item])).get(item.id or 0, [])
        return may_recall(Scope(item.scope, item.scope_id), item.visibility, bool(set(said_in) & set(reading)),
                          reading)

    async def _forgettable(self, origin: Origin, memory_id: str) -> MemoryItem:
        """The memory an id prefix names, among those the caller may forget."""
        if origin.is_admin:
            return await self.engine.admin.find_by_prefix(memory_id)
        try:
            return await self.engine.admin.find_by_prefix(memory_id, [self._own_scope(origin)])
        except AdminError:
            if not origin.is_group:
                raise
            group = self.engine.resolver.group_scope(origin)
            return await self.engine.admin.find_by_prefix(memory_id, [group], sender_id=origin.sender_id)

    async def forget_all(self, origin: Origin, *args: str) -> str:
        """``forget-all [<target>] [confirm]``. A trailing ``confirm`` is always
        the confirmation (a user whose id is "confirm" is ``user:confirm``)."""
        lang = self._lang(origin)
        words = " ".join(args).split()
        confirmed = bool(words) and words[-1].lower() in CONFIRM_WORDS
        named = " ".join(words[:-1] if confirmed else words)
        _, target, refused = await self._target_or_refusal(origin, named, "delete")
        if refused:
            return refused
        if target:
            scope, actor, whose = target, f"operator:{origin.sender_id}", "target"
            command = say("cmd.forget_all.confirm_target", lang, target=target)
            nothing = await self._nothing_in(target, lang)
        else:
            scope, actor, whose = self._own_scope(origin), f"user:{origin.sender_id}", "own"
            command, nothing = say("cmd.forget_all.confirm_own", lang), say("cmd.list.nothing", lang)
        # A person's own lines in groups go too (docs/privacy.md).
        accounts = self.engine.resolver.accounts(scope) if scope.kind == ScopeKind.USER else []
        key, now = (scope, actor), self.engine.clock()
        for stale in [k for k, t in self._forget_all_asked.items() if now - t > CONFIRM_WINDOW]:
            del self._forget_all_asked[stale]
        asked = self._forget_all_asked.get(key)
        if not confirmed or asked is None or now - asked > CONFIRM_WINDOW:
            _, total = await self.engine.admin.list_items(_in_scope(scope), limit=1)
            if total == 0 and not await self.engine.admin.quotable_turns(scope, accounts):
                return nothing
            self._forget_all_asked[key] = now
            asking = "read_only" if self.engine.config.emergency_read_only else "ask"
            return say(f"cmd.forget_all.{asking}_{whose}", lang, total=total, target=target, command=command)
        self._forget_all_asked.pop(key, None)
        try:
            count = await self.engine.admin.forget_scope(scope, actor, accounts)
        except ReadOnlyError:
            return say("cmd.read_only.nothing_deleted", lang)
        return say(f"cmd.forget_all.done_{whose}", lang, count=count, target=target)

    # -- operators -------------------------------------------------------

    async def pending(self, origin: Origin) -> str:
        lang = self._lang(origin)
        if not origin.is_admin:
            return say("cmd.operator_only.review", lang)
        items, total = await self.engine.admin.list_items(ItemFilter(status="pending"), limit=LIST_LIMIT)
        if not items:
            return say("cmd.pending.nothing", lang)
        lines = [f"{i.memory_id[:8]} {i.scope}:{i.scope_id} [{word('type', i.type, lang)}] {i.fact}" for i in items]
        return say("cmd.pending.head", lang, total=total) + "\n" + "\n".join(lines)

    async def review(self, origin: Origin, memory_id: str, decision: str) -> str:
        lang = self._lang(origin)
        if not origin.is_admin:
            return say("cmd.operator_only.review", lang)
        if not memory_id.strip():
            return say(f"cmd.review.usage_{decision}", lang)
        try:
            item = await self.engine.admin.find_by_prefix(memory_id)
            await self.engine.admin.review([item.memory_id], decision, f"operator:{origin.sender_id}")
        except AdminError as exc:
            return exc.message(lang)
        except ReadOnlyError:
            return say("cmd.read_only.nothing_changed", lang)
        return say("cmd.review.approved" if decision == "approve" else "cmd.review.rejected", lang, fact=item.fact)

    # -- policy versions and the write switch -----------------------------------

    async def policy(self, origin: Origin, action: str = "", arg: str = "") -> str:
        """``/ltm policy`` (current version and mode), ``/ltm policy history``,
        ``/ltm policy rollback <version>`` — operators only."""
        lang = self._lang(origin)
        if not origin.is_admin:
            return say("cmd.operator_only.policy", lang)
        versions = self.engine.policy_versions
        action = action.strip().lower()
        if action == "":
            cfg = self.engine.config
            return say("cmd.policy.current", lang,
                       version=await versions.current_version() or say("cmd.policy.none_recorded", lang),
                       memory=on_off(cfg.enable, lang), mode=cfg.write_policy.mode,
                       writes=on_off(cfg.write_policy.enable, lang), reads=on_off(cfg.read_policy.enable, lang),
                       read_only=on_off(cfg.emergency_read_only, lang),
                       off=SEPARATORS[lang].join(cfg.write_policy.disabled_scopes) or say("cmd.none", lang))
        action = POLICY_ACTIONS.get(action, action)
        if action == "history":
            rows = await versions.history(0, LIST_LIMIT)
            if not rows:
                return say("cmd.policy.no_history", lang)
            return "\n".join(version_line(r, lang) for r in rows)
        if action == "rollback":
            if not arg.strip().isdigit() or len(arg.strip()) > 12:
                return say("cmd.policy.rollback_usage", lang)
            try:
                result = await versions.rollback(int(arg), f"operator:{origin.sender_id}", None)
            except AdminError as exc:
                return say("cmd.policy.not_rolled_back", lang, error=exc.message(lang))
            except ReadOnlyError as exc:
                return say("cmd.policy.not_rolled_back", lang, error=translate(str(exc), lang))
            if not result["changed"]:
                return say("cmd.policy.already", lang, version=arg.strip())
            return say("cmd.policy.rolled_back", lang, version=arg.strip(), new=result["version"])
        return say("cmd.policy.usage", lang)

    async def writes(self, origin: Origin, state: str = "", target: str = "") -> str:
        """``/ltm writes off|on <target>``: switch a scope's writes (operators)."""
        lang = self._lang(origin)
        if not origin.is_admin:
            return say("cmd.operator_only.writes", lang)
        switch = SWITCH_WORDS.get(state.strip().lower())
        if switch is None or not target.strip():
            return say("cmd.writes.usage", lang, target=msg("cmd.target_syntax"))
        try:
            scope = str(await targets.resolve(self.engine.db, target))
            result = await self.engine.policy_versions.set_writes(
                scope, switch == "on", f"operator:{origin.sender_id}", PolicySource.COMMAND, None)
        except AdminError as exc:
            return say("cmd.writes.refused", lang, error=exc.message(lang))
        except ReadOnlyError:
            return say("cmd.read_only.emergency", lang)
        if not result["changed"]:
            return say("cmd.writes.already", lang, scope=scope, state=on_off(switch == "on", lang))
        return say("cmd.writes.back_on" if switch == "on" else "cmd.writes.now_off", lang,
                   scope=scope, version=result["version"])

    async def pause(self, origin: Origin) -> str:
        """``/ltm pause``: a user stops learning about themselves — their own
        state (operating/pauses.py), which no policy change undoes."""
        lang = self._lang(origin)
        # Taken during read-only too: a person's choice about their data (operating/pauses.py).
        made = await self.engine.pauses.pause(self._own_scope(origin), f"user:{origin.sender_id}",
                                              say("pause.reason.user", "en"))
        if made is None:
            return say("pause.already", lang, since=self.engine.pauses_since(origin))
        return say("pause.on", lang)

    async def resume(self, origin: Origin, target: str = "") -> str:
        """``/ltm resume``: the user's pause ends. ``/ltm resume <target>``:
        an operator lifts that user's pause (audited)."""
        lang = self._lang(origin)
        if target.strip():
            return await self._lift(origin, target, lang)
        scope = self._own_scope(origin)
        resumed = await self.engine.pauses.resume(scope, f"user:{origin.sender_id}", say("pause.reason.resume", "en"))
        reply = say("pause.resumed" if resumed else "pause.not_paused", lang)
        if self.engine.config.write_policy.writes_off(scope):  # the operator's switch is theirs to turn
            reply += "\n" + say("pause.operator_off", lang, scope=scope)
        return reply

    async def _lift(self, origin: Origin, target: str, lang: Lang) -> str:
        if not origin.is_admin:
            return say("pause.only_operator", lang)
        try:
            scope = await targets.resolve(self.engine.db, target)
        except AdminError as exc:
            return exc.message(lang)
        if scope.kind != ScopeKind.USER:
            return say("pause.users_only", lang, scope=scope)
        lifted = await self.engine.pauses.resume(scope, f"operator:{origin.sender_id}", say("pause.reason.lift", "en"),
                                                 lifted=True)
        return say("pause.lifted" if lifted else "pause.not_paused_target", lang, scope=scope)
