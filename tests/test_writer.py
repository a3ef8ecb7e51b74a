"""The write pipeline through the engine: write modes, every write-policy
field, dedup & merge, contradictions, tombstones and the audit trail."""

from __future__ import annotations

import functools

import pytest
from sqlalchemy import select

from astrbot_plugin_ltm.learning.candidates import Candidate
from astrbot_plugin_ltm.learning.policy import confidence
from astrbot_plugin_ltm.operating.queries import ItemFilter
from astrbot_plugin_ltm.scope import Scope
from astrbot_plugin_ltm.storing.tables import MemoryAudit, MemoryEvent, MemoryEvidence, MemoryItem

OPERATOR = "operator:root"


def tea(**kw):
    return {"fact": "Alice loves green tea", "fact_key": "alice_favourite_drink", **kw}


async def actions(ltm, action=None):
    rows = await ltm.audit()
    return [r for r in rows if action is None or r.action == action]


# -- write modes ----------------------------------------------------------


async def test_shadow_mode_stores_shadow_and_never_injects(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "shadow"}})
    a = origin("alice")
    await ltm.turn(a, "I love green tea", "Noted.", tea(confidence=1.0))
    item = await ltm.item()
    assert item.status == "shadow" and not item.awaiting_approval
    assert not await ltm.block(a, "green tea")
    (create,) = await actions(ltm, "create")
    assert create.memory_id == item.memory_id and "shadow" in create.reason

    # More evidence does not promote it either: shadow mode never injects.
    await ltm.turn(a, "green tea is the best", "Sure.", tea(confidence=1.0))
    item = await ltm.item()
    assert item.evidence_count == 2 and item.status == "shadow"
    assert not await ltm.block(a, "green tea")


async def test_shadow_mode_applies_to_explicit_requests_too(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "shadow"}})
    a = origin("alice")
    outcome = await ltm.engine.remember(a, "I like green tea")
    assert outcome.status == "shadow"
    assert (await ltm.item()).status == "shadow"
    assert not await ltm.block(a, "green tea")


async def test_auto_mode_activates_when_thresholds_pass(ltm, origin):
    a = origin("alice")
    await ltm.turn(a, "I love green tea", "Noted.", tea(confidence=0.9))  # 0.9 × 0.8 = 0.72 ≥ 0.6
    item = await ltm.item()
    assert item.status == "active" and item.confidence == pytest.approx(0.72)
    block = await ltm.block(a, "what should I drink")
    assert [s.memory_id for s in block.items] == [item.memory_id]
    assert "Alice loves green tea" in block.text
    (create,) = await actions(ltm, "create")
    assert create.reason == "mode auto: thresholds met"


async def test_auto_mode_keeps_low_confidence_in_shadow(ltm, origin):
    a = origin("alice")
    await ltm.turn(a, "I might like green tea", "OK.", tea(confidence=0.7))  # 0.56 < 0.6
    item = await ltm.item()
    assert item.status == "shadow" and item.confidence == pytest.approx(0.56)
    block = await ltm.block(a, "green tea")
    # The unsure memory is never injected; the turn it was made of reads as said,
    # as any turn no memory stands for does in mode auto (docs/decisions.md#d81).
    assert block.items == [] and [s.type for s in block.events] == ["event"]
    assert "Alice: I might like green tea" in block.text and "confidence" not in block.text
    (create,) = await actions(ltm, "create")
    assert "min_confidence" in create.reason


async def test_auto_mode_min_confidence_is_configurable(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto", "min_confidence": 0.5}})
    a = origin("alice")
    await ltm.turn(a, "I might like green tea", "OK.", tea(confidence=0.7))  # 0.56 ≥ 0.5
    assert (await ltm.item()).status == "active"


async def test_auto_mode_min_evidence_count(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto", "min_evidence_count": 2}})
    a = origin("alice")
    await ltm.turn(a, "I love green tea", "Noted.", tea(confidence=0.9))
    item = await ltm.item()
    assert item.status == "shadow"
    assert "min_evidence_count" in (await actions(ltm, "create"))[0].reason
    assert (await ltm.block(a, "green tea")).items == []  # the turn alone may read as said (d81)

    # A second, independent confirmation meets the threshold.
    await ltm.turn(a, "Green tea again today", "Enjoy.", tea(confidence=0.9))
    item = await ltm.item()
    assert item.evidence_count == 2 and item.status == "active"
    (status,) = await actions(ltm, "status")
    assert (status.detail["old"], status.detail["new"]) == ("shadow", "active") and status.reason
    assert [s.memory_id for s in (await ltm.block(a, "green tea")).items] == [item.memory_id]


async def test_manual_mode_queues_until_approved(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "manual"}})
    a = origin("alice")
    await ltm.turn(a, "I love green tea", "Noted.", tea(confidence=1.0))
    item = await ltm.item()
    assert item.status == "shadow" and item.awaiting_approval
    assert "approval" in (await actions(ltm, "create"))[0].reason
    assert not await ltm.block(a, "green tea")

    # More evidence does not release it from the queue.
    await ltm.turn(a, "Green tea!", "OK.", tea(confidence=1.0))
    item = await ltm.item()
    assert item.awaiting_approval and item.status == "shadow"
    assert not await ltm.block(a, "green tea")

    await ltm.engine.admin.review([item.memory_id], "approve", OPERATOR)
    item = await ltm.item()
    assert item.status == "active" and not item.awaiting_approval
    block = await ltm.block(a, "green tea")
    assert [s.memory_id for s in block.items] == [item.memory_id]
    (approve,) = await actions(ltm, "approve")
    assert approve.actor == OPERATOR and approve.memory_id == item.memory_id and approve.reason


async def test_manual_mode_explicit_requests_also_wait_for_approval(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "manual"}})
    a = origin("alice")
    await ltm.record(a, "Remember that I like green tea", "I will.")
    item = await ltm.item()
    assert item.awaiting_approval and item.status == "shadow"
    assert not await ltm.block(a, "green tea")


# -- every write-policy field ---------------------------------------------


async def test_writes_off_for_every_scope_records_but_never_extracts(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto", "disabled_scopes": ["*"]}})
    a = origin("alice")
    await ltm.turn(a, "I love green tea", "Noted.", tea())
    assert await ltm.items() == [] and ltm.gateway.calls == []
    # recorded, and never retried: no model call is paid for
    assert {e.extraction_status for e in await ltm.events()} == {"skipped"}


async def test_policy_allowed_types(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto", "allowed_types": ["profile"]}})
    a = origin("alice")
    await ltm.turn(
        a, "I'm Alice from Paris and I love tea", "Hi Alice.",
        {"type": "profile", "fact": "Alice lives in Paris"},
        {"type": "preference", "fact": "Alice loves tea"},
    )
    assert [i.fact for i in await ltm.items()] == ["Alice lives in Paris"]
    (drop,) = await actions(ltm, "policy")
    assert drop.detail["decision"] == "dropped" and "allowed_types" in drop.reason
    assert drop.detail["fact"] == "Alice loves tea"


async def test_policy_max_writes_per_session(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto", "max_writes_per_session": 2}})
    a = origin("alice")
    facts = [{"fact": f"Alice likes fruit number {n}", "fact_key": f"fruit_{n}"} for n in range(3)]
    await ltm.turn(a, "I like many fruits", "OK.", *facts)
    assert len(await ltm.items()) == 2
    (drop,) = await actions(ltm, "policy")
    assert "max_writes_per_session (2)" in drop.reason and drop.session_id == a.unified_msg_origin

    # A later batch of the same conversation is limited too ...
    await ltm.turn(a, "and kiwis", "OK.", {"fact": "Alice likes kiwis", "fact_key": "kiwi"})
    assert len(await ltm.items()) == 2
    # ... but a new conversation of the same person is not.
    other_conversation = origin("alice", umo="qq:FriendMessage:alice:second")
    await ltm.turn(other_conversation, "I like kiwis", "OK.", {"fact": "Alice likes kiwis", "fact_key": "kiwi"})
    assert len(await ltm.items()) == 3
    # Confirming an existing item is not a new write and is never limited.
    await ltm.turn(a, "I like fruit 0", "OK.", {"fact": "Alice likes fruit number 0", "fact_key": "fruit_0"})
    assert (await ltm.item(MemoryItem.fact_key == "fruit_0")).evidence_count == 2


async def test_a_long_lived_chat_keeps_learning_over_days(ltm, origin):
    # A QQ/Telegram private chat keeps one unified_msg_origin for ever, so
    # max_writes_per_session (default 10) must not become a lifetime cap of
    # ten memories per person: max_items_per_scope (200) could never be
    # reached and the bot would stop learning about its most loyal users.
    a = origin("alice")
    for day in range(12):
        await ltm.turn(a, f"news of day {day}", "OK.",
                       {"fact": f"Alice did thing number {day} today", "fact_key": f"thing_{day}"})
        ltm.clock.advance(days=1)
    assert len(await ltm.items()) == 12, [r.reason for r in await actions(ltm, "policy")]


async def test_policy_max_writes_per_hour(make_ltm, origin):
    ltm = await make_ltm(
        {"write_policy": {"mode": "auto", "max_writes_per_hour": 2, "max_writes_per_session": 1000}}
    )
    a = origin("alice")
    facts = [{"fact": f"Alice likes fruit number {n}", "fact_key": f"fruit_{n}"} for n in range(3)]
    await ltm.turn(a, "I like many fruits", "OK.", *facts)
    assert len(await ltm.items()) == 2
    assert "max_writes_per_hour (2)" in (await actions(ltm, "policy"))[0].reason

    ltm.clock.advance(minutes=30)
    await ltm.turn(a, "kiwis", "OK.", {"fact": "Alice likes kiwis", "fact_key": "kiwi"})
    assert len(await ltm.items()) == 2

    ltm.clock.advance(minutes=31)  # the first two writes are now more than an hour old
    await ltm.turn(a, "kiwis", "OK.", {"fact": "Alice likes kiwis", "fact_key": "kiwi"})
    assert len(await ltm.items()) == 3


async def test_policy_max_writes_per_hour_is_per_scope(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto", "max_writes_per_hour": 1}})
    await ltm.turn(origin("alice"), "tea", "OK.", {"fact": "Alice likes tea"})
    await ltm.turn(origin("bob"), "coffee", "OK.", {"fact": "Bob likes coffee"})
    assert sorted(i.fact for i in await ltm.items()) == ["Alice likes tea", "Bob likes coffee"]


async def test_policy_max_items_per_scope_evicts_lowest_importance_oldest(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto", "max_items_per_scope": 3}})
    a = origin("alice")
    await ltm.turn(a, "one", "OK.", {"fact": "Alice is a nurse", "fact_key": "job", "importance": 0.9})
    ltm.clock.advance(minutes=1)
    await ltm.turn(a, "two", "OK.", {"fact": "Alice had soup", "fact_key": "soup", "importance": 0.2})
    ltm.clock.advance(minutes=1)
    await ltm.turn(a, "three", "OK.", {"fact": "Alice had bread", "fact_key": "bread", "importance": 0.2})
    soup = await ltm.item(MemoryItem.fact_key == "soup")
    ltm.clock.advance(minutes=1)
    await ltm.turn(a, "four", "OK.", {"fact": "Alice owns a cat", "fact_key": "cat", "importance": 0.5})

    keys = sorted(i.fact_key for i in await ltm.items())
    assert keys == ["bread", "cat", "job"]  # soup: lowest importance, and older than bread
    (evict,) = await actions(ltm, "evict")
    assert evict.memory_id == soup.memory_id and "max_items_per_scope (3)" in evict.reason
    assert await ltm.evidence(MemoryEvidence.memory_id == soup.memory_id) == []

    # another scope's items are not counted
    await ltm.turn(origin("bob"), "hi", "OK.", {"fact": "Bob is a pilot", "fact_key": "job"})
    assert len(await ltm.items()) == 4 and len(await actions(ltm, "evict")) == 1


async def test_policy_require_approval_types(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto", "require_approval_types": ["constraint"]}})
    a = origin("alice")
    await ltm.turn(
        a, "Never use sudo. I like tea.", "OK.",
        {"type": "constraint", "fact": "Never suggest sudo to Alice", "fact_key": "no_sudo"},
        {"type": "preference", "fact": "Alice likes tea", "fact_key": "tea"},
    )
    constraint = await ltm.item(MemoryItem.fact_key == "no_sudo")
    preference = await ltm.item(MemoryItem.fact_key == "tea")
    assert constraint.awaiting_approval and constraint.status == "shadow"
    assert preference.status == "active" and not preference.awaiting_approval
    block = await ltm.block(a, "sudo tea")
    assert [s.memory_id for s in block.items] == [preference.memory_id]
    create = {r.memory_id: r for r in await actions(ltm, "create")}
    assert "requires approval" in create[constraint.memory_id].reason
    # the approval queue lists it for operators
    pending, total = await ltm.engine.admin.list_items(ItemFilter(status="pending"))
    assert total == 1 and pending[0].memory_id == constraint.memory_id


async def test_every_decision_is_audited_with_a_reason(make_ltm, origin):
    ltm = await make_ltm(
        {"write_policy": {"mode": "auto", "allowed_types": ["profile", "preference"], "max_writes_per_session": 3}}
    )
    a = origin("alice")
    outcomes = []
    _, results = await ltm.turn(
        a, "lots of facts", "OK.",
        {"type": "profile", "fact": "Alice lives in Paris", "fact_key": "city"},
        {"type": "preference", "fact": "Alice likes tea", "fact_key": "tea", "confidence": 0.5},
        {"type": "episode", "fact": "Alice went hiking", "fact_key": "hike"},
        {"type": "preference", "fact": "Alice likes jazz", "fact_key": "jazz"},
        {"type": "preference", "fact": "Alice likes cats", "fact_key": "cats"},
        {"type": "banana", "fact": "Alice is a banana"},
    )
    outcomes += [o for r in results for o in r.outcomes]
    # (a new conversation: the first one has used up its session cap)
    later = origin("alice", umo="qq:FriendMessage:alice:later")
    _, results = await ltm.turn(later, "Paris!", "OK.", {"type": "profile", "fact": "Alice lives in Paris",
                                                         "fact_key": "city"})
    outcomes += [o for r in results for o in r.outcomes]
    _, results = await ltm.turn(later, "London!", "OK.", {"type": "profile", "fact": "Alice lives in London",
                                                          "fact_key": "city"})
    outcomes += [o for r in results for o in r.outcomes]

    rows = await ltm.audit()
    assert all(r.reason.strip() for r in rows), [(r.action, r.reason) for r in rows if not r.reason.strip()]
    assert all(r.actor for r in rows)
    by_action = {}
    for r in rows:
        by_action.setdefault(r.action, []).append(r)
    assert len(by_action["create"]) == 3  # city, tea, jazz (cats hits the session cap)
    assert len(by_action["confirm"]) == 1 and len(by_action["supersede"]) == 1
    decisions = sorted(r.detail.get("decision") for r in by_action["policy"])
    assert decisions == ["dropped", "dropped", "rejected"]  # episode type, session cap, unknown type
    # one audit row per outcome of the writer (created/confirmed/superseded/dropped)
    past = {"created": "create", "confirmed": "confirm", "superseded": "supersede", "dropped": "policy"}
    for outcome in outcomes:
        matching = [r for r in by_action[past[outcome.action]]
                    if outcome.memory_id is None or r.memory_id == outcome.memory_id]
        assert matching and all(r.reason for r in matching)
    # every item has the audit row of its creation (a new value: its supersede)
    for item in await ltm.items():
        assert any(r.memory_id == item.memory_id for r in by_action["create"] + by_action["supersede"])


# -- dedup & merge ---------------------------------------------------------


async def test_exact_fact_key_match_adds_evidence(ltm, origin):
    a = origin("alice")
    first, _ = await ltm.turn(a, "I love green tea", "Noted.", tea(confidence=0.8))  # weighted 0.64
    second, _ = await ltm.turn(a, "Green tea is great", "Yes.", tea(confidence=0.6))  # weighted 0.48
    item = await ltm.item()
    assert item.evidence_count == 2
    assert item.confidence == pytest.approx(round((0.64 + 0.48) / 2 * 1.1, 4))  # mean × repetition bonus
    links = await ltm.evidence(MemoryEvidence.memory_id == item.memory_id)
    assert [e.event_id for e in links] == [first[0].event_id, second[0].event_id]
    assert all(e.extraction_method == "llm_extract" for e in links)
    assert links[1].extraction_meta["confidence"] == {"base": 0.6, "source": "llm_extract", "weighted": 0.48}
    assert links[1].extraction_meta["model"] == "fake:model"
    (confirm,) = await actions(ltm, "confirm")
    assert confirm.memory_id == item.memory_id and confirm.detail["evidence_count"] == 2

    third, _ = await ltm.turn(a, "Tea time", "Enjoy.", tea(confidence=0.9))  # weighted 0.72
    item = await ltm.item()
    assert item.evidence_count == 3
    assert item.confidence == pytest.approx(round((0.64 + 0.48 + 0.72) / 3 * 1.2, 4))


async def test_fact_key_match_is_normalised(ltm, origin):
    a = origin("alice")
    await ltm.turn(a, "tea", "OK.", tea(fact_key="Alice Favourite-Drink"))
    await ltm.turn(a, "tea", "OK.", tea(fact_key="alice_favourite_drink!"))
    item = await ltm.item()
    assert item.fact_key == "alice_favourite_drink" and item.evidence_count == 2


async def test_re_extraction_of_linked_events_adds_no_evidence(ltm, origin):
    a = origin("alice")
    events, _ = await ltm.turn(a, "I love green tea", "Noted.", tea(confidence=0.8))
    before = await ltm.item()
    # An operator re-queues the same events; the model finds the same fact again.
    await ltm.execute("UPDATE ltm_events SET extraction_status = 'pending'")
    ltm.gateway.facts(tea(confidence=1.0))
    await ltm.engine.worker.drain()
    assert len(ltm.gateway.calls) == 2
    item = await ltm.item()
    assert item.evidence_count == 1 and item.confidence == before.confidence
    assert len(await ltm.evidence()) == 1
    assert await actions(ltm, "confirm") == []

    # The same through the writer directly.
    candidate = Candidate(type="preference", fact="Alice loves green tea", fact_key="alice_favourite_drink",
                          confidence=1.0, importance=0.5, event_ids=[events[0].event_id])
    async with ltm.engine.db.write() as session:
        (outcome,) = await ltm.engine.writer.apply(
            session, Scope("user", "qq:alice"), [candidate], method="llm_extract", actor="test"
        )
    assert outcome.action == "confirmed" and "already linked" in outcome.reason
    assert (await ltm.item()).evidence_count == 1


async def test_a_new_value_supersedes_and_the_old_one_stays_as_history(ltm, origin):
    a = origin("alice")
    paris, _ = await ltm.turn(a, "I live in Paris", "Nice.",
                              {"type": "profile", "fact": "Alice lives in Paris", "fact_key": "alice_home_city"})
    old = await ltm.item()
    assert old.status == "active" and old.valid_from == paris[0].created_at
    london, _ = await ltm.turn(a, "I moved to London", "Nice.",
                               {"type": "profile", "fact": "Alice lives in London", "fact_key": "alice_home_city",
                                "confidence": 0.9})
    new = await ltm.item(MemoryItem.status != "superseded")
    old = await ltm.item(MemoryItem.status == "superseded")
    assert new.memory_id != old.memory_id and new.fact == "Alice lives in London"
    # the old value is closed by the new one, and each names the other
    assert (old.superseded_by, new.supersedes) == (new.memory_id, old.memory_id)
    assert old.valid_to is not None and new.valid_from == london[0].created_at and new.valid_to is None
    assert old.fact == "Alice lives in Paris" and old.fact_key == new.fact_key
    # a newer statement is as credible as the first: not penalised, so it goes live in auto
    assert new.confidence == pytest.approx(confidence(0.9, "llm_extract")) and new.status == "active"
    (sup,) = await actions(ltm, "supersede")
    assert sup.memory_id == new.memory_id and sup.detail["previous_fact"] == "Alice lives in Paris"
    assert {e.event_id for e in await ltm.evidence(MemoryEvidence.memory_id == old.memory_id)} == {paris[0].event_id}
    assert {e.event_id for e in await ltm.evidence(MemoryEvidence.memory_id == new.memory_id)} == {london[0].event_id}
    # the block shows the current value only, and no turn of the old one
    block = await ltm.block(a, "where does Alice live Paris London")
    assert "London" in block.text and "Paris" not in block.text


async def test_a_negated_fact_supersedes(ltm, origin):
    a = origin("alice")
    await ltm.turn(a, "I like cats", "OK.", {"fact": "Alice likes cats", "fact_key": "alice_cats", "confidence": 1.0})
    await ltm.turn(a, "I don't like cats anymore", "OK.",
                   {"fact": "Alice doesn't like cats", "fact_key": "alice_cats", "confidence": 1.0})
    item = await ltm.item(MemoryItem.status != "superseded")
    assert item.fact == "Alice doesn't like cats"
    assert item.confidence == pytest.approx(0.8)  # 1.0 × 0.8
    assert len(await actions(ltm, "supersede")) == 1


async def test_contradicting_facts_from_the_same_line_in_one_batch(ltm, origin):
    # "I used to live in Paris, now I live in London": both facts cite line 1.
    a = origin("alice")
    await ltm.record(a, "I used to live in Paris, now I live in London", "OK.")
    ltm.gateway.facts({"type": "profile", "fact": "Alice lives in Paris", "fact_key": "city"},
                      {"type": "profile", "fact": "Alice lives in London", "fact_key": "city"})
    (result,) = await ltm.engine.worker.drain()
    assert result.ok, result.error
    item = await ltm.item(MemoryItem.status != "superseded")
    assert item.fact == "Alice lives in London"
    assert len(await actions(ltm, "supersede")) == 1
    assert {e.extraction_status for e in await ltm.events()} == {"done"}
    # the line backs the current value only: it moved with the supersede
    links = await ltm.evidence()
    assert [link.memory_id for link in links] == [item.memory_id]


async def test_restating_an_item_is_not_a_contradiction(ltm, origin):
    a = origin("alice")
    await ltm.turn(a, "I live in Paris", "Nice.", {"type": "profile", "fact": "Alice lives in Paris",
                                                   "fact_key": "city"})
    await ltm.turn(a, "Paris, France", "Nice.",
                   {"type": "profile", "fact": "Alice lives in Paris, France", "fact_key": "city"})
    item = await ltm.item()
    assert item.evidence_count == 2 and await actions(ltm, "supersede") == []


class FakeMatcher:
    """writer.matcher stand-in: 'semantically equal' means the test says so."""

    def __init__(self, ltm, same_as: dict[str, str]) -> None:
        self.db = ltm.engine.db
        self.same_as = same_as  # new fact -> fact of the existing item it means
        self.calls: list[tuple[Scope, str]] = []

    async def find(self, scope, fact):
        self.calls.append((scope, fact))
        target = self.same_as.get(fact)
        if target is None:
            return None
        async with self.db.read() as session:
            return (await session.execute(select(MemoryItem.id).where(
                MemoryItem.scope == scope.kind, MemoryItem.scope_id == scope.id, MemoryItem.fact == target
            ))).scalar_one_or_none()


async def test_semantic_match_merges_into_the_existing_item(ltm, origin):
    a = origin("alice")
    matcher = FakeMatcher(ltm, {"Alice really enjoys drinking green tea": "Alice loves green tea"})
    ltm.engine.writer.matcher = matcher
    first, _ = await ltm.turn(a, "I love green tea", "OK.", tea(confidence=0.8))  # 0.64
    assert len(matcher.calls) == 1  # no key match: the matcher is asked, finds nothing
    second, _ = await ltm.turn(a, "green tea is my thing", "OK.",
                               {"fact": "Alice really enjoys drinking green tea", "fact_key": "alice_tea_habit",
                                "confidence": 1.0})  # 0.8
    item = await ltm.item()
    assert item.evidence_count == 2
    assert item.fact == "Alice really enjoys drinking green tea"  # better-supported wording wins
    assert item.fact_key == "alice_favourite_drink"  # the item keeps its key
    assert item.confidence == pytest.approx(round((0.64 + 0.8) / 2 * 1.1, 4))
    assert {e.event_id for e in await ltm.evidence()} == {first[0].event_id, second[0].event_id}
    (merge,) = await actions(ltm, "merge")
    assert merge.memory_id == item.memory_id and merge.detail["previous_fact"] == "Alice loves green tea"
    assert matcher.calls[-1] == (Scope("user", "qq:alice"), "Alice really enjoys drinking green tea")


async def test_the_matcher_is_asked_before_the_write_and_an_exact_key_match_comes_first(ltm, origin):
    a = origin("alice")
    matcher = FakeMatcher(ltm, {})
    ltm.engine.writer.matcher = matcher
    await ltm.turn(a, "I love green tea", "OK.", tea())
    await ltm.turn(a, "green tea", "OK.", tea())
    # asked for every candidate on the event loop, before its batch goes to the writer thread (decisions.md#d171)
    assert len(matcher.calls) == 2 and (await ltm.item()).evidence_count == 2


async def test_restating_the_original_wording_after_a_merge_confirms(ltm, origin):
    # The matcher judged the two wordings to mean the same; when the first
    # wording comes again under the item's own key it is a confirmation,
    # not a contradiction that halves the confidence and resets the evidence.
    a = origin("alice")
    ltm.engine.writer.matcher = FakeMatcher(ltm, {"Alice really enjoys drinking green tea": "Alice loves green tea"})
    await ltm.turn(a, "I love green tea", "OK.", tea(confidence=0.8))
    await ltm.turn(a, "green tea is my thing", "OK.",
                   {"fact": "Alice really enjoys drinking green tea", "fact_key": "alice_tea_habit", "confidence": 1.0})
    await ltm.turn(a, "tea", "OK.", tea(confidence=0.8))
    item = await ltm.item()
    assert await actions(ltm, "supersede") == []
    assert item.evidence_count == 3 and item.status == "active"


async def test_paraphrase_under_the_same_key_confirms(ltm, origin):
    # Design §3.3: an exact key match adds evidence. Models reword facts all
    # the time; only a real contradiction (Paris/London) may supersede.
    a = origin("alice")
    await ltm.turn(a, "I love green tea", "OK.", tea(fact="Alice loves green tea"))
    await ltm.turn(a, "green tea is my favourite", "OK.", tea(fact="Alice's favourite drink is green tea"))
    item = await ltm.item()
    assert await actions(ltm, "supersede") == []
    assert item.evidence_count == 2 and item.status == "active"


async def test_semantic_match_with_weaker_support_keeps_the_wording(ltm, origin):
    a = origin("alice")
    ltm.engine.writer.matcher = FakeMatcher(ltm, {"Alice kind of likes green tea": "Alice loves green tea"})
    await ltm.turn(a, "I love green tea", "OK.", tea(confidence=1.0))  # 0.8
    await ltm.turn(a, "tea is ok", "OK.", {"fact": "Alice kind of likes green tea", "fact_key": "x", "confidence": 0.5})
    item = await ltm.item()
    assert item.fact == "Alice loves green tea" and item.evidence_count == 2
    assert len(await actions(ltm, "merge")) == 1


# -- tombstones -----------------------------------------------------------


async def test_deleted_fact_is_not_recreated_by_extraction(ltm, origin):
    a = origin("alice")
    await ltm.turn(a, "I live in Paris", "OK.", {"type": "profile", "fact": "Alice lives in Paris",
                                                 "fact_key": "alice_home_city"})
    item = await ltm.item()
    await ltm.engine.admin.delete(item.memory_id, OPERATOR, "wrong")
    assert await ltm.items() == []
    (tomb,) = await ltm.tombstones()
    assert (tomb.fact_key, tomb.actor) == ("alice_home_city", OPERATOR)
    assert (await actions(ltm, "delete"))[0].memory_id == item.memory_id

    await ltm.turn(a, "Paris is home", "OK.",
                   {"type": "profile", "fact": "Alice lives in Paris", "fact_key": "alice_home_city"},
                   {"type": "profile", "fact": "Alice's home is Paris", "fact_key": "Alice home city"})
    assert await ltm.items() == []
    drops = await actions(ltm, "policy")
    assert len(drops) == 2 and all("tombstoned" in d.reason for d in drops)


async def test_rejected_fact_is_not_recreated_by_extraction(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "manual"}})
    a = origin("alice")
    await ltm.turn(a, "I hate tea", "OK.", tea())
    item = await ltm.item()
    await ltm.engine.admin.review([item.memory_id], "reject", OPERATOR, "not true")
    assert await ltm.items() == []
    assert (await actions(ltm, "reject"))[0].reason == "not true"
    await ltm.turn(a, "tea tea", "OK.", tea())
    assert await ltm.items() == []
    assert "tombstoned" in (await actions(ltm, "policy"))[0].reason


async def test_explicit_request_revives_a_tombstoned_fact(ltm, origin):
    a = origin("alice")
    await ltm.engine.remember(a, "I like green tea")
    item = await ltm.item()
    key = item.fact_key
    await ltm.engine.admin.delete(item.memory_id, "user:alice", "forgotten")
    assert await ltm.items() == []

    # extraction may not bring it back ...
    await ltm.turn(a, "I like green tea", "OK.", {"fact": item.fact, "fact_key": key})
    assert await ltm.items() == []

    # ... but the user saying it explicitly does
    await ltm.record(a, "Remember that I like green tea", "Will do.")
    revived = await ltm.item()
    assert revived.fact_key == key and revived.status == "active"
    assert await ltm.tombstones() == []
    (revive,) = await actions(ltm, "revive")
    assert revive.detail["fact_key"] == key and revive.actor == "user:alice" and revive.reason
    assert await ltm.block(a, "green tea")


async def test_tombstones_are_per_scope(ltm, origin):
    await ltm.turn(origin("alice"), "tea", "OK.", tea())
    await ltm.engine.admin.delete((await ltm.item()).memory_id, OPERATOR)
    await ltm.turn(origin("bob"), "tea", "OK.", {"fact": "Bob loves green tea", "fact_key": "alice_favourite_drink"})
    assert [i.scope_id for i in await ltm.items()] == ["qq:bob"]


async def test_evidence_links_point_at_real_events(ltm, origin):
    a = origin("alice")
    await ltm.turn(a, "I love green tea", "Noted.", tea())
    events = {e.event_id: e for e in await ltm.events()}
    for link in await ltm.evidence():
        assert link.event_id in events
        assert events[link.event_id].source_role == "user"
    async with ltm.engine.db.read() as session:
        orphans = (
            await session.execute(
                select(MemoryEvidence).where(~MemoryEvidence.memory_id.in_(select(MemoryItem.memory_id)))
            )
        ).scalars().all()
    assert orphans == []
    assert all(r.memory_id for r in await ltm.rows(MemoryAudit, MemoryAudit.action == "create"))
    assert len(await ltm.rows(MemoryEvent)) == 2


# -- a batch's rows held to its end (docs/decisions.md#d143, #d144) ------------------------


async def test_a_batch_writes_the_same_rows_as_the_same_candidates_written_one_write_at_a_time(
        make_ltm, origin):
    from astrbot_plugin_ltm.enums import Method
    from astrbot_plugin_ltm.storing.tables import GateLogEntry, MemoryTombstone

    def candidates(events):
        said = [e.event_id for e in events if e.source_role == "user"]
        return [
            Candidate(type="profile", fact="Alice lives in Paris", fact_key="alice_city", confidence=0.9,
                      importance=0.5, event_ids=[said[0]]),
            Candidate(type="profile", fact="Alice lives in Paris", fact_key="alice_city", confidence=0.9,
                      importance=0.5, event_ids=[said[1]]),  # confirms: reads the links the batch holds
            Candidate(type="preference", fact="Alice loves green tea", fact_key="alice_drink", confidence=0.9,
                      importance=0.5, event_ids=[said[1]]),
            Candidate(type="profile", fact="Alice lives in London", fact_key="alice_city", confidence=0.9,
                      importance=0.5, event_ids=[said[2]]),  # supersedes: moves no link, closes Paris
            Candidate(type="profile", fact="Alice lives in Lyon", fact_key="forgotten_city", confidence=0.9,
                      importance=0.5, event_ids=[said[2]]),  # tombstoned: dropped
        ]

    written = []
    for how in ("write", "batch"):
        ltm = await make_ltm({"write_policy": {"mode": "auto"}}, name=how)
        a = origin("alice")
        events = [e for text in ("I live in Paris", "Paris, and I love green tea", "I moved to London")
                  for e in await ltm.record(a, text)]
        async with ltm.engine.db.write() as session:
            session.add(MemoryTombstone(scope="user", scope_id="qq:alice", fact_key="forgotten_city", fact="x"))
        apply = functools.partial(ltm.engine.writer.apply, scope=Scope("user", "qq:alice"),
                                  candidates=candidates(events), method=Method.LLM_EXTRACT, actor="system:extractor")
        if how == "write":
            async with ltm.engine.db.write() as session:
                outcomes = await apply(session)
        else:
            outcomes = await ltm.engine.db.write_batch(apply)
        fact_of = {i.memory_id: i.fact for i in await ltm.items()}
        said = {e.event_id: n for n, e in enumerate(events)}  # the engines' event ids differ
        written.append((
            [(o.action, o.status, o.fact) for o in outcomes],
            [(i.id, i.fact, i.fact_key, i.status, i.evidence_count, i.valid_from) for i in await ltm.items()],
            [(e.id, fact_of[e.memory_id], said[e.event_id], e.extraction_meta) for e in await ltm.evidence()],
            [(r.id, r.action, fact_of.get(r.memory_id or ""), r.reason, r.detail.get("fact"))
             for r in await ltm.audit() if r.action != "config"],
            [(g.id, g.action, g.fact_key, g.status, g.memory_id is None) for g in await ltm.rows(GateLogEntry)],
        ))
    by_write, by_batch = written
    assert by_batch == by_write
    outcomes, items, links, audit, gate = by_batch
    assert [o[0] for o in outcomes] == ["created", "confirmed", "created", "superseded", "dropped"]
    assert len(links) == 4 and len(gate) == 4 and [r[1] for r in audit][-1] == "policy"
