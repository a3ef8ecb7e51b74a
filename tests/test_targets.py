"""A person or group named in any form they are shown in (operating/targets.py),
and a policy change in the settings form's words (operating/policy_words.py)."""

from __future__ import annotations

import pytest

from astrbot_plugin_ltm.operating.policy_words import described, setting_name, value_text
from astrbot_plugin_ltm.operating.targets import parse


@pytest.mark.parametrize(("text", "parsed"), [
    ("user:webchat:xiaoming", ("user", "webchat:xiaoming")),  # the API's and the write switch's
    ("webchat:xiaoming", (None, "webchat:xiaoming")),  # the memory list's scope id
    ("xiaoming", (None, "xiaoming")),  # the id a chat shows
    ("用户 · webchat:xiaoming", ("user", "webchat:xiaoming")),  # the page's label, in Chinese
    ("User · qq:1", ("user", "qq:1")),  # and in English
    ("群组 · qq:g1", ("group", "qq:g1")),
    ("用户:qq:1", ("user", "qq:1")),
    ("群聊:qq:g1", ("group", "qq:g1")),
    ("Group:qq:1", (None, "Group:qq:1")),  # a kind before a colon is written as the commands write it
    ("  group:aiocqhttp:1:2 ", ("group", "aiocqhttp:1:2")),
    ("user:", ("user", "")),
])
def test_every_form_a_scope_is_shown_in_parses_to_its_kind_and_id(text, parsed):
    assert parse(text) == parsed


def test_a_setting_reads_as_the_settings_form_names_it_in_each_language():
    assert setting_name("emergency_read_only", "zh") == "紧急只读"
    assert setting_name("read_policy.max_per_type", "zh") == "每种类型最多条数"
    assert setting_name("read_policy.max_per_type", "en") != "read_policy.max_per_type"
    assert setting_name("no_such.setting", "zh") == "no_such.setting"  # a later setting: its path
    assert value_text("write_policy.allowed_types", ["profile", "episode"], "zh") == "个人资料、事件"
    assert value_text("write_policy.require_approval_types", [], "zh") == "无"
    assert value_text("write_policy.min_confidence", 0.6, "en") == "0.6"
    change = described({"path": "read_policy.injection_position", "from": "context_message",
                        "to": "system_prompt"}, "zh")
    assert change["text"] == "注入位置：上下文消息 → 系统提示词" and change["path"] == "read_policy.injection_position"
