"""Policy versions (``operating/policy_versions.py``) and the per-scope
write switch (``write_policy.disabled_scopes``), without AstrBot.

What is proven here:

- the first start records version 1 (the policy in force); a restart with
  the same policy records nothing; a restart with a policy changed outside
  the plugin (AstrBot's config page) records a ``webui-config`` version with
  the exact diff;
- every effective change is one version with its actor, source, reason and
  diff, audited; a change that changes nothing is no version and no save;
- a rollback makes the old policy current, exactly, saved and applied at
  once, as a new version naming what it restored; read-only refuses only a
  rollback that keeps read-only on;
- listeners are awaited before and after, in order; one that raises is
  ignored;
- a scope with writes off records its turns but extracts none of them,
  refuses explicit memories, and reads on; switched back on, what was
  pending before is extracted and what was said while off never is.
"""

from __future__ import annotations

import copy

import pytest

from astrbot_plugin_ltm.config import parse_config
from astrbot_plugin_ltm.doors.commands import Commands
from astrbot_plugin_ltm.enums import PolicySource
from astrbot_plugin_ltm.errors import AdminError
from astrbot_plugin_ltm.operating.policy_versions import diff, normalised, policy_of
from astrbot_plugin_ltm.recording.journal import decode, encode
from astrbot_plugin_ltm.storing.database import ReadOnlyError
from astrbot_plugin_ltm.storing.tables import MemoryEvent, MemoryItem
from tests.helpers import START

USER = "root"
PARIS = {"type": "profile", "fact": "Alice lives in Paris", "fact_key": "city", "confidence": 0.9,
         "importance": 0.7}


def test_diff_names_each_changed_setting_and_nothing_else():
    before = policy_of(parse_config({})[0])
    after = copy.deepcopy(before)
    after["write_policy"]["mode"] = "auto"
    after["read_policy"]["max_items"] = 3
    after["emergency_read_only"] = True
    assert diff(before, after) == [
        {"path": "emergency_read_only", "from": False, "to": True},
        {"path": "write_policy.mode", "from": "shadow", "to": "auto"},
        {"path": "read_policy.max_items", "from": 15, "to": 3},
    ]
    assert diff(before, copy.deepcopy(before)) == []
    assert diff(None, before) == []  # the first version


def test_a_policy_stored_before_a_setting_existed_reads_with_its_default():
    old = policy_of(parse_config({"write_policy": {"mode": "auto"}})[0])
    del old["write_policy"]["disabled_scopes"]
    assert normalised(old) == policy_of(parse_config({"write_policy": {"mode": "auto"}})[0])


async def test_first_start_records_version_1_and_a_restart_with_the_same_policy_none(make_ltm):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}}, name="v.db")
    versions = ltm.engine.policy_versions
    assert await versions.current_version() == 1
    (first,) = await versions.history()
    assert first["source"] == "startup" and first["actor"] == "system:startup" and first["diff"] == []
    assert (await versions.get(1))["policy"]["write_policy"]["mode"] == "auto"
    (audited,) = [a for a in await ltm.audit() if a.action == "config"]
    assert audited.detail["version"] == 1 and audited.detail["source"] == "startup"

    again = await make_ltm({"write_policy": {"mode": "auto"}}, name="v.db")
    assert await again.engine.policy_versions.current_version() == 1
    assert await again.engine.policy_versions.count() == 1


async def test_a_policy_changed_outside_the_plugin_is_a_webui_config_version_at_the_next_start(make_ltm):
    await make_ltm({"write_policy": {"mode": "shadow"}}, name="w.db")
    # AstrBot's config page saves the file and reloads the plugin: a new engine, a new policy.
    ltm = await make_ltm({"write_policy": {"mode": "auto"}, "read_policy": {"enable": False},
                          "extraction": {"batch_size": 3}}, name="w.db")
    versions = ltm.engine.policy_versions
    assert await versions.current_version() == 2
    latest = (await versions.history())[0]
    assert latest["source"] == "webui-config" and latest["actor"] == "operator:webui"
    # only policy settings are versioned: extraction.batch_size is not in the diff
    assert raw(latest["diff"]) == [{"path": "write_policy.mode", "from": "shadow", "to": "auto"},
                              {"path": "read_policy.enable", "from": True, "to": False}]


async def test_an_effective_change_is_one_version_and_a_no_op_none(make_api):
    api = await make_api()
    saved = len(api.saved)
    policy = await api.ok("put_policy", {"write_policy": {"mode": "auto"}, "reason": "ready for auto"}, USER)
    assert policy["version"] == 2 and policy["write_policy"]["mode"] == "auto"
    assert len(api.saved) == saved + 1 and api.saved[-1]["write_policy"] == {"mode": "auto"}
    (latest, first) = (await api.ok("policy_history", {}))["versions"]
    assert (latest["version"], first["version"]) == (2, 1)  # newest first
    assert latest["actor"] == f"operator:{USER}" and latest["source"] == "api"
    assert latest["reason"] == "ready for auto"
    assert raw(latest["diff"]) == [{"path": "write_policy.mode", "from": "shadow", "to": "auto"}]
    config_rows = [a for a in await api.ltm.audit() if a.action == "config"]
    assert [a.detail["version"] for a in config_rows] == [1, 2]

    # The same value again, and the same value spelled differently: no version, no save.
    again = await api.ok("put_policy", {"write_policy": {"mode": "auto", "enable": "yes"}}, USER)
    assert again["version"] == 2 and len(api.saved) == saved + 1
    assert (await api.ok("policy_history", {}))["total"] == 2
    # The page says it is the page.
    await api.ok("put_policy", {"read_policy": {"max_items": 4}, "source": "page"}, USER)
    assert (await api.ok("policy_history", {"page_size": "1"}))["versions"][0]["source"] == "page"


@pytest.mark.parametrize("body", [
    {"write_policy": {"mode": "auto"}, "source": "rollback"}, {"write_policy": {"mode": "auto"}, "reason": 3},
    {"write_policy": {"mode": "auto"}, "reason": "x" * 501}, {"reason": "nothing else"},
    {"write_policy": {"disabled_scopes": ["qq:1"]}}, {"write_policy": {"disabled_scopes": ["user:"]}},
    {"write_policy": {"disabled_scopes": ["channel:x"]}}, {"write_policy": {"disabled_scopes": "user: x"}},
])
async def test_a_bad_change_is_refused_and_records_nothing(make_api, body):
    api = await make_api()
    await api.err(400, "put_policy", body, USER)
    assert (await api.ok("policy_history", {}))["total"] == 1 and api.saved == []


async def test_rollback_restores_the_exact_policy_at_once_as_a_new_version(make_api, origin):
    api = await make_api({"write_policy": {"mode": "auto"}})
    v1 = (await api.ok("policy_version", "1"))["policy"]
    await api.ltm.turn(origin("alice"), "I live in Paris", "Nice.", PARIS)
    assert (await api.ltm.block(origin("alice"), "where do I live")).text
    await api.ok("put_policy", {"read_policy": {"enable": False, "max_items": 2},
                                "write_policy": {"mode": "manual", "min_confidence": 0.8}}, USER)
    assert not (await api.ltm.block(origin("alice"), "where do I live")).text  # reads off

    result = await api.ok("policy_rollback", {"version": 1, "reason": "reads went dark"}, USER)
    assert result["changed"] is True and result["version"] == 3 and result["rollback_of"] == 1
    current = await api.ok("get_policy")
    assert {k: current[k] for k in v1} == v1  # exactly version 1's policy
    assert api.saved[-1]["read_policy"] == v1["read_policy"]  # saved: survives a restart
    assert (await api.ltm.block(origin("alice"), "where do I live")).text  # and in force at once
    latest = await api.ok("policy_version", "3")
    assert latest["source"] == "rollback" and latest["rollback_of"] == 1
    assert latest["reason"] == "rollback to version 1: reads went dark"
    assert {"path": "read_policy.enable", "from": False, "to": True} in raw(latest["diff"])

    again = await api.ok("policy_rollback", {"version": 1}, USER)  # already in force
    assert again["changed"] is False and (await api.ok("policy_history", {}))["total"] == 3
    assert "no policy version 9" in await api.err(404, "policy_rollback", {"version": 9}, USER)
    for bad in ({}, {"version": "one"}, {"version": 0}, {"version": True}, {"version": 1, "extra": 1}, []):
        await api.err(400, "policy_rollback", bad, USER)
    await api.err(404, "policy_version", "77")
    await api.err(400, "policy_version", "-1")


async def test_read_only_refuses_only_a_rollback_that_keeps_it_on(make_api):
    api = await make_api()
    await api.ok("put_policy", {"read_policy": {"max_items": 3}}, USER)  # v2
    await api.ok("put_policy", {"emergency_read_only": True}, USER)  # v3, recorded before the store closed
    assert (await api.ok("policy_version", "3"))["policy"]["emergency_read_only"] is True
    await api.ok("put_policy", {"emergency_read_only": False}, USER)  # v4
    await api.ok("put_policy", {"emergency_read_only": True, "read_policy": {"max_items": 5}}, USER)  # v5
    before = await api.ltm.table_snapshot()
    message = await api.err(409, "policy_rollback", {"version": 3}, USER)
    assert "keeps it on" in message and await api.ltm.table_snapshot() == before
    assert api.ltm.engine.config.read_policy.max_items == 5

    result = await api.ok("policy_rollback", {"version": 2}, USER)  # turns read-only off: allowed
    assert result["version"] == 6 and api.ltm.engine.config.emergency_read_only is False
    assert api.ltm.engine.config.read_policy.max_items == 3


async def test_listeners_see_before_and_after_in_order_and_a_failing_one_is_ignored(make_api):
    api = await make_api()
    seen: list[tuple[str, int | None, str]] = []

    async def broken(moment: str, version: int | None) -> None:
        raise RuntimeError("snapshot failed")

    async def watch(moment: str, version: int | None) -> None:
        seen.append((moment, version, api.ltm.engine.config.write_policy.mode))

    versions = api.ltm.engine.policy_versions
    versions.add_listener(broken)
    versions.add_listener(watch)
    await api.ok("put_policy", {"write_policy": {"mode": "auto"}}, USER)
    await versions.rollback(1, "operator:x", None)
    await api.ok("put_policy", {"write_policy": {"mode": "shadow"}}, USER)  # no change: no calls
    assert seen == [("before", 1, "shadow"), ("after", 2, "auto"), ("before", 2, "auto"), ("after", 3, "shadow")]


async def test_a_disabled_scope_records_but_learns_nothing_and_reads_on(make_api, origin, gateway):
    api = await make_api({"write_policy": {"mode": "auto"}})
    ltm, alice, bob = api.ltm, origin("alice"), origin("bob")
    await ltm.turn(alice, "I live in Paris", "Nice.", PARIS)
    # pending before the switch: it waits, and is extracted once writes are back on
    await ltm.record(alice, "I have a cat called Tom")
    await api.ok("put_policy", {"write_policy": {"disabled_scopes": ["user:qq:alice"]}}, USER)
    assert raw((await api.ok("policy_history", {}))["versions"][0]["diff"]) == [
        {"path": "write_policy.disabled_scopes", "from": [], "to": ["user:qq:alice"]}]

    await ltm.record(alice, "I work as a nurse")
    await ltm.record(alice, "remember that I hate olives")  # explicit: not captured
    gateway.default = gateway.facts_json({"fact": "Bob likes tea", "fact_key": "tea"})
    await ltm.engine.worker.drain()
    assert {i.fact for i in await ltm.items()} == {"Alice lives in Paris"}
    said_while_off = await ltm.events(MemoryEvent.content["text"].as_string().in_(
        ["I work as a nurse", "remember that I hate olives"]))
    assert len(said_while_off) == 2 and {e.extraction_status for e in said_while_off} == {"skipped"}
    (waiting,) = await ltm.events(MemoryEvent.content["text"].as_string() == "I have a cat called Tom")
    assert waiting.extraction_status == "pending"
    with pytest.raises(AdminError, match="switched off for user:qq:alice"):
        await ltm.engine.remember(alice, "I like tea")
    assert "switched off" in await Commands(ltm.engine).remember(alice, "I like tea")
    assert (await ltm.block(alice, "where do I live")).text  # reads go on
    # another scope learns as before
    await ltm.turn(bob, "I like tea", "OK.")
    assert "Bob likes tea" in {i.fact for i in await ltm.items()}

    # back on: the turn pending from before is extracted, nothing said while off is
    gateway.default = "[]"
    gateway.facts({"fact": "Alice has a cat called Tom", "fact_key": "cat"})
    await api.ok("put_policy", {"write_policy": {"disabled_scopes": []}}, USER)
    await ltm.engine.worker.drain()
    facts = {i.fact for i in await ltm.items(MemoryItem.scope_id == "qq:alice")}
    assert facts == {"Alice lives in Paris", "Alice has a cat called Tom"}
    prompts = " ".join(c["prompt"] for c in gateway.calls)
    assert "I have a cat called Tom" in prompts and "nurse" not in prompts and "olives" not in prompts


async def test_the_writes_command_is_a_version_and_pause_is_none(make_api, origin):
    api = await make_api()
    commands = Commands(api.ltm.engine)
    alice, admin = origin("alice"), origin("root", admin=True)
    assert "paused" in await commands.pause(alice)  # the user's own state (test_pauses.py), no version
    assert api.ltm.engine.config.write_policy.disabled_scopes == [] and not api.saved
    assert "back on" in await commands.resume(alice)

    assert "Only an operator" in await commands.writes(alice, "off", "group:qq:g1")
    assert "Usage" in await commands.writes(admin, "sideways", "group:qq:g1")
    assert "off" in await commands.writes(admin, "off", "group:qq:g1")
    assert api.ltm.engine.config.write_policy.disabled_scopes == ["group:qq:g1"]
    latest = (await api.ok("policy_history", {}))["versions"][0]
    assert latest["actor"] == "operator:root" and latest["source"] == "command"
    assert "Policy version 2" in await commands.policy(admin)
    history = await commands.policy(admin, "history")
    assert history.splitlines()[0].startswith("v2") and "group:qq:g1" in history
    assert "Rolled back to version 1" in await commands.policy(admin, "rollback", "1")
    assert api.ltm.engine.config.write_policy.disabled_scopes == []
    assert "no policy version 42" in await commands.policy(admin, "rollback", "42")
    assert "Only an operator" in await commands.policy(alice, "rollback", "1")

    await api.ok("put_policy", {"emergency_read_only": True}, USER)
    assert "is paused" in await commands.pause(alice)  # a person's choice, taken during read-only too
    with pytest.raises(ReadOnlyError):
        await api.ltm.engine.policy_versions.change({"read_policy": {"max_items": 1}}, "x", PolicySource.API)


async def test_the_page_switch_changes_one_scope_and_refuses_bad_input(make_api):
    api = await make_api({"write_policy": {"disabled_scopes": ["user:qq:bob"]}})
    result = await api.ok("policy_writes", {"scope": "group:qq:g1", "writes": "off", "reason": "spam wave"}, USER)
    assert result["changed"] and result["disabled_scopes"] == ["user:qq:bob", "group:qq:g1"]
    latest = (await api.ok("policy_history", {}))["versions"][0]
    assert latest["source"] == "page" and latest["reason"] == "spam wave"
    result = await api.ok("policy_writes", {"scope": "user:qq:bob", "writes": "on"}, USER)
    assert result["disabled_scopes"] == ["group:qq:g1"] and api.saved[-1]["write_policy"]["disabled_scopes"] == [
        "group:qq:g1"]
    assert (await api.ok("policy_writes", {"scope": "user:qq:bob", "writes": "on"}, USER))["changed"] is False
    await api.ok("policy_writes", {"scope": "user:qq:carol", "writes": "off"}, USER)
    again = await api.ok("policy_writes", {"scope": "group:qq:g1", "writes": "off"}, USER)  # not the last one
    assert again["changed"] is False and again["disabled_scopes"] == ["group:qq:g1", "user:qq:carol"]
    total = (await api.ok("policy_history", {}))["total"]
    for bad in ({"scope": "user:", "writes": "off"}, {"scope": "user:qq:bob", "writes": "maybe"},
                {"scope": ["user:x"], "writes": "off"}, {"scope": "user:x", "writes": "off", "extra": 1}, [],
                {"scope": "user:x", "writes": "off", "reason": 5}):
        await api.err(400, "policy_writes", bad, USER)
    assert (await api.ok("policy_history", {}))["total"] == total
    # a scope named as the memory list shows it ("qq:bob": a user) is the same switch
    assert (await api.ok("policy_writes", {"scope": "qq:bob", "writes": "off"}, USER))["disabled_scopes"][-1] == (
        "user:qq:bob")


def test_a_turn_said_while_writes_were_off_stays_skipped_through_the_crash_journal():
    said = [MemoryEvent(scope="user", scope_id="qq:a", source_type="message", source_role="user",
                        content={"text": text}, created_at=START, extraction_status=status)
            for text, status in (("while off", "skipped"), ("while on", "pending"))]
    replayed = [decode(line) for line in encode(said).splitlines()]
    assert [e.extraction_status for e in replayed] == ["skipped", "pending"]


async def test_a_start_in_read_only_records_nothing_and_the_next_change_carries_the_diff(make_ltm, api_of):
    await make_ltm({}, name="ro.db")
    # changed on AstrBot's page together with read-only on: the store takes no write at start
    ltm = await make_ltm({"emergency_read_only": True, "read_policy": {"max_items": 4}}, name="ro.db")
    api = api_of(ltm)
    assert await ltm.engine.policy_versions.count() == 1
    await api.ok("put_policy", {"emergency_read_only": False}, USER)
    # turning it off records first what AstrBot's config changed meanwhile, then the page's change:
    # two versions that each say what changed, none with an empty diff
    caught_up, latest = reversed((await api.ok("policy_history", {}))["versions"][:2])
    assert caught_up["version"] == 2 and caught_up["source"] == "webui-config"
    assert raw(caught_up["diff"]) == [{"path": "emergency_read_only", "from": False, "to": True},
                                      {"path": "read_policy.max_items", "from": 15, "to": 4}]
    assert latest["version"] == 3 and latest["source"] == "api"
    assert raw(latest["diff"]) == [{"path": "emergency_read_only", "from": True, "to": False}]


async def test_every_version_names_the_settings_it_changed_in_the_readers_language(make_ltm, api_of):
    ltm = await make_ltm({})
    api = api_of(ltm)
    await api.ok("put_policy", {"emergency_read_only": True, "source": "page"}, USER)
    await api.ok("put_policy", {"emergency_read_only": False, "source": "page"}, USER)
    await api.ok("put_policy", {"write_policy": {"mode": "auto"}}, USER)
    zh = (await api.ok("policy_history", {"lang": "zh"}))["versions"]
    assert [v["diff"][0]["text"] for v in zh[:3]] == [
        "写入模式：影子 (shadow) → 自动 (auto)", "紧急只读：开启 → 关闭", "紧急只读：关闭 → 开启"]
    assert zh[-1]["diff"] == [] and zh[-1]["source"] == "startup"  # only the first names nothing
    en = (await api.ok("policy_history", {"lang": "en"}))["versions"]
    assert en[1]["diff"][0]["text"] == "Emergency read-only: on → off"
    # the audit says where it came from in the reader's words, its detail what changed
    audit = (await api.ok("audit_log", {"action": "config", "lang": "zh"}))["entries"]
    assert audit[1]["reason"] == "策略版本 3（审核页）"
    assert audit[1]["detail"]["diff"][0]["text"] == "紧急只读：开启 → 关闭"


def raw(diff: list[dict]) -> list[dict]:
    """A diff as stored: each change's path and values (the API adds their words)."""
    return [{k: c[k] for k in ("path", "from", "to")} for c in diff]
