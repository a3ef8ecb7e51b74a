"""Raw turns in the injected block: which may be shown (storing.turns.shown_turns_among),
how they share the budget with memories, and that what an operator or a
user took back is never quoted again."""

from __future__ import annotations

from datetime import timedelta

from astrbot_plugin_ltm.recalling.block import NOTES
from astrbot_plugin_ltm.scope import Scope

ALICE = Scope("user", "qq:alice")


def said(block) -> list[str]:
    return [s.fact for s in block.events]


async def test_auto_mode_shows_a_turn_no_memory_covers_with_when_and_who(ltm, origin, clock):
    a = origin("alice")
    await ltm.turn(a, "My sister Jane is visiting from Lisbon next week", "How nice!")  # nothing extracted
    assert {e.extraction_status for e in await ltm.events()} == {"done"}
    block = await ltm.block(a, "when is Jane visiting?")
    assert said(block) == [f"[said {clock():%Y-%m-%d}] Alice: My sister Jane is visiting from Lisbon next week"]
    assert block.events[0].type == "event" and block.events[0].scope == "user:qq:alice"
    assert block.text.splitlines() == [
        "[Long-term Memory]", NOTES["en"], f"[said {clock():%Y-%m-%d}]",
        "- Alice: My sister Jane is visiting from Lisbon next week", "[End Memory]",
    ]


async def test_turns_said_on_one_day_share_its_heading(ltm, origin, clock):
    a = origin("alice")
    await ltm.turn(a, "Morning run in the park")
    clock.advance(hours=2)
    await ltm.turn(a, "Evening run in the park")
    clock.advance(days=1)
    await ltm.turn(a, "Another run in the park")
    block = await ltm.block(a, "run in the park")
    first, second = f"{clock() - timedelta(days=1):%Y-%m-%d}", f"{clock():%Y-%m-%d}"
    assert block.text.splitlines()[2:-1] == [
        f"[said {first}]", "- Alice: Morning run in the park", "- Alice: Evening run in the park",
        f"[said {second}]", "- Alice: Another run in the park",
    ]
    assert block.tokens == ltm.engine.reader.counter.count(block.text)


async def test_the_bots_own_lines_read_as_the_bots_and_other_scopes_turns_are_never_shown(ltm, origin, clock):
    await ltm.turn(origin("alice"), "hello", "I recommend the pineapple cake at Rosa's bakery")
    await ltm.turn(origin("bob"), "I keep a pineapple plant")
    block = await ltm.block(origin("alice"), "pineapple")
    assert said(block) == [f"[said {clock():%Y-%m-%d}] bot (you): I recommend the pineapple cake at Rosa's bakery"]
    assert "- bot (you): I recommend" in block.text and "plant" not in block.text
    assert "pineapple plant" in said(await ltm.block(origin("bob"), "pineapple"))[0]


async def test_shadow_and_manual_modes_show_only_turns_behind_active_memories(make_ltm, origin):
    for mode in ("shadow", "manual"):
        ltm = await make_ltm({"write_policy": {"mode": mode}})
        a = origin("alice")
        await ltm.turn(a, "I moved to Porto last spring", "Lovely.")
        await ltm.turn(a, "I love green tea", "Noted.", {"fact": "Alice loves green tea", "type": "preference"})
        assert not await ltm.block(a, "Porto"), mode  # a turn no memory covers: not in these modes
        item = await ltm.item()
        await ltm.engine.admin.review([item.memory_id], "approve", "operator:root")
        ltm.configure({"read_policy": {"max_items": 0}})  # turns only
        assert said(await ltm.block(a, "green tea")) and not await ltm.block(a, "Porto"), mode


async def test_a_turn_behind_a_held_memory_is_not_shown(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto", "require_approval_types": ["profile"]}})
    a = origin("alice")
    await ltm.turn(a, "I live at 12 Rose Street", "OK.",
                   {"fact": "Alice lives at 12 Rose Street", "type": "profile"})
    assert (await ltm.item()).awaiting_approval
    assert not await ltm.block(a, "Rose Street")  # neither the memory nor the turn behind it
    await ltm.engine.admin.review([(await ltm.item()).memory_id], "approve", "operator:root")
    assert "12 Rose Street" in (await ltm.block(a, "Rose Street")).text


async def test_disabled_and_expired_memories_hide_their_turns(ltm, origin, clock):
    a = origin("alice")
    await ltm.turn(a, "I ran a marathon in Berlin", "Wow!", {"fact": "Alice ran the Berlin marathon",
                                                          "type": "episode"})
    item = await ltm.item()
    ltm.configure({"read_policy": {"max_items": 0}})
    assert said(await ltm.block(a, "marathon"))
    await ltm.engine.admin.update_item(item.memory_id, {"status": "disabled"}, "operator:root")
    assert not await ltm.block(a, "marathon")
    await ltm.engine.admin.update_item(item.memory_id, {"status": "active"}, "operator:root")
    clock.advance(days=31)  # episodes are kept 30 days
    await ltm.engine.worker.sweep_expired()
    assert (await ltm.item()).status == "expired"
    assert not await ltm.block(a, "marathon")


async def test_deleting_or_rejecting_a_memory_withholds_its_turns_for_good(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto", "require_approval_types": ["profile"]}})
    a = origin("alice")
    await ltm.turn(a, "I love green tea", "Noted.", {"fact": "Alice loves green tea", "type": "preference"})
    await ltm.turn(a, "My phone number is 555-0100", "OK.", {"fact": "Alice's phone is 555-0100", "type": "profile"})
    tea, phone = await ltm.items()
    await ltm.engine.admin.delete(tea.memory_id, "user:alice")
    await ltm.engine.admin.review([phone.memory_id], "reject", "operator:root")
    assert await ltm.items() == []
    # (the bot's "Noted." and "OK." were withheld when recorded: small talk)
    withheld = [e for e in await ltm.events() if e.withheld and e.source_role == "user"]
    assert sorted(e.content["text"] for e in withheld) == ["I love green tea", "My phone number is 555-0100"]
    assert not await ltm.block(a, "green tea") and not await ltm.block(a, "phone number")
    await ltm.turn(a, "I still love green tea")  # said again afterwards: that turn may be shown
    assert said(await ltm.block(a, "green tea")) and "still" in said(await ltm.block(a, "green tea"))[0]


async def test_forget_all_withholds_every_turn_and_extracts_nothing_said_before(ltm, origin):
    a = origin("alice")
    await ltm.turn(a, "I love green tea", "Noted.", {"fact": "Alice loves green tea", "type": "preference"})
    await ltm.turn(a, "I collect stamps")
    await ltm.record(a, "I grew up in Osaka")  # not extracted yet
    assert await ltm.engine.admin.forget_scope(ALICE, "user:alice") == 1
    assert all(e.withheld for e in await ltm.events())
    assert not await ltm.block(a, "tea stamps Osaka")
    ltm.gateway.facts({"fact": "Alice grew up in Osaka", "type": "profile"})
    await ltm.engine.worker.drain()
    assert ltm.gateway.calls == [] or "Osaka" not in ltm.gateway.calls[-1]["prompt"]
    assert await ltm.items() == []
    assert {e.extraction_status for e in await ltm.events() if e.source_role == "user"} <= {"done", "skipped"}


async def test_a_turn_an_injected_memory_covers_is_not_repeated(ltm, origin):
    a = origin("alice")
    await ltm.turn(a, "I love green tea", "Noted.", {"fact": "Alice loves green tea", "type": "preference"})
    await ltm.turn(a, "Green tea with jasmine is my favourite", "Nice.")
    block = await ltm.block(a, "green tea")
    assert [s.fact for s in block.items] == ["Alice loves green tea"]
    assert [line.split("Alice: ")[1] for line in said(block)] == ["Green tea with jasmine is my favourite"]
    ltm.configure({"read_policy": {"max_items": 0}})  # with no memories, both turns are shown
    assert len(said(await ltm.block(a, "green tea"))) == 2


async def test_max_events_caps_the_turns_and_zero_means_memories_only(ltm, origin, clock):
    a = origin("alice")
    for n in range(6):
        clock.advance(hours=n % 2)  # turns said in the same second keep the order they were recorded in
        await ltm.turn(a, f"I visited museum number {n} in Paris")
    ltm.configure({"read_policy": {"max_events": 3}})
    block = await ltm.block(a, "Paris museum")
    assert len(block.events) == 3
    numbers = [int(s.fact.split("number ")[1][0]) for s in block.events]
    assert numbers == sorted(numbers)  # oldest first: a conversation reads in order
    ltm.configure({"read_policy": {"max_events": 0}})
    assert not await ltm.block(a, "Paris museum")


async def test_long_turns_are_cut_and_the_budget_holds(ltm, origin):
    a = origin("alice")
    await ltm.turn(a, "Paris " + "and then we walked along the river " * 40)
    block = await ltm.block(a, "Paris river")
    (line,) = said(block)
    assert line.endswith("…") and len(line) < 340
    for budget in (20, 40, 60, 100):
        ltm.configure({"read_policy": {"max_tokens": budget}})
        block = await ltm.block(a, "Paris river")
        assert block.tokens <= budget and (not block or block.tokens == ltm.engine.reader.counter.count(block.text))


async def test_evicting_a_held_back_memory_keeps_its_turns_hidden(make_ltm, origin):
    """Eviction (max_items_per_scope) removes the evidence links too; a turn
    behind a memory that was not active must not come back as one no memory
    covers."""
    ltm = await make_ltm({"write_policy": {"mode": "auto", "max_items_per_scope": 1}})
    a = origin("alice")
    await ltm.turn(a, "I ran a marathon in Berlin", "Wow!", {"fact": "Alice ran the Berlin marathon",
                                                          "type": "episode", "importance": 0.1})
    (marathon,) = await ltm.items()
    await ltm.engine.admin.update_item(marathon.memory_id, {"status": "disabled"}, "operator:root")
    await ltm.turn(a, "I love green tea", "Noted.", {"fact": "Alice loves green tea", "type": "preference",
                                                     "importance": 0.9})
    assert [i.fact for i in await ltm.items()] == ["Alice loves green tea"]  # the marathon was evicted
    block = await ltm.block(a, "marathon Berlin")
    assert block.events == [] and "marathon" not in block.text
    assert [e.withheld for e in await ltm.events() if "marathon" in e.content.get("text", "")] == [True]


async def test_a_turn_that_outranks_its_own_memory_is_not_shown_beside_it(ltm, origin):
    a = origin("alice")
    await ltm.turn(a, "do you know I love green tea", "Noted.",
                   {"fact": "Alice loves green tea", "type": "preference", "importance": 0.0})
    block = await ltm.block(a, "do you know I love green tea")  # the turn's own words rank it first
    assert [s.fact for s in block.items] == ["Alice loves green tea"]
    assert block.events == []
