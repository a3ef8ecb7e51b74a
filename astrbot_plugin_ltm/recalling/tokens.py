"""Token counting for the read budget. cl100k_base comes from ``bpe-openai``'s copy
(hash-checked): tiktoken would download it, which hangs on a bot without internet.
Without it, an estimate that errs high, as the budget must hold for the real tokenizer.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import math
import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..extension_points import TokenCounter
from ..logs import log
from ..text import is_cjk

_CL100K_FILE = "cl100k_base.tiktoken.gz"
_CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_CL100K_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


class TiktokenCounter:
    def __init__(self, encoding: Any) -> None:
        self._encoding = encoding
        self.name = f"tiktoken:{encoding.name}"

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))


class EstimateCounter:
    """Upper-bound estimate: 2 tokens per CJK character (cl100k spends 1–3),
    and for other text the larger of words×1.5 and characters/3."""

    name = "estimate"

    def count(self, text: str) -> int:
        cjk = sum(1 for ch in text if is_cjk(ch))
        rest = "".join(" " if is_cjk(ch) else ch for ch in text)
        words = len(rest.split())
        other = max(math.ceil(words * 1.5), math.ceil(len(rest.strip()) / 3))
        return 2 * cjk + other


# Characters str.split() breaks at that the counters' whitespace does not.
_SPLIT_ONLY = re.compile("[\x1c-\x1f]")


def fewest_tokens(counter: TokenCounter, text: str) -> int:
    """A cheap lower bound of ``counter.count(text)``: its words, as cl100k's pieces hold at
    most one run without whitespace each; 0 for any other counter."""
    if not isinstance(counter, TiktokenCounter | EstimateCounter):
        return 0
    return max(0, len(text.split()) - len(_SPLIT_ONLY.findall(text)))


def joined_count(counter: TokenCounter, parts: list[str], count: Callable[[str], int]) -> int:
    """``counter.count("\\n".join(parts))`` from the cached counts of ``"\\n" + part``, with no
    new encoding (docs/decisions.md#d134): cl100k encodes pieces on their own, and a break
    before a part ends one. Any other counter, or other edges: counted whole."""
    if not isinstance(counter, TiktokenCounter) or len(parts) < 2 \
            or any(not part or part[0].isspace() for part in parts[1:]):
        return count("\n".join(parts))
    total = count(parts[0] + "\n") + count("\n" + parts[-1]) - 1
    for part in parts[1:-1]:
        tail = _last_piece(part)
        if tail is None:
            return count("\n".join(parts))
        # "\n" + part counts one more than the part (the break alone is a token)
        total += count("\n" + part) if not tail else count("\n" + part) - 1 - count(tail) + count(tail + "\n")
    return total


def _last_piece(part: str) -> str | None:
    """"" after a letter or digit (a break is then a piece of its own); else cl100k's last
    piece, which takes a break in: trailing punctuation and the space before; else None."""
    if unicodedata.category(part[-1])[0] in "LN":
        return ""
    start = len(part)
    while start and unicodedata.category(part[start - 1])[0] in "PS":
        start -= 1
    if start == len(part):
        return None
    if not start or unicodedata.category(part[start - 1])[0] in "LN":
        return part[start:]
    return part[start - 1:] if part[start - 1] == " " else None


def _cl100k_file() -> bytes:
    """bpe-openai's cl100k file, read without importing the package when it can be: its
    import keeps all three vocabularies, ~55 MB resident. ImportError when not installed."""
    try:
        spec = importlib.util.find_spec("bpe_openai")
    except ValueError:  # in sys.modules without a spec
        spec = None
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(location) / "data" / _CL100K_FILE
        if path.is_file():
            return path.read_bytes()
    return resources.files("bpe_openai.data").joinpath(_CL100K_FILE).read_bytes()


def _load_offline_cl100k() -> Any:
    import tiktoken

    raw = gzip.decompress(_cl100k_file())
    if hashlib.sha256(raw).hexdigest() != _CL100K_SHA256:
        raise ValueError("bpe-openai's cl100k_base file does not match tiktoken's hash")
    ranks = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    encoding = tiktoken.Encoding(
        name="cl100k_base",
        pat_str=_CL100K_PATTERN,
        mergeable_ranks=ranks,
        special_tokens=_CL100K_SPECIAL,
    )
    # Only pickling needs the Python copy of the ranks, which the counter never does: 18 MB (docs/decisions.md#d161).
    encoding._mergeable_ranks = {}
    return encoding


@lru_cache(maxsize=1)
def default_counter() -> TokenCounter:
    """cl100k, else the estimate; a reload picks up a package installed since."""
    try:
        return TiktokenCounter(_load_offline_cl100k())
    except ImportError as exc:  # bpe-openai (or tiktoken) not installed: a failed install
        log.warning("ltm: %s is not installed: token counts for the memory block are estimated "
                    "(a little high, so blocks come out shorter); install requirements.txt and reload "
                    "the plugin", exc.name if exc.name and not exc.name.startswith("bpe_openai") else "bpe-openai")
    except Exception as exc:  # any failure means: fall back, never break reads
        log.warning("ltm: tiktoken cl100k unavailable offline (%s); using the CJK-aware estimate", exc)
    return EstimateCounter()

