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
    assert "2 条" in status and status.endswith("写入模式：自动（可信的新记忆立即用到）。"), status
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
    assert HAN.search(status) and "写入模式：自动（" in status, bot.diag(f"/ltm status said {status!r}")
    # Another user who has said nothing yet gets the default, English.
    assert bot.chat("/ltm status", "carol", "lang-carol") == "I don't keep any memories about you yet."
    assert bot.chat("/ltm list", "carol", "lang-carol") == "I don't remember anything about you."
    bot.assert_log_clean()


def test_an_operator_gets_chinese_through_the_aliases(bot):
    assert bot.admin_chat("/ltm 待审", "lang-op") == "没有待批准的记忆。"
    policy = bot.admin_chat("/ltm 策略", "lang-op")
    assert policy.startswith("策略版本 ") and "写入模式 自动（" in policy, bot.diag(f"/ltm 策略 said {policy!r}")
    history = bot.admin_chat("/ltm 策略 历史", "lang-op")
    assert history.startswith("v1 ") and "初始策略" in history, history
    assert bot.admin_chat("/ltm 写入 开", "lang-op").startswith("用法：/ltm 写入 关|开 <目标>")
    bot.assert_log_clean()


def test_a_bare_ltm_and_a_forget_without_an_id_are_answered_in_the_users_language(bot):
    """AstrBot answered these itself before: its tree of English subcommands
    ("参数不足…") and "必要参数缺失…memory_id(str)"."""
    bot.chat("你好，我是新来的。", "xiaoli", "bare-xiaoli")
    bare = bot.chat("/ltm", "xiaoli", "bare-xiaoli")
    assert bare == help_text("zh"), bot.diag(f"/ltm said {bare!r}")
    assert bot.chat("/ltm 忘记", "xiaoli", "bare-xiaoli") == say("cmd.forget.usage", "zh")
    assert bot.chat("/ltm", "dave", "bare-dave") == help_text("en")  # no language said yet: English
    assert bot.chat("/ltm forget", "dave", "bare-dave") == say("cmd.forget.usage", "en")
    assert bot.admin_chat("/ltm 驳回", "bare-op") == say("cmd.review.usage_reject", "zh")
    log = bot.log_text(0)
    assert "参数不足" not in log and "必要参数缺失" not in log
    bot.assert_log_clean()


def test_a_person_is_one_name_and_remember_names_them_as_chat_facts_do(bot):
    bot.chat("我叫小丽", "xiaoli", "names-xiaoli")
    bot.wait_extracted("xiaoli", ["小丽的名字是小丽"])
    remembered = bot.chat("/ltm 记住 我的猫叫咪咪", "xiaoli", "names-xiaoli")
    assert remembered.endswith("：小丽的猫叫咪咪。"), remembered  # not "用户的猫叫咪咪"
    # The operator names her as the memory list shows her, or by her id alone.
    for named in ("webchat:xiaoli", "xiaoli", "user:webchat:xiaoli"):
        status = bot.admin_chat(f"/ltm 状态 {named}", "names-op")
        assert status.startswith("用户 webchat:xiaoli：生效 2 条"), (named, status)
    typo = bot.admin_chat("/ltm 列表 xiaolli", "names-op")
    assert typo.endswith("你是不是要找 user:webchat:xiaoli？"), typo
    # Each policy version says what it changed, by the setting's name, in Chinese.
    assert bot.admin_chat("/ltm 写入 关 xiaoli", "names-op").startswith("user:webchat:xiaoli 的学习已关闭")
    history = bot.admin_chat("/ltm 策略 历史", "names-op").splitlines()
    assert history[0].startswith("v") and "（聊天命令）" in history[0], history
    assert history[0].endswith("：关闭写入的范围：无 → user:webchat:xiaoli"), history
    assert "初始策略" in history[-1] and not any("初始策略" in line for line in history[:-1])
    assert bot.admin_chat("/ltm 写入 开 xiaoli", "names-op").startswith("user:webchat:xiaoli 的学习已重新开启")
    bot.assert_log_clean()
