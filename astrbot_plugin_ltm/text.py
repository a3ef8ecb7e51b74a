"""Text normalisation shared by the write and read paths.

Everything here must treat Chinese, Japanese and Korean text as first-class:
most AstrBot users write Chinese, and a tokenizer that only splits on spaces
would turn a whole Chinese sentence into one unsearchable token.
"""

from __future__ import annotations

import re
import unicodedata

FACT_KEY_MAX_CHARS = 128

# CJK Unified Ideographs (+ extension A, compatibility), kana, hangul.
_CJK_RANGES = (
    (0x3040, 0x30FF),  # hiragana, katakana
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xAC00, 0xD7AF),  # hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
)
_CJK_CLASS = "".join(f"\\u{lo:04x}-\\u{hi:04x}" for lo, hi in _CJK_RANGES)
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
_TOKEN_RUN = re.compile(f"[{_CJK_CLASS}]+|[^\\W_]+", re.UNICODE)

# Words too common to say anything about relevance. Kept short on purpose:
# BM25 already discounts frequent terms, this only removes query noise.
_STOPWORDS = frozenset(
    """a an and are as at be but by did do does for from had has have he her
    him his i i'm in is it its me my of on or our she so that the their them
    they this to was we were what when where which who why will with you your
    how about can could would should just like""".split()
)


def is_cjk(ch: str) -> bool:
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in _CJK_RANGES)


def normalize_fact_key(raw: str) -> str:
    """The dedup key of a fact: lowercase, punctuation stripped, CJK kept.

    Runs of whitespace and underscores collapse to one underscore so that
    ``"Home City"`` and ``"home_city"`` meet; the result is cut to 128 chars.
    """
    text = unicodedata.normalize("NFKC", raw).lower()
    kept = []
    for ch in text:
        cat = unicodedata.category(ch)
        if cat[0] in ("L", "N"):
            kept.append(ch)
        elif ch.isspace() or ch in "_-.:/":
            kept.append(" ")
        # every other punctuation or symbol is dropped
    key = "_".join("".join(kept).split())
    return key[:FACT_KEY_MAX_CHARS]


def search_tokens(text: str) -> list[str]:
    """Tokens for the keyword index and keyword queries.

    Latin words are lowercased; a CJK run becomes its overlapping character
    bigrams (a lone character stays a unigram). Bigrams need no dictionary,
    behave the same at index and query time, and are what CJK search
    engines have long used for recall.
    """
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


def index_text(text: str) -> str:
    """What the FTS5 table stores: the search tokens joined by spaces."""
    return " ".join(search_tokens(text))


def query_tokens(text: str, limit: int = 32) -> list[str]:
    """Distinct, meaningful tokens of a query, in order, at most ``limit``."""
    seen: dict[str, None] = {}
    for token in search_tokens(text):
        if token in _STOPWORDS or (len(token) == 1 and not is_cjk(token)):
            continue
        seen.setdefault(token, None)
        if len(seen) >= limit:
            break
    return list(seen)


def fts_match_expression(tokens: list[str]) -> str:
    """An FTS5 MATCH string that ORs the tokens, each quoted literally."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in tokens)


def token_set_similarity(a: str, b: str) -> float:
    """Jaccard similarity of two texts' search tokens (0 when both empty)."""
    sa, sb = set(search_tokens(a)), set(search_tokens(b))
    if not sa and not sb:
        return 0.0
    return len(sa & sb) / len(sa | sb)


def _content_tokens(text: str) -> set[str]:
    return {t for t in search_tokens(text) if t not in _STOPWORDS and (len(t) > 1 or is_cjk(t))}


def contradicts(old: str, new: str) -> bool:
    """Keyword heuristic for two statements under the same fact key.

    A restatement or a refinement (one side's content words contain the
    other's) agrees; when each side says something the other does not and
    they share little ("lives in Paris" / "lives in London", "30" / "31",
    "likes" / "doesn't like"), they contradict.
    """
    a, b = _content_tokens(old), _content_tokens(new)
    if a <= b or b <= a:
        return False
    return len(a & b) / len(a | b) < 0.75
