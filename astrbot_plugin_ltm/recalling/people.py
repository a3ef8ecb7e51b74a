"""A read stage: a question about a person who speaks in the scope is answered by their
own turns: by words, the best matches are often others' turns addressing them, and the
keyword index never sees who spoke (docs/decisions.md#d124).
"""

from __future__ import annotations

from collections.abc import Collection
from functools import lru_cache

from ..enums import Role
from ..text import search_tokens
from ..withholding import speaker_of
from .ranking import fuse, turn_rankings
from .read import Read
from .rows import EventRow


@lru_cache(maxsize=4096)
def _name_tokens(name: str) -> frozenset[str]:
    return frozenset(search_tokens(name))


def names_speaker(tokens: frozenset[str], speaker: str | None) -> bool:
    """Whether a question's tokens name every word of ``speaker``'s name, as the keyword index sees it."""
    name = _name_tokens(speaker) if speaker else frozenset()
    return bool(name) and name <= tokens


def named_speakers(tokens: Collection[str], turns: dict[int, EventRow]) -> frozenset[str]:
    """The speakers of ``turns`` the question names; None for nobody or everyone, as the
    name then tells no turn apart. One pass: most questions name nobody."""
    if not tokens or not turns:
        return frozenset()
    # speaker_of, for a person's turn.
    speakers = {turn.sender_name or turn.sender_id for turn in turns.values() if turn.source_role == Role.USER}
    wanted = frozenset(tokens)
    named = frozenset(s for s in speakers if s is not None and names_speaker(wanted, s))
    return frozenset() if named == speakers else named


def their_turns(named: frozenset[str], fused: dict[int, float], turns: dict[int, EventRow]) -> list[int]:
    """The candidate turns the ``named`` people said, the best ``fused`` match first."""
    theirs = [rowid for rowid, turn in turns.items()
              if turn.source_role == Role.USER and speaker_of(turn) in named]
    return sorted(theirs, key=lambda rowid: (-fused.get(rowid, 0.0), rowid))


async def rank_their_turns(read: Read) -> None:
    """A stage: a question naming a person who spoke ranks that person's own candidate turns."""
    if named := named_speakers(read.query.tokens, read.turns):
        read.added.append(their_turns(named, fuse(turn_rankings(read)), read.turns))
