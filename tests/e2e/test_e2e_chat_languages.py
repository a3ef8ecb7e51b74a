"""The chat commands in a real AstrBot answer a Chinese user in Chinese:
through the Chinese aliases (AstrBot's own command parsing), through
Chinese words after an English subcommand, and, for a bare command, in the
language the sender last chatted in; an English command stays English."""

from __future__ import annotations

import re

import pytest

from astrbot_plugin_ltm.doors.commands import help_text
from astrbot_plugin_ltm.i18n import say

pytestmark = pytest.mark.e2e

HAN = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def bot(bot_factory):
    with bot_factory("languages", {"write_policy": {"mode": "auto"}}) as b:
        yield b


def test_a_chinese_user_is_answered_in_chinese_through_aliases_and_chinese_words(bot):
    def chat(text: str) -> str:
        return bot.chat(text, "xiaomei", "lang-xiaomei")

    assert chat("/ltm 帮助") == help_text("zh"), bot.diag("/ltm 帮助")
    assert chat("/ltm 状态") == say("cmd.status.nothing", "zh")
    remembered = chat("/ltm 记住 我养了一只叫咪咪的猫")
    assert remembered.startswith("已记住（") and "咪咪" in remembered, bot.diag(f"/ltm 记住 said {remembered!r}")
    (cat,) = bot.items("xiaomei")
    assert remembered == say("cmd.remember.done", "zh", id=cat["memory_id"][:8], fact=cat["fact"])
    # An English subcommand with Chinese words: Chinese.
    tea = chat("/ltm remember 我喜欢喝绿茶")
    assert tea.startswith("已记住（"), tea
    listed = chat("/ltm 列表")
    assert f"{cat['memory_id'][:8]} [" in listed and cat["fact"] in listed and "绿茶" in listed, listed
    without_ids = re.sub(r"^[0-9a-f]{8} ", "", listed.replace(cat["fact"], ""), flags=re.M)
    assert not re.search(r"[A-Za-z]{3,}", without_ids), listed
    status = chat("/ltm 状态")
    assert "2 条" in status and status.endswith("写入模式：auto。"), status
    assert chat(f"/ltm 忘记 {cat['memory_id'][:8]}") == f"已忘记：{cat['fact']}"
    asked = chat("/ltm 全部忘记")
    assert asked == say("cmd.forget_all.ask_own", "zh", total=1, command="/ltm 全部忘记 确认"), asked
    assert chat("/ltm 全部忘记 确认") == "已删除 1 条记忆。"
    assert bot.items("xiaomei") == []
    # A user naming someone else's scope is refused, in Chinese.
    assert chat("/ltm 列表 webchat:someone") == "只有管理员可以查看其他用户的记忆。"
    bot.assert_log_clean()


def test_a_bare_command_follows_the_language_the_sender_last_chatted_in(bot):
    said = "你好，我最近在学做饭。"
    assert bot.chat(said, "xiaoming", "lang-xiaoming") == f"ECHO: {said}"
    bot.wait_for(lambda: bot.events("xiaoming"), what="xiaoming's turn recorded")
    status = bot.chat("/ltm status", "xiaoming", "lang-xiaoming")
    assert HAN.search(status) and "写入模式：auto。" in status, bot.diag(f"/ltm status said {status!r}")
    # Another user who has said nothing yet gets the default, English.
    assert bot.chat("/ltm status", "carol", "lang-carol") == "I don't keep any memories about you yet."
    assert bot.chat("/ltm list", "carol", "lang-carol") == "I don't remember anything about you."
    bot.assert_log_clean()


def test_an_operator_gets_chinese_through_the_aliases(bot):
    assert bot.admin_chat("/ltm 待审", "lang-op") == "没有待批准的记忆。"
    policy = bot.admin_chat("/ltm 策略", "lang-op")
    assert policy.startswith("策略版本 ") and "写入模式 auto" in policy, bot.diag(f"/ltm 策略 said {policy!r}")
    history = bot.admin_chat("/ltm 策略 历史", "lang-op")
    assert history.startswith("v1 ") and "初始策略" in history, history
    assert bot.admin_chat("/ltm 写入 开", "lang-op").startswith("用法：/ltm 写入 关|开 <目标>")
    bot.assert_log_clean()
