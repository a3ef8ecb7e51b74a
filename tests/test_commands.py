"""The /ltm chat commands (text in, text out over the engine)."""

from __future__ import annotations

import pytest

from astrbot_plugin_ltm.doors.commands import Commands, help_text
from astrbot_plugin_ltm.errors import AdminError
from astrbot_plugin_ltm.i18n import say
from astrbot_plugin_ltm.operating import targets
from astrbot_plugin_ltm.scope import Scope
from astrbot_plugin_ltm.storing.tables import MemoryItem


@pytest.fixture
async def cmd(ltm):
    return Commands(ltm.engine)


async def test_status(ltm, cmd, origin):
    a = origin("alice")
    assert await cmd.status(a) == "I don't keep any memories about you yet."
    await cmd.remember(a, "I like green tea")
    await ltm.record(a, "I live in Paris", "Nice.")
    text = await cmd.status(a)
    assert "user qq:alice: 1 active; 2 message(s) waiting for extraction" in text
    assert text.endswith("Write mode: auto.")
    # another user sees nothing of it
    assert await cmd.status(origin("bob")) == "I don't keep any memories about you yet."


async def test_list(ltm, cmd, origin):
    a = origin("alice")
    assert await cmd.list(a) == "I don't remember anything about you."
    await cmd.remember(a, "I like green tea")
    await ltm.turn(a, "maybe I like jazz", "OK.", {"fact": "Alice might like jazz", "confidence": 0.5})
    item = await ltm.item(MemoryItem.fact == "Alice likes green tea")
    text = await cmd.list(a)
    lines = text.split("\n")
    assert f"{item.memory_id[:8]} [preference] Alice likes green tea" in lines
    assert any(line.endswith("[preference] Alice might like jazz (shadow)") for line in lines)
    assert await cmd.list(origin("bob")) == "I don't remember anything about you."


async def test_list_is_capped_and_says_how_many_more(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto", "max_writes_per_session": 100, "max_writes_per_hour": 100}})
    cmd = Commands(ltm.engine)
    a = origin("alice")
    for n in range(23):
        await ltm.engine.remember(a, f"fact number {n} is {'x' * n}")
    lines = (await cmd.list(a)).split("\n")
    assert len(lines) == 21 and lines[-1] == "… and 3 more"


async def test_remember(ltm, cmd, origin):
    a = origin("alice")
    reply = await cmd.remember(a, "I like green tea")
    item = await ltm.item()
    assert reply == f"Remembered ({item.memory_id[:8]}): Alice likes green tea."
    assert item.status == "active"
    assert await cmd.remember(a, "   ") == "Usage: /ltm remember <fact>"
    assert len(await ltm.items()) == 1
    assert ltm.gateway.calls == []


async def test_remember_in_shadow_or_manual_mode_says_it_is_not_active(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "manual"}})
    reply = await Commands(ltm.engine).remember(origin("alice"), "I like green tea")
    assert reply.endswith("I will use it once an operator approves it.")
    assert (await ltm.item()).awaiting_approval
    # in words a user reads: no "shadow" (影子), no status name
    cmd = Commands(ltm.engine)
    with cmd.hearing("ltm 记住 我喜欢喝乌龙茶"):
        zh = await cmd.remember(origin("bob"), "我喜欢喝乌龙茶")
    assert zh.endswith("管理员批准后我才会用到它。") and "影子" not in zh and "shadow" not in zh


async def test_remember_refused_by_policy_says_why(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto", "allowed_types": ["profile"]}})
    reply = await Commands(ltm.engine).remember(origin("alice"), "I like green tea")
    assert reply.startswith("Not stored:") and "allowed_types" in reply
    assert await ltm.items() == []


async def test_forget(ltm, cmd, origin):
    a, b = origin("alice"), origin("bob")
    await cmd.remember(a, "I like green tea")
    await cmd.remember(b, "I like coffee")
    mine = await ltm.item(MemoryItem.scope_id == "qq:alice")
    theirs = await ltm.item(MemoryItem.scope_id == "qq:bob")

    # not someone else's
    reply = await cmd.forget(a, theirs.memory_id[:8])
    assert "no memory" in reply
    assert len(await ltm.items()) == 2
    # too short to be safe
    assert "at least 4" in await cmd.forget(a, mine.memory_id[:3])

    assert await cmd.forget(a, mine.memory_id[:8]) == "Forgotten: Alice likes green tea"
    assert [i.memory_id for i in await ltm.items()] == [theirs.memory_id]
    (tomb,) = await ltm.tombstones()
    assert tomb.fact_key == mine.fact_key and tomb.actor == "user:alice"
    assert "no memory" in await cmd.forget(a, mine.memory_id[:8])


async def test_forget_all_needs_confirmation(ltm, cmd, origin):
    a, b = origin("alice"), origin("bob")
    assert await cmd.forget_all(a, "") == "I don't remember anything about you."
    for fact in ("I like green tea", "I live in Paris", "I am a nurse"):
        await cmd.remember(a, fact)
    await cmd.remember(b, "I like coffee")

    # "confirm" before being asked deletes nothing: it asks
    reply = await cmd.forget_all(a, "confirm")
    assert "deletes all 3 memories" in reply and "confirm" in reply
    assert len(await ltm.items()) == 4

    # asked, but the confirmation comes too late: asks again
    ltm.clock.advance(minutes=3)
    assert "deletes all 3" in await cmd.forget_all(a, "confirm")
    assert len(await ltm.items()) == 4

    # another user's confirmation does not count for alice
    assert "deletes all 1" in await cmd.forget_all(b, "")

    ltm.clock.advance(seconds=30)
    assert await cmd.forget_all(a, "confirm") == "Deleted 3 memories."
    assert [i.scope_id for i in await ltm.items()] == ["qq:bob"]
    assert len(await ltm.tombstones()) == 3
    # the confirmation is used up
    assert await cmd.forget_all(a, "confirm") == "I don't remember anything about you."


async def test_forget_all_with_no_memories_still_stops_quoting_what_was_said(ltm, cmd, origin):
    a = origin("alice")
    await ltm.turn(a, "My locker code is 4312")  # nothing extracted, but the reader may quote it
    assert "4312" in (await ltm.block(a, "locker code")).text
    assert "deletes all 0 memories" in await cmd.forget_all(a, "")
    assert await cmd.forget_all(a, "confirm") == "Deleted 0 memories."
    assert not await ltm.block(a, "locker code")
    assert await cmd.forget_all(a, "") == "I don't remember anything about you."


async def test_operator_commands_are_refused_to_users(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "manual"}})
    cmd = Commands(ltm.engine)
    a = origin("alice")
    await cmd.remember(a, "I like green tea")
    item = await ltm.item()
    refused = "Only an operator can review memories."
    assert await cmd.pending(a) == refused
    assert await cmd.review(a, item.memory_id[:8], "approve") == refused
    assert await cmd.review(a, item.memory_id[:8], "reject") == refused
    item = await ltm.item()
    assert item.awaiting_approval and item.status == "shadow"
    assert not [r for r in await ltm.audit() if r.action in ("approve", "reject")]


async def test_pending_approve_reject(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "manual"}})
    cmd = Commands(ltm.engine)
    op = origin("root", admin=True)
    assert await cmd.pending(op) == "No memories await approval."
    await cmd.remember(origin("alice"), "I like green tea")
    await cmd.remember(origin("bob"), "I like coffee")
    tea = await ltm.item(MemoryItem.scope_id == "qq:alice")
    coffee = await ltm.item(MemoryItem.scope_id == "qq:bob")

    text = await cmd.pending(op)
    assert text.startswith("2 awaiting approval:")
    assert f"{tea.memory_id[:8]} user:qq:alice [preference] Alice likes green tea" in text

    assert await cmd.review(op, tea.memory_id[:8], "approve") == "Approved: Alice likes green tea"
    tea = await ltm.item(MemoryItem.scope_id == "qq:alice")
    assert tea.status == "active" and not tea.awaiting_approval
    assert await ltm.block(origin("alice"), "tea")
    (approve,) = [r for r in await ltm.audit() if r.action == "approve"]
    assert approve.actor == "operator:root"

    assert await cmd.review(op, coffee.memory_id[:8], "reject") == "Rejected: Bob likes coffee"
    assert await ltm.items(MemoryItem.scope_id == "qq:bob") == []
    assert [t.scope_id for t in await ltm.tombstones()] == ["qq:bob"]
    assert await cmd.pending(op) == "No memories await approval."
    assert "no memory" in await cmd.review(op, "ffffffff", "approve")


HELP = help_text("en")
TARGET_SYNTAX = say("cmd.target_syntax", "en")


def test_help_lists_every_command():
    for name in ("status", "list", "remember", "forget", "forget-all", "pending", "approve", "reject", "pause",
                 "resume", "policy", "policy history", "policy rollback <version>", "writes off|on <target>"):
        assert f"/ltm {name}" in HELP
    for variant in ("status <target>", "list <target>", "forget-all <target>"):
        assert f"/ltm {variant}" in HELP
    assert f"<target> is {TARGET_SYNTAX}" in HELP
    assert "user:<user id>" in TARGET_SYNTAX and "group:<group id>" in TARGET_SYNTAX


async def test_what_a_user_remembers_in_a_group_they_can_list_and_forget(ltm, cmd, origin):
    # /ltm remember answers with an id; /ltm list and /ltm forget in the same
    # chat must know it, or the user cannot take back their own words.
    bob = origin("bob", group="g1")
    reply = await cmd.remember(bob, "I am vegetarian")
    assert reply.startswith("Remembered (")
    short_id = reply[len("Remembered ("):].split(")")[0]
    assert short_id in await cmd.list(bob)
    assert (await cmd.forget(bob, short_id)).startswith("Forgotten")
    assert await ltm.items() == []


# -- operator variants: another user's or group's scope -----------------------


@pytest.mark.parametrize(
    ("text", "scope"),
    [
        ("qq:12345", Scope("user", "qq:12345")),  # a bare id is a user
        ("user:qq:12345", Scope("user", "qq:12345")),
        ("group:qq:67890", Scope("group", "qq:67890")),
        ("  group:aiocqhttp:1:2 ", Scope("group", "aiocqhttp:1:2")),  # split at the first colon only
        ("user:group:7", Scope("user", "group:7")),  # how to name a user whose id starts with a kind
        ("session:abc", Scope("user", "session:abc")),  # not a kind: part of the user id
        ("Group:qq:1", Scope("user", "Group:qq:1")),  # kinds are lower case
        ("webchat:FriendMessage:webchat!a!b", Scope("user", "webchat:FriendMessage:webchat!a!b")),
        ("alice", Scope("user", "alice")),
    ],
)
async def test_a_target_no_scope_is_known_by_is_read_as_typed(ltm, text, scope):
    assert await targets.resolve(ltm.engine.db, text) == scope


@pytest.mark.parametrize("text", ["user:", "group:", "group:   ", "   "])
async def test_a_target_without_an_id_says_the_syntax(ltm, text):
    with pytest.raises(AdminError) as exc:
        await targets.resolve(ltm.engine.db, text)
    assert str(exc.value) == f"No scope id given. Target: {TARGET_SYNTAX}."


async def _alice_bob_and_a_group(ltm, cmd, origin) -> None:
    """alice: 2 memories, bob: 1, group qq:g1: 1 (the group's own rule)."""
    await cmd.remember(origin("alice"), "I like green tea")
    await cmd.remember(origin("alice"), "I live in Paris")
    await cmd.remember(origin("bob"), "I like coffee")
    await ltm.turn(origin("carol", group="g1"), "In this group we eat vegetarian", "OK.",
                   {"type": "constraint", "fact": "The group eats vegetarian", "fact_key": "group_food",
                    "about": "group"})
    assert len(await ltm.items()) == 4


async def test_operator_lists_and_counts_another_scope(ltm, cmd, origin):
    op = origin("root", admin=True)
    await _alice_bob_and_a_group(ltm, cmd, origin)
    tea = await ltm.item(MemoryItem.fact == "Alice likes green tea")
    group_item = await ltm.item(MemoryItem.scope == "group")

    # every form a person sees names her: the API's, the list's, the page's label, the bare id
    for target in ("qq:alice", "user:qq:alice", "alice", "用户 · qq:alice", "User · qq:alice"):
        lines = (await cmd.list(op, target)).split("\n")
        assert f"{tea.memory_id[:8]} [preference] Alice likes green tea" in lines
        assert len(lines) == 2 and not any("Bob" in line or "Carol" in line for line in lines)
    assert (await cmd.list(op, "group:qq:g1")) == f"{group_item.memory_id[:8]} [{group_item.type}] {group_item.fact}"

    status = await cmd.status(op, "qq:alice")
    assert status.startswith("user qq:alice: 2 active; 0 message(s) waiting for extraction")
    assert "qq:bob" not in status and status.endswith("Write mode: auto.")
    assert (await cmd.status(op, "group:qq:g1")).startswith("group qq:g1: 1 active;")

    # the operator's own memories are still what the plain commands show
    assert await cmd.list(op) == "I don't remember anything about you."
    own = (await cmd.status(op)).split("\n")  # and, to an admin, what memory costs on disk (test_compact.py)
    assert own[0] == "I don't keep any memories about you yet." and own[1].startswith("Memory on disk: ")


async def test_operator_target_with_nothing_in_it_says_so_with_the_syntax(ltm, cmd, origin):
    op = origin("root", admin=True)
    await _alice_bob_and_a_group(ltm, cmd, origin)
    # a typo names an empty scope: a message, not an exception, and the scope it may have meant
    for command in (cmd.list, cmd.status):
        assert await command(op, "qq:alcie") == (
            f"I keep no memories in user:qq:alcie. (Target: {TARGET_SYNTAX}.)\nDid you mean user:qq:alice?")
        assert await command(op, "group:qq:nope") == (
            f"I keep no memories in group:qq:nope. (Target: {TARGET_SYNTAX}.)"
        )
        assert await command(op, "user:") == f"No scope id given. Target: {TARGET_SYNTAX}."
    assert await cmd.forget_all(op, "group:", "confirm") == f"No scope id given. Target: {TARGET_SYNTAX}."
    assert "I keep no memories in user:qq:nobody" in await cmd.forget_all(op, "qq:nobody", "")
    assert len(await ltm.items()) == 4


async def test_users_cannot_target_other_scopes_and_nothing_is_read(ltm, cmd, origin, monkeypatch):
    a, carol = origin("alice"), origin("carol", group="g1")
    await _alice_bob_and_a_group(ltm, cmd, origin)
    before = await ltm.table_snapshot()

    def no_access(*args, **kwargs):
        raise AssertionError("a refused command touched the memory store")

    for name in ("stats", "list_items", "find_by_prefix", "forget_scope", "delete"):
        monkeypatch.setattr(ltm.engine.admin, name, no_access)
    see = "Only an operator can see other users' memories."
    delete = "Only an operator can delete other users' memories."
    for user in (a, carol):
        for target in ("qq:bob", "user:qq:bob", "group:qq:g1", "qq:alice"):  # even their own, by target
            assert await cmd.status(user, target) == see
            assert await cmd.list(user, target) == see
            assert await cmd.forget_all(user, target, "") == delete
            assert await cmd.forget_all(user, target, "confirm") == delete
    assert cmd._forget_all_asked == {}
    monkeypatch.undo()

    assert await ltm.table_snapshot() == before
    # a user's forget still reaches only their own memories
    coffee = await ltm.item(MemoryItem.scope_id == "qq:bob")
    assert await cmd.forget(a, coffee.memory_id[:8]) == f"no memory {coffee.memory_id[:8]} here"
    assert len(await ltm.items()) == 4 and await ltm.tombstones() == []


async def test_operator_forgets_any_memory_by_id_prefix(ltm, cmd, origin):
    op = origin("root", admin=True)
    await _alice_bob_and_a_group(ltm, cmd, origin)
    coffee = await ltm.item(MemoryItem.scope_id == "qq:bob")
    group_item = await ltm.item(MemoryItem.scope == "group")

    assert await cmd.forget(op, coffee.memory_id[:8]) == "Forgotten: Bob likes coffee (user:qq:bob)"
    assert await cmd.forget(op, group_item.memory_id[:8]) == f"Forgotten: {group_item.fact} (group:qq:g1)"
    assert sorted(i.scope_id for i in await ltm.items()) == ["qq:alice", "qq:alice"]
    tombs = await ltm.tombstones()
    assert sorted(t.scope_id for t in tombs) == ["qq:bob", "qq:g1"]
    assert {t.actor for t in tombs} == {"operator:root"}
    deletes = [r for r in await ltm.audit() if r.action == "delete"]
    assert {(r.actor, r.reason) for r in deletes} == {("operator:root", "forgotten by the operator")}

    assert await cmd.forget(op, coffee.memory_id[:8]) == f"no memory {coffee.memory_id[:8]} here"
    assert "at least 4" in await cmd.forget(op, "abc")
    assert len(await ltm.items()) == 2


async def test_operator_forget_all_of_a_target_needs_the_operators_own_confirmation(ltm, cmd, origin):
    op, other_op = origin("root", admin=True), origin("admin2", admin=True)
    alice = origin("alice")
    await _alice_bob_and_a_group(ltm, cmd, origin)

    # "confirm" before being asked deletes nothing: it asks, naming the target
    reply = await cmd.forget_all(op, "qq:alice", "confirm")
    assert reply == (
        "This deletes all 2 memories of user:qq:alice, and nothing said before is quoted again. "
        "Send /ltm forget-all user:qq:alice confirm within 2 minutes to go ahead."
    )
    assert len(await ltm.items()) == 4
    assert "deletes all 2 memories of user:qq:alice" in await cmd.forget_all(op, "qq:alice", "")  # asked now

    # another operator's confirmation does not count
    assert "deletes all 2 memories of user:qq:alice" in await cmd.forget_all(other_op, "qq:alice", "confirm")
    # nor does a confirmation for another target, the operator's own scope, or alice's own
    assert "deletes all 1 memories of user:qq:bob" in await cmd.forget_all(op, "qq:bob", "confirm")
    assert await cmd.forget_all(op, "confirm", "") == "I don't remember anything about you."
    assert "deletes all 2 memories I keep about you" in await cmd.forget_all(alice, "confirm", "")
    assert len(await ltm.items()) == 4

    # the operator's confirmation within 2 minutes; the same scope, however named
    ltm.clock.advance(seconds=90)
    assert await cmd.forget_all(op, "user:qq:alice", "confirm") == "Deleted 2 memories of user:qq:alice."
    assert sorted(i.scope_id for i in await ltm.items()) == ["qq:bob", "qq:g1"]
    tombs = await ltm.tombstones()
    assert [t.scope_id for t in tombs] == ["qq:alice", "qq:alice"] and {t.actor for t in tombs} == {"operator:root"}
    # used up
    assert "I keep no memories in user:qq:alice" in await cmd.forget_all(op, "qq:alice", "confirm")

    # too late for bob: asks again; then a group scope
    ltm.clock.advance(minutes=3)
    assert "deletes all 1 memories of user:qq:bob" in await cmd.forget_all(op, "qq:bob", "confirm")
    assert len(await ltm.items()) == 2
    assert "deletes all 1 memories of group:qq:g1" in await cmd.forget_all(op, "group:qq:g1", "")
    assert await cmd.forget_all(op, "group:qq:g1", "confirm") == "Deleted 1 memories of group:qq:g1."
    assert [i.scope_id for i in await ltm.items()] == ["qq:bob"]


async def test_forget_takes_percent_and_underscore_literally(ltm, cmd, origin):
    op = origin("root", admin=True)
    await cmd.remember(origin("alice"), "I like green tea")
    (tea,) = await ltm.items()
    for pattern in ("%%%%", "____", tea.memory_id[:4] + "%", tea.memory_id[:3] + "_", "%"):
        reply = await cmd.forget(op, pattern)
        assert reply.startswith("no memory") or "at least 4" in reply, (pattern, reply)
    assert len(await ltm.items()) == 1


async def test_remember_refuses_what_an_edit_refuses(ltm, cmd, origin):
    a = origin("alice")
    limit = ltm.engine.config.extraction.max_fact_chars
    for fact, says in (("x" * 1_000_000, "longer than"), ("I like " + "y" * limit, "longer than"),
                       ("I like\x00tea", "control character")):
        reply = await cmd.remember(a, fact)
        assert reply.startswith("Not stored") and says in reply and len(reply) < 300, reply
    assert await ltm.items() == []


async def test_forget_all_says_read_only_will_refuse_it_before_asking_to_confirm(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}})
    cmd = Commands(ltm.engine)
    a = origin("alice")
    await cmd.remember(a, "I like green tea")
    ltm.engine.apply_config({**ltm.raw_config, "emergency_read_only": True})
    reply = await cmd.forget_all(a, "")
    assert "read-only" in reply and "refused" in reply
    assert "read-only" in await cmd.forget_all(a, "confirm")
    assert len(await ltm.items()) == 1


async def test_a_target_two_scopes_fit_is_refused_naming_both(ltm, cmd, origin):
    op = origin("root", admin=True)
    await cmd.remember(origin("sam"), "I like tea")
    await cmd.remember(origin("sam", platform="tg"), "I like coffee")
    for command in (cmd.list, cmd.status):
        reply = await command(op, "sam")
        assert reply == "sam could be user:qq:sam, user:tg:sam; name one of them."
    assert "Sam likes coffee" in await cmd.list(op, "tg:sam")


async def test_forget_or_review_without_an_id_says_how_in_the_users_language(ltm, cmd, origin):
    with cmd.hearing("ltm 忘记"):
        assert await cmd.forget(origin("alice"), "") == "要忘记哪一条？用法：/ltm 忘记 <ID>；发送 /ltm 列表 查看 ID。"
    with cmd.hearing("ltm forget"):
        assert await cmd.forget(origin("bob"), " ") == (
            "Which memory? Usage: /ltm forget <id>; /ltm list shows the ids.")
    op = origin("root", admin=True)
    with cmd.hearing("ltm 驳回"):
        assert await cmd.review(op, "", "reject") == "要驳回哪一条？用法：/ltm 驳回 <ID>；发送 /ltm 待审 查看 ID。"
    with cmd.hearing("ltm approve"):
        assert await cmd.review(origin("root2", admin=True), "", "approve") == (
            "Which memory? Usage: /ltm approve <id>; /ltm pending shows the ids.")
