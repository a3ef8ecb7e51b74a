"""Explicit requests: "remember that …" / "记住…" in a message and the
remember() API become user_explicit memories without a model call."""

from __future__ import annotations

import contextlib

import pytest

from astrbot_plugin_ltm.config import ExtractionConfig
from astrbot_plugin_ltm.learning.known import given_name
from astrbot_plugin_ltm.recording.explicit import attribute, explicit_fact, guess_type
from astrbot_plugin_ltm.storing.tables import MemoryEvidence, MemoryItem


async def _explicit_item(ltm):
    item = await ltm.item()
    (link,) = await ltm.evidence(MemoryEvidence.memory_id == item.memory_id)
    return item, link


async def test_english_request_in_a_message(ltm, origin):
    a = origin("alice")
    events = await ltm.record(a, "Remember that I like green tea", "Sure, I will.")
    # written when the events are written: no extraction needed
    item, link = await _explicit_item(ltm)
    assert item.fact == "Alice likes green tea"
    assert item.type == "preference" and item.status == "active"
    assert item.confidence == 1.0  # 1.0 × user_explicit weight 1.0
    assert link.extraction_method == "user_explicit" and link.event_id == events[0].event_id
    assert [a for a in await ltm.audit() if a.action != "config"][0].actor == "user:alice"

    await ltm.engine.worker.drain()
    assert ltm.gateway.calls == []  # the model was never asked
    assert (await ltm.item()).evidence_count == 1  # and nothing was extracted twice
    assert {e.extraction_status for e in await ltm.events()} <= {"done", "skipped"}
    assert "green tea" in (await ltm.block(a, "what do I drink")).text


async def test_chinese_request_in_a_message(ltm, origin):
    xm = origin("xiaoming", name="小明")
    await ltm.record(xm, "记住我喜欢喝绿茶", "好的，记住了。")
    item, link = await _explicit_item(ltm)
    assert item.fact == "小明喜欢喝绿茶"
    assert item.type == "preference" and item.status == "active"
    assert link.extraction_method == "user_explicit"
    await ltm.engine.worker.drain()
    assert ltm.gateway.calls == []
    assert "小明喜欢喝绿茶" in (await ltm.block(xm, "我喜欢喝什么")).text


async def test_remember_api(ltm, origin):
    a = origin("alice")
    outcome = await ltm.engine.remember(a, "  my   birthday is May 1  ")
    assert outcome.action == "created" and outcome.status == "active"
    item, link = await _explicit_item(ltm)
    assert item.fact == "Alice's birthday is May 1" and item.memory_id == outcome.memory_id
    assert link.extraction_method == "user_explicit"
    (event,) = await ltm.events()
    assert event.event_id == link.event_id and event.extraction_status == "done"
    assert event.content["text"] == "my birthday is May 1" and event.sender_id == "alice"
    await ltm.engine.worker.drain()
    assert ltm.gateway.calls == [] and ltm.gateway.completer_calls == []


async def test_remember_api_rejects_empty_facts(ltm, origin):
    with pytest.raises(ValueError):
        await ltm.engine.remember(origin("alice"), "   ")
    assert await ltm.items() == [] and await ltm.events() == []


async def test_explicit_memories_respect_max_fact_chars(make_ltm, origin, monkeypatch):
    # extraction.max_fact_chars is "the longest a memory may be"; extraction
    # and operator edits enforce it, and explicit requests must not bypass it.
    monkeypatch.setattr(ExtractionConfig, "max_fact_chars", 50)
    ltm = await make_ltm({"write_policy": {"mode": "auto"}})
    a = origin("alice")
    long_fact = "my favourite things are " + ", ".join(f"thing number {n}" for n in range(30))
    with contextlib.suppress(ValueError):  # refusing is fine
        await ltm.engine.remember(a, long_fact)
    await ltm.record(a, "Remember that " + long_fact, "OK.")
    assert all(len(i.fact) <= 50 for i in await ltm.items()), [len(i.fact) for i in await ltm.items()]


async def test_explicit_requests_skip_confidence_thresholds(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto", "min_confidence": 1.0, "min_evidence_count": 3}})
    await ltm.engine.remember(origin("alice"), "I am vegetarian")
    item = await ltm.item()
    assert item.status == "active" and item.fact == "Alice is vegetarian"


async def test_explicit_request_in_a_group_names_the_speaker(ltm, origin):
    bob = origin("bob", group="g1")
    await ltm.record(bob, "please remember my birthday is May 1", "OK Bob.")
    item = await ltm.item()
    assert item.fact == "Bob's birthday is May 1"
    # Kept with Bob, who said it; the group he said it in may recall it (tests/test_audience.py).
    assert (item.scope, item.scope_id) == ("user", "qq:bob")
    assert "Bob's birthday is May 1" in (await ltm.block(origin("carol", group="g1"), "When is Bob's birthday?")).text


async def test_the_assistant_saying_remember_is_not_a_request(ltm, origin):
    await ltm.record(origin("alice"), "what's next?", "Remember that you have a meeting at 10.")
    assert await ltm.items() == []


async def test_reminiscing_is_not_a_request(ltm, origin):
    a = origin("alice")
    await ltm.record(a, "Remember when we went to Paris?", "Yes!")
    await ltm.record(a, "记得吗？", "嗯")
    assert await ltm.items() == []
    # those events wait for normal extraction instead
    assert {e.extraction_status for e in await ltm.events()} == {"pending"}


def test_words_that_only_begin_like_a_request_are_not_requests():
    # "note"/"remember"/"记住" must be whole words: "Noted, thanks!" is not
    # a request to remember "d, thanks".
    messages = [
        "Noted, thanks!",
        "Notebook is broken",
        "notes are in the drawer",
        "Remembering names is hard for me",
        "Memorizes everything",
        "Remember that",
        "记住了",
    ]
    assert {m: explicit_fact(m) for m in messages} == {m: None for m in messages}


async def test_an_acknowledgement_creates_no_memory(ltm, origin):
    await ltm.record(origin("alice"), "Noted, thanks!", "You're welcome.")
    await ltm.record(origin("xiaoming", name="小明"), "记住了", "好的")
    assert [i.fact for i in await ltm.items()] == []
    # and the messages still go to normal extraction
    assert {e.extraction_status for e in await ltm.events()} == {"pending"}


WEIRD_NAME = r"C:\Users\bob \1 \g<0>"


def test_attribute_inserts_the_speaker_name_literally():
    assert attribute("I like tea", WEIRD_NAME) == WEIRD_NAME + " likes tea"
    assert attribute("我喜欢茶", WEIRD_NAME) == WEIRD_NAME + "喜欢茶"


async def test_a_backslash_in_a_nickname_does_not_block_recording(ltm, origin):
    weird = origin("bob", name=WEIRD_NAME)
    ltm.engine.record_turn(weird, "Remember that I like green tea", "OK")
    ltm.engine.record_turn(origin("alice"), "hello", "hi")
    await ltm.engine.recorder.flush()
    assert len(await ltm.events()) == 4
    assert [i.fact for i in await ltm.items()] == [WEIRD_NAME + " likes green tea"]


@pytest.mark.parametrize(
    ("message", "fact"),
    [
        ("Remember that I like green tea", "I like green tea"),
        ("remember: my cat is called Tom.", "my cat is called Tom"),
        ("Please remember I'm allergic to nuts!", "I'm allergic to nuts"),
        ("note that the deadline is Friday", "the deadline is Friday"),
        ("记住我喜欢喝绿茶", "我喜欢喝绿茶"),
        ("请记住：我住在上海。", "我住在上海"),
        ("帮我记一下明天开会", "明天开会"),
        ("Remember when we met?", None),
        ("Do you remember me?", None),
        ("I remember that day", None),
        ("记得吗", None),
        ("hello", None),
    ],
)
def test_explicit_fact(message, fact):
    assert explicit_fact(message) == fact


def test_attribute_rewrites_the_first_person():
    assert attribute("I like green tea", "Alice") == "Alice likes green tea"
    assert attribute("my cat is Tom", "Alice") == "Alice's cat is Tom"
    assert attribute("I'm allergic to nuts", "Alice") == "Alice is allergic to nuts"
    assert attribute("我的猫叫汤姆", "小明") == "小明的猫叫汤姆"
    assert attribute("我喜欢绿茶", "小明") == "小明喜欢绿茶"
    assert attribute("I like tea", "") == "I like tea"


@pytest.mark.parametrize(
    ("said", "kept"),
    [
        ("I like green tea", "Alice likes green tea"),
        ("I really like cats", "Alice really likes cats"),
        ("I study maths and I teach", "Alice studies maths and Alice teaches"),
        ("I go swimming", "Alice goes swimming"),
        ("I fix bikes", "Alice fixes bikes"),
        ("I need glasses", "Alice needs glasses"),
        ("I have two cats", "Alice has two cats"),
        ("I've got a dog", "Alice has got a dog"),
        ("I don't eat pork", "Alice doesn't eat pork"),
        ("I do not eat pork", "Alice does not eat pork"),
        ("I'll visit Rome", "Alice will visit Rome"),
        # modals and past forms do not change
        ("I can swim", "Alice can swim"),
        ("I went to Paris", "Alice went to Paris"),
        ("I visited Rome", "Alice visited Rome"),
        ("I was born in 1990", "Alice was born in 1990"),
    ],
)
def test_attribute_makes_the_verb_agree_with_the_name(said, kept):
    assert attribute(said, "Alice") == kept


def test_attribute_leaves_we_and_words_containing_wo_alone():
    # "我们" is "we" (English "we" is left alone too), "自我" is "self"
    assert attribute("我们周五开会", "小明") == "我们周五开会"
    assert attribute("我在准备自我介绍", "小明") == "小明在准备自我介绍"


@pytest.mark.parametrize(
    ("fact", "mtype"),
    [
        ("Alice likes green tea", "preference"),
        ("小明喜欢喝绿茶", "preference"),
        ("never use sudo", "constraint"),
        ("不要用sudo", "constraint"),
        ("Alice lives in Paris", "profile"),
    ],
)
def test_guess_type(fact, mtype):
    assert guess_type(fact) == mtype


@pytest.mark.parametrize(("fact", "name"), [
    ("小明的名字是小明", "小明"), ("用户叫小红", "小红"), ("用户的名字叫王芳。", "王芳"),
    ("Alice's name is Alice", "Alice"), ("The user's name is Mary Ann", "Mary Ann"), ("the user is called Bo", "Bo"),
    ("小明住在杭州", None), ("Alice lives in Paris", None),
])
def test_the_name_a_name_fact_gives(fact, name):
    assert given_name(fact) == name


async def test_remember_names_the_person_by_the_name_they_gave_as_chat_facts_do(ltm, origin):
    """One style for a person: a web chat user has no display name (the
    login is no name); facts learnt from chat call them by the name they
    gave, and so does /ltm remember."""
    web = origin("xiaoming", name="xiaoming", platform="webchat")
    await ltm.turn(web, "我叫小明", "你好，小明！",
                   {"fact": "小明的名字是小明", "fact_key": "name", "type": "profile"})
    await ltm.engine.remember(web, "我的猫叫咪咪")
    await ltm.record(web, "记住我是一名程序员", "好的。")
    facts = {i.fact for i in await ltm.items(MemoryItem.fact_key != "name")}
    assert facts == {"小明的猫叫咪咪", "小明是一名程序员"}
    # someone who gave no name is still "用户"
    other = origin("nobody", name="nobody", platform="webchat")
    await ltm.engine.remember(other, "我的狗叫旺财")
    assert [i.fact for i in await ltm.items(MemoryItem.scope_id == "webchat:nobody")] == ["用户的狗叫旺财"]
