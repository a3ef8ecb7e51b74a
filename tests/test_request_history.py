"""The request's history (recalling/history.py): turns the model already
reads in this request are not recalled again; memories, summaries and turns
the history lacks are; the adapter reads the history from AstrBot's shapes."""

from __future__ import annotations

import json
import time

from astrbot.core.agent.message import ImageURLPart, Message, TextPart, ToolCall

from astrbot_plugin_ltm.adapter import history_texts
from astrbot_plugin_ltm.recalling.history import History
from astrbot_plugin_ltm.recording.recorder import truncate

ASKED = "你还记得我住在哪里吗？"


def said(block) -> list[str]:
    return [s.fact.split("] ", 1)[1] for s in block.events]


async def block_with(ltm, origin, query: str, history: list[str]):
    return await ltm.engine.memory_block(origin, query, history=history)


async def test_a_turn_in_the_requests_history_is_not_recalled(ltm, origin):
    a = origin("alice")
    await ltm.turn(a, ASKED, "你说过你住在杭州西湖边")
    assert said(await ltm.block(a, "我住在哪里来着？")) == [f"Alice: {ASKED}", "bot (you): 你说过你住在杭州西湖边"]
    block = await block_with(ltm, a, "我住在哪里来着？", [ASKED, "你说过你住在杭州西湖边"])
    assert said(block) == []
    assert ASKED not in block.text and "西湖" not in block.text


async def test_a_turn_the_history_lacks_is_still_recalled(ltm, origin):
    a = origin("alice")
    await ltm.turn(a, "我去年住在杭州西湖边", "好的")
    await ltm.turn(a, ASKED, "你说过你住在杭州")
    block = await block_with(ltm, a, "我住在哪里来着？", [ASKED, "你说过你住在杭州"])
    assert said(block) == ["Alice: 我去年住在杭州西湖边"]


async def test_memories_are_recalled_whatever_the_history_holds(ltm, origin):
    a = origin("alice")
    fact = {"fact": "Alice lives in Lisbon", "type": "profile"}
    await ltm.turn(a, "I live in Lisbon", "Nice city.", fact)
    history = ["I live in Lisbon", "Nice city.", "Alice lives in Lisbon"]
    block = await block_with(ltm, a, "where do I live?", history)
    assert [s.fact for s in block.items] == ["Alice lives in Lisbon"]
    assert said(block) == []


async def test_a_hook_with_no_history_reads_as_before(ltm, origin):
    a = origin("alice")
    await ltm.turn(a, "My sister Jane is visiting from Lisbon next week", "How nice!")
    plain = await ltm.block(a, "when is Jane visiting?")
    assert said(plain) == ["Alice: My sister Jane is visiting from Lisbon next week"]
    for empty in ([], ["", "   "]):
        again = await block_with(ltm, a, "when is Jane visiting?", empty)
        assert again.text == plain.text and again.tokens == plain.tokens


async def test_the_room_a_left_out_turn_frees_goes_to_a_turn_the_history_lacks(ltm, origin):
    a = origin("alice")
    await ltm.turn(a, "The red bike is parked by the library", "OK")
    await ltm.turn(a, "The blue bike is parked at the station", "OK")
    ltm.configure({"read_policy": {"max_events": 1}})
    alone = said(await ltm.block(a, "where is the bike parked?"))
    assert len(alone) == 1
    block = await block_with(ltm, a, "where is the bike parked?", [alone[0].split(": ", 1)[1]])
    assert len(said(block)) == 1 and said(block) != alone


async def test_the_bots_reply_in_the_history_is_left_out_and_its_question_kept_when_absent(ltm, origin):
    a = origin("alice")
    await ltm.turn(a, "Which pineapple cake should I try?", "Try the pineapple cake at Rosa's bakery")
    assert len(said(await ltm.block(a, "pineapple cake"))) == 2
    block = await block_with(ltm, a, "pineapple cake", ["Try the pineapple cake at Rosa's bakery"])
    assert said(block) == ["Alice: Which pineapple cake should I try?"]


async def test_last_time_stays_out_when_the_history_holds_the_last_conversation(make_ltm, gateway, origin):
    def answer(system: str, prompt: str) -> str:
        if "summar" in system.lower():
            return json.dumps({"summary": "Session summary: Alice planned a trip to Kyoto"})
        return "[]"

    gateway.default = answer
    ltm = await make_ltm({"write_policy": {"mode": "auto"},
                          "summaries": {"enable": True, "idle_minutes": 30, "min_events": 1}})
    alice = origin("alice")
    await ltm.record(alice, "I am planning a trip to Kyoto", "Kyoto is lovely in autumn")
    ltm.clock.advance(minutes=1)
    await ltm.engine.summaries.drain()
    ltm.clock.advance(hours=3)
    assert "Last time we talked" in (await ltm.block(alice, "hi again")).text  # a new conversation
    history = ["I am planning a trip to Kyoto", "Kyoto is lovely in autumn"]
    assert "Last time we talked" not in (await block_with(ltm, alice, "hi again", history)).text
    # A history that is not the last conversation's end keeps it.
    assert "Last time we talked" in (await block_with(ltm, alice, "hi again", ["something else entirely"])).text


def test_a_turn_is_held_when_a_history_message_is_it_normalised_or_wrapped_in_lines():
    history = History([
        "[User ID: 42, Nickname: Alice]\n  I live in   Paris ",  # a sender line above
        "<Quoted Message>\nsee you\n</Quoted Message>\nFirst line of mine\nand my second",
        "ok",
    ])
    assert history.holds("I live in Paris")  # spacing aside
    assert history.holds("ok") and not history.holds("no")
    assert not history.holds("Paris") and not history.holds("I live in Rome")
    assert history.holds("First line of mine\nand my second") is False  # two lines above it: not matched
    assert History(["[User ID: 42]\nFirst line of mine\nand my second"]).holds("First line of mine\nand my second")
    long = "I moved to a small flat near the river last spring " * 10
    cut, _ = truncate(long, 120)
    assert History([long]).holds(cut)  # a record cut short is its original's opening
    assert not History([long.replace("river", "sea")]).holds(truncate(long, 400)[0])
    assert History([json.dumps({"temp": 21})]).holds_turn({"tool": "get_weather", "result": '{"temp": 21}'})
    assert History.of([]) is None and History.of(["  "]) is None


def test_the_adapter_reads_the_history_from_astrbots_messages():
    messages = [
        Message(role="system", content="You are a helpful bot"),
        Message(role="user", content="plain string question"),
        Message(role="assistant", content=[TextPart(text="a reply in parts"),
                                           TextPart(text="a temporary note").mark_as_temp()]),
        Message(role="assistant", content=None, tool_calls=[ToolCall(
            id="c1", function=ToolCall.FunctionBody(name="get_weather", arguments="{}"))]),
        Message(role="tool", content='{"temp": 21}', tool_call_id="c1"),
        Message(role="user", content=[TextPart(text="look at this"),
                                      ImageURLPart(image_url=ImageURLPart.ImageURL(url="http://x/y.png"))]),
        Message(role="user", content="the message being answered"),
    ]
    assert history_texts(messages) == ["plain string question", "a reply in parts", '{"temp": 21}', "look at this"]
    assert history_texts([]) == [] and history_texts(None) == []
    # A conversation's first message: system prompt and the message, no history.
    assert history_texts([messages[0], messages[-1]]) == []


def test_the_adapter_reads_the_history_from_a_provider_requests_contexts():
    contexts = [
        {"role": "user", "content": "earlier question"},
        {"role": "assistant", "content": [{"type": "text", "text": "earlier answer"},
                                          {"type": "text", "text": "injected", "_no_save": True}]},
        {"role": "tool", "content": "tool output", "tool_call_id": "c1"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]},
    ]
    # The last message is the user's: the one being answered, not history.
    assert history_texts(contexts) == ["earlier question", "earlier answer", "tool output"]
    assert history_texts(contexts[:3]) == ["earlier question", "earlier answer", "tool output"]


async def test_a_long_history_costs_little_per_read():
    # About AstrBot's fallback window: 128k tokens of mixed Chinese and English.
    texts = [f"第{n}条消息：今天我们聊了天气、工作和去京都的旅行。Message {n}: I talked about my day, the weather "
             f"and the trip to Kyoto, and what we will do next week." * 4 for n in range(1000)]
    start = time.perf_counter()
    history = History(texts)
    built = time.perf_counter() - start
    start = time.perf_counter()
    for n in range(150):
        history.holds(f"a turn the history never held, number {n}, about something else")
    checked = time.perf_counter() - start
    assert await History.read(texts) is not None  # long: read on a thread
    print(f"history of {len(texts)} messages, {sum(map(len, texts))} characters: built in {built * 1000:.2f} ms, "
          f"150 turns checked in {checked * 1000:.2f} ms")
    assert history.holds(texts[123]) and built + checked < 0.5  # generous: a loaded, shared machine
