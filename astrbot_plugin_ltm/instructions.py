"""Text that tries to steer the bot rather than tell it about someone.

A memory reaches every later prompt of its scope, so a stored "ignore your
rules" or a fake end-of-block marker would act on each of them. Such text
is held for an operator in every write mode (learning/policy.py: gate), a
raw turn saying it is never shown (recalling/reader.py), and whatever does
go into the block is neutralised (recalling/block.py: neutralise).

Preferences about how to answer the person ("用简体回答我", "call me Sam")
are facts about them and pass (docs/decisions.md#d44).
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata

_ZERO_WIDTH = re.compile("[\u200b-\u200f\u2060-\u2064\ufeff\u00ad]")
_SPACED = re.compile(r"(?<![a-z])(?:[a-z][ ._\-*]){3,}[a-z](?![a-z])")
_WORD_GAP = re.compile(r"\s{2,}|[._\-*]{2,}")
# Spaced-out text whose word gaps were lost ("i g n o r e a l l"): the
# letters run together, so the words are looked for without boundaries.
_JOINED = re.compile(
    r"(ignore|disregard|forget|bypass|override)(all|your|the|previous|prior|above|every|my)*(instructions?|rules?"
    r"|prompts?|guidelines)|systemprompt|reveal(the|your)*(system)?prompt|youmust|youarenow|fromnowon|jailbreak"
    r"|developermode|danmode|endmemory|imstart|pretend(tobe|youare)")
_BASE64 = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")

_EN_PATTERNS = [
    # instructions to ignore or replace the rules
    r"\b(ignore|disregard|forget|override|bypass|skip)\b.{0,40}\b(instructions?|rules?|prompts?|guidelines|"
    r"directives|polic(y|ies)|restrictions|constraints|guardrails|safety|everything (above|before))\b",
    r"\b(previous|prior|above|earlier|original|system|developer|hidden)\s+(instructions?|prompts?|messages?|rules)\b",
    r"\bsystem\s*(prompt|message|instructions?)\b",
    r"\b(reveal|show|print|leak|output|repeat|tell (me|us|everyone))\b.{0,30}\b(prompt|instructions|secrets?|"
    r"passwords?|api[ _-]?keys?|tokens?|configuration|rules)\b",
    r"\b(passwords?|passcode|api[ _-]?keys?|secret keys?|credentials?|private keys?)\s*(is|are|=|:)",
    # telling the bot how to behave from now on
    r"\b(from now on|henceforth|in (all|every) (future )?(responses?|replies|answers|conversations?))\b",
    # not a guess ("you must have been thrilled", "you must be so proud") or a
    # clause ("if you need to talk", "where you are now")
    r"(?<!\bif )(?<!\bwhen )(?<!\bwhat )(?<!\bwhere )(?<!\bhow )(?<!\bdo )(?<!\bdid )(?<!\bwhatever )"
    r"\byou (must(?!\s+(have|'ve|feel|love|miss|know|be (so|very|really|quite|pretty|proud|happy|excited|"
    r"thrilled|stoked|tired|exhausted|relieved)))|shall|have to|need to|will now|are now|can now|should always|"
    r"should never|may now)\b",
    r"(?<!\bwho )(?<!\bthat )(?<!\bwhich )"
    r"\b(always|never) (obey|follow|comply|reply|respond|answer|say|mention|start|end|begin|include|refuse|"
    r"agree|tell|use|call|talk|write|recommend|help)\b",
    r"\b(obey|comply with|follow) (me|my|his|her|their|the user|alice|bob|\w+'s) (orders?|commands?|instructions?)\b",
    # persona, role play, jailbreaks
    r"\b(act|behave|respond|speak) as (if|an?|the|my)\b",
    r"\bpretend (to be|you are|that you)\b",
    r"\brole-?play\b|\bjailbreak|\b(dan|developer|god|debug|admin) mode\b|\bunfiltered\b|\buncensored\b",
    r"\bno (restrictions|filters|limits|rules)\b",
    r"\b(your|the bot'?s|the assistant'?s) (rules|instructions|persona|personality|prompt|guidelines|"
    r"programming(?!\s+(projects?|skills?|class(es)?|courses?|career|jobs?|work|journey|languages?|experience|team))"
    r"|identity|creator|owner)\b",
    r"\byour (new )?name is\b|\byou are (no longer|not) an? (ai|assistant|bot)\b",
    # role and template markers
    r"(^|[\s\"'(])(system|assistant|developer|human)\s*:",
    r"<\|[a-z_ ]+\|>|\[/?inst\]|<</?sys>>|</?s>|<\|?endoftext\|?>|\bbegin_of_text\b|\bim_(start|end)\b",
    r"(^|\s)#{2,}\s*(system|instruction|assistant|user|new|rules?)\b",
    r"```",
    # the block's own markers
    r"\[\s*(end\s*)?(long[- ]?term\s*)?memory\s*\]|</?\s*memor(y|ies)\s*>|\[/?\s*memory\b|end memory\b",
    # accusations against someone
    r"\b\w+\s+(is|was|are)\s+(a|an|the)?\s*(thief|liar|scammer|fraud(ster)?|criminal|murderer|rapist|"
    r"p(a)?edophile|terrorist|drug dealer|crook|cheat(er)?|whore|slut|pervert|molester|con artist)\b",
    r"\b\w+\s+(stole|steals|raped|molested|murdered|embezzled|defrauded|scammed)\b",
]
_ZH_PATTERNS = [
    r"(忽略|无视|忘记|忘掉|不要理会|不用理会|跳过|绕过|抛开|删除).{0,12}(指令|指示|规则|提示|设定|限制|要求|"
    r"约束|之前|以上|上面|前面|系统)",
    r"(系统|开发者|隐藏|原始)(提示|指令|消息|设定|规则)",
    r"提示词",
    r"(泄露|透露|告诉我|告诉大家|显示|输出|打印|说出).{0,10}(提示|系统|密码|密钥|秘密|指令|设定|配置)",
    r"(密码|密钥|口令|验证码)\s*(是|为|:|：)",
    r"(以后|从现在起|从现在开始|从今以后|今后|此后|接下来)(你|机器人|助手|ai|AI)",
    r"你(必须|只能|不准|不许|务必|一定要|永远|总是要|不得)",
    r"(扮演|假装你是|假装自己是|假扮|你现在是|你的新身份|角色扮演|进入.{0,6}模式|开发者模式|越狱|无限制|不受限制)",
    r"(你的|机器人的|助手的|AI的)(规则|设定|人设|身份|指令|主人|创造者|提示)",
    r"你的(新)?名字(是|叫|改成|改为|就是)",  # renaming the bot; asking its name is not
    r"(服从|听从|遵守|执行)(我|他|她|用户|\w{1,6})的(命令|指令|要求)",
    r"[\[【［](记忆结束|长期记忆|结束记忆|系统|指令)[\]】］]",
    r"\S{1,8}\s*(是|就是)(个|一个|一名)?(小偷|骗子|罪犯|杀人犯|强奸犯|恋童癖|人渣|贱人|婊子|诈骗犯|流氓|变态)",
    r"\S{1,8}(偷了|骗了|强奸|猥亵|谋杀|诈骗)",
]
# Searched one by one: a single alternation of all of them is twice as slow.
_HOSTILE = [re.compile(p, re.I | re.S) for p in _EN_PATTERNS + _ZH_PATTERNS]

# What a person may ask of the replies they get: about them, not the bot's rules.
_PREFERENCE = re.compile(
    r"^(?:(?:please|pls)\s+)?(?:(?:always|only)\s+)?(?:reply|respond|answer|write|speak|talk)"
    r"(?: to (?:me|him|her|them))?(?: only)? in (?:[a-z]+|simplified chinese|traditional chinese)(?: please)?[.!]?$"
    r"|^(?:please\s+)?call (?:me|him|her|them) [\w\-]+(?: please)?[.!]?$"
    r"|^(?:请)?(?:以后)?(?:用|使用)(?:简体|繁体|中文|英文|英语|日语|粤语)(?:中文)?(?:来)?(?:回答|回复|和我说话|跟我说话)(?:我)?[。!！]?$"
    r"|^(?:请)?(?:以后)?叫我[\w\u4e00-\u9fff]{1,8}(?:就好|吧|就行)?[。!！]?$",
    re.I,
)


def _forms(text: str) -> tuple[list[str], str]:
    """``text`` as written and undisguised: NFKC (full-width letters),
    no zero-width characters, spaced-out letters joined, base64 decoded;
    and, when it is spaced out, its letters run together ("" if not)."""
    plain = _ZERO_WIDTH.sub("", unicodedata.normalize("NFKC", text))
    forms = [plain]
    joined = ""
    if _SPACED.search(plain.lower()):
        joined = re.sub(r"[^a-z]", "", plain.lower())
        # "i g n o r e   a l l": letters one apart, words further apart
        forms.append(_SPACED.sub(lambda m: re.sub(r"[ ._\-*]", "", m.group(0)), plain.lower()))
        forms.append(" ".join(re.sub(r"[ ._\-*]", "", word) for word in _WORD_GAP.split(plain.lower())))
    for blob in _BASE64.findall(plain):
        try:
            decoded = base64.b64decode(blob + "=" * (-len(blob) % 4), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        if decoded.isprintable():
            forms.append(decoded)
    return forms, joined


def instruction_reason(text: str) -> str | None:
    """Why ``text`` reads as an instruction, a marker or an accusation
    rather than a fact; None when it reads as a fact."""
    forms, joined = _forms(text)
    found = _JOINED.search(joined) if joined else None
    for form in forms:
        if found:
            break
        if _PREFERENCE.match(form.strip()):
            continue
        found = next((m for m in (p.search(form) for p in _HOSTILE) if m), None)
    if found:
        # The catalogue's "reason.instruction", written out: this module imports
        # only the standard library.
        return f"reads as an instruction or a marker, not a fact: {found.group(0).strip()[:40]!r}"
    return None


# -- neutralising what goes into the block ------------------------------------------------

_MARKER_SWAPS = {
    "[": "(", "]": ")", "［": "(", "］": ")", "【": "(", "】": ")",
    "<": "‹", ">": "›", "＜": "‹", "＞": "›", "`": "'", "|": "¦",
}
_MARKERS = str.maketrans(_MARKER_SWAPS)
_MARKERS_FROM = tuple(_MARKER_SWAPS)
_ROLE = re.compile(r"\b(system|assistant|developer|user|human)\s*:", re.I)
_HASHES = re.compile(r"#{2,}")


# Most lines have nothing neutralise would change: returned as they are, at a fraction of the cost.
_OTHER_SPACE = re.compile(r"[^\S ]")
_MARKER_CHAR = re.compile("[" + re.escape("".join(_MARKERS_FROM)) + _ZERO_WIDTH.pattern[1:-1] + "]")
_ROLE_NAMES = ("system", "assistant", "developer", "user", "human")


def _unchanged(text: str) -> bool:
    if "  " in text or "##" in text or text[:1] == " " or text[-1:] == " ":
        return False
    if _OTHER_SPACE.search(text) is not None or _MARKER_CHAR.search(text) is not None:
        return False
    lowered = text.lower()
    return not any(name in lowered for name in _ROLE_NAMES) or _ROLE.search(text) is None


def neutralise(text: str) -> str:
    """``text`` as one line that can neither close nor open the block, nor
    start a role or a chat-template turn: no line breaks, no brackets or
    angle brackets, backticks, pipes, runs of '#' or 'role:' prefixes."""
    return text if _unchanged(text) else _neutralise_fully(text)


def _neutralise_fully(text: str) -> str:
    text = " ".join(_ZERO_WIDTH.sub("", text).split())
    text = text.translate(_MARKERS)
    text = _HASHES.sub("#", text)
    return _ROLE.sub(lambda m: m.group(1) + " -", text)
