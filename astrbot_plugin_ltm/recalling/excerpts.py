"""A long turn in the block: the part of it the message is about. Cut to its opening,
the detail a later question asks about never reaches the model; so its sentences
sharing the message's rarest words come first, then the one after each (an answer
follows the words that announce it), in the turn's order (docs/decisions.md#d80).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable
from functools import lru_cache
from itertools import accumulate

from ..text import is_cjk, search_tokens

MARK = "…"
TAIL_MIN_CHARS = 16  # room left after the sentences chosen that is worth the start of the next one
# A read excerpts a few dozen turns, and the same ones come back read after read.
EXCERPT_CACHE = 2048
# A sentence ends at a line break, after a CJK full stop (or ；), or after
# . ! ? … and a space; a list's "2." is no sentence of its own (joined below).
_BREAK = re.compile(r"\s*\n\s*|(?<=[。！？；])\s*|(?<=[.!?…])\s+")
_LIST_MARK = re.compile(r"^(?:\d{1,3}|[a-zA-Z])[.)]$")


@lru_cache(maxsize=EXCERPT_CACHE)
def sentences(text: str) -> tuple[tuple[str, str], ...]:
    """``text``'s sentences, each with its form as the tokenizer reads it (NFKC, lower case)."""
    pieces: list[str] = []
    for raw in _BREAK.split(text):
        piece = " ".join(raw.split())
        if not piece:
            continue
        if pieces and _LIST_MARK.match(pieces[-1]):
            pieces[-1] = f"{pieces[-1]} {piece}"
        else:
            pieces.append(piece)
    if text.isascii():  # NFKC leaves ASCII as it is
        return tuple((piece, piece.lower()) for piece in pieces)
    return tuple((piece, unicodedata.normalize("NFKC", piece).lower()) for piece in pieces)


def _probe(token: str) -> str:
    """A stem's letters but the last, as the stemmer changes only a word's end ("citi" ← "city")."""
    return token[:-1] if len(token) > 3 and token.isascii() and token.isalpha() else token


@lru_cache(maxsize=256)
def _finder(wanted: frozenset[str]) -> re.Pattern[str]:
    """Where a text may hold one of ``wanted``: a CJK bigram as is; a word by its probe."""
    # Bigrams before lone characters: at one place only the first that matches is seen.
    cjk = [re.escape(t) for t in sorted(wanted, key=len, reverse=True) if is_cjk(t[0])]
    words = [re.escape(_probe(t)) for t in wanted if not is_cjk(t[0])]
    parts = cjk + ([rf"\b(?:{'|'.join(words)})[^\W_]*"] if words else [])
    return re.compile(f"(?=({'|'.join(parts)}))")


def shared(said: tuple[tuple[str, str], ...], wanted: frozenset[str]) -> list[frozenset[str]]:
    """The tokens of ``wanted`` each sentence holds; only candidate words are stemmed, as
    stemming a long reply cost most of a read (docs/decisions.md#d82)."""
    if not wanted or not said:
        return [frozenset() for _ in said]
    held: list[set[str]] = [set() for _ in said]
    starts = list(accumulate((len(low) + 1 for _, low in said[:-1]), initial=0))
    text = "\n".join(low for _, low in said)
    for match in _finder(wanted).finditer(text):  # one pass over the turn
        word, at = match.group(1), match.start()
        found = held[bisect_right(starts, at) - 1]
        if len(word) == 1 and is_cjk(word):  # a lone CJK character is a token only outside a longer run
            if not ((at and is_cjk(text[at - 1])) or (at + 1 < len(text) and is_cjk(text[at + 1]))):
                found.add(word)
        elif word in wanted:
            found.add(word)
        else:
            found.update(t for t in search_tokens(word) if t in wanted)
    return [frozenset(h) for h in held]


def excerpt(text: str, query: Iterable[str], max_chars: int, keep: int | None = None) -> str:
    """``text`` if short enough, else at most ``keep`` of its sentences within ``max_chars``."""
    flat = " ".join(text.split())
    if len(flat) <= max_chars and (keep is None or len(_BREAK.findall(text)) < keep  # too few to choose from
                                    or len(sentences(text)) <= keep):
        return flat
    said = sentences(text)
    wanted = frozenset(query)
    held = shared(said, wanted) if wanted else [frozenset()] * len(said)
    spread: dict[str, int] = {}
    for tokens in held:
        for token in tokens:
            spread[token] = spread.get(token, 0) + 1
    weight = [sum(1.0 / spread[t] for t in tokens) for tokens in held]
    order = sorted((n for n in range(len(said)) if weight[n] > 0), key=lambda n: (-weight[n], n))
    limit = len(said) if keep is None else keep
    if not order:
        return _opening(said, max_chars, limit)
    best = order[0]
    if len(_render(said, [best])) > max_chars:  # the best sentence alone is longer than the bound
        return _window(said, best, sorted(held[best]), max_chars)
    chosen: list[int] = []
    used = 0
    # With ``keep``, no sentence after a match: a turn further down the block (docs/decisions.md#d71).
    paired = [m for n in order for m in (n, n + 1) if m < len(said)] if keep is None else order
    for n in paired + [n for n in range(len(said)) if weight[n] == 0]:
        if n in chosen:
            continue
        if len(chosen) >= limit or used >= max_chars - 1:
            break
        if len(said[n][0]) > max_chars - used:  # a sentence adds at least its own length
            continue
        tried = len(_render(said, sorted([*chosen, n])))
        if tried <= max_chars:
            chosen.append(n)
            used = tried
    shown = _render(said, sorted(chosen))
    # Room left: the start of the sentence after the last one shown, cut.
    after = max(chosen) + 1
    if after < len(said) and keep is None and max_chars - len(shown) > TAIL_MIN_CHARS:
        start = _cut(said[after][0], max_chars - len(shown) - 2)
        if len(start) >= TAIL_MIN_CHARS // 2:
            shown = _join([shown, start]) + MARK
    return shown[:max_chars]


def _render(said: tuple[tuple[str, str], ...], chosen: list[int]) -> str:
    """The ``chosen`` sentences in order, "…" where left out; none at the end unless cut
    mid-way, as a turn has no id to expand (docs/decisions.md#d73)."""
    parts: list[str] = []
    last = -1
    for n in chosen:
        if n > last + 1:
            parts.append(MARK)
        parts.append(said[n][0])
        last = n
    return _join(parts)


def _join(parts: list[str]) -> str:
    """Sentences joined as they were written: no space beside a CJK one."""
    out = ""
    for n, part in enumerate(parts):
        after = parts[n + 1] if part == MARK and n + 1 < len(parts) else part  # a mark goes with what follows
        if out and not (_cjk_edge(out[-1]) or _cjk_edge(after[0])):
            out += " "
        out += part
    return out


def _cjk_edge(ch: str) -> bool:
    return is_cjk(ch) or ch in "。！？；：，、"


def _opening(said: tuple[tuple[str, str], ...], max_chars: int, limit: int) -> str:
    """The first ``limit`` sentences, cut at ``max_chars`` ("…" ending the cut)."""
    flat = _join([s for s, _ in said[:limit]])
    if len(flat) <= max_chars:
        return flat
    return _cut(flat, max_chars - 1) + MARK


def _window(said: tuple[tuple[str, str], ...], n: int, shared: list[str], max_chars: int) -> str:
    """Sentence ``n`` cut to ``max_chars`` around the first of its ``shared`` tokens."""
    sentence, lower = said[n]
    found = [at for at in (lower.find(_probe(t)) for t in shared) if at >= 0]
    room = max_chars - 2  # the marks at both ends
    first = min(found, default=0)
    # From the sentence's start (what it is about: a name, a list's entry)
    # when the word is in reach; else a third of the room before the word.
    start = 0 if first + room // 4 <= room else first - room // 3
    start = min(start, max(0, len(sentence) - room))
    if start > 0 and not is_cjk(sentence[start]) and " " in sentence[start:start + room // 3]:
        start = sentence.index(" ", start) + 1  # not in the middle of a word
    body = _cut(sentence[start:], room) if len(sentence) - start > room else sentence[start:]
    head = MARK if start > 0 or n > 0 else ""
    tail = MARK if start + len(body) < len(sentence) else ""
    return f"{head}{body}{tail}"


def _cut(text: str, chars: int) -> str:
    """``text``'s first ``chars`` characters, at a word's end where there is one."""
    if len(text) <= chars:
        return text
    start = text[:chars]
    if " " in start and not is_cjk(text[chars - 1]) and not text[chars].isspace():
        start = start.rsplit(" ", 1)[0]
    return start.rstrip()
