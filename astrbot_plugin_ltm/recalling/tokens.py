"""Token counting for the read budget.

tiktoken's ``cl100k_base`` is used when its vocabulary can be had offline:
tiktoken itself would try to download it on first use, which hangs or fails
on a bot without internet, so the vocabulary is read from the copy the
``bpe-openai`` package ships (checked against tiktoken's published hash).
Without it, a conservative estimate is used that counts CJK characters one
by one; the budget must hold for the real tokenizer too, so the estimate
errs high.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import math
import re
from functools import lru_cache
from importlib import resources
from typing import Any

from ..extension_points import TokenCounter
from ..logs import log
from ..text import is_cjk

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
    """A lower bound of ``counter.count(text)``, far cheaper than counting:
    its words (runs without whitespace). cl100k splits text into pieces
    with at most one such run each, and encodes each piece in at least one
    token; the estimate counts each run too. 0 for any other counter."""
    if not isinstance(counter, TiktokenCounter | EstimateCounter):
        return 0
    return max(0, len(text.split()) - len(_SPLIT_ONLY.findall(text)))


def _load_offline_cl100k() -> Any:
    import tiktoken

    data = resources.files("bpe_openai.data").joinpath("cl100k_base.tiktoken.gz").read_bytes()
    raw = gzip.decompress(data)
    if hashlib.sha256(raw).hexdigest() != _CL100K_SHA256:
        raise ValueError("bpe-openai's cl100k_base file does not match tiktoken's hash")
    ranks = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return tiktoken.Encoding(
        name="cl100k_base",
        pat_str=_CL100K_PATTERN,
        mergeable_ranks=ranks,
        special_tokens=_CL100K_SPECIAL,
    )


@lru_cache(maxsize=1)
def default_counter() -> TokenCounter:
    """cl100k, else the estimate; a plugin reload imports this module
    afresh, so a package installed since is used then."""
    try:
        return TiktokenCounter(_load_offline_cl100k())
    except ImportError as exc:  # bpe-openai (or tiktoken) not installed: a failed install
        log.warning("ltm: %s is not installed: token counts for the memory block are estimated "
                    "(a little high, so blocks come out shorter); install requirements.txt and reload "
                    "the plugin", exc.name if exc.name and not exc.name.startswith("bpe_openai") else "bpe-openai")
    except Exception as exc:  # any failure means: fall back, never break reads
        log.warning("ltm: tiktoken cl100k unavailable offline (%s); using the CJK-aware estimate", exc)
    return EstimateCounter()

