"""A raw turn in the block: the first few whole, the rest as the sentences
the message is about (docs/decisions.md#d71)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from astrbot_plugin_ltm.config import ReadPolicy
from astrbot_plugin_ltm.recalling.block import TURN_SENTENCES, WHOLE_TURNS, BlockBuilder
from astrbot_plugin_ltm.recalling.ranking import Ranked
from astrbot_plugin_ltm.recalling.read import Focus, Read
from astrbot_plugin_ltm.recalling.tokens import default_counter
from astrbot_plugin_ltm.text import query_tokens
from tests.helpers import event_row

SAID_AT = datetime(2023, 6, 9, 18, 0, tzinfo=UTC)  # a LoCoMo evening
CAMPING = ("Thanks, Caroline! It was a lovely weekend. We went camping at the lake with the kids. "
           "The weather was great too. Talk soon!")
CAMPING_FOCUSED = "Melanie: … We went camping at the lake with the kids. The weather was great too."


def _turn(n: int, said: str, *, who: str = "Melanie", source_type: str = "message",
          content: dict[str, str] | None = None) -> Ranked:
    return Ranked(1.0 - n / 100, turn=event_row(n, said, source_type=source_type, content=content, sender_id=who,
                                                sender_name=who, at=SAID_AT + timedelta(minutes=n)))


def about(message: str) -> Focus:
    return Focus(frozenset(query_tokens(message)))


def _lines(block) -> list[str]:
    return [line for line in block.text.splitlines() if line.startswith("- ")]


def test_turns_after_the_first_few_read_as_the_sentences_the_message_is_about():
    builder = BlockBuilder(default_counter())
    ranked = [_turn(n, CAMPING) for n in range(WHOLE_TURNS + 2)]
    block = builder.fit(ranked, Read("", [], ReadPolicy(), focus=about("Where did Melanie go camping?")))
    lines = _lines(block)
    assert lines[:WHOLE_TURNS] == [f"- Melanie: {CAMPING}"] * WHOLE_TURNS
    # the sentence sharing the message's word, then the opening one fills up to TURN_SENTENCES
    assert TURN_SENTENCES == 2
    assert lines[WHOLE_TURNS:] == ["- Melanie: Thanks, Caroline! … We went camping at the lake with the kids."] * 2
    # what the block reports is what it shows
    assert [s.fact.split("] ", 1)[1] for s in block.events] == [line[2:] for line in lines]


def test_a_turn_focused_on_a_later_sentence_keeps_its_speaker():
    builder = BlockBuilder(default_counter())
    ranked = [_turn(n, CAMPING) for n in range(WHOLE_TURNS + 1)]
    block = builder.fit(ranked, Read("", [], ReadPolicy(), focus=about("How was the weather at the lake?")))
    assert _lines(block)[-1] == "- " + CAMPING_FOCUSED


def test_without_a_message_to_focus_on_every_turn_is_whole():
    builder = BlockBuilder(default_counter())
    block = builder.fit([_turn(n, CAMPING) for n in range(WHOLE_TURNS + 2)], Read("", [], ReadPolicy()))
    assert _lines(block) == [f"- Melanie: {CAMPING}"] * (WHOLE_TURNS + 2)


def test_short_turns_are_whole_and_a_tool_result_reads_from_its_start():
    builder = BlockBuilder(default_counter())
    short = "We went camping. It rained."
    result = "Forecast: rain. Lake closed. Camping allowed. Bring boots."
    ranked = [*(_turn(n, CAMPING) for n in range(WHOLE_TURNS)), _turn(5, short),
              _turn(6, "", source_type="tool_result", content={"tool": "weather", "result": result})]
    block = builder.fit(ranked, Read("", [], ReadPolicy(), focus=about("camping")))
    assert _lines(block)[WHOLE_TURNS:] == [f"- Melanie: {short}", f"- tool weather: {result}"]


def test_focused_turns_leave_room_for_more_turns_of_other_days():
    builder = BlockBuilder(default_counter())
    ranked = [Ranked(1.0 - n / 100, turn=event_row(n, CAMPING, sender_id="Melanie", sender_name="Melanie",
                                                   at=SAID_AT + timedelta(days=n)))
              for n in range(12)]
    policy = ReadPolicy(max_tokens=400)
    whole = builder.fit(ranked, Read("", [], policy))
    focused = builder.fit(ranked, Read("", [], policy, focus=about("Where did Melanie go camping?")))
    assert focused.tokens <= policy.max_tokens
    assert len(focused.events) >= len(whole.events) + 2


def test_a_chinese_turn_is_focused_on_its_sentences():
    builder = BlockBuilder(default_counter())
    said = "谢谢你！周末过得很好。我们带孩子去湖边露营了。天气也不错。下次再聊！"
    ranked = [_turn(n, said, who="小美") for n in range(WHOLE_TURNS + 1)]
    block = builder.fit(ranked, Read("", [], ReadPolicy(), focus=about("小美去哪里露营了？")))
    assert _lines(block)[-1] == "- 小美: 谢谢你！…我们带孩子去湖边露营了。"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(st.text(min_size=1, max_size=400).map(lambda s: " ".join(s.split())).filter(bool),
                   min_size=0, max_size=12),
    message=st.text(max_size=60),
    max_tokens=st.integers(0, 400),
)
def test_focused_turns_keep_the_budget_and_their_speaker_for_arbitrary_text(texts, message, max_tokens):
    counter = default_counter()
    policy = ReadPolicy(max_tokens=max_tokens)
    block = BlockBuilder(counter).fit([_turn(n, said) for n, said in enumerate(texts)],
                                      Read("", [], policy, focus=about(message)))
    assert block.tokens <= policy.max_tokens
    assert not block.text or counter.count(block.text) == block.tokens
    assert all(line.startswith("- Melanie:") for line in _lines(block))
