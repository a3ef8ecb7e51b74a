"""Scope isolation: whose memories a message may read and where it writes."""

from __future__ import annotations

import pytest

from astrbot_plugin_ltm.config import IdentityConfig
from astrbot_plugin_ltm.scope import Origin, Scope, ScopeResolver


async def facts(ltm, origin, query=""):
    return {s.fact for s in (await ltm.block(origin, query)).items}


async def test_one_users_memories_never_reach_another(ltm, origin):
    alice, bob = origin("alice"), origin("bob")
    await ltm.engine.remember(alice, "my password hint is green tea")
    await ltm.engine.remember(bob, "I like coffee")
    await ltm.turn(alice, "I live in Paris", "OK.",
                   {"type": "profile", "fact": "Alice lives in Paris", "fact_key": "home"})
    for query in ("", "password hint green tea Paris", "Alice"):
        assert not any("Alice" in f for f in await facts(ltm, bob, query)), query
    assert await facts(ltm, bob, "green tea Paris") == {"Bob likes coffee"}
    assert await facts(ltm, alice) == {"Alice's password hint is green tea", "Alice lives in Paris"}


async def test_a_group_recalls_what_was_said_in_it_and_a_private_chat_everything_about_its_person(ltm, origin):
    alice_dm, bob_dm = origin("alice"), origin("bob")
    alice_g1, bob_g1 = origin("alice", group="g1"), origin("bob", group="g1")
    carol_g2 = origin("carol", group="g2")
    await ltm.engine.remember(alice_dm, "I am allergic to peanuts")
    await ltm.engine.remember(bob_dm, "I am afraid of spiders")
    await ltm.engine.remember(alice_g1, "the team meets on Fridays")
    await ltm.engine.remember(carol_g2, "the team meets on Mondays")

    # a group: what was said in it, never what a member said in private
    assert await facts(ltm, alice_g1, "peanuts spiders team") == {"the team meets on Fridays"}
    assert await facts(ltm, bob_g1, "peanuts spiders team") == {"the team meets on Fridays"}
    # a private chat: everything about its person, wherever they said it; no other group's
    assert await facts(ltm, alice_dm, "peanuts team") == {"Alice is allergic to peanuts",
                                                           "the team meets on Fridays"}
    assert await facts(ltm, bob_dm, "team") == {"Bob is afraid of spiders"}
    assert await facts(ltm, origin("carol", group="g2"), "peanuts team") == {"the team meets on Mondays"}


async def test_sender_id_strategy_follows_the_person_across_conversations(ltm, origin):
    first = origin("alice", umo="webchat:FriendMessage:conversation-1", platform="webchat")
    second = origin("alice", umo="webchat:FriendMessage:conversation-2", platform="webchat")
    await ltm.engine.remember(first, "I like green tea")
    assert await facts(ltm, second, "tea") == {"Alice likes green tea"}
    (item,) = await ltm.items()
    assert (item.scope, item.scope_id) == ("user", "webchat:alice")
    # the same sender id on another platform is another person
    assert not await ltm.block(origin("alice", platform="telegram"), "tea")


async def test_unified_msg_origin_strategy_keeps_conversations_apart(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}, "identity": {"user_scope_strategy": "unified_msg_origin"}})
    first = origin("alice", umo="webchat:FriendMessage:conversation-1")
    second = origin("alice", umo="webchat:FriendMessage:conversation-2")
    await ltm.engine.remember(first, "I like green tea")
    assert await facts(ltm, first, "tea") == {"Alice likes green tea"}
    assert not await ltm.block(second, "tea")


async def test_cross_platform_aliases_join_accounts(make_ltm, origin):
    ltm = await make_ltm({
        "write_policy": {"mode": "auto"},
        "identity": {"cross_platform_aliases": ["qq:111=alice", "telegram:222=alice"]},
    })
    assert ltm.engine.config_errors == []
    on_qq = origin("111", name="Alice", platform="qq")
    on_telegram = origin("222", name="Alice", platform="telegram")
    stranger = origin("333", name="Mallory", platform="telegram")
    await ltm.engine.remember(on_qq, "I like green tea")
    await ltm.turn(on_telegram, "I live in Paris", "OK.",
                   {"type": "profile", "fact": "Alice lives in Paris", "fact_key": "home"})
    assert {(i.scope, i.scope_id) for i in await ltm.items()} == {("user", "alice")}
    expected = {"Alice likes green tea", "Alice lives in Paris"}
    assert await facts(ltm, on_qq, "tea Paris") == expected
    assert await facts(ltm, on_telegram, "tea Paris") == expected
    assert not await ltm.block(stranger, "tea Paris")
    # in a group, what she says of herself is kept in the alias's scope too
    await ltm.engine.remember(origin("222", name="Alice", platform="telegram", group="g"), "I like jazz")
    assert {(i.scope, i.scope_id) for i in await ltm.items()} == {("user", "alice")}
    assert await facts(ltm, on_qq, "jazz") >= {"Alice likes jazz"}


async def test_legacy_per_conversation_memories_are_read_when_enabled(make_ltm, origin):
    ltm = await make_ltm({
        "write_policy": {"mode": "auto"}, "identity": {"user_scope_strategy": "unified_msg_origin"},
    })
    old = origin("alice")
    await ltm.engine.remember(old, "I like green tea")  # stored under the conversation id
    ltm.configure({"identity": {"user_scope_strategy": "sender_id"}})
    assert await facts(ltm, old, "tea") == {"Alice likes green tea"}
    ltm.configure({"identity": {"include_legacy_umo_on_read": False}})
    assert not await ltm.block(old, "tea")


async def test_group_events_go_to_the_group_scope(ltm, origin):
    await ltm.record(origin("alice", group="g1"), "hello", "hi")
    await ltm.record(origin("alice"), "hello", "hi")
    scopes = {(e.scope, e.scope_id, e.session_id) for e in await ltm.events()}
    assert scopes == {("group", "qq:g1", "qq:GroupMessage:g1"), ("user", "qq:alice", "qq:FriendMessage:alice")}


# -- the resolver on its own -------------------------------------------------------


def o(sender="alice", *, platform="qq", group=None, umo=None):
    return Origin(platform, umo or f"{platform}:x:{group or sender}", sender, sender.title(), group)


def test_resolver_private_chat():
    r = ScopeResolver(IdentityConfig())
    assert r.write_scope(o()) == Scope("user", "qq:alice")
    assert r.read_scopes(o()) == [Scope("user", "qq:alice"), Scope("user", "qq:x:alice")]
    r = ScopeResolver(IdentityConfig(include_legacy_umo_on_read=False))
    assert r.read_scopes(o()) == [Scope("user", "qq:alice")]


def test_resolver_group_chat():
    r = ScopeResolver(IdentityConfig())
    assert r.write_scope(o(group="g1")) == Scope("group", "qq:g1")
    assert r.read_scopes(o(group="g1")) == [Scope("group", "qq:g1")]  # never a member's own (audience.py)
    # groups of different platforms with the same id are different groups
    assert r.write_scope(o(group="g1", platform="tg")) != r.write_scope(o(group="g1"))


def test_resolver_umo_strategy_never_keys_a_group_member_by_the_group():
    r = ScopeResolver(IdentityConfig(user_scope_strategy="unified_msg_origin"))
    assert r.user_scope(o(umo="qq:FriendMessage:alice")) == Scope("user", "qq:FriendMessage:alice")
    assert r.user_scope(o(group="g1")) == Scope("user", "qq:alice")


@pytest.mark.parametrize("strategy", ["sender_id", "unified_msg_origin"])
def test_resolver_aliases_win_over_the_strategy(strategy):
    r = ScopeResolver(IdentityConfig(user_scope_strategy=strategy, cross_platform_aliases=["qq:alice=A", " tg:9 = A "]))
    assert r.user_scope(o()) == Scope("user", "A")
    assert r.user_scope(o("9", platform="tg")) == Scope("user", "A")
    assert r.user_scope(o("bob")) != Scope("user", "A")
