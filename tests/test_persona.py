"""identity.persona_scoped: what the bot learnt under one AstrBot persona
stays with that persona; the person's profile, preferences and
constraints are shared by every persona; off by default."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from astrbot_plugin_ltm.adapter import note_persona, origin_from_event
from astrbot_plugin_ltm.config import IdentityConfig
from astrbot_plugin_ltm.enums import Status
from astrbot_plugin_ltm.persona import persona_name, shared_scope, target_scope
from astrbot_plugin_ltm.scope import Scope, ScopeResolver, with_persona
from astrbot_plugin_ltm.storing.tables import MemoryItem

ON = {"write_policy": {"mode": "auto"}, "identity": {"persona_scoped": True}}


def as_persona(origin, persona):
    return replace(origin, persona=persona)


async def learn(ltm, origin, said: str, fact: dict) -> None:
    await ltm.turn(origin, said, "OK.", fact)


def facts(block) -> set[str]:
    return {i.fact for i in block.items}


def turns(block) -> str:
    return " ".join(e.fact for e in block.events)


async def test_off_by_default_the_persona_changes_nothing(ltm, origin):
    luna, max_ = as_persona(origin(), "Luna"), as_persona(origin(), "Max")
    assert ltm.engine.resolver.write_scope(luna) == ltm.engine.resolver.write_scope(origin())
    await learn(ltm, luna, "We planned a trip to the Moon museum on Friday.",
                {"type": "episode", "fact": "Alice planned a trip to the Moon museum on Friday"})
    block = await ltm.block(max_, "museum trip")
    assert "Alice planned a trip to the Moon museum on Friday" in facts(block)


async def test_episodes_stay_with_the_persona_and_the_profile_is_shared(make_ltm, origin):
    ltm = await make_ltm(ON)
    luna, max_ = as_persona(origin(), "Luna"), as_persona(origin(), "Max")
    await learn(ltm, luna, "We planned a trip to the Moon museum on Friday.",
                {"type": "episode", "fact": "Alice planned a trip to the Moon museum on Friday"})
    await learn(ltm, luna, "I live in Paris, by the museum.",
                {"type": "profile", "fact": "Alice lives in Paris by the museum"})

    episode = await ltm.item(MemoryItem.type == "episode")
    profile = await ltm.item(MemoryItem.type == "profile")
    assert (episode.scope_id, profile.scope_id) == ("qq:alice#persona:Luna", "qq:alice")

    under_luna = await ltm.block(luna, "museum trip Paris")
    assert {"Alice planned a trip to the Moon museum on Friday", "Alice lives in Paris by the museum"} \
        <= facts(under_luna)
    under_max = await ltm.block(max_, "museum trip Paris")
    assert facts(under_max) == {"Alice lives in Paris by the museum"}
    # Luna's raw turns stay with Luna too
    await ltm.record(luna, "You sang me the lighthouse song yesterday.")
    assert "lighthouse" in turns(await ltm.block(luna, "lighthouse song"))
    assert "lighthouse" not in turns(await ltm.block(max_, "lighthouse song"))
    # without a persona (the default), only the shared memory
    assert facts(await ltm.block(origin(), "museum trip Paris")) == {"Alice lives in Paris by the museum"}


async def test_memories_from_before_are_read_by_every_persona(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}})
    await learn(ltm, origin(), "My cat Mochi likes the museum garden.",
                {"type": "episode", "fact": "Alice's cat Mochi likes the museum garden"})
    ltm.configure({"identity": {"persona_scoped": True}})
    block = await ltm.block(as_persona(origin(), "Luna"), "Mochi museum")
    assert "Alice's cat Mochi likes the museum garden" in facts(block)


async def test_two_personas_keep_their_own_episodes_under_one_key(make_ltm, origin):
    ltm = await make_ltm(ON)
    for persona, place in (("Luna", "the Moon museum"), ("Max", "the car show")):
        await learn(ltm, as_persona(origin(), persona), f"Friday we go to {place}.",
                    {"type": "episode", "fact": f"Alice plans to go to {place} on Friday", "fact_key": "friday plan"})
    current = await ltm.items(MemoryItem.status == Status.ACTIVE)
    assert sorted(i.scope_id for i in current) == ["qq:alice#persona:Luna", "qq:alice#persona:Max"]


def test_a_group_reads_each_scope_of_the_persona_before_the_shared_one(origin):
    resolver = ScopeResolver(IdentityConfig(persona_scoped=True))
    speaker = as_persona(origin("bob", group="g1"), "Luna")
    assert resolver.write_scope(speaker) == Scope("group", "qq:g1#persona:Luna")
    # A group reads the group alone (audience.py): never the speaker's own scopes.
    assert resolver.read_scopes(speaker) == [Scope("group", "qq:g1#persona:Luna"), Scope("group", "qq:g1")]


def test_astrbots_default_personas_are_no_persona():
    assert [persona_name(p) for p in (None, "", "[%None]", "default", "_chatui_default_", " Luna ")] \
        == [None, None, None, None, None, "Luna"]


def test_facts_about_the_person_go_to_the_shared_scope():
    luna = with_persona(Scope("user", "qq:alice"), "Luna")
    assert shared_scope(luna) == Scope("user", "qq:alice")
    assert {t: target_scope(luna, t).id for t in ("profile", "preference", "constraint", "episode", "task_state")} \
        == {"profile": "qq:alice", "preference": "qq:alice", "constraint": "qq:alice",
            "episode": "qq:alice#persona:Luna", "task_state": "qq:alice#persona:Luna"}
    assert target_scope(Scope("user", "qq:alice"), "episode") == Scope("user", "qq:alice")


def test_the_adapter_takes_the_persona_astrbot_chose_for_the_request():
    def event(extras: dict | None) -> SimpleNamespace:
        def get_extra(key: str | None = None):
            if extras is None:
                raise AttributeError("an AstrBot without extras")
            return extras if key is None else extras.get(key)
        return SimpleNamespace(
            get_group_id=lambda: None, get_platform_id=lambda: "webchat", get_platform_name=lambda: "webchat",
            unified_msg_origin="webchat:FriendMessage:x", get_sender_id=lambda: "u1", get_sender_name=lambda: "Al",
            get_self_id=lambda: "bot", is_admin=lambda: False, get_extra=get_extra)

    assert origin_from_event(event({"_trace_persona_id": "Luna"})).persona == "Luna"
    assert origin_from_event(event({"_trace_persona_id": "_chatui_default_"})).persona is None
    assert origin_from_event(event({})).persona is None
    assert origin_from_event(event(None)).persona is None
    # AstrBot's own note wins over the one note_persona made on an older AstrBot
    assert origin_from_event(event({"ltm_persona_id": "Luna"})).persona == "Luna"
    assert origin_from_event(event({"_trace_persona_id": None, "ltm_persona_id": "Luna"})).persona is None


class _OldAstrBot:
    """What note_persona asks of AstrBot 4.25's Context: the session's
    conversation and the persona its agent would choose for it."""

    def __init__(self, conversation_persona: str | None, fail: bool = False) -> None:
        self.asked: list[dict] = []
        self.fail = fail
        conversation = SimpleNamespace(persona_id=conversation_persona)

        async def current(umo: str) -> str:
            return "cid-1"

        async def get(umo: str, cid: str) -> SimpleNamespace:
            return conversation

        async def resolve(**kwargs):
            if self.fail:
                raise RuntimeError("persona manager down")
            self.asked.append(kwargs)
            chosen = kwargs["conversation_persona_id"] or kwargs["provider_settings"]["default_personality"]
            return chosen, None, None, False

        self.conversation_manager = SimpleNamespace(get_curr_conversation_id=current, get_conversation=get)
        self.persona_manager = SimpleNamespace(resolve_selected_persona=resolve)
        self.get_config = lambda umo=None: {"provider_settings": {"default_personality": "Default-P"}}


def _event_with_extras(extras: dict) -> SimpleNamespace:
    return SimpleNamespace(
        unified_msg_origin="webchat:FriendMessage:x", get_platform_name=lambda: "webchat",
        get_extra=lambda key=None: extras if key is None else extras.get(key),
        set_extra=extras.__setitem__)


async def test_on_an_astrbot_that_does_not_note_the_persona_the_plugin_works_it_out():
    extras: dict = {}
    context = _OldAstrBot("Luna")
    await note_persona(context, _event_with_extras(extras))
    assert extras == {"ltm_persona_id": "Luna"}
    assert context.asked[0]["umo"] == "webchat:FriendMessage:x" and context.asked[0]["platform_name"] == "webchat"

    extras = {}
    await note_persona(_OldAstrBot(None), _event_with_extras(extras))
    assert extras == {"ltm_persona_id": "Default-P"}  # no conversation persona: the configured default

    # AstrBot noted it itself (4.29): nothing asked, nothing added
    extras = {"_trace_persona_id": "Sol"}
    context = _OldAstrBot("Luna")
    await note_persona(context, _event_with_extras(extras))
    assert extras == {"_trace_persona_id": "Sol"} and context.asked == []

    # a failure is no persona, not an error into AstrBot
    extras = {}
    await note_persona(_OldAstrBot("Luna", fail=True), _event_with_extras(extras))
    assert extras == {}


async def test_forgetting_a_person_forgets_what_every_persona_kept(make_ltm, origin):
    ltm = await make_ltm(ON)
    luna = as_persona(origin(), "Luna")
    await learn(ltm, luna, "We planned a trip to the Moon museum on Friday.",
                {"type": "episode", "fact": "Alice planned a trip to the Moon museum on Friday"})
    await learn(ltm, luna, "I live in Paris.", {"type": "profile", "fact": "Alice lives in Paris"})
    await ltm.record(luna, "You sang me the lighthouse song yesterday.")
    assert await ltm.engine.admin.forget_scope(Scope("user", "qq:alice"), "operator:test") == 2
    assert await ltm.items(MemoryItem.status == Status.ACTIVE) == []
    block = await ltm.block(luna, "lighthouse song museum Paris")
    assert not block.items and not block.events


def test_a_persona_scope_follows_its_persons_write_switch():
    from astrbot_plugin_ltm.config import WritePolicy
    from astrbot_plugin_ltm.scope import Scope, with_persona

    policy = WritePolicy(disabled_scopes=["user:qq:alice"])
    assert policy.writes_off(Scope("user", "qq:alice"))
    assert policy.writes_off(with_persona(Scope("user", "qq:alice"), "catgirl"))
    assert not policy.writes_off(with_persona(Scope("user", "qq:bob"), "catgirl"))
