"""A turn's keyword terms as the database keeps them: each search token as a
4-byte hash, the turn's own words only (its context is added when read).

The keyword namespaces know a term only by its hash; the tokens themselves
took five times the turn's text in FTS5 (docs/decisions.md#d158). CRC-32 is
the same in every process (Python's ``hash`` is not); two terms of one scope
collide with odds of about one in 4·10⁹ a pair.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence

import numpy as np

# Where a turn's passages meet (storing.turns.PASSAGE_BREAK): no term hashes to it.
BREAK_KEY = 0
_DTYPE = np.dtype("<u4")
KEY_BYTES = _DTYPE.itemsize  # a key's bytes in a blob


def term_key(term: str) -> int:
    return zlib.crc32(term.encode("utf-8")) or 1


def term_keys(tokens: Iterable[str], passage_break: str | None = None) -> np.ndarray:
    """The keys of ``tokens`` in order (``passage_break`` as BREAK_KEY)."""
    return np.fromiter((BREAK_KEY if t == passage_break else term_key(t) for t in tokens), np.int64)


def encode(tokens: Sequence[str], passage_break: str) -> bytes:
    """The blob of a turn's tokens (its passages' breaks kept)."""
    return term_keys(tokens, passage_break).astype(_DTYPE).tobytes()


def decode(blob: bytes | None) -> np.ndarray:
    """The keys of a blob (int64), breaks included; empty for None."""
    if not blob:
        return np.zeros(0, np.int64)
    return np.frombuffer(blob, _DTYPE).astype(np.int64)


def context_keys(own: np.ndarray, most: int) -> np.ndarray:
    """What a turn lends the next as context: its first ``most`` terms."""
    return own[own != BREAK_KEY][:most]


def with_context(own: np.ndarray, context: np.ndarray | None) -> np.ndarray:
    """A turn's keys as the keyword index reads them: its own, ``context``
    (the turn before's) joining its first passage (before its first break)."""
    if context is None or not len(context):
        return own
    breaks = np.flatnonzero(own == BREAK_KEY)
    at = int(breaks[0]) if len(breaks) else len(own)
    return np.concatenate([own[:at], context, own[at:]])
