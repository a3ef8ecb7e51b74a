"""The bot's side of the conversation: bot-side episodes (learning/bot_side.py)
attributed to the bot and evidenced by its own line, and the bot's replies
as labelled lines of the block (recalling/bot_lines.py)."""

from __future__ import annotations

from astrbot_plugin_ltm.learning.extractor import SYSTEM_PROMPT, build_transcript, validate
from astrbot_plugin_ltm.recalling.bot_lines import BOT_CHARS, BOT_SHARE
from astrbot_plugin_ltm.storing.tables import MemoryEvent
from astrbot_plugin_ltm.withholding import withhold

BOOK = {"type": "episode", "fact": "the bot recommended 《小王子》 to the user", "by": "bot", "lines": [2],
        "confidence": 0.9, "importance": 0.6}


def exchange(user: str = "你能给我推荐一本书吗？",
             bot: str = "我推荐你读《小王子》，很温暖的一本书。") -> list[MemoryEvent]:
    def event(n: int, role: str, text: str) -> MemoryEvent:
        human = role == "user"
        return MemoryEvent(event_id=f"e{n}", scope="user", scope_id="qq:zmt", source_type="message",
                           source_role=role, content={"text": text}, sender_id="zmt" if human else None,
                           sender_name="张曼婷" if human else None)
    return [event(1, "user", user), event(2, "assistant", bot)]


def test_a_bot_side_episode_is_the_bots_evidenced_by_its_own_line():
    events = exchange()
    (candidate,), rejected = validate([BOOK], events, 300)
    assert rejected == []
    assert candidate.fact == "the bot recommended 《小王子》 to 张曼婷"  # "the user" named, the bot the actor
    assert candidate.event_ids == ["e2"]  # the bot's line, never the person's
    assert candidate.source == "bot_side" and candidate.type == "episode"
    # citing the person's ask too changes nothing: the evidence is the bot's line
    (both,), _ = validate([{**BOOK, "lines": [1, 2]}], events, 300)
    assert both.event_ids == ["e2"]


def test_what_only_the_bot_said_is_refused_unless_it_is_a_bot_side_episode():
    events = exchange()
    plain = {k: v for k, v in BOOK.items() if k != "by"}
    accepted, (rejection,) = validate([plain], events, 300)
    assert accepted == [] and rejection.reason == "only the assistant said this"


def test_a_bot_side_fact_never_reads_as_what_a_person_stated():
    events = exchange()
    cases = {
        "the user said the bot recommended 《小王子》": "must not say a person stated it",
        "用户说机器人推荐了《小王子》": "must not say a person stated it",
        "张曼婷 is reading 《小王子》": "must say it is the bot's",
    }
    for fact, reason in cases.items():
        accepted, (rejection,) = validate([{**BOOK, "fact": fact}], events, 300)
        assert accepted == [] and reason in rejection.reason, fact


def test_a_bot_side_fact_is_an_episode_citing_a_bot_line():
    events = exchange()
    for change, reason in (({"type": "preference"}, "must be an episode"),
                           ({"lines": [1]}, "cites none of the bot's lines"),
                           ({"lines": []}, "must cite the bot's lines"),
                           ({"lines": None}, "must cite the bot's lines"),
                           ({"lines": [3]}, "must cite the bot's lines")):
        accepted, (rejection,) = validate([{**BOOK, **change}], events, 300)
        assert accepted == [] and reason in rejection.reason, change


def test_the_prompt_asks_for_the_bots_acts_not_its_opinions():
    assert '"by": "bot"' in SYSTEM_PROMPT and "small talk are not memories" in SYSTEM_PROMPT
    assert build_transcript(exchange()).splitlines()[1].startswith("[2] assistant: ")


async def test_a_bot_side_episode_is_stored_with_the_bots_event_and_recalled(ltm, origin):
    a = origin("alice")
    events, _ = await ltm.turn(a, "Can you recommend a book?", "I recommend The Little Prince, a gentle classic.",
                               {"type": "episode", "fact": "the bot recommended The Little Prince to the user",
                                "by": "bot", "lines": [2], "importance": 0.6})
    item = await ltm.item()
    assert item.fact == "the bot recommended The Little Prince to Alice" and item.type == "episode"
    (evidence,) = await ltm.evidence()
    bot_event = next(e for e in events if e.source_role == "assistant")
    assert evidence.event_id == bot_event.event_id
    block = await ltm.block(a, "which book did you recommend?")
    assert "the bot recommended The Little Prince to Alice" in block.text
    # the reply the memory stands for is not shown again beside it
    assert all("Little Prince" not in s.fact for s in block.events)


async def test_the_bots_reply_is_labelled_bounded_and_kept_to_its_share(ltm, origin):
    a = origin("alice")
    long_reply = "I recommend the pineapple cake at Rosa's bakery. " + "It is lovely and sweet. " * 40
    await ltm.turn(a, "Where should I get dessert?", long_reply)
    block = await ltm.block(a, "pineapple cake dessert")
    (bot_line,) = [line for line in block.text.splitlines() if line.startswith("- bot (you): ")]
    # the part the message is about, within the bot's bound (recalling/excerpts.py)
    assert bot_line.startswith("- bot (you): I recommend the pineapple cake") and len(bot_line) <= 2 + BOT_CHARS + 1
    assert any("Alice: Where should I get dessert?" in s.fact for s in block.events)
    # many long replies: together they stay within their share of the budget
    for n in range(12):
        await ltm.turn(a, f"dessert idea {n}?", f"I recommend pineapple cake number {n}. " + "Sweet! " * 30)
    block = await ltm.block(a, "pineapple cake dessert")
    counter = ltm.engine.reader.counter
    bot_tokens = sum(counter.count("\n" + line) for line in block.text.splitlines() if line.startswith("- bot (you)"))
    assert 0 < bot_tokens <= ltm.engine.config.read_policy.max_tokens * BOT_SHARE


async def test_small_talk_and_replies_to_withheld_messages_are_never_shown(ltm, origin):
    a = origin("alice")
    await ltm.turn(a, "I adopted a kitten named Miso", "How nice!")
    assert all("bot (you)" not in s.fact for s in (await ltm.block(a, "kitten Miso")).events)
    await ltm.turn(a, "My phone number is 555-0100", "Got it, I will remember your number 555-0100 for later.",
                   {"fact": "Alice's phone is 555-0100", "type": "profile"})
    phone = await ltm.item()
    ltm.configure({"read_policy": {"max_items": 0}})
    assert any("bot (you)" in s.fact for s in (await ltm.block(a, "phone number 555-0100")).events)
    await ltm.engine.admin.delete(phone.memory_id, "user:alice")
    # the person's message is withheld, and so is the bot's reply that repeats it
    assert "555-0100" not in (await ltm.block(a, "phone number 555-0100")).text


def test_the_bots_small_talk_and_echoes_are_withheld_when_recorded_and_its_advice_is_not():
    echo = exchange("我住在上海的浦东新区", "你住在上海的浦东新区！")
    small = exchange("我养了一只小猫", "当然了！")
    advice = exchange()
    alone = exchange("x", "你住在上海的浦东新区！")[1:]  # after the bot's reply, not a message: no echo
    assert withhold([*echo, *small, *advice, *alone]) == 2
    assert [e.withheld for e in (*echo, *small, *advice, *alone)] == [False, True, False, True, False, False, False]


async def test_a_reply_that_only_says_the_message_back_is_not_shown(ltm, origin):
    a = origin("alice")
    await ltm.turn(a, "My sister Jane visits from Lisbon next week", "Your sister Jane visits from Lisbon next week!")
    await ltm.turn(a, "Any tips for Lisbon?", "Try the custard tarts at Belém and ride tram 28 in Lisbon.")
    shown = [s.fact for s in (await ltm.block(a, "Jane Lisbon tram")).events]
    assert not any("bot (you): Your sister" in f for f in shown)  # the echo: her own line stands for it
    assert any("Alice: My sister Jane" in f for f in shown)
    assert any("bot (you): Try the custard tarts" in f for f in shown)


async def test_the_bots_lines_leave_the_count_of_turns_to_what_people_said(ltm, origin):
    """read_policy.max_events counts the people's turns: the bot's replies,
    bounded by their share of the budget, take none of them
    (docs/decisions.md#d118)."""
    a = origin("alice")
    ltm.configure({"read_policy": {"max_events": 3, "max_items": 0}})
    for n in range(5):
        await ltm.turn(a, f"I went hiking on trail {n} with my sister.",
                       f"Hiking trail {n} sounds lovely; take water and good shoes on that trail.")
    block = await ltm.block(a, "hiking trail sister")
    people = [s for s in block.events if "bot (you)" not in s.fact]
    bots = [s for s in block.events if "bot (you)" in s.fact]
    assert len(people) == 3  # the cap, all of it the people's
    assert bots  # the bot's matching replies come beside them
    counter = ltm.engine.reader.counter
    bot_tokens = sum(counter.count("\n" + line) for line in block.text.splitlines() if line.startswith("- bot (you)"))
    assert bot_tokens <= ltm.engine.config.read_policy.max_tokens * BOT_SHARE
