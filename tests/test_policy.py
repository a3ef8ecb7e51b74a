"""The confidence formula and the write gate (learning/policy.py) as pure functions."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from astrbot_plugin_ltm.config import ReadPolicy, WritePolicy
from astrbot_plugin_ltm.enums import MEMORY_TYPES, Status
from astrbot_plugin_ltm.learning.policy import (
    SOURCE_QUALITY,
    GateInput,
    confidence,
    gate,
)

# -- confidence -------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "weight"), [("user_explicit", 1.0), ("llm_extract", 0.8), ("tool_result", 0.7)]
)
def test_source_quality_weights(source, weight):
    assert SOURCE_QUALITY[source] == weight
    assert confidence(1.0, source) == pytest.approx(weight)
    assert confidence(0.5, source) == pytest.approx(0.5 * weight)


def test_unknown_source_is_weighted_like_an_extraction_not_trusted_fully():
    assert confidence(1.0, "something_else") == pytest.approx(0.8)


@pytest.mark.parametrize(("n", "bonus"), [(1, 1.0), (2, 1.1), (3, 1.2), (5, 1.4)])
def test_repetition_bonus_adds_ten_percent_per_further_confirmation(n, bonus):
    assert confidence(0.5, "llm_extract", evidence_count=n) == pytest.approx(0.5 * 0.8 * bonus)


def test_zero_or_negative_evidence_count_gives_no_bonus_and_no_malus():
    assert confidence(0.5, "llm_extract", evidence_count=0) == pytest.approx(0.4)


def test_confidence_is_capped_at_one():
    assert confidence(1.0, "user_explicit", evidence_count=10) == 1.0
    assert confidence(0.95, "llm_extract", evidence_count=4) == pytest.approx(0.988)  # below the cap
    assert confidence(0.95, "llm_extract", evidence_count=6) == 1.0  # 0.95*0.8*1.5 = 1.14 → capped


@given(
    base=st.floats(0.0, 1.0),
    source=st.sampled_from(sorted(SOURCE_QUALITY)),
    n=st.integers(0, 1000),
)
def test_confidence_always_in_unit_interval_and_monotone(base, source, n):
    value = confidence(base, source, n)
    assert 0.0 <= value <= 1.0
    # more evidence never lowers it
    assert confidence(base, source, n + 1) >= value


# -- the gate --------------------------------------------------------------


def inp(**kw) -> GateInput:
    values: dict[str, Any] = dict(
        type="preference", confidence=0.9, evidence_count=1, is_new=True, explicit=False,
        writes_this_session=0, writes_this_hour=0,
    )
    values.update(kw)
    return GateInput(**values)


def test_disabled_policy_drops_everything():
    d = gate(WritePolicy(disabled_scopes=["*"], mode="auto"), inp())
    assert not d.allowed and "disabled" in d.reason
    d = gate(WritePolicy(disabled_scopes=["*"], mode="auto"), inp(explicit=True))
    assert not d.allowed


def test_shadow_mode_stores_as_shadow():
    d = gate(WritePolicy(mode="shadow"), inp(confidence=1.0, evidence_count=9))
    assert d.allowed and d.status == Status.SHADOW and not d.awaiting_approval and d.reason


def test_manual_mode_queues_for_approval():
    d = gate(WritePolicy(mode="manual"), inp(confidence=1.0))
    assert d.allowed and d.status == Status.SHADOW and d.awaiting_approval and "approval" in d.reason


def test_auto_mode_activates_when_thresholds_pass():
    d = gate(WritePolicy(mode="auto", min_confidence=0.6), inp(confidence=0.6))
    assert d.allowed and d.status == Status.ACTIVE and not d.awaiting_approval


def test_auto_mode_below_min_confidence_is_shadow():
    d = gate(WritePolicy(mode="auto", min_confidence=0.6), inp(confidence=0.59))
    assert d.allowed and d.status == Status.SHADOW and "min_confidence" in d.reason


def test_auto_mode_below_min_evidence_is_shadow():
    d = gate(WritePolicy(mode="auto", min_evidence_count=2), inp(evidence_count=1))
    assert d.allowed and d.status == Status.SHADOW and "min_evidence_count" in d.reason
    assert gate(WritePolicy(mode="auto", min_evidence_count=2), inp(evidence_count=2)).status == Status.ACTIVE


def test_explicit_requests_skip_the_extraction_thresholds_but_not_the_mode():
    policy = WritePolicy(mode="auto", min_confidence=0.99, min_evidence_count=5)
    assert gate(policy, inp(confidence=0.1, explicit=True)).status == Status.ACTIVE
    assert gate(WritePolicy(mode="shadow"), inp(explicit=True)).status == Status.SHADOW
    assert gate(WritePolicy(mode="manual"), inp(explicit=True)).awaiting_approval


def test_allowed_types():
    policy = WritePolicy(mode="auto", allowed_types=["profile"])
    d = gate(policy, inp(type="preference"))
    assert not d.allowed and "allowed_types" in d.reason
    assert gate(policy, inp(type="profile")).allowed


def test_require_approval_types_in_auto_mode():
    policy = WritePolicy(mode="auto", require_approval_types=["constraint"])
    d = gate(policy, inp(type="constraint"))
    assert d.allowed and d.status == Status.SHADOW and d.awaiting_approval and "requires approval" in d.reason
    assert gate(policy, inp(type="profile")).status == Status.ACTIVE


@pytest.mark.parametrize("mode", ["shadow", "manual", "auto"])
def test_max_writes_per_session_only_limits_new_items(mode):
    policy = WritePolicy(mode=mode, max_writes_per_session=3)
    assert gate(policy, inp(writes_this_session=2)).allowed
    d = gate(policy, inp(writes_this_session=3))
    assert not d.allowed and "max_writes_per_session" in d.reason
    assert gate(policy, inp(writes_this_session=3, is_new=False)).allowed


@pytest.mark.parametrize("mode", ["shadow", "manual", "auto"])
def test_max_writes_per_hour_only_limits_new_items(mode):
    policy = WritePolicy(mode=mode, max_writes_per_hour=5)
    assert gate(policy, inp(writes_this_hour=4)).allowed
    d = gate(policy, inp(writes_this_hour=5))
    assert not d.allowed and "max_writes_per_hour" in d.reason
    assert gate(policy, inp(writes_this_hour=5, is_new=False)).allowed


@given(
    enable=st.booleans(),
    mode=st.sampled_from(["shadow", "auto", "manual"]),
    min_conf=st.floats(0, 1),
    min_ev=st.integers(1, 5),
    allowed=st.lists(st.sampled_from(MEMORY_TYPES), unique=True),
    approval=st.lists(st.sampled_from(MEMORY_TYPES), unique=True),
    mtype=st.sampled_from(MEMORY_TYPES),
    conf=st.floats(0, 1),
    ev=st.integers(1, 6),
    is_new=st.booleans(),
    explicit=st.booleans(),
    ws=st.integers(0, 20),
    wh=st.integers(0, 80),
)
def test_every_gate_decision_has_a_reason_and_a_consistent_status(
    enable, mode, min_conf, min_ev, allowed, approval, mtype, conf, ev, is_new, explicit, ws, wh
):
    policy = WritePolicy(
        disabled_scopes=[] if enable else ["*"], mode=mode, min_confidence=min_conf, min_evidence_count=min_ev,
        allowed_types=allowed, require_approval_types=approval,
        max_writes_per_session=10, max_writes_per_hour=50,
    )
    d = gate(policy, inp(type=mtype, confidence=conf, evidence_count=ev, is_new=is_new,
                         explicit=explicit, writes_this_session=ws, writes_this_hour=wh))
    assert d.reason
    if not d.allowed:
        assert d.status is None
        return
    assert enable and mtype in allowed
    # only auto mode ever activates, and never past an approval requirement
    if d.status == Status.ACTIVE:
        assert mode == "auto" and mtype not in approval and not d.awaiting_approval
        assert explicit or (conf >= min_conf and ev >= min_ev)
    else:
        assert d.status == Status.SHADOW
    if d.awaiting_approval:
        assert mode == "manual" or mtype in approval


def test_policy_defaults_match_the_design():
    w = WritePolicy()
    assert (w.enable, w.mode, w.min_confidence, w.min_evidence_count) == (True, "shadow", 0.6, 1)
    assert w.allowed_types == ["profile", "preference", "task_state", "constraint", "episode", "summary"]
    assert (w.max_writes_per_session, w.max_writes_per_hour, w.max_items_per_scope) == (10, 50, 200)
    assert w.require_approval_types == []
    r = ReadPolicy()
    assert (r.enable, r.max_items, r.max_tokens, r.max_per_type, r.min_confidence) == (True, 15, 800, 5, 0.5)
    # Issue 4: ranking weights default to what the LoCoMo benchmark supports
    # (the design's 0.3/0.4/0.3 halved evidence recall), similarity first.
    assert (r.recency_weight, r.importance_weight, r.similarity_weight) == (0.1, 0.2, 0.7)
