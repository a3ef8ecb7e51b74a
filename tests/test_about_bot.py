"""Whose words a message asks about (recalling/bot_lines.py), and the share
of the block the bot's replies take for each (docs/decisions.md#d119)."""

from __future__ import annotations

from astrbot_plugin_ltm.recalling.bot_lines import BOT_SHARE, CONTEXT_SHARE, asks_what_the_bot_said


def test_a_question_about_the_bots_own_words_is_told_apart_from_one_about_the_person():
    about_the_bot = [
        "Can you remind me of the name of that restaurant you recommended in Bandung?",
        "You mentioned two-factor authentication methods; which ones were they?",
        "In our previous chat, what were the other options?",
        "What was the fifth bottle in your list?",
        "你曾经给我推荐过哪些画家？",
        "你告诉过我哪些缓解压力的方法？",
        "在5月3号，你给我推荐了哪两部电影？",
    ]
    about_the_person = [
        "How many antique items did I inherit from my family members?",
        "Who did I go with to the music event last Saturday?",
        "Can you suggest some activities I can do in the evening?",  # asks for new suggestions
        "我曾经和你推荐过一部科幻电影，它的名字是？",  # the person recommended it to the bot
        "我曾经给你推荐过一档美食节目，它的名字是？",
        "我喜欢听什么类型的音乐？",
    ]
    assert all(asks_what_the_bot_said(m) for m in about_the_bot)
    assert not any(asks_what_the_bot_said(m) for m in about_the_person)


async def test_the_bots_replies_take_a_smaller_share_unless_the_question_is_about_them(ltm, origin):
    a = origin("alice")
    ltm.configure({"read_policy": {"max_items": 0}})
    for n in range(12):
        await ltm.turn(a, f"I inherited an antique clock number {n} from my grandmother.",
                       f"An antique clock number {n} is a lovely heirloom to inherit; have it appraised. " * 2)
    counter = ltm.engine.reader.counter
    budget = ltm.engine.config.read_policy.max_tokens

    def bot_tokens(block) -> int:
        return sum(counter.count("\n" + line) for line in block.text.splitlines() if line.startswith("- bot (you)"))

    about_me = bot_tokens(await ltm.block(a, "which antique clock did I inherit from my grandmother?"))
    about_the_bot = bot_tokens(await ltm.block(a, "which antique clock did you tell me to have appraised?"))
    assert 0 < about_me <= budget * CONTEXT_SHARE
    assert budget * CONTEXT_SHARE < about_the_bot <= budget * BOT_SHARE
