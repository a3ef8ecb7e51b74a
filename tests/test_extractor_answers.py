"""What real extraction models answer, and what must come of each answer
(learning/model_answer.py, learning/extractor.py; docs/decisions.md#d89).

Each row of ``ANSWERS`` is an answer in a shape models really give — a
code fence, prose around the JSON, one object, Chinese field names, a
cut-off array, an empty answer… — and what must come of it: the facts kept
(with the reasons the rest were refused), or ``RETRY``: nothing read, the
events left pending for a retry after the backoff, never lost and never
asked again at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from astrbot_plugin_ltm.clock import as_utc
from astrbot_plugin_ltm.learning.candidates import KnownFact
from astrbot_plugin_ltm.learning.extractor import LLMExtractor, MalformedOutput
from astrbot_plugin_ltm.storing.tables import MemoryEvent

PARIS = {"type": "profile", "fact": "Alice lives in Paris", "fact_key": "alice_home_city", "confidence": 0.9,
         "importance": 0.6, "lines": [1]}
TEA = {"type": "preference", "fact": "Alice loves green tea", "fact_key": "alice_tea", "confidence": 0.9,
       "importance": 0.5, "lines": [1]}
CAT = {"type": "profile", "fact": "Alice的猫叫咪咪", "fact_key": "alice_猫的名字", "confidence": 0.9,
       "importance": 0.5, "lines": [3]}
KNOWN = [KnownFact("m-lyon", "alice_home_city", "Alice lives in Lyon")]  # shown to the model as K1


def _j(*facts: object) -> str:
    return json.dumps(list(facts), ensure_ascii=False)


def _without(fact: dict[str, object], *names: str) -> dict[str, object]:
    return {k: v for k, v in fact.items() if k not in names}


@dataclass(frozen=True)
class Kept:
    facts: tuple[str, ...]
    refused: tuple[str, ...] = ()  # a part of each rejection's reason
    updates: dict[str, str | None] = field(default_factory=dict)  # fact → the memory it updates
    keys: dict[str, str] = field(default_factory=dict)  # fact → its key


RETRY = "retry"

ANSWERS: list[tuple[str, str, Kept | str]] = [
    # -- the JSON, wrapped ----------------------------------------------------------------------
    ("a plain array", _j(PARIS, TEA), Kept(("Alice lives in Paris", "Alice loves green tea"))),
    ("a json code fence", "```json\n" + _j(PARIS) + "\n```", Kept(("Alice lives in Paris",))),
    ("a bare code fence", "```\n" + _j(PARIS) + "\n```", Kept(("Alice lives in Paris",))),
    ("prose around the array",
     "Here is what I found:\n" + _j(PARIS, TEA) + "\nLet me know if you need anything else!",
     Kept(("Alice lives in Paris", "Alice loves green tea"))),
    ("prose around a fence", "好的，提取结果如下：\n```json\n" + _j(CAT) + "\n```\n以上。", Kept(("Alice的猫叫咪咪",))),
    ("prose with a bracket before the array", "I found [2] facts in lines {1}: " + _j(PARIS, TEA),
     Kept(("Alice lives in Paris", "Alice loves green tea"))),
    ("a reasoning block first",
     "<think>Line [1] says she lives in Paris; {maybe} tea too.</think>\n" + _j(PARIS, TEA),
     Kept(("Alice lives in Paris", "Alice loves green tea"))),
    ("one object instead of a list", json.dumps(PARIS), Kept(("Alice lives in Paris",))),
    ("an object wrapping the list", json.dumps({"memories": [PARIS, TEA]}),
     Kept(("Alice lives in Paris", "Alice loves green tea"))),
    ("a facts object with a note", json.dumps({"facts": [TEA], "notes": ["nothing else"]}),
     Kept(("Alice loves green tea",))),
    ("a trailing comma", json.dumps([PARIS]).replace("}]", "},]"), Kept(("Alice lives in Paris",))),
    ("an empty list", "[]", Kept(())),
    ("an empty facts object", '{"facts": []}', Kept(())),
    ("an empty list after prose", "Nothing worth remembering: []", Kept(())),
    # -- fields missing, or spelled otherwise ----------------------------------------------------
    ("no importance", _j(_without(PARIS, "importance")), Kept(("Alice lives in Paris",))),
    ("no fact_key", _j(_without(TEA, "fact_key")), Kept(("Alice loves green tea",),
                                                        keys={"Alice loves green tea": "alice_loves_green_tea"})),
    ("no lines, one speaker", _j(_without(PARIS, "lines")), Kept(("Alice lives in Paris",))),
    ("no confidence", _j(_without(PARIS, "confidence"), TEA),
     Kept(("Alice loves green tea",), ("confidence None",))),
    ("no type", _j(_without(PARIS, "type"), TEA), Kept(("Alice loves green tea",), ("unknown type None",))),
    ("no fact", _j(_without(PARIS, "fact"), TEA), Kept(("Alice loves green tea",), ("missing or empty fact",))),
    ("camelCase names", _j({**_without(PARIS, "fact_key"), "factKey": "alice_home_city"}),
     Kept(("Alice lives in Paris",), keys={"Alice lives in Paris": "alice_home_city"})),
    ("other common names", _j({"category": "preference", "statement": "Alice loves green tea", "key": "alice_tea",
                               "confidence": 0.8, "line_numbers": [1]}), Kept(("Alice loves green tea",))),
    ("numbers as text", _j({**PARIS, "confidence": "0.85", "importance": "60%", "lines": ["1"]}),
     Kept(("Alice lives in Paris",))),
    ("one line number, not a list", _j({**TEA, "lines": 1}), Kept(("Alice loves green tea",))),
    ("a type in capitals", _j({**TEA, "type": "Preference"}), Kept(("Alice loves green tea",))),
    ("confidence in words", _j({**PARIS, "confidence": "high"}, TEA),
     Kept(("Alice loves green tea",), ("confidence 'high'",))),
    # -- Chinese ---------------------------------------------------------------------------------
    ("a Chinese key and value", _j(CAT), Kept(("Alice的猫叫咪咪",), keys={"Alice的猫叫咪咪": "alice_猫的名字"})),
    ("Chinese field names and type",
     _j({"类型": "偏好", "事实": "Alice喜欢绿茶", "键": "alice_绿茶", "置信度": 0.8, "重要性": 0.5, "行号": [1]}),
     Kept(("Alice喜欢绿茶",), keys={"Alice喜欢绿茶": "alice_绿茶"})),
    ("a Chinese plan type", _j({**CAT, "type": "计划", "fact": "Alice下周带猫去打疫苗", "fact_key": "alice_猫疫苗"}),
     Kept(("Alice下周带猫去打疫苗",))),
    # -- ids that are wrong or point nowhere -------------------------------------------------------
    ("a line past the batch", _j({**PARIS, "lines": [7]}, TEA),
     Kept(("Alice loves green tea",), ("do not refer to transcript lines",))),
    ("an event id for a line", _j({**PARIS, "lines": ["e1"]}, TEA),
     Kept(("Alice loves green tea",), ("do not refer to transcript lines",))),
    ("line zero", _j({**PARIS, "lines": [0]}), Kept((), ("do not refer to transcript lines",))),
    ("only the assistant's line", _j({**TEA, "lines": [2]}), Kept((), ("only the assistant said this",))),
    ("updates an id shown", _j({**PARIS, "updates": "K1"}),
     Kept(("Alice lives in Paris",), updates={"Alice lives in Paris": "m-lyon"})),
    ("updates in another spelling", _j({**PARIS, "updates": " [k1] "}),
     Kept(("Alice lives in Paris",), updates={"Alice lives in Paris": "m-lyon"})),
    ("updates by the known key", _j({**PARIS, "updates": "alice_home_city"}),
     Kept(("Alice lives in Paris",), updates={"Alice lives in Paris": "m-lyon"})),
    ("updates pointing nowhere", _j({**PARIS, "updates": "K9"}),
     Kept(("Alice lives in Paris",), updates={"Alice lives in Paris": None})),
    ("updates as a number", _j({**PARIS, "updates": 1}),
     Kept(("Alice lives in Paris",), updates={"Alice lives in Paris": None})),
    ("updates and same_as at once", _j({**PARIS, "updates": "K1", "same_as": "K1"}),
     Kept(("Alice lives in Paris",), updates={"Alice lives in Paris": None})),
    # -- cut off, empty, or not facts at all -----------------------------------------------------
    ("cut off after two facts", _j(PARIS, TEA, CAT)[:-40],
     Kept(("Alice lives in Paris", "Alice loves green tea"), ("cut off after 2",))),
    ("cut off in a fence", "```json\n" + _j(PARIS, TEA)[:-30], Kept(("Alice lives in Paris",), ("cut off after 1",))),
    ("a list with a stray string", _j(PARIS, "and she loves tea"),
     Kept(("Alice lives in Paris",), ("not an object",))),
    ("cut off in the first fact", _j(PARIS)[:30], RETRY),
    ("an empty answer", "", RETRY),
    ("only whitespace", " \n\t", RETRY),
    ("only a reasoning block", "<think>She lives in Paris [1].</think>", RETRY),
    ("a list of strings", _j("Alice lives in Paris", "Alice loves green tea"), RETRY),
    ("prose only", "Alice lives in Paris and loves green tea.", RETRY),
    ("an error object", json.dumps({"error": "rate limited, try again"}), RETRY),
    ("null", "null", RETRY),
    ("a number", "0", RETRY),
    ("a list of numbers", "[1, 3]", RETRY),
]


def _events() -> list[MemoryEvent]:
    said = [("user", "I live in Paris and I love green tea."), ("assistant", "Nice!"),
            ("user", "我的猫叫咪咪。"), ("assistant", "好可爱！")]
    return [MemoryEvent(event_id=f"e{n}", scope="user", scope_id="qq:alice", source_type="message",
                        source_role=role, content={"text": text}, sender_id="alice" if role == "user" else None,
                        sender_name="Alice" if role == "user" else None)
            for n, (role, text) in enumerate(said, start=1)]


def test_every_case_of_the_corpus_has_a_distinct_name():
    names = [name for name, _, _ in ANSWERS]
    assert len(names) == len(set(names)) and len(names) >= 40


@pytest.mark.parametrize(("answer", "expected"), [pytest.param(a, e, id=n) for n, a, e in ANSWERS])
async def test_each_answer_is_kept_or_cleanly_refused(answer: str, expected: Kept | str):
    async def complete(system: str, prompt: str) -> str:
        return answer

    extractor = LLMExtractor(complete, "fake")
    if expected == RETRY:
        with pytest.raises(MalformedOutput, match="malformed answer"):
            await extractor.extract(_events(), KNOWN)
        return
    assert isinstance(expected, Kept)
    result = await extractor.extract(_events(), KNOWN)
    assert tuple(c.fact for c in result.candidates) == expected.facts
    assert len(result.rejected) == len(expected.refused)
    for rejection, part in zip(result.rejected, expected.refused, strict=True):
        assert part in rejection.reason
    by_fact = {c.fact: c for c in result.candidates}
    for fact, memory_id in expected.updates.items():
        assert by_fact[fact].updates == memory_id
    for fact, key in expected.keys.items():
        assert by_fact[fact].fact_key == key
    for c in result.candidates:  # evidence is always a line of this batch that a person said
        assert c.event_ids and set(c.event_ids) <= {"e1", "e3"}


@pytest.mark.parametrize(("answer", "expected"), [pytest.param(a, e, id=n) for n, a, e in ANSWERS])
async def test_the_worker_writes_what_was_kept_or_leaves_the_events_for_a_later_retry(
        make_ltm, origin, answer: str, expected: Kept | str):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}, "extraction": {"backoff_seconds": 60}})
    alice = origin("alice")
    await ltm.record(alice, "I live in Paris and I love green tea.", "Nice!")
    await ltm.record(alice, "我的猫叫咪咪。", "好可爱！")
    ltm.gateway.reply(answer)
    (result,) = await ltm.engine.worker.drain()
    events = await ltm.events()
    if expected == RETRY:
        assert not result.ok and "malformed answer" in result.error
        assert {(e.extraction_status, e.attempts) for e in events} == {("pending", 1)}
        assert {as_utc(e.next_attempt_at) for e in events} == {ltm.clock() + timedelta(seconds=60)}
        assert await ltm.items() == []
        await ltm.engine.worker.drain()  # not due yet: the model is not asked again at once
        assert len(ltm.gateway.calls) == 1
        return
    assert isinstance(expected, Kept)
    assert result.ok and {e.extraction_status for e in events} == {"done"}
    assert sorted(i.fact for i in await ltm.items()) == sorted(expected.facts)
    refused = [a for a in await ltm.audit() if a.action == "policy" and a.detail.get("decision") == "rejected"]
    assert len(refused) == len(expected.refused)  # each refusal is audited with its reason and the raw answer
    assert all(r.detail.get("raw") for r in refused)
