"""Every /ltm command answers in its sender's language: a Chinese alias or
Chinese words get Chinese, an English command English, and with nothing
to go by the sender's last message, then the reply_language setting."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from astrbot_plugin_ltm import validators
from astrbot_plugin_ltm.adapter import client_locale
from astrbot_plugin_ltm.config import parse_config
from astrbot_plugin_ltm.doors.commands import Commands, help_text
from astrbot_plugin_ltm.enums import MEMORY_TYPES
from astrbot_plugin_ltm.errors import AdminError
from astrbot_plugin_ltm.i18n import Lang, msg, say, translate
from astrbot_plugin_ltm.operating.reply_language import (
    KEPT_SAMPLES,
    SAMPLE_CHARS,
    SenderLanguages,
    command_words,
    reply_language,
    said_in,
)
from astrbot_plugin_ltm.scope import Origin
from astrbot_plugin_ltm.storing.tables import MemoryItem

MAIN = Path(__file__).resolve().parent.parent / "main.py"
HAN = re.compile(r"[\u3400-\u9fff]")
# An identifier, not a word: ids, scope ids, setting paths, versions, dates.
IDENTIFIER = re.compile(r"[\w.:/<>\[\]'@#-]*[\d_.:/<>\[\]@#][\w.:/<>\[\]'@#-]*")
# An English sentence: three or more English words in a row, with only
# spaces and ASCII punctuation between them.
ENGLISH_RUN = re.compile(r"[A-Za-z]+(?:[ ,;'()-]+[A-Za-z]+){2,}")


def english_sentences(reply: str, allowed: list[str]) -> list[str]:
    """The English sentences in ``reply`` outside ``allowed`` texts (memory
    facts, other areas' texts the catalogue does not hold yet), ids,
    scope ids and commands."""
    text = reply
    for part in sorted(filter(None, allowed), key=len, reverse=True):
        text = text.replace(part, " ")
    text = re.sub(r"/ltm(?: [a-z-]+)?", " ", text)
    text = re.sub(r"\b[0-9a-f]{8}\b", " ", text)  # memory ids, even all letters
    return ENGLISH_RUN.findall(IDENTIFIER.sub(" ", text))


def untranslated(text: str) -> list[str]:
    """Another area's English text, allowed in a Chinese reply while the
    catalogue has no template for it (once it has, it must come translated)."""
    return [text] if translate(text, "zh") == text else []


# main.py's Chinese aliases, checked against its decorators below.
ALIASES = {"帮助": "help", "状态": "status", "列表": "list", "记住": "remember", "忘记": "forget",
           "全部忘记": "forget-all", "待审": "pending", "批准": "approve", "驳回": "reject", "策略": "policy",
           "写入": "writes", "暂停": "pause", "恢复": "resume"}


def test_every_subcommand_has_a_chinese_alias_in_main() -> None:
    wired = dict(re.findall(r'@ltm\.command\("([\w-]+)", alias=\{"([^"]+)"\}\)', MAIN.read_text(encoding="utf-8")))
    assert wired == {en: zh for zh, en in ALIASES.items()}
    assert not re.search(r'@ltm\.command\("[\w-]+"\)', MAIN.read_text(encoding="utf-8"))


def test_every_command_and_hook_describes_itself_in_chinese_and_english() -> None:
    # AstrBot shows a handler's docstring as its description (the plugin page, /help).
    tree = ast.parse(MAIN.read_text(encoding="utf-8"))
    marks = ("command", ".on_", "custom_filter")
    handlers = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                and any(mark in ast.unparse(d) for d in f.decorator_list for mark in marks)]
    assert len(handlers) == len(ALIASES) + 5  # the subcommands, the group, a bare /ltm and three hooks
    for handler in handlers:
        described = ast.get_docstring(handler) or ""
        assert re.search(r"[\u4e00-\u9fff]", described) and re.search(r"[A-Za-z]{3}", described), handler.name


async def send(cmd: Commands, who: Origin, said: str) -> str:
    """A command as AstrBot hands it to main.py: the subcommand (or its
    alias) picks the method, the words after it are its arguments."""
    sub, rest = command_words(said)
    name, args = ALIASES.get(sub, sub), rest.split()
    with cmd.hearing(said):
        if name == "help":
            return await cmd.help(who)
        if name in ("status", "list"):
            return await getattr(cmd, name)(who, args[0] if args else "")
        if name == "remember":
            return await cmd.remember(who, rest)
        if name == "forget":
            return await cmd.forget(who, args[0])
        if name == "forget-all":
            return await cmd.forget_all(who, *args)
        if name == "pending":
            return await cmd.pending(who)
        if name in ("approve", "reject"):
            return await cmd.review(who, args[0], name)
        if name == "policy":
            return await cmd.policy(who, *args[:2])
        if name == "writes":
            return await cmd.writes(who, *args[:2])
    raise AssertionError(f"no such command in this test: {said}")


async def conversation(ltm, origin, lang: Lang) -> list[tuple[str, str, list[str]]]:
    """Every command, user and operator forms, answers, refusals, usage
    lines and errors, sent in ``lang``; (sent, reply, allowed texts)."""
    cmd = Commands(ltm.engine)
    alice, bob, root = origin("alice"), origin("bob"), origin("root", admin=True)
    said: list[tuple[str, str, list[str]]] = []

    def zh_en(zh: str, en: str) -> str:
        return zh if lang == "zh" else en

    async def facts() -> list[str]:
        return [i.fact for i in await ltm.items()]

    async def run(who: Origin, text: str, *allowed: str) -> str:
        reply = await send(cmd, who, text)
        said.append((text, reply, [*allowed, *await facts()]))
        return reply

    tea, cat = zh_en("我喜欢喝绿茶", "I like green tea"), zh_en("我养了一只叫咪咪的猫", "I have a cat called Mimi")
    nurse, home = zh_en("我在医院当护士", "I am a nurse"), zh_en("我住在上海", "I live in Paris")
    await run(alice, zh_en("ltm 帮助", "ltm help"))
    await run(alice, zh_en("ltm 状态", "ltm status"))
    await run(alice, zh_en("ltm 列表", "ltm list"))
    await run(alice, zh_en("ltm 全部忘记", "ltm forget-all"))
    await run(alice, zh_en("ltm 记住", "ltm remember"))
    await run(alice, zh_en("ltm 记住 ", "ltm remember ") + tea, tea)
    await run(alice, zh_en("ltm 记住 ", "ltm remember ") + cat, cat)
    too_long = zh_en("我喜欢 ", "I like ") + "x" * 400
    with pytest.raises(AdminError) as refused:
        validators.fact(too_long, ltm.engine.config.extraction.max_fact_chars)
    await run(alice, zh_en("ltm 记住 ", "ltm remember ") + too_long, too_long, *untranslated(str(refused.value)))
    await run(alice, zh_en("ltm 状态", "ltm status"))
    await run(alice, zh_en("ltm 列表", "ltm list"))
    with pytest.raises(AdminError) as missing:
        await ltm.engine.admin.find_by_prefix("ffff0000", [ltm.engine.resolver.user_scope(alice)])
    await run(alice, zh_en("ltm 忘记 ffff0000", "ltm forget ffff0000"), *untranslated(str(missing.value)))
    with pytest.raises(AdminError) as short:
        validators.memory_id("abc")
    await run(alice, zh_en("ltm 忘记 abc", "ltm forget abc"), *untranslated(str(short.value)))
    tea_item = await ltm.item(MemoryItem.fact.contains("茶" if lang == "zh" else "tea"))
    await run(alice, zh_en("ltm 忘记 ", "ltm forget ") + tea_item.memory_id[:8])
    await run(alice, zh_en("ltm 记住 ", "ltm remember ") + tea, tea)  # restated after being forgotten
    # Dropped by the write policy, with the writer's reason.
    ltm.configure({"write_policy": {"allowed_types": ["profile"]}})
    coffee = zh_en("我喜欢喝咖啡", "I like coffee")
    reply = await run(alice, zh_en("ltm 记住 ", "ltm remember ") + coffee, coffee)
    (dropped,) = [r for r in await ltm.audit() if r.action == "policy"]
    assert translate(dropped.reason, lang) in reply, reply
    said[-1][2].extend(untranslated(dropped.reason))
    ltm.configure({"write_policy": {"allowed_types": list(MEMORY_TYPES)}})
    # A user naming a target, or an operator's command: refused.
    for text in (zh_en("ltm 状态 qq:bob", "ltm status qq:bob"), zh_en("ltm 列表 qq:bob", "ltm list qq:bob"),
                 zh_en("ltm 全部忘记 qq:bob 确认", "ltm forget-all qq:bob confirm"), zh_en("ltm 待审", "ltm pending"),
                 zh_en("ltm 批准 abcd", "ltm approve abcd"), zh_en("ltm 驳回 abcd", "ltm reject abcd"),
                 zh_en("ltm 策略", "ltm policy"), zh_en("ltm 写入 关 qq:bob", "ltm writes off qq:bob")):
        await run(alice, text)

    # The operator: the review queue, targets, the policy and the write switch.
    cat_item = await ltm.item(MemoryItem.fact.contains("咪咪" if lang == "zh" else "Mimi"))
    await run(root, zh_en("ltm 待审", "ltm pending"))
    await run(root, zh_en("ltm 批准 ", "ltm approve ") + cat_item.memory_id[:8])
    await run(root, zh_en("ltm 待审", "ltm pending"))
    await run(root, zh_en("ltm 驳回 ffff0000", "ltm reject ffff0000"), *untranslated(str(missing.value)))
    await run(root, zh_en("ltm 状态 qq:alice", "ltm status qq:alice"))
    await run(root, zh_en("ltm 列表 user:qq:alice", "ltm list user:qq:alice"))
    await run(root, zh_en("ltm 列表 qq:nobody", "ltm list qq:nobody"))
    await run(root, zh_en("ltm 状态 group:", "ltm status group:"))
    await run(root, zh_en("ltm 写入", "ltm writes"))
    await run(root, zh_en("ltm 写入 关 qq:alice", "ltm writes off qq:alice"))
    await run(root, zh_en("ltm 写入 关 qq:alice", "ltm writes off qq:alice"))
    # Refused while the scope's writes are off, saying why.
    with pytest.raises(AdminError) as off:
        await ltm.engine.remember(alice, home)
    await run(alice, zh_en("ltm 记住 ", "ltm remember ") + home, home, *untranslated(str(off.value)))
    await run(root, zh_en("ltm 写入 开 qq:alice", "ltm writes on qq:alice"))
    await run(root, zh_en("ltm 策略", "ltm policy"))
    history = await ltm.engine.policy_versions.history(0, 20)
    await run(root, zh_en("ltm 策略 历史", "ltm policy history"),
              *[t for row in history if row["reason"] for t in untranslated(row["reason"])])
    await run(root, zh_en("ltm 策略 回滚 x", "ltm policy rollback x"))
    with pytest.raises(AdminError) as no_version:
        await ltm.engine.policy_versions.rollback(999, "operator:root", None)
    await run(root, zh_en("ltm 策略 回滚 999", "ltm policy rollback 999"), *untranslated(str(no_version.value)))
    await run(root, zh_en("ltm 策略 回滚 2", "ltm policy rollback 2"))
    await run(root, zh_en("ltm 策略 回滚 2", "ltm policy rollback 2"))
    await run(root, zh_en("ltm 策略 什么", "ltm policy what"))
    await run(root, zh_en("ltm 写入 开 qq:alice", "ltm writes on qq:alice"))
    await run(root, zh_en("ltm 忘记 ", "ltm forget ") + cat_item.memory_id[:8])
    await run(bob, zh_en("ltm 记住 ", "ltm remember ") + nurse, nurse)
    await run(root, zh_en("ltm 全部忘记 qq:bob", "ltm forget-all qq:bob"))
    await run(root, zh_en("ltm 全部忘记 qq:bob 确认", "ltm forget-all qq:bob confirm"))

    # Emergency read-only: every write is refused, and says so.
    await run(alice, zh_en("ltm 记住 ", "ltm remember ") + home, home)
    home_item = await ltm.item(MemoryItem.fact.contains("上海" if lang == "zh" else "Paris"))
    ltm.configure({"emergency_read_only": True})
    await run(alice, zh_en("ltm 状态", "ltm status"))
    await run(alice, zh_en("ltm 记住 ", "ltm remember ") + tea, tea)
    await run(alice, zh_en("ltm 忘记 ", "ltm forget ") + home_item.memory_id[:8])
    await run(alice, zh_en("ltm 全部忘记", "ltm forget-all"))
    await run(root, zh_en("ltm 批准 ", "ltm approve ") + home_item.memory_id[:8])
    await run(root, zh_en("ltm 写入 关 qq:alice", "ltm writes off qq:alice"))
    ltm.configure({"emergency_read_only": False})
    await run(alice, zh_en("ltm 全部忘记", "ltm forget-all"))
    await run(alice, zh_en("ltm 全部忘记 确认", "ltm forget-all confirm"))
    with cmd.hearing(zh_en("ltm 状态", "ltm status")):
        said.append(("(a command that raised)", cmd.failed(RuntimeError("disk full")), ["disk full"]))
    return said


async def test_every_command_sent_in_chinese_is_answered_without_an_english_sentence(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "manual"}})
    said = await conversation(ltm, origin, "zh")
    assert len(said) > 50
    for text, reply, allowed in said:
        assert HAN.search(reply) or reply in allowed, (text, reply)  # (another area's text, untranslated yet)
        assert english_sentences(reply, allowed) == [], (text, reply)
    replies = [reply for _, reply, _ in said]
    # A few, word for word: the help, the first answer, the confirmation asked for.
    assert replies[0] == help_text("zh") and "/ltm 全部忘记" in replies[0]
    assert replies[1] == "我还没有记下任何关于你的内容。"
    assert any(r.startswith("已记住（") and "咪咪" in r and "待批准" not in r for r in replies)
    assert any("请在 2 分钟内发送 /ltm 全部忘记 确认" in r for r in replies)
    assert any(r.startswith("已删除 ") and r.endswith(" 条记忆。") for r in replies)


async def test_every_command_sent_in_english_is_answered_in_english(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "manual"}})
    said = await conversation(ltm, origin, "en")
    assert len(said) > 50
    for text, reply, _ in said:
        assert not HAN.search(reply), (text, reply)
        assert re.search(r"[A-Za-z]{2,}", IDENTIFIER.sub(" ", reply)), (text, reply)
    replies = [reply for _, reply, _ in said]
    assert replies[0] == help_text("en")
    assert replies[1] == "I don't keep any memories about you yet."
    assert any("Send /ltm forget-all confirm within 2 minutes" in r for r in replies)


# -- the language choice ----------------------------------------------------------------------


@pytest.mark.parametrize(("sent", "lang"), [
    ("ltm 状态", "zh"),  # a Chinese alias
    ("/ltm 记住 I like tea", "zh"),  # the alias wins over the words
    ("ltm remember 我养了一只猫", "zh"),  # Chinese words
    ("ltm remember I have a cat", "en"),  # English words
    ("ltm forget-all 确认", "zh"),  # a Chinese keyword
    ("ltm status 张三", "zh"),  # a Chinese target
    ("ltm status", None),  # an English subcommand says nothing: everyone types it
    ("ltm forget abcdef12", None),  # ids say nothing
    ("ltm forget-all confirm", None),  # nor do keywords
    ("ltm policy history", None),
    ("", None),
])
def test_what_a_command_itself_says_about_its_language(sent: str, lang: str | None) -> None:
    assert said_in(sent) == lang


def test_the_reply_language_goes_alias_words_last_message_then_setting() -> None:
    assert reply_language("ltm 状态", last="en", setting="en") == "zh"
    assert reply_language("ltm remember I like tea", last="zh", setting="zh") == "en"
    assert reply_language("ltm status", last="zh", setting="en") == "zh"
    assert reply_language("ltm status", last=None, setting="zh") == "zh"
    assert reply_language("ltm status", last=None, setting="en", locale="zh-CN") == "en"
    # auto: the chat client's language, else English
    assert reply_language("ltm status", last=None, setting="auto", locale="zh-CN") == "zh"
    assert reply_language("ltm status", last=None, setting="auto", locale="en-US") == "en"
    assert reply_language("ltm status", last=None, setting="auto") == "en"


async def test_a_command_is_answered_in_the_language_its_sender_last_wrote_in(ltm, origin):
    cmd = Commands(ltm.engine)
    alice, bob = origin("alice"), origin("bob")
    with cmd.hearing("ltm status"):
        assert await cmd.status(alice) == say("cmd.status.nothing", "en")
    await ltm.record(alice, "你好，今天天气怎么样？", "挺好的。")
    with cmd.hearing("ltm list"):
        assert await cmd.list(alice) == say("cmd.list.nothing", "zh")
        assert await cmd.list(bob) == say("cmd.list.nothing", "en")  # only her own messages count
    # An id or a number says nothing: the last language holds.
    await ltm.record(alice, "12345", "?")
    with cmd.hearing("ltm forget abcdef12"):
        assert "abcdef12" in await cmd.forget(alice, "abcdef12")
        assert cmd._lang(alice) == "zh"
    await ltm.record(alice, "Actually, let's speak English.", "Sure.")
    with cmd.hearing("ltm list"):
        assert await cmd.list(alice) == say("cmd.list.nothing", "en")


async def test_a_command_sent_in_chinese_sets_the_language_of_the_next_ones(ltm, origin):
    cmd = Commands(ltm.engine)
    alice = origin("alice")
    with cmd.hearing("ltm 帮助"):
        assert await cmd.help(alice) == help_text("zh")
    with cmd.hearing("ltm list"):
        assert await cmd.list(alice) == say("cmd.list.nothing", "zh")


async def test_without_any_sign_the_configured_reply_language_is_used(make_ltm, origin):
    ltm = await make_ltm({"reply_language": "zh"})
    cmd = Commands(ltm.engine)
    with cmd.hearing("ltm status"):
        assert await cmd.status(origin("alice")) == say("cmd.status.nothing", "zh")
    ltm.configure({"reply_language": "auto"})
    with cmd.hearing("ltm status", locale="zh-CN"):  # the web chat's own language
        assert await cmd.status(origin("bob")) == say("cmd.status.nothing", "zh")
    with cmd.hearing("ltm status"):
        assert await cmd.status(origin("carol")) == say("cmd.status.nothing", "en")
    # Called without main.py's text (a direct call): the same rules, minus the text.
    assert await cmd.status(origin("dave")) == say("cmd.status.nothing", "en")


async def test_an_operators_status_lists_what_limits_memory_in_their_language(ltm, origin, monkeypatch):
    notice = msg("common.not_running")  # any catalogue text stands in for a notice
    monkeypatch.setattr(ltm.engine, "notices", lambda: [notice])
    cmd = Commands(ltm.engine)
    await cmd.remember(origin("alice"), "I like green tea")
    with cmd.hearing("ltm 状态 qq:alice"):
        assert notice.render("zh") in (await cmd.status(origin("root", admin=True), "qq:alice")).split("\n")
    with cmd.hearing("ltm status"):  # another operator, who has not written in Chinese
        assert notice.render("en") in (await cmd.status(origin("ops", admin=True), "qq:alice")).split("\n")
        assert notice.render("en") not in await cmd.status(origin("alice"))  # a user is not told


def test_a_bad_reply_language_setting_falls_back_to_auto_and_says_why() -> None:
    cfg, errors = parse_config({"reply_language": "fr"})
    assert cfg.reply_language == "auto"
    assert errors == ["reply_language: 'fr' is not one of auto, zh, en; using the default 'auto'"]
    assert parse_config({"reply_language": "zh"})[0].reply_language == "zh"


async def test_concurrent_commands_each_answer_in_their_own_language(ltm, origin):
    import asyncio

    cmd = Commands(ltm.engine)

    async def ask(said: str, who: Origin) -> str:
        with cmd.hearing(said):
            await asyncio.sleep(0)  # the other command runs in between
            return await cmd.status(who)

    zh, en = await asyncio.gather(ask("ltm 状态", origin("alice")), ask("ltm status", origin("bob")))
    assert (zh, en) == (say("cmd.status.nothing", "zh"), say("cmd.status.nothing", "en"))


def test_the_senders_languages_are_bounded_and_judged_only_when_asked(origin) -> None:
    languages = SenderLanguages(limit=3)
    for user in ("a", "b", "c", "d"):
        languages.note(origin(user), "我住在上海")
    assert len(languages) == 3 and languages.last(origin("a")) is None
    assert languages.last(origin("d")) == "zh"
    languages.note(origin("d"), "123 :)")  # too little to tell: kept
    assert languages.last(origin("d")) == "zh"
    languages.note(origin("d"), "I moved to Berlin")
    languages.note(origin("d"), "ok :)")  # the newest message that says a language counts
    assert languages.last(origin("d")) == "en"
    # The hot path keeps only a message's start, and only the last few, until a command asks.
    alice = origin("alice")
    for _ in range(10):
        languages.note(alice, "我住在上海。" * 2000)
    kept = languages.samples_kept(alice)
    assert len(kept) == KEPT_SAMPLES and all(len(sample) == SAMPLE_CHARS for sample in kept)
    assert languages.last(alice) == "zh" and languages.samples_kept(alice) == ()


class _Event:
    """An AstrBot event's extras, as the web chat fills them."""

    def __init__(self, extras: dict) -> None:
        self.extras = extras

    def get_extra(self, key: str | None = None, default: object = None) -> object:
        return self.extras.get(key, default)


def test_the_chat_clients_language_is_read_from_the_event_when_it_sends_one() -> None:
    assert client_locale(_Event({"locale": "zh-CN"})) == "zh-CN"
    assert client_locale(_Event({})) is None
    assert client_locale(_Event({"locale": 7})) is None
    assert client_locale(object()) is None  # no extras at all
