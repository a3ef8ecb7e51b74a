"""A group's own talk and AstrBot's own events, without AstrBot: messages
that did not wake the bot are learnt only where the operator switched it
on; AstrBot's group context is not recalled a second time; a cron job's
made-up event is nobody's words; memories of old are placed by where
they were said (operating/contexts.py)."""

from __future__ import annotations

from types import SimpleNamespace

from sqlalchemy import delete

from astrbot_plugin_ltm.adapter import group_context_texts, history_texts, is_scheduled, origin_from_event
from astrbot_plugin_ltm.enums import Visibility
from astrbot_plugin_ltm.storing.tables import IndexBuild, MemoryContext, MemoryEvidence, MemoryItem

GROUP_CONTEXT = ("<system_reminder>You are in a group chat. Belows are group chat context after your last reply:\n"
                 "--- BEGIN CONTEXT---\n[Bob/10:00:01]:  the picnic basket is blue\n"
                 "[Carol/10:00:05]: ⚠️[DIRECTED AT YOU]  where is it? [At: bot]\n--- END CONTEXT ---\n"
                 "</system_reminder>")


async def test_a_group_learns_messages_that_did_not_wake_the_bot_only_where_switched_on(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}, "groups": {"learn_all_messages": ["qq:g1"]}})
    assert ltm.engine.record_heard(origin("bob", group="g1"), "the picnic basket is blue")
    assert ltm.engine.record_heard(origin("bob", group="g2"), "the tent is red") == []
    assert ltm.engine.record_heard(origin("bob"), "not a group") == []
    await ltm.engine.recorder.flush()
    (heard,) = await ltm.events()
    assert (heard.scope, heard.scope_id, heard.sender_id, heard.source_role) == ("group", "qq:g1", "bob", "user")
    # a member who paused is not recorded, here either
    from astrbot_plugin_ltm.doors.commands import Commands
    await Commands(ltm.engine).pause(origin("carol"))
    assert ltm.engine.record_heard(origin("carol", group="g1"), "my card number is 6222") == []
    # "*" is every group; a bare group id names it on any platform
    ltm.configure({"groups": {"learn_all_messages": ["*"]}})
    assert ltm.engine.record_heard(origin("bob", group="g9"), "hello")
    ltm.configure({"groups": {"learn_all_messages": ["g7"]}})
    assert ltm.engine.record_heard(origin("bob", group="g7", platform="tg"), "hello")


def test_the_group_setting_refuses_what_names_no_group():
    from astrbot_plugin_ltm.config import parse_config

    cfg, errors = parse_config({"groups": {"learn_all_messages": ["qq:1 2", ":x"]}})
    assert cfg.groups.learn_all_messages == [] and "do not name a group" in errors[0]
    cfg, errors = parse_config({"groups": {"profiles_follow_members": ["group:qq:g1", "*"]}})
    assert errors == [] and cfg.groups.profiles_follow_members == ["qq:g1", "*"]


def test_astrbots_group_context_counts_as_what_the_request_holds():
    assert group_context_texts([{"type": "text", "text": "question"}, {"type": "text", "text": GROUP_CONTEXT}]) \
        == ["the picnic basket is blue", "where is it?"]
    messages = [{"role": "user", "content": "earlier"},
                {"role": "user", "content": [{"type": "text", "text": "where?"},
                                             {"type": "text", "text": GROUP_CONTEXT}]}]
    assert history_texts(messages) == ["the picnic basket is blue", "where is it?", "earlier"]


async def test_a_turn_astrbots_group_context_carries_is_not_recalled_again(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}, "groups": {"learn_all_messages": ["*"]}})
    ltm.engine.record_heard(origin("bob", group="g1"), "the picnic basket is blue")
    await ltm.engine.recorder.flush()
    carol = origin("carol", group="g1")
    assert "picnic basket is blue" in (await ltm.engine.memory_block(carol, "where is the picnic basket")).text
    held = history_texts([{"role": "user", "content": [{"type": "text", "text": "where is the picnic basket"},
                                                      {"type": "text", "text": GROUP_CONTEXT}]}])
    block = await ltm.engine.memory_block(carol, "where is the picnic basket", held)
    assert "picnic basket is blue" not in block.text


def cron_event(session_id: str, message_type: str) -> SimpleNamespace:
    """What AstrBot's CronMessageEvent tells a plugin (seen on 4.25.6 and 4.29.3)."""
    event = SimpleNamespace(
        get_group_id=lambda: "", get_platform_id=lambda: "onebot", get_platform_name=lambda: "cron",
        unified_msg_origin=f"onebot:{message_type}:{session_id}", get_sender_id=lambda: session_id,
        get_sender_name=lambda: "Scheduler", get_self_id=lambda: "astrbot", is_admin=lambda: True,
        get_extra=lambda key=None: {} if key is None else None, session_id=session_id,
        get_message_type=lambda: SimpleNamespace(value=message_type))
    return event


def test_a_cron_jobs_event_is_the_schedulers_and_its_group_is_taken_from_the_session():
    private = origin_from_event(cron_event("10001", "FriendMessage"))
    assert private.scheduled and not private.is_group and private.sender_id == "10001" and private.sender_name == ""
    for session in ("20001", "10001_20001"):  # shared group conversation, and unique_session
        group = origin_from_event(cron_event(session, "GroupMessage"))
        assert group.scheduled and group.group_id == "20001"
    assert is_scheduled(cron_event("1", "FriendMessage"))


async def test_a_scheduled_turn_records_only_the_bots_own_words(ltm, origin):
    from dataclasses import replace

    job = replace(origin("10001"), scheduled=True, sender_name="")
    events = ltm.engine.record_turn(job, "remind Alice to water the plants", "Time to water the plants!")
    assert [(e.source_role, e.sender_id) for e in events] == [("assistant", None)]
    in_group = replace(origin("20001", group="20001"), scheduled=True)
    (said,) = ltm.engine.record_turn(in_group, "remind the group about the hike", "The hike is tomorrow!")
    assert (said.scope, said.scope_id, said.source_role) == ("group", "qq:20001", "assistant")


async def test_memories_of_old_are_placed_by_where_they_were_said_at_the_first_start(make_ltm, origin, gateway):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}}, name="old.db")
    alice, in_g1, bob = origin("alice"), origin("alice", group="g1"), origin("bob", group="g1")
    await ltm.turn(alice, "I live in Paris", "OK.", {"type": "profile", "fact": "Alice lives in Paris",
                                                     "fact_key": "alice_city"})
    await ltm.turn(in_g1, "I like jazz and I live in Paris", "OK.",
                   {"type": "preference", "fact": "Alice likes jazz", "fact_key": "alice_jazz"},
                   {"type": "profile", "fact": "Alice lives in Paris", "fact_key": "alice_city"})
    await ltm.turn(bob, "we meet on Sunday", "OK.",
                   {"type": "episode", "fact": "The group meets on Sunday", "fact_key": "meeting", "about": "group"})
    # As an earlier version kept them: every fact said in g1 in g1's scope, none placed.
    async with ltm.engine.db.write() as session:
        await session.execute(delete(MemoryContext))
        jazz = (await session.execute(MemoryItem.__table__.select().where(MemoryItem.fact_key == "alice_jazz"))).one()
        await session.execute(MemoryItem.__table__.update().where(MemoryItem.id == jazz.id)
                              .values(scope="group", scope_id="qq:g1"))
        await session.execute(MemoryItem.__table__.insert().values(
            memory_id="0" * 8 + "-0000-4000-8000-000000000001", scope="group", scope_id="qq:g1", type="profile",
            fact="Alice lives in Paris", fact_key="alice_city", confidence=0.9, importance=0.5, evidence_count=1,
            status="active", awaiting_approval=False, created_at=ltm.clock(), updated_at=ltm.clock(),
            visibility="shared"))
        paris_in_g1 = "0" * 8 + "-0000-4000-8000-000000000001"
        said = [e.event_id for e in await ltm.events() if (e.content or {}).get("text") == "I like jazz and I live "
                "in Paris"]
        session.add(MemoryEvidence(memory_id=paris_in_g1, event_id=said[0], extraction_method="llm_extract"))
        meeting = (await session.execute(MemoryItem.__table__.select().where(MemoryItem.fact_key == "meeting"))).one()
        session.add(MemoryEvidence(memory_id=meeting.memory_id, event_id=said[0], extraction_method="llm_extract"))
        await session.execute(MemoryItem.__table__.insert().values(
            memory_id="0" * 8 + "-0000-4000-8000-000000000002", scope="group", scope_id="qq:g1", type="episode",
            fact="An imported note", fact_key="imported", confidence=0.9, importance=0.5, evidence_count=0,
            status="active", awaiting_approval=False, created_at=ltm.clock(), updated_at=ltm.clock(),
            visibility="shared"))
        await session.execute(delete(IndexBuild).where(IndexBuild.name == "contexts"))
    again = await make_ltm({"write_policy": {"mode": "auto"}}, name="old.db")  # the first start of this version
    kept = {i.fact_key: i for i in await again.items()}
    assert (kept["alice_jazz"].scope, kept["alice_jazz"].scope_id) == ("user", "qq:alice")  # moved to her
    (paris,) = [i for i in await again.items() if i.fact_key == "alice_city"]  # merged into her own
    assert paris.scope_id == "qq:alice" and len(await again.evidence(MemoryEvidence.memory_id == paris.memory_id)) == 2
    # what two people said stays the group's
    assert (kept["meeting"].scope, kept["meeting"].visibility) == ("group", Visibility.SHARED)
    assert kept["imported"].visibility == Visibility.PRIVATE  # nothing places it: no group recalls it
    said_in = {(c.item_id, c.scope_id) for c in await again.rows(MemoryContext, order_by=MemoryContext.item_id)}
    assert said_in == {(kept["alice_jazz"].id, "qq:g1"), (paris.id, "qq:g1")}
    assert "Alice likes jazz" in (await again.block(origin("carol", group="g1"), "what does Alice like?")).text
    assert "imported note" not in (await again.block(origin("carol", group="g1"), "an imported note")).text
    assert "Alice likes jazz" not in (await again.block(origin("carol", group="g2"), "what does Alice like?")).text
