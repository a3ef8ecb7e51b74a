"""A user's own pause (``/ltm pause``; operating/pauses.py), without AstrBot.

What is proven here:

- a pause is the user's state: no policy rollback, config save, restart or
  policy change undoes it, and pausing makes no policy version;
- a pause means forgotten: what a paused user says — turns, "remember
  that …", ``/ltm remember`` — in their own chat and in a group is not
  recorded at all, while what others say is learnt; resuming answers
  truthfully; a pause is taken during emergency read-only too;
- only an operator lifts another user's pause, explicitly, and it is audited;
- pauses made through the policy before (``disabled_scopes``) become pause
  rows at the first start, and the operator's own entries stay;
- the API: ``pauses``, ``pauses/lift``, ``user`` and a rollback's dry run.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from astrbot_plugin_ltm.doors.commands import Commands
from astrbot_plugin_ltm.doors.replay_api import ReplayAPI
from astrbot_plugin_ltm.enums import PolicySource
from astrbot_plugin_ltm.errors import AdminError
from astrbot_plugin_ltm.learning.summary_prompt import SESSION_MARK
from astrbot_plugin_ltm.storing.tables import MemoryEvent, MemoryItem

OPERATOR = "root"
PARIS = {"type": "profile", "fact": "Alice lives in Paris", "fact_key": "city", "confidence": 0.9,
         "importance": 0.7}
NURSE = {"type": "profile", "fact": "Alice works as a nurse", "fact_key": "job", "confidence": 0.9,
         "importance": 0.7}
TEA = {"type": "preference", "fact": "Bob likes tea", "fact_key": "tea", "confidence": 0.9, "importance": 0.7}


def said(text: str):
    return MemoryEvent.content["text"].as_string() == text


async def alice_facts(ltm) -> set[str]:
    return {i.fact for i in await ltm.items(MemoryItem.scope_id == "qq:alice")}


async def test_a_paused_user_learns_nothing_after_a_rollback_to_version_1(make_api, origin, gateway):
    api = await make_api({"write_policy": {"mode": "auto"}})
    ltm, engine = api.ltm, api.ltm.engine
    commands, alice = Commands(engine), origin("alice")
    await api.ok("put_policy", {"read_policy": {"max_items": 5}}, OPERATOR)  # version 2
    assert "paused" in await commands.pause(alice)

    rolled = await api.ok("policy_rollback", {"version": 1}, OPERATOR)
    assert rolled["changed"] and rolled["current"]["write_policy"]["disabled_scopes"] == []

    gateway.default = gateway.facts_json(PARIS)  # what any extraction of her turn would find
    events, _ = await ltm.turn(alice, "I live in Paris", "Nice.")
    assert events == [] and not await ltm.events(said("I live in Paris"))  # not even recorded
    await ltm.record(alice, "remember that I work as a nurse")
    with pytest.raises(AdminError, match="paused"):
        await engine.remember(alice, "I like tea")
    assert "paused" in await commands.remember(alice, "I like tea")
    await engine.worker.drain()
    assert await alice_facts(ltm) == set()
    assert "I live in Paris" not in " ".join(c["prompt"] for c in gateway.calls)
    status = await commands.status(alice)
    assert "paused (since 2025-03-01 12:00 UTC)" in status

    gateway.default = "[]"
    assert "back on" in await commands.resume(alice)  # not "already on": the pause held
    assert "not paused" in await commands.resume(alice)
    await ltm.turn(alice, "I work as a nurse", "OK.", NURSE)
    assert await alice_facts(ltm) == {"Alice works as a nurse"}  # what was said while paused stays unlearned


async def test_pausing_makes_no_policy_version_and_no_config_save(make_api, origin):
    api = await make_api()
    versions = api.ltm.engine.policy_versions
    before = await versions.count()
    commands, alice = Commands(api.ltm.engine), origin("alice")
    assert "paused" in await commands.pause(alice)
    assert "already paused (since 2025-03-01 12:00 UTC)" in await commands.pause(alice)
    assert "back on" in await commands.resume(alice)
    assert await versions.count() == before and api.saved == []
    assert [a.action for a in await api.ltm.audit() if a.scope == "user"] == ["pause", "resume"]


async def finished(replay: ReplayAPI, started: dict) -> dict:
    job = replay.engine.jobs.get(started["job_id"])
    assert job.task is not None
    await job.task
    answer = await replay.job(started["job_id"])
    assert answer["status"] == "done", answer["error"]
    return answer


async def test_a_config_save_a_replay_tuning_or_a_restart_does_not_undo_a_pause(make_api, make_ltm, origin):
    api = await make_api({"write_policy": {"mode": "auto"}}, name="p.db")
    engine, alice = api.ltm.engine, origin("alice")
    await api.ltm.turn(origin("bob"), "I like tea", "OK.", TEA)
    await Commands(engine).pause(alice)
    replay = api.api.replay
    await replay.draw_holdout({"share": 1.0})
    await finished(replay, await replay.start_replay({"policy": {"write_policy": {"disabled_scopes": []}}}))
    await finished(replay, await replay.start_tune({}))
    assert engine.paused(alice)
    await api.ok("put_policy", {"write_policy": {"disabled_scopes": [], "mode": "shadow"}}, OPERATOR)
    engine.apply_config({"write_policy": {"mode": "auto"}})  # AstrBot's config page saved
    assert engine.paused(alice)
    again = await make_ltm({"write_policy": {"mode": "auto"}}, name="p.db")  # a restart
    assert again.engine.paused(alice)
    assert await again.record(alice, "I live in Paris") == []


async def test_a_paused_users_messages_in_a_group_are_not_learned_and_others_are(ltm, origin, gateway):
    commands = Commands(ltm.engine)
    alice, bob = origin("alice", group="g1"), origin("bob", group="g1")
    assert "paused" in await commands.pause(alice)  # said in the group: pauses alice everywhere
    assert ltm.engine.paused(origin("alice"))
    # decided on the hot path: neither her words nor the bot's answer to them are recorded
    assert ltm.engine.record_turn(alice, "remember that I live in Paris", "Noted, Paris!") == []
    await ltm.engine.recorder.flush()
    assert not [e for e in await ltm.events() if "Paris" in json.dumps(e.content)]
    await ltm.turn(bob, "I like tea", "OK.", TEA)
    assert {i.fact for i in await ltm.items()} == {"Bob likes tea"}
    prompts = " ".join(c["prompt"] for c in gateway.calls)
    assert "I like tea" in prompts and "Paris" not in prompts
    assert "paused" in await commands.status(origin("alice"))


async def test_only_an_operator_lifts_a_pause_explicitly_and_it_is_audited(make_api, origin):
    api = await make_api()
    commands = Commands(api.ltm.engine)
    alice, bob, admin = origin("alice"), origin("bob"), origin("root", admin=True)
    await commands.pause(alice)
    assert "Only an operator" in await commands.resume(bob, "user:qq:alice")
    assert api.ltm.engine.paused(alice)
    assert "paused by the user" in await commands.status(admin, "user:qq:alice")

    lifted = await api.ok("lift_pause", {"scope": "user:qq:alice", "reason": "she asked by mail"}, OPERATOR)
    assert lifted == {"lifted": True} and not api.ltm.engine.paused(alice)
    (lift,) = [a for a in await api.ltm.audit() if a.action == "lift"]
    assert (lift.actor, lift.scope, lift.scope_id) == ("operator:root", "user", "qq:alice")
    assert lift.reason == "pause lifted by an operator: she asked by mail"
    assert await api.ok("lift_pause", {"scope": "user:qq:alice"}, OPERATOR) == {"lifted": False}

    await commands.pause(alice)
    assert "Only a user pauses" in await commands.resume(admin, "group:qq:g1")
    assert "Lifted the pause of user:qq:alice" in await commands.resume(admin, "user:qq:alice")
    assert [a.actor for a in await api.ltm.audit() if a.action == "lift"] == ["operator:root", "operator:root"]
    assert "has not paused" in await commands.resume(admin, "user:qq:alice")

    assert "Only a user pauses" in await api.err(400, "lift_pause", {"scope": "group:qq:g1"}, OPERATOR)
    await api.err(400, "lift_pause", {"scope": "user:"}, OPERATOR)
    await api.err(400, "lift_pause", {"scope": "user:qq:alice", "why": "x"}, OPERATOR)
    await api.err(400, "lift_pause", [], OPERATOR)


async def test_the_pauses_and_user_views_show_a_users_pause_in_the_readers_language(make_api, origin):
    api = await make_api({"write_policy": {"mode": "auto"}})
    alice = origin("alice")
    await api.ltm.turn(alice, "I live in Paris", "Nice.", PARIS)
    await Commands(api.ltm.engine).pause(alice)

    (listed,) = (await api.ok("pauses", {}))["items"]
    assert listed == {"scope": "user:qq:alice", "since": "2025-03-01T12:00:00+00:00", "by": "user:alice",
                      "reason": "/ltm pause by the user", "reason_code": "pause.reason.user"}
    assert (await api.ok("pauses", {"lang": "zh"}))["items"][0]["reason"] == "用户发送了 /ltm pause"

    view = await api.ok("user_view", {"scope": "user:qq:alice"})
    assert view["scope"] == "user:qq:alice" and view["writes_off"] is False
    assert view["paused"]["by"] == "user:alice" and view["paused"]["since"].startswith("2025-03-01")
    assert [i["fact"] for i in view["memories"]["items"]] == ["Alice lives in Paris"]
    assert view["memories"]["total"] == 1
    assert [e["content"]["text"] for e in view["events"]] == ["Nice.", "I live in Paris"]  # newest first
    assert view["audit"][0]["action"] == "pause"
    group = await api.ok("user_view", {"scope": "group:qq:g1"})
    assert group["paused"] is None and group["memories"] == {"items": [], "total": 0}
    await api.err(400, "user_view", {})
    await api.err(400, "user_view", {"scope": "user:"})
    # named as a person sees her: the memory list's form, the bare id, the page's label
    for named in ("qq:alice", "alice", "用户 · qq:alice"):
        assert (await api.ok("user_view", {"scope": named}))["scope"] == "user:qq:alice"
    # a typo: nothing is kept of it, and the scope it reads like is suggested
    assert "did you mean user:qq:alice" in await api.err(404, "user_view", {"scope": "qq:alcie"})


async def test_a_rollback_dry_run_shows_the_diff_and_warnings_and_writes_nothing(make_api):
    api = await make_api({"write_policy": {"mode": "auto"}})
    await api.ok("put_policy", {"write_policy": {"mode": "shadow", "disabled_scopes": ["group:qq:g1"]}}, OPERATOR)
    await api.ok("put_policy", {"emergency_read_only": True}, OPERATOR)
    before = await api.ltm.table_snapshot()

    preview = await api.ok("policy_rollback", {"version": 1, "dry_run": True}, OPERATOR)
    assert [{k: c[k] for k in ("path", "from", "to")} for c in preview["diff"]] == [
        {"path": "emergency_read_only", "from": True, "to": False},
        {"path": "write_policy.disabled_scopes", "from": ["group:qq:g1"], "to": []},
        {"path": "write_policy.mode", "from": "shadow", "to": "auto"},
    ]
    assert [w["code"] for w in preview["warnings"]] == [
        "rollback.warn.read_only_off", "rollback.warn.writes_on", "rollback.warn.mode_auto"]
    assert preview["warnings"][2]["message"] == "write mode shadow → auto: new memories go live without review"
    assert preview["warnings"][1]["message"] == "writes switch back on for group:qq:g1"
    chinese = await api.ok("policy_rollback", {"version": 1, "dry_run": True, "lang": "zh"}, OPERATOR)
    assert chinese["warnings"][2]["message"].startswith("写入模式 shadow → auto")
    assert [c["text"] for c in chinese["diff"]][2] == "写入模式：影子 (shadow) → 自动 (auto)"
    assert await api.ltm.table_snapshot() == before and api.ltm.engine.config.emergency_read_only
    assert (await api.ok("policy_rollback", {"version": 3, "dry_run": True}, OPERATOR)) == {
        "version": 3, "diff": [], "warnings": []}
    await api.err(404, "policy_rollback", {"version": 42, "dry_run": True}, OPERATOR)
    for unreadable in ("maybe", "", None):
        await api.err(400, "policy_rollback", {"version": 1, "dry_run": unreadable}, OPERATOR)
    assert await api.ltm.table_snapshot() == before


async def test_old_pauses_in_the_policy_become_pause_rows_at_the_first_start(make_api, make_ltm, origin):
    """Before pauses had their own table, /ltm pause put the user's scope in
    disabled_scopes as a policy version; the first start moves those."""
    api = await make_api({"write_policy": {"mode": "auto"}}, name="old.db")
    versions = api.ltm.engine.policy_versions
    await versions.set_writes("user:qq:alice", False, "user:alice", PolicySource.COMMAND, "/ltm pause by the user")
    await versions.set_writes("group:qq:g1", False, "operator:root", PolicySource.COMMAND)
    await versions.set_writes("user:qq:carol", False, "operator:root", PolicySource.PAGE)  # the operator's
    old_config = api.raw
    assert old_config["write_policy"]["disabled_scopes"] == ["user:qq:alice", "group:qq:g1", "user:qq:carol"]

    started = await make_ltm(old_config, name="old.db")
    engine = started.engine
    assert engine.paused(origin("alice")) and not engine.paused(origin("carol"))
    assert engine.config.write_policy.disabled_scopes == ["group:qq:g1", "user:qq:carol"]
    (moved,) = await engine.policy_versions.history(0, 1)
    assert moved["source"] == "pauses-moved" and moved["actor"] == "system:startup"
    assert moved["diff"] == [{"path": "write_policy.disabled_scopes",
                              "from": ["user:qq:alice", "group:qq:g1", "user:qq:carol"],
                              "to": ["group:qq:g1", "user:qq:carol"]}]
    (pause,) = engine.pauses.listing()
    assert pause.by == "user:alice" and pause.since == api.ltm.clock()
    assert "moved out of write_policy.disabled_scopes, version 2" in pause.reason
    assert [a.actor for a in await started.audit() if a.action == "pause"] == ["user:alice"]
    # a rollback past the move cannot unpause her
    await engine.policy_versions.rollback(1, "operator:root", None)
    assert engine.paused(origin("alice"))

    count = await engine.policy_versions.count()
    again = await make_ltm(engine.policy_versions._raw(), name="old.db")  # nothing left to move
    assert await again.engine.policy_versions.count() == count and again.engine.paused(origin("alice"))


async def test_what_a_paused_user_says_is_in_no_summary(make_ltm, gateway, origin):
    def summarise(system: str, prompt: str) -> str:
        return json.dumps({"summary": "Summary: " + " / ".join(prompt.splitlines()[1:])}) \
            if system.startswith(SESSION_MARK) else "[]"

    gateway.default = summarise
    ltm = await make_ltm({"write_policy": {"mode": "auto"},
                          "summaries": {"enable": True, "idle_minutes": 30, "min_events": 1}})
    alice, bob = origin("alice", group="g1"), origin("bob", group="g1")
    await Commands(ltm.engine).pause(alice)
    await ltm.record(alice, "I live in Paris", "Paris, lovely!")
    await ltm.record(bob, "I like tea", "Tea is great.")
    ltm.clock.advance(minutes=31)
    await ltm.engine.summaries.run_once()
    (summary,) = [i.fact for i in await ltm.items(MemoryItem.type == "summary")]
    assert "I like tea" in summary and "Paris" not in summary


async def test_a_pause_covers_the_users_persona_scopes_too(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}, "identity": {"persona_scoped": True}})
    alice = origin("alice")
    as_bard = replace(alice, persona="Bard")
    await Commands(ltm.engine).pause(alice)
    assert ltm.engine.resolver.write_scope(as_bard).id != "qq:alice"  # a scope of its own
    assert await ltm.record(as_bard, "I live in Paris") == []


async def test_a_pause_asked_for_during_read_only_is_kept_when_read_only_ends(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}, "emergency_read_only": True})
    commands, alice = Commands(ltm.engine), origin("alice")
    reply = await commands.pause(alice)
    assert "is paused" in reply and "nothing changed" not in reply
    assert [a.action for a in await ltm.audit() if a.scope == "user"] == ["pause"]
    ltm.configure({"emergency_read_only": False})
    assert ltm.engine.paused(alice)
    assert await ltm.record(alice, "I live in Paris") == []


async def test_turns_recorded_while_paused_before_this_version_are_deleted_at_start(make_ltm, origin, gateway):
    """Before a pause meant forgotten, what a paused user said was recorded
    (only not learnt): the first start of this version deletes it, in the
    user's own chat and in groups, with the bot's replies."""
    from sqlalchemy import delete as sql_delete

    from astrbot_plugin_ltm.storing.tables import IndexBuild

    ltm = await make_ltm({"write_policy": {"mode": "auto"}}, name="old-pauses.db")
    alice, in_g1, bob = origin("alice"), origin("alice", group="g1"), origin("bob", group="g1")
    await ltm.record(alice, "I like tea before the pause", "OK.")
    await Commands(ltm.engine).pause(alice)
    async with ltm.engine.db.write() as session:  # as the recorder of before wrote them: kept, skipped
        for origin_, text in ((alice, "my card number is 6222"), (in_g1, "my code is ZX-4417")):
            for role, said_ in (("user", text), ("assistant", f"Noted: {text}")):
                session.add(MemoryEvent(scope="group" if origin_.group_id else "user",
                                        scope_id=f"qq:{origin_.group_id or 'alice'}", source_type="message",
                                        source_role=role, content={"text": said_}, platform_id="qq",
                                        session_id=origin_.unified_msg_origin,
                                        sender_id="alice" if role == "user" else None,
                                        created_at=ltm.clock(), extraction_status="skipped"))
        await session.execute(sql_delete(IndexBuild).where(IndexBuild.name == "contexts"))
    await ltm.record(bob, "bob's words stay", "OK.")
    again = await make_ltm({"write_policy": {"mode": "auto"}}, name="old-pauses.db")  # the first start
    left = {e.content["text"] for e in await again.events()}
    assert left == {"I like tea before the pause", "OK.", "bob's words stay"}, left


async def test_the_user_view_of_someone_paused_with_nothing_kept_is_shown_not_taken_for_a_typo(make_api, origin):
    """A pause records nothing, so a paused person may have no memory and no
    turn; their view (to lift the pause) is theirs, not "did you mean …"."""
    api = await make_api({"write_policy": {"mode": "auto"}})
    await api.ltm.turn(origin("zee"), "I live in Paris", "Nice.", PARIS)
    await Commands(api.ltm.engine).pause(origin("zed"))
    view = await api.ok("user_view", {"scope": "user:qq:zed"})
    assert view["scope"] == "user:qq:zed" and view["paused"]["by"] == "user:zed"
    assert "did you mean user:qq:zee" in await api.err(404, "user_view", {"scope": "user:qq:zef"})
