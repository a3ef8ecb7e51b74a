"""A hostile-input corpus against every entry point operators and users
have: every dashboard API method (driven as the routes drive it, without
AstrBot), the export file, import, and the chat commands.

Inputs: oversize text, malformed and deeply nested JSON, wrong types,
extreme numbers, SQL and FTS syntax, LIKE wildcards, control characters,
lone surrogates. For every one: an answer below 500 with a message (no
stack trace), and not one row of any ltm_ table added, removed or changed.
A slice of the same corpus runs through a real AstrBot in
tests/e2e/test_e2e_dashboard_api.py.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from astrbot_plugin_ltm import validators
from astrbot_plugin_ltm.doors.api import MemoryAPI
from astrbot_plugin_ltm.doors.commands import Commands
from astrbot_plugin_ltm.errors import AdminError
from astrbot_plugin_ltm.operating.serialize import EVENT_FIELDS, ITEM_FIELDS
from devtools.exports import reseal

DEEP_LIST: Any = []
for _ in range(5000):
    DEEP_LIST = [DEEP_LIST]
DEEP_OBJECT: Any = {}
for _ in range(200):
    DEEP_OBJECT = {"a": DEEP_OBJECT}

# Text as it arrives in query strings, path segments and chat commands.
HOSTILE_TEXT = [
    "", " ", "\t\n", "x" * 1_000_000, "y" * 300, "\x00", "a\x00b", "\x1b[31mred", "\x7f", "\u202egnp.exe",
    "\ud800", "🙂" * 50, "'; DROP TABLE ltm_items; --", '" OR 1=1 --', "%", "_", "%%%%", "____",
    "NEAR(alice bob)", '"unterminated', "alice* OR bob*", "^start", "scoped : x", "tokens:alice", "(((", ")",
    "null", "NaN", "-Infinity", "-1", "1e+309", "9" * 5000, "0x10", "1.5", "../../etc/passwd",
    "<script>alert(1)</script>", "{{7*7}}", "\n" * 1000, "user:", "group:", ":::", "qq:" + "z" * 300,
]

# JSON values in bodies: each is invalid for every field it is put in.
HOSTILE_VALUES: list[Any] = [
    10**30, -(10**30), 1e308, -1, 36_501, 1.5, -1e-320, True, "", "x" * 1_000_000, "\x00",
    "\ud800", [], {}, DEEP_LIST, DEEP_OBJECT, "'; DROP TABLE ltm_items; --", "%",
]

QUERY_PARAMS = {
    "list_items": ("page", "page_size", "scope", "scope_id", "type", "status", "min_confidence", "q", "sort",
                   "search"),
    "list_events": ("page", "page_size", "scope", "scope_id", "status", "source_type", "session_id"),
    "stats": ("scope", "scope_id"),
    "audit_log": ("page", "page_size", "action", "memory_id", "scope", "scope_id", "session_id", "actor"),
    "export": ("scope", "scope_id", "status", "type"),
    "export_file": ("scope", "scope_id", "status", "type"),
    "user_view": ("scope", "page", "page_size", "lang"),
    "pauses": ("lang",),
}


@dataclass
class Tally:
    tried: int = 0
    server_errors: list[str] = field(default_factory=list)
    tracebacks: list[str] = field(default_factory=list)

    def answer(self, what: str, status: int, message: str) -> None:
        self.tried += 1
        if status >= 500:
            self.server_errors.append(f"{what}: {status} {message[:200]}")
        if "Traceback" in message or 'File "' in message:
            self.tracebacks.append(f"{what}: {message[:200]}")


def short(value: Any) -> str:
    try:
        shown = repr(value)
    except RecursionError:
        shown = f"a deeply nested {type(value).__name__}"
    return shown if len(shown) <= 50 else shown[:47] + "..."


def accepted(validator: Callable[..., Any], *args: Any) -> bool:
    try:
        validator(*args)
    except AdminError:
        return False
    return True


def is_refused_fact(value: Any, limit: int) -> bool:
    return not accepted(validators.fact, value, limit)


def hostile_imports(doc: dict) -> list[tuple[str, bytes]]:
    """Raw bodies: malformed, nested, and the real export with one field at
    a time made hostile (and resealed, so the field's validator is what
    refuses it)."""
    out: list[tuple[str, bytes]] = [
        ("empty", b""), ("not UTF-8", b"\xff\xfe\x00"), ("truncated", b'{"format": "astrbot'),
        ("NaN", b'{"format": NaN}'), ("deep list", b"[" * 100_000 + b"]" * 100_000),
        ("deep object", b'{"a":' * 50_000 + b"1" + b"}" * 50_000), ("a number", b"1e999"),
        ("a string", b'"export"'), ("null", b"null"),
        ("envelope of nothing", json.dumps({"status": "ok", "data": None}).encode()),
        ("envelope of an error", json.dumps({"status": "error", "message": "x"}).encode()),
        ("page wrapper of a list", json.dumps({"dry_run": True, "export": []}).encode()),
        ("huge item count", json.dumps({**doc, "items": [{}] * 100_001}).encode()),
    ]
    for name in (*ITEM_FIELDS, "evidence"):
        for value in HOSTILE_VALUES:
            changed = copy.deepcopy(doc)
            changed["items"][-1][name] = value
            try:
                body = json.dumps(reseal(changed)).encode("utf-8", "surrogatepass")
            except RecursionError:
                continue  # not expressible as JSON (nested past json's own limit)
            out.append((f"items[-1].{name}={short(value)}", body))
    for name in EVENT_FIELDS:
        for value in HOSTILE_VALUES[:10]:
            changed = copy.deepcopy(doc)
            changed["items"][-1]["evidence"][0]["event"][name] = value
            out.append((f"event.{name}={short(value)}", json.dumps(reseal(changed)).encode("utf-8", "surrogatepass")))
    for content in ({"text": "\ud800"}, {"text": "x" * 1_000_000}, {"text": "a" * 300_000}, {"deep": DEEP_OBJECT}):
        changed = copy.deepcopy(doc)
        changed["items"][-1]["evidence"][0]["event"]["content"] = content
        out.append((f"event.content={short(content)}", json.dumps(reseal(changed)).encode("utf-8", "surrogatepass")))
    return out


async def test_hostile_inputs_never_get_a_500_a_traceback_or_a_write(make_ltm, origin, capsys):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}})
    raw = copy.deepcopy(ltm.raw_config)

    async def save(new: dict[str, Any]) -> None:
        raise AssertionError(f"a hostile policy change was saved: {short(new)}")

    api = MemoryAPI(ltm.engine, lambda: raw, save)
    cmd = Commands(ltm.engine)
    user, op = origin("alice"), origin("root", admin=True)
    await cmd.remember(user, "I like green tea")
    await cmd.remember(origin("bob"), "I live in Paris")
    memory_id = (await ltm.items())[0].memory_id
    doc = await api.export({})
    limit = ltm.engine.config.extraction.max_fact_chars
    before = await ltm.table_snapshot()
    tally = Tally()

    async def through_api(what: str, method: Callable[..., Awaitable[Any]], *args: Any) -> None:
        response = await api.call(method, *args)
        message = response.body.get("message", "") if response.status != 200 else ""
        tally.answer(what, response.status, message)

    async def through_command(what: str, reply: Awaitable[str]) -> None:
        try:
            text = await reply
        except Exception as exc:  # what main.py would turn into "Sorry, that failed"
            tally.answer(what, 500, f"{type(exc).__name__}: {exc}")
            return
        tally.answer(what, 200, text)
        assert isinstance(text, str) and text and len(text) < 5000, (what, text[:200])

    # -- every API route -------------------------------------------------------------------
    for name, params in QUERY_PARAMS.items():
        method = getattr(api, name)
        for param in params:
            for text in HOSTILE_TEXT:
                if name == "export_file":
                    response = await method({param: text})
                    tally.answer(f"{name}?{param}={short(text)}", response.status, response.body.get("message", ""))
                else:
                    await through_api(f"{name}?{param}={short(text)}", method, {param: text})
    for text in HOSTILE_TEXT:
        await through_api(f"get_item {short(text)}", api.get_item, text)
        await through_api(f"delete_item {short(text)}", api.delete_item, text, "root")
        await through_api(f"patch_item {short(text)}", api.patch_item, text, {"importance": 0.5}, "root")
        await through_api(f"import dry_run={short(text)}", api.import_, json.dumps(doc).encode(),
                          {"dry_run": text}, "root")
    for text in HOSTILE_TEXT:  # the injection preview reads only: any answer below 500, nothing written
        await through_api(f"items?q={short(text)}&search=meaning", api.list_items, {"q": text, "search": "meaning"})
        for body in ({"scope": text, "message": "tea?"}, {"scope": "user:qq:alice", "message": text},
                     {"scope": "user:qq:alice", "message": "tea?", "group": text},
                     {"scope": "user:qq:alice", "message": "tea?", "persona": text}):
            await through_api(f"preview {short(body)}", api.preview, body)
    for value in HOSTILE_VALUES:
        for body in ({"scope": value, "message": "tea?"}, {"scope": "user:qq:alice", "message": value},
                     {"scope": "user:qq:alice", "message": "tea?", "group": value}, value):
            await through_api(f"preview {short(body)}", api.preview, body)
    for value in HOSTILE_VALUES:
        for change in ("status", "importance", "ttl_days", "fact", "type", "owner"):
            if change == "fact" and not is_refused_fact(value, limit):
                continue  # text that is a fine fact ("%", SQL) is not hostile as a fact
            await through_api(f"patch {change}={short(value)}", api.patch_item, memory_id, {change: value}, "root")
        await through_api(f"patch body {short(value)}", api.patch_item, memory_id, value, "root")
        bodies = [{"memory_ids": value, "decision": "approve"}, {"memory_ids": [memory_id], "decision": value}, value]
        if not accepted(validators.text, value, "reason"):
            bodies.append({"memory_ids": [memory_id], "decision": "reject", "reason": value})
        for body in bodies:
            await through_api(f"review {short(body)}", api.review, body, "root")
        for key in ("enable", "emergency_read_only", "write_policy", "read_policy", "other"):
            if value is True and key in ("enable", "emergency_read_only"):
                continue  # a valid setting, not a hostile one
            await through_api(f"policy {key}={short(value)}", api.put_policy, {key: value}, "root")
        for section, setting in (("write_policy", "mode"), ("write_policy", "min_confidence"),
                                 ("read_policy", "max_tokens"), ("read_policy", "enable")):
            if value is True and setting == "enable":
                continue
            await through_api(f"policy {section}.{setting}={short(value)}", api.put_policy,
                              {section: {setting: value}}, "root")
        for body in ({"scope": value}, {"scope": "user:qq:alice", "reason": value}, value):
            await through_api(f"pauses/lift {short(body)}", api.lift_pause, body, "root")
        for body in ({"version": value, "dry_run": True}, {"version": 1, "dry_run": value},
                     {"version": 1, "dry_run": True, "lang": value}):
            await through_api(f"rollback dry run {short(body)}", api.policy_rollback, body, "root")
    for what, body in hostile_imports(doc):
        await through_api(f"import {what}", api.import_, body, {}, "root")
        await through_api(f"import/preview {what}", api.import_, body, {}, "root", True)
    await through_api("import of no readable body", api.import_, None, {}, "root")

    # -- every chat command ----------------------------------------------------------------------
    for text in HOSTILE_TEXT:
        if is_refused_fact(text, limit):  # the rest are facts a user may store
            await through_command(f"remember {short(text)}", cmd.remember(user, text))
        for who in (user, op):
            await through_command(f"status {short(text)}", cmd.status(who, text))
            await through_command(f"list {short(text)}", cmd.list(who, text))
            await through_command(f"forget {short(text)}", cmd.forget(who, text))
            await through_command(f"forget-all {short(text)}", cmd.forget_all(who, text))
            await through_command(f"resume {short(text)}", cmd.resume(who, text))
        await through_command(f"approve {short(text)}", cmd.review(op, text, "approve"))
        await through_command(f"reject {short(text)}", cmd.review(op, text, "reject"))

    after = await ltm.table_snapshot()
    changed = sorted(t for t in set(before) | set(after) if before.get(t) != after.get(t))
    with capsys.disabled():
        print(f"\nhostile corpus: {tally.tried} inputs, {len(tally.server_errors)} answers >= 500, "
              f"{len(tally.tracebacks)} tracebacks, {len(changed)} tables changed")
    assert tally.tried >= 150
    assert tally.server_errors == []
    assert tally.tracebacks == []
    assert changed == [], {t: (sorted(set(after.get(t, [])) - set(before.get(t, [])))[:3]) for t in changed}


@pytest.mark.parametrize("target", ["qq:" + "z" * 300, "\x00", "user:\x1b[2J", "group:" + "\ud800"])
async def test_a_hostile_operator_target_is_answered_with_the_syntax(make_ltm, origin, target):
    ltm = await make_ltm({})
    reply = await Commands(ltm.engine).status(origin("root", admin=True), target)
    assert ("longer than" in reply or "control character" in reply) and len(reply) < 400, reply
