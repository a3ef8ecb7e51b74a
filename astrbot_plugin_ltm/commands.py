"""The `/ltm` chat commands, as text in → text out over the engine.

A user's commands act on their own memory only; the operator commands
(approving, rejecting, other users' scopes) are wired with AstrBot's admin
permission in main.py and check ``origin.is_admin`` here as well.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from .admin import AdminError, ItemFilter
from .db import ReadOnlyError
from .engine import LTMEngine
from .scope import Origin, Scope

HELP = """/ltm status — what the bot keeps about you
/ltm list — your memories (id, type, status)
/ltm remember <fact> — store a fact now
/ltm forget <id> — delete one of your memories
/ltm forget-all — delete all your memories (asks to confirm)
Operators: /ltm pending, /ltm approve <id>, /ltm reject <id>"""

CONFIRM_WINDOW = timedelta(seconds=120)
LIST_LIMIT = 20


class Commands:
    def __init__(self, engine: LTMEngine) -> None:
        self.engine = engine
        self._forget_all_asked: dict[Scope, datetime] = {}

    def _own_scope(self, origin: Origin) -> Scope:
        return self.engine.resolver.user_scope(origin)

    async def status(self, origin: Origin) -> str:
        scopes = self.engine.resolver.read_scopes(origin)
        stats = await self.engine.admin.stats(scopes)
        if not stats:
            return "I don't keep any memories about you yet."
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
        scope = self._own_scope(origin)
        filters = [ItemFilter(scope=scope.kind, scope_id=scope.id)]
        if origin.is_group:
            group = self.engine.resolver.group_scope(origin)
            filters.append(ItemFilter(scope=group.kind, scope_id=group.id, told_by=origin.sender_id))
        return filters

    async def list(self, origin: Origin) -> str:
        items, total = [], 0
        for f in self._own_filters(origin):
            found, count = await self.engine.admin.list_items(f, sort="importance", limit=LIST_LIMIT)
            items.extend(found)
            total += count
        if not items:
            return "I don't remember anything about you."
        lines = [
            f"{i.memory_id[:8]} [{i.type}] {i.fact}"
            + ("" if i.status == "active" else f" ({'awaiting approval' if i.awaiting_approval else i.status})")
            for i in items[:LIST_LIMIT]
        ]
        more = f"\n… and {total - len(lines)} more" if total > len(lines) else ""
        return "\n".join(lines) + more

    async def remember(self, origin: Origin, fact: str) -> str:
        if not fact.strip():
            return "Usage: /ltm remember <fact>"
        try:
            outcome = await self.engine.remember(origin, fact)
        except ReadOnlyError:
            return "Memory is read-only right now (emergency read-only); nothing was stored."
        if outcome.action == "dropped":
            return f"Not stored: {outcome.reason}"
        note = "" if outcome.status == "active" else f" It is {outcome.status} until an operator approves it."
        return f"Remembered ({outcome.memory_id[:8]}): {outcome.fact}.{note}"

    async def forget(self, origin: Origin, memory_id: str) -> str:
        try:
            try:
                item = await self.engine.admin.find_by_prefix(memory_id, [self._own_scope(origin)])
            except AdminError:
                if not origin.is_group:
                    raise
                group = self.engine.resolver.group_scope(origin)
                item = await self.engine.admin.find_by_prefix(memory_id, [group], sender_id=origin.sender_id)
            await self.engine.admin.delete(item.memory_id, f"user:{origin.sender_id}", "forgotten by the user")
        except AdminError as exc:
            return str(exc)
        except ReadOnlyError:
            return "Memory is read-only right now; nothing was deleted."
        return f"Forgotten: {item.fact}"

    async def forget_all(self, origin: Origin, confirm: str) -> str:
        scope = self._own_scope(origin)
        now = self.engine.clock()
        asked = self._forget_all_asked.get(scope)
        if confirm.strip().lower() != "confirm" or asked is None or now - asked > CONFIRM_WINDOW:
            items, total = await self.engine.admin.list_items(ItemFilter(scope=scope.kind, scope_id=scope.id), limit=1)
            if total == 0:
                return "I don't remember anything about you."
            self._forget_all_asked[scope] = now
            return (
                f"This deletes all {total} memories I keep about you. "
                "Send /ltm forget-all confirm within 2 minutes to go ahead."
            )
        self._forget_all_asked.pop(scope, None)
        try:
            count = await self.engine.admin.forget_scope(scope, f"user:{origin.sender_id}")
        except ReadOnlyError:
            return "Memory is read-only right now; nothing was deleted."
        return f"Deleted {count} memories."

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
