"""The `/ltm` chat commands, as text in → text out over the engine.

A user's commands act on their own memory only. The operator-only commands
(pending, approve, reject) are wired with AstrBot's admin permission in
main.py and check ``origin.is_admin`` here as well. The operator variants of
status, list, forget and forget-all (another user's or group's scope) share
their command with the users' one, so ``origin.is_admin`` (AstrBot's
``event.is_admin()``) checked here is what guards them.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ..engine import LTMEngine
from ..enums import SCOPE_KINDS, Outcome, PolicySource, ScopeKind, Status
from ..i18n import Lang, say
from ..scope import Origin, Scope
from ..storing.database import ReadOnlyError
from ..storing.tables import MemoryItem
from . import validators
from .errors import AdminError
from .queries import ItemFilter

TARGET_SYNTAX = "<user id>, user:<user id> or group:<group id> (e.g. qq:12345, group:qq:67890)"

HELP = f"""/ltm status — what the bot keeps about you
/ltm list — your memories (id, type, status)
/ltm remember <fact> — store a fact now
/ltm forget <id> — delete one of your memories
/ltm forget-all — delete all your memories (asks to confirm)
/ltm pause, /ltm resume — stop or restart learning about you
(what you say while paused, in groups too, is never learned)
Operators: /ltm pending, /ltm approve <id>, /ltm reject <id>,
/ltm status <target>, /ltm list <target>, /ltm forget <id> (any memory),
/ltm forget-all <target> (asks to confirm),
/ltm policy, /ltm policy history, /ltm policy rollback <version>,
/ltm writes off|on <target>, /ltm resume <target> (lift a user's pause)
<target> is {TARGET_SYNTAX}"""

CONFIRM_WINDOW = timedelta(seconds=120)
LIST_LIMIT = 20


def parse_target(text: str) -> Scope:
    """The scope an operator names. Scope ids contain ':' themselves
    (``qq:12345``), so only a known kind before the first colon is a kind;
    anything else is a user id as a whole."""
    text = text.strip()
    kind, colon, scope_id = text.partition(":")
    if not (colon and kind in SCOPE_KINDS):
        kind, scope_id = "user", text
    if not scope_id.strip():
        raise AdminError(f"No scope id given. Target: {TARGET_SYNTAX}.")
    return Scope(kind, validators.scope_id(scope_id, "the target's id"))


def _in_scope(scope: Scope, told_by: str | None = None) -> ItemFilter:
    return ItemFilter(scope=scope.kind, scope_id=scope.id, told_by=told_by)


class Commands:
    def __init__(self, engine: LTMEngine) -> None:
        self.engine = engine
        # (scope, actor) → when forget-all was asked: only the one who asked,
        # in the same role, can confirm.
        self._forget_all_asked: dict[tuple[Scope, str], datetime] = {}

    def _lang(self, origin: Origin) -> Lang:
        """The language to answer ``origin`` in."""
        return "en"

    def _own_scope(self, origin: Origin) -> Scope:
        return self.engine.resolver.user_scope(origin)

    @staticmethod
    def _target(origin: Origin, target: str, verb: str) -> Scope | None:
        """The scope an operator's target names; None without a target (the
        caller's own memories). A user's target is refused (AdminError)
        before anything is read."""
        if not target.strip():
            return None
        if not origin.is_admin:
            raise AdminError(f"Only an operator can {verb} other users' memories.")
        return parse_target(target)

    @staticmethod
    def _nothing_in(scope: Scope) -> str:
        return f"I keep no memories in {scope}. (Target: {TARGET_SYNTAX}.)"

    async def status(self, origin: Origin, target: str = "") -> str:
        reply = await self._status(origin, target)
        lang = self._lang(origin)
        if not target.strip():
            if self.engine.paused(origin):
                reply += "\n" + say("pause.status", lang, since=self.engine.pauses_since(origin))
        elif origin.is_admin:
            try:
                pause = self.engine.pauses.get(parse_target(target))
            except AdminError:
                pause = None
            if pause is not None:
                reply += "\n" + say("pause.status_target", lang, scope=pause.scope, since=pause.since_text)
        return reply

    async def _status(self, origin: Origin, target: str = "") -> str:
        try:
            scope = self._target(origin, target, "see")
        except AdminError as exc:
            return str(exc)
        stats = await self.engine.admin.stats([scope] if scope else self.engine.resolver.read_scopes(origin))
        if not stats:
            return self._nothing_in(scope) if scope else "I don't keep any memories about you yet."
        lines = []
        for s in stats:
            counts = ", ".join(f"{n} {status}" for status, n in sorted(s["by_status"].items())) or "no memories"
            pending = s["events"]["pending"]
            lines.append(f"{s['scope']} {s['scope_id']}: {counts}; {pending} message(s) waiting for extraction")
        mode = self.engine.config.write_policy.mode
        ro = " Writes are paused (emergency read-only)." if self.engine.config.emergency_read_only else ""
        return "\n".join(lines) + f"\nWrite mode: {mode}.{ro}"

    def _own_filters(self, origin: Origin) -> list[ItemFilter]:
        """A user's memories: their own scope and, in a group, what the group
        remembers from their own messages."""
        filters = [_in_scope(self._own_scope(origin))]
        if origin.is_group:
            filters.append(_in_scope(self.engine.resolver.group_scope(origin), told_by=origin.sender_id))
        return filters

    async def list(self, origin: Origin, target: str = "") -> str:
        try:
            scope = self._target(origin, target, "see")
        except AdminError as exc:
            return str(exc)
        items, total = [], 0
        for f in [_in_scope(scope)] if scope else self._own_filters(origin):
            found, count = await self.engine.admin.list_items(f, sort="importance", limit=LIST_LIMIT)
            items.extend(found)
            total += count
        if not items:
            return self._nothing_in(scope) if scope else "I don't remember anything about you."
        lines = [
            f"{i.memory_id[:8]} [{i.type}] {i.fact}"
            + ("" if i.status == Status.ACTIVE else f" ({'awaiting approval' if i.awaiting_approval else i.status})")
            for i in items[:LIST_LIMIT]
        ]
        more = f"\n… and {total - len(lines)} more" if total > len(lines) else ""
        return "\n".join(lines) + more

    async def remember(self, origin: Origin, fact: str) -> str:
        if not fact.strip():
            return "Usage: /ltm remember <fact>"
        if self.engine.paused(origin):
            return say("pause.status", self._lang(origin), since=self.engine.pauses_since(origin))
        try:
            fact = validators.fact(fact, self.engine.config.extraction.max_fact_chars)
            outcome = await self.engine.remember(origin, fact)
        except AdminError as exc:
            return f"Not stored: {exc}."
        except ReadOnlyError:
            return "Memory is read-only right now (emergency read-only); nothing was stored."
        if outcome.action == Outcome.DROPPED:
            return f"Not stored: {outcome.reason}"
        note = "" if outcome.status == Status.ACTIVE else f" It is {outcome.status} until an operator approves it."
        return f"Remembered ({(outcome.memory_id or '')[:8]}): {outcome.fact}.{note}"

    async def forget(self, origin: Origin, memory_id: str) -> str:
        """A user forgets one of their own memories; an operator any memory."""
        role = "operator" if origin.is_admin else "user"
        try:
            item = await self._forgettable(origin, memory_id)
            await self.engine.admin.delete(item.memory_id, f"{role}:{origin.sender_id}", f"forgotten by the {role}")
        except AdminError as exc:
            return str(exc)
        except ReadOnlyError:
            return "Memory is read-only right now; nothing was deleted."
        # An operator may reach into any scope: say whose it was.
        return f"Forgotten: {item.fact}" + (f" ({item.scope}:{item.scope_id})" if origin.is_admin else "")

    async def _forgettable(self, origin: Origin, memory_id: str) -> MemoryItem:
        """The memory an id prefix names, among those the caller may forget:
        an operator any; a user their own scope's and, in a group, what the
        group keeps from their own messages."""
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
        """``forget-all [confirm]`` for your own memories, ``forget-all
        <target> [confirm]`` for an operator's on another scope. A trailing
        ``confirm`` is always the confirmation (a user whose id is "confirm"
        is ``user:confirm``)."""
        words = " ".join(args).split()
        confirmed = bool(words) and words[-1].lower() == "confirm"
        try:
            target = self._target(origin, " ".join(words[:-1] if confirmed else words), "delete")
        except AdminError as exc:
            return str(exc)
        if target:
            scope, actor, whose = target, f"operator:{origin.sender_id}", f"of {target}"
            command, nothing = f"/ltm forget-all {target} confirm", self._nothing_in(target)
        else:
            scope, actor, whose = self._own_scope(origin), f"user:{origin.sender_id}", "I keep about you"
            command, nothing = "/ltm forget-all confirm", "I don't remember anything about you."
        key, now = (scope, actor), self.engine.clock()
        for stale in [k for k, t in self._forget_all_asked.items() if now - t > CONFIRM_WINDOW]:
            del self._forget_all_asked[stale]
        asked = self._forget_all_asked.get(key)
        if not confirmed or asked is None or now - asked > CONFIRM_WINDOW:
            _, total = await self.engine.admin.list_items(_in_scope(scope), limit=1)
            if total == 0 and not await self.engine.admin.quotable_turns(scope):
                return nothing
            self._forget_all_asked[key] = now
            if self.engine.config.emergency_read_only:
                return (f"Memory is read-only right now (emergency read-only): deleting the {total} memories "
                        f"{whose} would be refused. Once read-only is off, send {command} within 2 minutes "
                        "of asking again.")
            return (f"This deletes all {total} memories {whose}, and nothing said before is quoted again. "
                    f"Send {command} within 2 minutes to go ahead.")
        self._forget_all_asked.pop(key, None)
        try:
            count = await self.engine.admin.forget_scope(scope, actor)
        except ReadOnlyError:
            return "Memory is read-only right now; nothing was deleted."
        return f"Deleted {count} memories of {target}." if target else f"Deleted {count} memories."

    # -- operators -------------------------------------------------------

    async def pending(self, origin: Origin) -> str:
        if not origin.is_admin:
            return "Only an operator can review memories."
        items, total = await self.engine.admin.list_items(ItemFilter(status="pending"), limit=LIST_LIMIT)
        if not items:
            return "No memories await approval."
        lines = [f"{i.memory_id[:8]} {i.scope}:{i.scope_id} [{i.type}] {i.fact}" for i in items]
        return f"{total} awaiting approval:\n" + "\n".join(lines)

    async def review(self, origin: Origin, memory_id: str, decision: str) -> str:
        if not origin.is_admin:
            return "Only an operator can review memories."
        try:
            item = await self.engine.admin.find_by_prefix(memory_id)
            await self.engine.admin.review([item.memory_id], decision, f"operator:{origin.sender_id}")
        except AdminError as exc:
            return str(exc)
        except ReadOnlyError:
            return "Memory is read-only right now; nothing changed."
        verb = "Approved" if decision == "approve" else "Rejected"
        return f"{verb}: {item.fact}"

    # -- policy versions and the write switch -----------------------------------

    async def policy(self, origin: Origin, action: str = "", arg: str = "") -> str:
        """``/ltm policy`` (current version and mode), ``/ltm policy history``,
        ``/ltm policy rollback <version>`` — operators only."""
        if not origin.is_admin:
            return "Only an operator can see or change the policy."
        versions = self.engine.policy_versions
        action = action.strip().lower()
        if action == "":
            cfg = self.engine.config
            off = ", ".join(cfg.write_policy.disabled_scopes) or "none"
            return (f"Policy version {await versions.current_version() or '(none recorded)'}: "
                    f"memory {'on' if cfg.enable else 'off'}, write mode {cfg.write_policy.mode} "
                    f"(writes {'on' if cfg.write_policy.enable else 'off'}), "
                    f"reads {'on' if cfg.read_policy.enable else 'off'}, "
                    f"read-only {'on' if cfg.emergency_read_only else 'off'}; writes off for: {off}.")
        if action == "history":
            rows = await versions.history(0, LIST_LIMIT)
            if not rows:
                return "No policy version is recorded yet."
            return "\n".join(_version_line(r) for r in rows)
        if action == "rollback":
            if not arg.strip().isdigit() or len(arg.strip()) > 12:
                return "Usage: /ltm policy rollback <version> (a number from /ltm policy history)"
            try:
                result = await versions.rollback(int(arg), f"operator:{origin.sender_id}", None)
            except AdminError as exc:
                return f"Not rolled back: {exc}."
            except ReadOnlyError as exc:
                return f"Not rolled back: {exc}."
            if not result["changed"]:
                return f"Version {arg.strip()}'s policy is already in force; nothing changed."
            return f"Rolled back to version {arg.strip()}'s policy, now version {result['version']}."
        return "Usage: /ltm policy, /ltm policy history, /ltm policy rollback <version>"

    async def writes(self, origin: Origin, state: str = "", target: str = "") -> str:
        """``/ltm writes off|on <target>``: switch a scope's writes (operators)."""
        if not origin.is_admin:
            return "Only an operator can switch another scope's writes; /ltm pause stops learning about you."
        state = state.strip().lower()
        if state not in ("on", "off") or not target.strip():
            return f"Usage: /ltm writes off|on <target>; <target> is {TARGET_SYNTAX}"
        try:
            scope = parse_target(target)
        except AdminError as exc:
            return str(exc)
        return await self._switch(str(scope), state == "on", f"operator:{origin.sender_id}", "")

    async def pause(self, origin: Origin) -> str:
        """``/ltm pause``: a user stops learning about themselves — their own
        state (operating/pauses.py), which no policy change undoes."""
        lang = self._lang(origin)
        try:
            made = await self.engine.pauses.pause(self._own_scope(origin), f"user:{origin.sender_id}",
                                                  say("pause.reason.user", "en"))
        except ReadOnlyError:
            return say("pause.read_only", lang)
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
        try:
            resumed = await self.engine.pauses.resume(scope, f"user:{origin.sender_id}",
                                                      say("pause.reason.resume", "en"))
        except ReadOnlyError:
            return say("pause.read_only", lang)
        reply = say("pause.resumed" if resumed else "pause.not_paused", lang)
        if self.engine.config.write_policy.writes_off(scope):  # the operator's switch is theirs to turn
            reply += "\n" + say("pause.operator_off", lang, scope=scope)
        return reply

    async def _lift(self, origin: Origin, target: str, lang: Lang) -> str:
        if not origin.is_admin:
            return say("pause.only_operator", lang)
        try:
            scope = parse_target(target)
        except AdminError as exc:
            return exc.message(lang)
        if scope.kind != ScopeKind.USER:
            return say("pause.users_only", lang, scope=scope)
        try:
            lifted = await self.engine.pauses.resume(scope, f"operator:{origin.sender_id}",
                                                     say("pause.reason.lift", "en"), lifted=True)
        except ReadOnlyError:
            return say("pause.read_only", lang)
        return say("pause.lifted" if lifted else "pause.not_paused_target", lang, scope=scope)

    async def _switch(self, scope: str, on: bool, actor: str, whom: str) -> str:
        reason = f"{'/ltm resume' if on else '/ltm pause'} by the user" if whom else None
        try:
            result = await self.engine.policy_versions.set_writes(scope, on, actor, PolicySource.COMMAND, reason)
        except AdminError as exc:
            return f"Nothing changed: {exc}."
        except ReadOnlyError:
            return "Memory is read-only right now (emergency read-only); nothing changed."
        subject = "about you" if whom else f"for {scope}"
        if not result["changed"]:
            return f"Learning {subject} is already {'on' if on else 'off'}."
        if on:
            return (f"Learning {subject} is back on (policy version {result['version']}). "
                    "What was said while it was off stays unlearned.")
        return (f"Learning {subject} is off (policy version {result['version']}): nothing new is learned "
                "from what is said now; what is already known is still used.")


def _version_line(row: dict) -> str:
    changes = "; ".join(f"{c['path']} {c['from']} → {c['to']}" for c in row["diff"][:4])
    more = f" (+{len(row['diff']) - 4} more)" if len(row["diff"]) > 4 else ""
    reason = f" — {row['reason']}" if row["reason"] else ""
    return (f"v{row['version']} {row['created_at'][:16].replace('T', ' ')} {row['actor']} ({row['source']})"
            f"{reason}: {changes or 'initial policy'}{more}")
