"""A rerank provider's judgement of a read's best candidates: it reads the question
and each candidate together, finding answers in other words than the question's. Its
order is fused with the ranking's, so one bad judgement moves one candidate, not the
block; a failing or slow reranker leaves the ranking as it was (docs/decisions.md#d151).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence

from ..config import RerankConfig
from ..enums import MemoryType
from ..extension_points import Reranker
from ..logs import log
from .block import event_body
from .ranking import Ranked, fuse
from .read import Focus
from .summary_lines import focus

# What the rest of a read (the fit, the thread hops) is left after the reranker's call.
FIT_MARGIN = 0.25
MIN_CALL_SECONDS = 0.05  # less than this left: the ranking stands, uncalled


def document(candidate: Ranked, about: Focus) -> str:
    """What the reranker reads of a candidate: what the block would show of it."""
    memory = candidate.memory
    if memory is not None:
        if memory.type == MemoryType.SUMMARY and memory.id not in about.whole:
            return focus(memory.fact, about.tokens)
        return memory.fact
    assert candidate.turn is not None
    return event_body(candidate.turn, about)


def reorder(ranked: list[Ranked], scores: Sequence[float]) -> list[Ranked]:
    """The first ``len(scores)`` reordered by fusion with the reranker's; each position
    keeps its score, so the budget and the trace read the same scale."""
    n = len(scores)
    mine = list(range(n))
    theirs = sorted(mine, key=lambda i: (-scores[i], i))
    fused = fuse([mine, theirs])
    order = sorted(mine, key=lambda i: (-fused[i], i))
    top = [ranked[i] for i in order]
    for candidate, score in zip(top, sorted((r.score for r in ranked[:n]), reverse=True), strict=True):
        candidate.score = score
    return top + ranked[n:]


class Reranking:
    """The read path's call to the reranker: bounded, never raising; ``config`` is read at
    each call, so a new configuration takes effect at once."""

    def __init__(self, rerankers: Callable[[str], Reranker], config: Callable[[], RerankConfig]) -> None:
        self._rerankers = rerankers
        self._config = config
        self._built: tuple[str, Reranker] | None = None
        self._warned = False

    @property
    def on(self) -> bool:
        """A rerank provider is configured."""
        return bool(self._config().provider_id)

    def documents(self, ranked: Sequence[Ranked], about: Focus) -> list[str]:
        """The texts of the candidates to rerank (built in the read's thread)."""
        return [document(r, about) for r in ranked[:self._config().candidates]] if self.on else []

    def _reranker(self, provider_id: str) -> Reranker:
        if self._built is None or self._built[0] != provider_id:
            self._built = (provider_id, self._rerankers(provider_id))
        return self._built[1]

    async def apply(self, query: str, ranked: list[Ranked], documents: list[str],
                    seconds_left: float) -> list[Ranked]:
        """``ranked`` reordered by the reranker; as it was when it cannot help in time."""
        config = self._config()
        if len(documents) < 2 or not config.provider_id or not query.strip():
            return ranked
        timeout = min(config.timeout_seconds, seconds_left - FIT_MARGIN)
        if timeout < MIN_CALL_SECONDS:
            log.debug("ltm: %.2f s left of the read: not reranked", seconds_left)
            return ranked
        try:
            scores = await asyncio.wait_for(self._reranker(config.provider_id).rerank(query, documents), timeout)
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            self._failed(f"no answer within {timeout:g} s")
            return ranked
        except Exception as exc:
            self._failed(f"{type(exc).__name__}: {exc}")
            return ranked
        if len(scores) != len(documents):
            self._failed(f"{len(scores)} scores for {len(documents)} candidates")
            return ranked
        if not all(isinstance(s, int | float) and math.isfinite(s) for s in scores):
            self._failed("a score that is not a finite number")
            return ranked
        if self._warned:
            log.info("ltm: reranking available again (rerank provider %s)", config.provider_id)
            self._warned = False
        return reorder(ranked, scores)

    def _failed(self, why: str) -> None:
        if not self._warned:
            log.warning("ltm: reranking unavailable (%s); memories are ranked by the retrievers alone", why)
            self._warned = True
