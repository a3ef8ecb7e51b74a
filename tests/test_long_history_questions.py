"""Time and preference questions over long histories: a busy day's turns
that match the question come first (periods.py), a question comparing
events searches each event it names (asking.event_parts), and a request for
suggestions lifts what the person said they like (asking, preferences,
ranking; docs/decisions.md#d84, #d85)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from astrbot_plugin_ltm.recalling import reader
from astrbot_plugin_ltm.recalling.asking import asks_for_suggestions, event_parts
from astrbot_plugin_ltm.recalling.periods import PERIOD_LIMIT
from astrbot_plugin_ltm.recalling.preferences import states_preference


def said(block) -> list[str]:
    return [e.fact for e in block.events]


# -- what a message asks ---------------------------------------------------------------


@pytest.mark.parametrize(("message", "parts"), [
    ("How many days did it take for me to find a house I loved after starting to work with Rachel?",
     ["for me to find a house I loved", "starting to work with Rachel"]),
    ("Which show did I start watching first, 'The Crown' or 'Game of Thrones'?",
     ["Which show", "I start watching", "'The Crown'", "'Game of Thrones'"]),
    ("How many weeks passed between Maria adopting Coco and Shadow?", ["Maria adopting Coco", "Shadow"]),
    ("How many days before the wedding did I buy the dress?", ["the wedding", "I buy the dress"]),
    ("我先去了北京还是上海？", ["去了北京", "上海"]),
    ("我搬家之前多少天买了那辆车？", ["我搬家", "买了那辆车"]),
])
def test_a_question_comparing_events_names_each_event_in_a_part(message, parts):
    assert event_parts(message) == parts


@pytest.mark.parametrize("message", [
    "What is my cat's name?", "Who did I go with to the music event last Saturday?",
    "What did Maria participate in last weekend before April 10, 2023?", "你好", "",
    "How many weeks ago did I attend a bird watching workshop?",
])
def test_other_questions_are_searched_whole(message):
    assert event_parts(message) == []


@pytest.mark.parametrize("message", [
    "Can you suggest some activities that I can do in the evening?", "Any suggestions?",
    "I've been feeling stuck. Do you have any ideas on how I can find new inspiration?",
    "What would you recommend for dinner?", "能推荐几家杭州的餐厅吗？", "有什么好看的电影吗", "给我出出主意",
])
def test_a_request_for_suggestions_is_told(message):
    assert asks_for_suggestions(message)


@pytest.mark.parametrize("message", [
    "What book did Tim recommend to John?", "What advice did Tim give John about endorsements?",
    "你给我推荐过哪些画家？", "你之前推荐的那家做西湖醋鱼的餐厅叫什么名字？", "在5月3号，你给我推荐了哪两部电影？",
    "What is my cat's name?",
])
def test_a_question_about_a_past_suggestion_is_not_a_request(message):
    assert not asks_for_suggestions(message)


@pytest.mark.parametrize("text", [
    "What else can I do later? I prefer winding down by 9:30 pm.", "I'm really into jazz these days.",
    "I really love hiking in the mountains.", "My favourite cuisine is Thai.", "I usually read before bed.",
    "I'm a big fan of Sony cameras.", "我更喜欢安静一点的地方。", "我一般不吃辣。", "我最爱的电影是《星际穿越》",
    "我对花生过敏",
])
def test_a_stated_preference_or_habit_is_told(text):
    assert states_preference(text)


@pytest.mark.parametrize("text", [
    "I'd like to know more about tires.", "I would like to ask Rachel about listings.", "What time is it?",
    "你喜欢什么颜色？", "The weather is nice today.", "今天天气很好。",
])
def test_a_wish_or_a_question_is_no_preference(text):
    assert not states_preference(text)


# -- the read ---------------------------------------------------------------------------


async def test_a_busy_day_brings_its_turns_that_match_the_question(ltm, origin):
    """More turns in the named day than a period loads: the one the
    question's words match is among them, though said late in the day."""
    start = datetime(2023, 4, 15, 0, 0, tzinfo=UTC)
    for n in range(PERIOD_LIMIT + 20):
        ltm.clock.now = start + timedelta(minutes=5 * n)
        await ltm.record(origin(), f"Let us plan chore number {n} for the garage.")
    ltm.clock.now = start + timedelta(hours=20)
    await ltm.record(origin(), "I saw Queen live at the concert with my parents.")
    ltm.configure({"read_policy": {"max_events": 3}})
    ltm.clock.now = datetime(2023, 4, 22, 9, 0, tzinfo=UTC)  # a Saturday: "last Saturday" is 15 April
    block = await ltm.block(origin(), "Who did I go to the concert with last Saturday?")
    assert any("Queen" in s for s in said(block))


async def test_a_question_comparing_two_events_reaches_the_turns_of_each(ltm, origin, monkeypatch):
    """One long day of chat: many turns share the question's frame and one
    event's words, many others one word each of the other event; that
    event's own turn is still reached."""
    start = datetime(2023, 3, 1, 9, 0, tzinfo=UTC)
    lines = ["I started working with Rachel, my real estate agent, today."]
    lines += [f"How many days after I started working with Rachel did it take to get listing {n}?" for n in range(5)]
    lines += [f"I love jazz record {n}." for n in range(5)] + [f"The house of cards, season {n}." for n in range(5)]
    lines += ["I finally find a house I love, with a big garden."]
    for n, line in enumerate(lines):
        ltm.clock.now = start + timedelta(minutes=10 * n)
        await ltm.record(origin(), line)
    ltm.configure({"read_policy": {"max_events": 2}})
    ltm.clock.now = start + timedelta(days=30)
    question = "How many days did it take me to find a house I love after I started working with Rachel?"
    both = said(await ltm.block(origin(), question))
    assert any("garden" in s for s in both) and any("Rachel" in s for s in both)
    monkeypatch.setattr(reader, "event_parts", lambda message: [])
    whole = said(await ltm.block(origin(), question))
    assert not any("garden" in s for s in whole)


async def test_a_request_for_suggestions_brings_a_preference_said_in_other_words(ltm, origin):
    """One long day of chat: the turn that says how the person likes their
    evenings shares one word with the request, the others three."""
    start = datetime(2023, 5, 1, 9, 0, tzinfo=UTC)
    lines = ["Any calm activities for later? I prefer winding down by 9:30 pm."]
    lines += [f"Can you suggest some activities for the kids' camp, group {n}?" for n in range(6)]
    for n, line in enumerate(lines):
        ltm.clock.now = start + timedelta(minutes=10 * n)
        await ltm.record(origin(), line)
    ltm.configure({"read_policy": {"max_events": 2}})
    ltm.clock.now = start + timedelta(days=20)
    asked = said(await ltm.block(origin(), "Can you suggest some activities that I can do in the evening?"))
    assert any("9:30" in s for s in asked)
    # A question that asks for no suggestion lifts no preference.
    recalled = said(await ltm.block(origin(), "Which activities did I plan for the kids' camp?"))
    assert not any("9:30" in s for s in recalled)


def test_the_bench_reads_a_longmemeval_question_date():
    from bench.conversations import parse_question_date

    assert parse_question_date("2023/04/22 (Sat) 08:01") == datetime(2023, 4, 22, 8, 1, tzinfo=UTC)
    assert parse_question_date(None) is None and parse_question_date("next week") is None
