"""Text normalisation shared by the write and read paths. CJK is first-class:
most AstrBot users write Chinese, which splitting on spaces leaves unsearchable.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from functools import lru_cache
from importlib import metadata
from typing import Any

from .logs import log as _log  # with the filter AstrBot's log handlers need

FACT_KEY_MAX_CHARS = 128

_CJK_RANGES = (
    (0x3040, 0x30FF),  # hiragana, katakana
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xAC00, 0xD7AF),  # hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
)
_CJK_CLASS = "".join(f"\\u{lo:04x}-\\u{hi:04x}" for lo, hi in _CJK_RANGES)
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
# A Latin (or other script) word must not run on into CJK: "Python编程" is
# "python" + the CJK run "编程".
_TOKEN_RUN = re.compile(f"[{_CJK_CLASS}]+|[^\\W_{_CJK_CLASS}]+", re.UNICODE)

# Words too common to say anything about relevance. Kept short on purpose:
# BM25 already discounts frequent terms, this only removes query noise.
_STOPWORDS = frozenset(
    [
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "did", "do", "does", "for", "from", "had", "has",
        "have", "he", "her", "him", "his", "i", "i'm", "in", "is", "it", "its", "me", "my", "of", "on", "or", "our",
        "she", "so", "that", "the", "their", "them", "they", "this", "to", "was", "we", "were", "what", "when",
        "where", "which", "who", "why", "will", "with", "you", "your", "how", "about", "can", "could", "would",
        "should", "just", "like"
    ]
)


def is_cjk(ch: str) -> bool:
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in _CJK_RANGES)


def normalize_fact_key(raw: str) -> str:
    """The dedup key of a fact: lowercase, punctuation stripped, CJK kept;
    ``"Home City"`` and ``"home_city"`` meet."""
    text = unicodedata.normalize("NFKC", raw).lower()
    kept = []
    for ch in text:
        cat = unicodedata.category(ch)
        if cat[0] in ("L", "N"):
            kept.append(ch)
        elif ch.isspace() or ch in "_-.:/":
            kept.append(" ")
    key = "_".join("".join(kept).split())
    return key[:FACT_KEY_MAX_CHARS]


def _words(text: str) -> list[str]:
    """Lowercased words, a CJK run as its overlapping bigrams: no dictionary,
    the same at index and query time (docs/decisions.md#d27)."""
    text = unicodedata.normalize("NFKC", text).lower()
    tokens: list[str] = []
    for match in _TOKEN_RUN.finditer(text):
        run = match.group(0)
        if _CJK_RUN.fullmatch(run):
            if len(run) == 1:
                tokens.append(run)
            else:
                tokens.extend(run[i : i + 2] for i in range(len(run) - 1))
        else:
            tokens.append(run)
    return tokens


NO_STEMMER = "none"


def _load_stemmer() -> tuple[Any, str]:
    """snowballstemmer's English stemmer and the name the keyword rows record
    it by; without the package, NO_STEMMER and words indexed as they are."""
    try:
        import snowballstemmer
    except ImportError as exc:
        _log.warning("ltm: snowballstemmer is not installed (%s): English keywords are not stemmed, "
                     "so \"books\" will not find \"book\"; install requirements.txt and reload the plugin", exc)
        return None, NO_STEMMER
    try:
        version = metadata.version("snowballstemmer")
    except metadata.PackageNotFoundError:  # imported from a path, not installed
        version = getattr(snowballstemmer, "__version__", "?")
    # Releases stem a few words differently between minor versions (requirements.txt).
    return snowballstemmer.stemmer("english"), "snowballstemmer " + ".".join(version.split(".")[:2])


_STEMMER, KEYWORD_STEMMER = _load_stemmer()
_STEM_LOCK = threading.Lock()


def stem(word: str) -> str:
    """An English word's stem; any other token as it is (docs/decisions.md#d10)."""
    return _english_stem(word) if _STEMMER is not None and word.isascii() and word.isalpha() else word


# Only English words are cached: CJK bigrams, far more numerous, pushed
# them out, and a miss costs ~70 µs (docs/decisions.md#d72). 16,384 words
# hold a chat's vocabulary in a quarter of 65,536's memory (docs/decisions.md#d166).
@lru_cache(maxsize=16384)
def _english_stem(word: str) -> str:
    # One stemmer object keeps its state on itself: two threads (the
    # recorder's withhold, a read) stemming at once raised or stemmed wrong,
    # and lru_cache kept the wrong stem (docs/decisions.md#d100).
    with _STEM_LOCK:
        return str(_STEMMER.stemWord(word))


def search_tokens(text: str) -> list[str]:
    """Tokens for the keyword index and keyword queries."""
    return [stem(word) for word in _words(text)]


def index_text(text: str) -> str:
    """What the FTS5 table stores: the search tokens joined by spaces."""
    return " ".join(search_tokens(text))


def query_tokens(text: str, limit: int = 32) -> list[str]:
    """Distinct, meaningful tokens of a query, in order, at most ``limit``."""
    seen: dict[str, None] = {}
    for word in _words(text):
        if word in _STOPWORDS or (len(word) == 1 and not is_cjk(word)):
            continue
        seen.setdefault(stem(word), None)
        if len(seen) >= limit:
            break
    return list(seen)


def replace_literally(pattern: re.Pattern[str], replacement: str, text: str) -> str:
    """``pattern.sub`` with ``replacement`` taken as it is: a name may hold
    backslashes that re would read as group references."""
    return pattern.sub(lambda _match: replacement, text)


def fts_match_expression(tokens: list[str]) -> str:
    """An FTS5 MATCH string that ORs the tokens, each quoted literally."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in tokens)


@lru_cache(maxsize=4096)
def _token_set(text: str) -> frozenset[str]:
    return frozenset(search_tokens(text))


def token_set_similarity(a: str, b: str) -> float:
    """Jaccard similarity of two texts' search tokens (0 when both empty)."""
    sa, sb = _token_set(a), _token_set(b)
    if not sa and not sb:
        return 0.0
    return len(sa & sb) / len(sa | sb)


_NEGATION = re.compile(
    r"\b(not|never|no longer|no|don't|doesn't|didn't|isn't|aren't|wasn't|won't|cannot|can't|dislikes?|hates?)\b"
    r"|不|没|别|未|非|讨厌",
    re.I,
)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
# Chinese numerals: a run with 十/百/千 or of two or more digits, or one
# digit before a unit ("三岁", "两只"): "一直", "统一" are words, not numbers.
_CN_DIGITS = "零〇一二两三四五六七八九"
_CN_NUMBER = re.compile(f"[{_CN_DIGITS}十百千]*[十百千][{_CN_DIGITS}]?|[{_CN_DIGITS}]{{2,}}"
                        f"|[{_CN_DIGITS}](?=[岁年月日号个只位次天周元块本件条口])")
# A plan called off or moved is a new value of the plan, like a negation.
_CALLED_OFF = re.compile(r"\b(cancel(?:l?ed|s|ling)?|called off|postpon\w*|delay(?:ed|s)?|put off)\b"
                         r"|取消|推迟|延期|改期|作罢", re.I)
_UNIT = re.compile(f"[{_CJK_CLASS}]|[^\\W_{_CJK_CLASS}]+", re.UNICODE)
_MAX_VALUE_UNITS = 8  # a replaced value ("Paris", "上海", "30") is short
# Characters that carry grammar, not a value ("的", "是", "在"): two
# phrasings of one value differ in these.
_FUNCTION_CHARS = frozenset("的是在了和也都就我你他她它们个这那有要会很最着过被把得地吗呢吧啊")
SAME_VALUE_SHARE = 0.5  # of the shorter side's value units that two phrasings of one value share


def _units(text: str) -> list[str]:
    """Words, and single CJK characters, for comparing two phrasings."""
    return _UNIT.findall(unicodedata.normalize("NFKC", text).lower())


def _cn_value(numeral: str) -> int:
    digits = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"〇": 0, "两": 2}
    if not any(c in numeral for c in "十百千"):
        return int("".join(str(digits[c]) for c in numeral))
    total, digit = 0, 0
    for ch in numeral:
        if ch in digits:
            digit = digits[ch]
        else:
            total += (digit or 1) * {"十": 10, "百": 100, "千": 1000}[ch]
            digit = 0
    return total + digit


def _numbers(text: str) -> set[str]:
    """The numbers ``text`` states, Chinese numerals as digits ("三十一岁": 31)."""
    found = set(_NUMBER.findall(text))
    found.update(str(_cn_value(m)) for m in _CN_NUMBER.findall(text))
    return found


def _value_units(units: list[str]) -> set[str]:
    """What carries a value: stemmed content words, CJK characters less grammar."""
    out: set[str] = set()
    for unit in units:
        if len(unit) == 1 and is_cjk(unit):
            if unit not in _FUNCTION_CHARS:
                out.add(unit)
        elif unit not in _STOPWORDS:
            out.add(stem(unit))
    return out


def _mostly_cjk(units: list[str]) -> bool:
    cjk = sum(1 for u in units if len(u) == 1 and is_cjk(u))
    return cjk > sum(1 for u in units if not (len(u) == 1 and is_cjk(u)) and not u.isdigit())


def _after_common_start(old: str, new: str) -> tuple[list[str], list[str], int]:
    a, b = _units(old), _units(new)
    prefix = 0
    while prefix < min(len(a), len(b)) and a[prefix] == b[prefix]:
        prefix += 1
    return a[prefix:], b[prefix:], prefix


def _shared(rest_a: list[str], rest_b: list[str]) -> float:
    """How much of the shorter side's value units the other side has too."""
    va, vb = _value_units(rest_a), _value_units(rest_b)
    return len(va & vb) / min(len(va), len(vb)) if va and vb else 0.0


def contradicts(old: str, new: str) -> bool:
    """Keyword heuristic: does ``new`` contradict ``old`` (same fact key)?
    Models reword facts all the time, so a different wording is not enough:
    a negation or a called-off plan on one side only, different numbers, or
    a short differing value after a common start ("住在上海" / "住在北京")."""
    if bool(_NEGATION.search(old)) != bool(_NEGATION.search(new)):
        return True
    if bool(_CALLED_OFF.search(old)) != bool(_CALLED_OFF.search(new)):
        return True
    old_numbers, new_numbers = _numbers(old), _numbers(new)
    if old_numbers and new_numbers and old_numbers != new_numbers:
        return True
    rest_a, rest_b, prefix = _after_common_start(old, new)
    if not rest_a or not rest_b or rest_a[-1] == rest_b[-1]:
        return False  # a refinement, or the same ending
    return (prefix >= 2 and len(rest_a) <= _MAX_VALUE_UNITS and len(rest_b) <= _MAX_VALUE_UNITS
            and _shared(rest_a, rest_b) <= SAME_VALUE_SHARE)  # "named Rex" / "now named Max"


def same_value(old: str, new: str) -> bool | None:
    """Do two statements given the same fact key state the same value? None
    when one is Chinese, the other not, and words cannot tell (docs/decisions.md#d74)."""
    if contradicts(old, new):
        return False
    rest_a, rest_b, _ = _after_common_start(old, new)
    va, vb = _value_units(rest_a), _value_units(rest_b)
    if not va or not vb or rest_a[-1] == rest_b[-1]:
        return True  # one adds to or trims the other, or both end on the value
    if _mostly_cjk(_units(old)) != _mostly_cjk(_units(new)):
        return True if va & vb else None
    return _shared(rest_a, rest_b) >= SAME_VALUE_SHARE


# Words of a fact key that name one attribute: a model may write either.
_KEY_SYNONYMS = {"occupation": "job", "profession": "job", "career": "job"}
MIN_RELATED_KEY_WORDS = 2  # the subject and at least one attribute word
MAX_RELATED_KEY_WORDS = 4  # a key, not a sentence standing in for one (a fact without its key)


def related_keys(a: str, b: str) -> bool:
    """Do two different fact keys name one attribute of one subject, as
    ``alice_city`` / ``alice_home_city`` do? (docs/decisions.md#d90)"""
    if a == b:
        return False
    first_a, words_a = _key_words(a)
    first_b, words_b = _key_words(b)
    if not first_a or first_a != first_b:
        return False
    shorter, longer = sorted((words_a, words_b), key=len)
    return len(shorter) >= MIN_RELATED_KEY_WORDS and len(longer) <= MAX_RELATED_KEY_WORDS and shorter <= longer


@lru_cache(maxsize=8192)
def _key_words(key: str) -> tuple[str, frozenset[str]]:
    """A key's first word and its words, synonyms made one; cached, as the
    writer compares the same keys candidate after candidate (docs/decisions.md#d128)."""
    words = [_KEY_SYNONYMS.get(w, w) for w in key.split("_") if w]
    return (words[0] if words else ""), frozenset(words)


# CJK full stops need no space after them.
_SENTENCE_END = re.compile(r"(?<=[.!?;…])\s+|(?<=[。！？；])\s*|\s*\n\s*")
MIN_SENTENCE_TOKENS = 3  # "Hey Tim!", "好的。": nothing to find a turn by alone
MAX_SENTENCES = 8


def sentences(text: str) -> list[str]:
    """What ``text`` is searched by: its sentences worth searching by, then
    the whole text when a short one ("在上海。") was left out, so nothing said
    is out of reach (docs/decisions.md#d07)."""
    whole = text.strip()
    said = [p for p in _SENTENCE_END.split(whole) if p.strip()]
    parts = [p for p in said if len(search_tokens(p)) >= MIN_SENTENCE_TOKENS]
    if not parts:
        return [whole] if whole else []
    left_out = len(parts) < len(said)
    if len(parts) > MAX_SENTENCES:
        parts[MAX_SENTENCES - 1:] = [" ".join(parts[MAX_SENTENCES - 1:])]
    return parts + [whole] if left_out else parts
