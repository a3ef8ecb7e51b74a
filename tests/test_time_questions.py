"""Time in questions: the period a message names (Chinese and English, in the
user's time zone, relative to the message) and the read that puts that
period's memories and turns first."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from astrbot_plugin_ltm.recalling.dates import FIRST, Period, named_period, number, time_zone

SHANGHAI = ZoneInfo("Asia/Shanghai")
# Sunday 7 May 2023, 10:00 in Shanghai.
NOW = datetime(2023, 5, 7, 2, 0, tzinfo=UTC)


def local_days(period: Period | object, tz=SHANGHAI) -> tuple[date, date]:
    """The first and last local day of a period."""
    assert isinstance(period, Period), period
    return period.start.astimezone(tz).date(), (period.end - timedelta(microseconds=1)).astimezone(tz).date()


@pytest.mark.parametrize(("message", "first", "last"), [
    ("在5月3号我们聊了什么？", date(2023, 5, 3), date(2023, 5, 3)),
    ("5月3日你推荐了什么", date(2023, 5, 3), date(2023, 5, 3)),
    ("2023年5月3日", date(2023, 5, 3), date(2023, 5, 3)),
    ("2022年12月31号那天", date(2022, 12, 31), date(2022, 12, 31)),
    ("五月三号我说了什么", date(2023, 5, 3), date(2023, 5, 3)),
    ("十二月二十五日", date(2022, 12, 25), date(2022, 12, 25)),
    ("昨天我们聊了什么", date(2023, 5, 6), date(2023, 5, 6)),
    ("前天", date(2023, 5, 5), date(2023, 5, 5)),
    ("大前天", date(2023, 5, 4), date(2023, 5, 4)),
    ("今天", date(2023, 5, 7), date(2023, 5, 7)),
    ("上周五你答应了我什么", date(2023, 4, 28), date(2023, 4, 28)),
    ("上个星期三", date(2023, 4, 26), date(2023, 4, 26)),
    ("周五", date(2023, 5, 5), date(2023, 5, 5)),
    ("上周", date(2023, 4, 24), date(2023, 4, 30)),
    ("这周", date(2023, 5, 1), date(2023, 5, 7)),
    ("上个月", date(2023, 4, 1), date(2023, 4, 30)),
    ("4月份", date(2023, 4, 1), date(2023, 4, 30)),
    ("2022年3月", date(2022, 3, 1), date(2022, 3, 31)),
    ("去年", date(2022, 1, 1), date(2022, 12, 31)),
    ("两周前", date(2023, 4, 17), date(2023, 4, 23)),
    ("3天前", date(2023, 5, 4), date(2023, 5, 4)),
    ("三个月前", date(2023, 2, 1), date(2023, 2, 28)),
    ("yesterday", date(2023, 5, 6), date(2023, 5, 6)),
    ("What did I say the day before yesterday?", date(2023, 5, 5), date(2023, 5, 5)),
    ("What did we talk about last Friday?", date(2023, 5, 5), date(2023, 5, 5)),
    ("on May 3", date(2023, 5, 3), date(2023, 5, 3)),
    ("Who did I have dinner with on May 3, 2023?", date(2023, 5, 3), date(2023, 5, 3)),
    ("the 3rd of May", date(2023, 5, 3), date(2023, 5, 3)),
    ("on 2023-05-03", date(2023, 5, 3), date(2023, 5, 3)),
    ("two weeks ago", date(2023, 4, 17), date(2023, 4, 23)),
    ("3 days ago", date(2023, 5, 4), date(2023, 5, 4)),
    ("a couple of days ago", date(2023, 5, 5), date(2023, 5, 5)),
    ("last week", date(2023, 4, 24), date(2023, 4, 30)),
    ("last month", date(2023, 4, 1), date(2023, 4, 30)),
    ("When did I go camping in June?", date(2022, 6, 1), date(2022, 6, 30)),
])
def test_a_date_expression_names_a_period_of_local_days(message, first, last):
    assert local_days(named_period(message, NOW, SHANGHAI)) == (first, last)


@pytest.mark.parametrize("message", ["你还记得我们第一次聊天说了什么吗？", "What did we talk about the first time?",
                                     "when we first met"])
def test_the_first_time_is_left_to_the_database(message):
    assert named_period(message, NOW, SHANGHAI) is FIRST


@pytest.mark.parametrize("message", ["你好", "What is my cat's name?", "I may 2 things", "周末愉快", "",
                                     "我最近去厦门旅游了", "recently", "几天前", "a few days ago"])
def test_a_message_without_a_date_names_none_or_only_what_it_says(message):
    found = named_period(message, NOW, SHANGHAI)
    if message == "周末愉快":  # "the weekend": the latest one
        assert local_days(found) == (date(2023, 5, 6), date(2023, 5, 7))
    else:
        assert found is None


def test_the_first_expression_in_the_message_wins():
    assert local_days(named_period("昨天和5月3号", NOW, SHANGHAI)) == (date(2023, 5, 6), date(2023, 5, 6))
    assert local_days(named_period("5月3号和昨天", NOW, SHANGHAI)) == (date(2023, 5, 3), date(2023, 5, 3))


def test_yesterday_depends_on_the_users_time_zone():
    # 20:00 UTC on 6 May is already 7 May in Shanghai.
    evening = datetime(2023, 5, 6, 20, 0, tzinfo=UTC)
    in_utc = named_period("昨天", evening, UTC)
    in_shanghai = named_period("昨天", evening, SHANGHAI)
    assert local_days(in_utc, UTC) == (date(2023, 5, 5), date(2023, 5, 5))
    assert local_days(in_shanghai) == (date(2023, 5, 6), date(2023, 5, 6))
    # The Shanghai day starts at 16:00 UTC the day before.
    assert isinstance(in_shanghai, Period)
    assert in_shanghai.start == datetime(2023, 5, 5, 16, 0, tzinfo=UTC)


def test_a_date_without_a_year_is_the_latest_one_not_after_the_message():
    january = datetime(2024, 1, 10, 12, 0, tzinfo=UTC)
    assert local_days(named_period("12月25号", january, UTC), UTC) == (date(2023, 12, 25), date(2023, 12, 25))
    assert local_days(named_period("1月5号", january, UTC), UTC) == (date(2024, 1, 5), date(2024, 1, 5))


def test_an_unknown_time_zone_is_utc():
    assert time_zone("Mars/Olympus") is UTC
    assert time_zone(None) is UTC
    assert time_zone("Asia/Shanghai") == SHANGHAI


@pytest.mark.parametrize(("text", "value"), [("3", 3), ("十", 10), ("十二", 12), ("二十一", 21), ("三十一", 31),
                                             ("两", 2), ("two", 2), ("a couple of", 2), ("几", None), ("few", None)])
def test_numbers_in_digits_chinese_and_words(text, value):
    assert number(text) == value


# -- the read ---------------------------------------------------------------------


def at(day: int, hour: int = 10) -> datetime:
    return datetime(2023, 5, day, hour, 0, tzinfo=UTC)


async def converse(ltm, origin, days: dict[int, list[str]]) -> None:
    for day, lines in days.items():
        for n, line in enumerate(lines):
            ltm.clock.now = at(day) + timedelta(minutes=n)
            await ltm.record(origin, line)


DAYS = {
    1: ["Let's talk about movies, I watched Alien again."],
    3: ["We went to the aquarium with my cousin Rosa.", "The jellyfish were glowing blue."],
    5: ["Can we talk about my work? My manager is strict."],
    6: ["I want to talk about books: I am reading Dune."],
}


def said(block) -> list[str]:
    return [e.fact for e in block.events]


async def test_a_date_question_lifts_that_days_turns(ltm, origin):
    await converse(ltm, origin(), DAYS)
    ltm.configure({"read_policy": {"max_events": 2}})
    ltm.clock.now = at(7)
    undated = await ltm.block(origin(), "What happened?")
    assert not any("aquarium" in s for s in said(undated))
    dated = await ltm.block(origin(), "What happened on May 3?")
    assert any("aquarium" in s for s in said(dated)) and any("jellyfish" in s for s in said(dated))
    assert all("2023-05-03" in s for s in said(dated))


async def test_a_strong_word_match_of_another_day_still_competes(ltm, origin):
    """The period is lifted, not a filter (docs/decisions.md#d61): turns of
    other days that match the question's words well keep their place."""
    await converse(ltm, origin(), DAYS)
    ltm.configure({"read_policy": {"max_events": 3}})
    ltm.clock.now = at(7)
    plain = said(await ltm.block(origin(), "What did we talk about?"))
    dated = said(await ltm.block(origin(), "What did we talk about on May 3?"))
    # three turns say "talk about"; they outrank the day's two, which share no word
    assert len(plain) == 3 and not any("2023-05-03" in s for s in plain)
    assert sorted(dated) == sorted(plain)


async def test_a_chinese_relative_date_in_the_users_time_zone(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}, "read_policy": {"max_events": 1}},
                         timezone="Asia/Shanghai")
    # 17:00 UTC on 2 May is 01:00 on 3 May in Shanghai.
    ltm.clock.now = datetime(2023, 5, 2, 17, 0, tzinfo=UTC)
    await ltm.record(origin(), "我昨晚梦见了一只会说话的猫。")
    ltm.clock.now = at(2, 9)
    await ltm.record(origin(), "今天的天气很好，阳光明媚。")
    ltm.clock.now = datetime(2023, 5, 4, 2, 0, tzinfo=UTC)  # 4 May, 10:00 in Shanghai
    block = await ltm.block(origin(), "昨天我们聊了什么？")
    assert len(block.events) == 1 and "猫" in block.events[0].fact


async def test_the_first_time_brings_the_earliest_days_turns(ltm, origin):
    await converse(ltm, origin(), DAYS)
    ltm.configure({"read_policy": {"max_events": 1}})
    ltm.clock.now = at(7)
    block = await ltm.block(origin(), "What did we talk about the first time?")
    assert len(block.events) == 1 and "Alien" in block.events[0].fact


async def test_a_memory_is_in_the_period_of_its_evidence(ltm, origin):
    ltm.clock.now = at(3)
    await ltm.record(origin(), "My cousin Rosa visited, we went to the aquarium.")
    ltm.clock.now = at(6)
    # Extracted days later: the memory changed on 6 May, its evidence is of 3 May.
    ltm.gateway.facts({"type": "episode", "fact": "Alice went to the aquarium with her cousin Rosa",
                       "fact_key": "aquarium visit", "importance": 0.3})
    for topic in ["movies", "work", "books", "music"]:
        await ltm.record(origin(), f"I love to talk about {topic}.")
        ltm.gateway.facts({"type": "preference", "fact": f"Alice loves to talk about {topic}",
                           "fact_key": f"talk {topic}", "importance": 0.9})
    await ltm.engine.worker.drain()
    ltm.configure({"read_policy": {"max_items": 1, "max_events": 0}})
    ltm.clock.now = at(7)
    undated = await ltm.block(origin(), "What happened?")
    assert [i.fact for i in undated.items] != ["Alice went to the aquarium with her cousin Rosa"]
    dated = await ltm.block(origin(), "What happened on 3 May?")
    assert [i.fact for i in dated.items] == ["Alice went to the aquarium with her cousin Rosa"]


async def test_a_period_with_nothing_in_it_changes_nothing(ltm, origin):
    await converse(ltm, origin(), DAYS)
    ltm.clock.now = at(7)
    plain = await ltm.block(origin(), "What did we talk about books?")
    empty_day = await ltm.block(origin(), "What did we talk about books on April 2?")
    assert "Dune" in " ".join(said(plain)) and "Dune" in " ".join(said(empty_day))


async def test_another_persons_turns_of_that_day_stay_out(ltm, origin):
    await converse(ltm, origin("bob"), {3: ["Bob's secret: I adopted a parrot."]})
    await converse(ltm, origin(), {3: ["We went to the aquarium."]})
    ltm.clock.now = at(7)
    block = await ltm.block(origin(), "5月3号我们聊了什么？")
    assert "aquarium" in " ".join(said(block)) and "parrot" not in " ".join(said(block))
