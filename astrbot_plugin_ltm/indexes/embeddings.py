"""The embedding provider as the plugin uses it: bounded calls, a failing provider
warned about once (then keyword-only, nothing raises). A missing provider is reported
only when a read goes without it: AstrBot loads providers after plugins, so the
fill's first call at start comes a moment too early."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from ..enums import Corpus
from ..extension_points import Embedder
from ..logs import log
from ..scope import Scope
from ..storing.vector_rows import normalise
from .calibration import FLOOR_PROBES, floor_of, same_threshold
from .namespaces import COLD_WAIT
from .vectors import VectorIndex

# The same-fact threshold for a floor of 0, while the model's is unknown (docs/decisions.md#d18, #d68).
SEMANTIC_MATCH = same_threshold(0.0)
PRIMED_FACTS = 1024  # candidate facts' vectors kept between prime() and their write


@dataclass
class VectorHits:
    """Row id -> cosine similarity, per corpus."""

    memories: dict[int, float] = field(default_factory=dict)
    turns: dict[int, float] = field(default_factory=dict)


class Embeddings:
    def __init__(self, embedder: Embedder | None, index: VectorIndex, query_timeout: float = 2.0) -> None:
        self.embedder = embedder
        self.index = index
        self.query_timeout = query_timeout
        self._warned = False
        self._absent: str | None = None  # why there is no provider, until one answers
        self._announced = ""  # the model "vector search on" was logged for
        self._primed: OrderedDict[str, np.ndarray] = OrderedDict()
        self._thresholds: dict[str, float] = {}  # model -> its "same fact" cosine (calibration.py)
        # A provider reconfigured to another dimension keeps its name: the fill embeds everything again.
        self.dims: dict[str, int] = {}

    @property
    def model(self) -> str:
        """The vector space: vectors of another model are never compared."""
        return (getattr(self.embedder, "model_id", "") or "") if self.embedder else ""

    @property
    def provider_missing(self) -> bool:
        """The last call found no embedding provider (none configured in AstrBot)."""
        return self._absent is not None

    def _unavailable(self, why: str) -> None:
        if not self._warned:
            log.warning("ltm: vector search unavailable (%s); keyword-only", why)
            self._warned = True

    async def embed(self, texts: list[str], timeout: float | None = None) -> np.ndarray | None:
        """Normalised vectors of ``texts``; None when there is no provider or it fails."""
        if self.embedder is None or not texts:
            return None
        try:
            vectors = await asyncio.wait_for(self.embedder.embed(texts), timeout)
        except asyncio.CancelledError:
            raise
        except LookupError as exc:  # no provider, or none loaded yet: said by query()
            self._absent = str(exc) or "no embedding provider"
            log.debug("ltm: no embedding provider yet (%s)", self._absent)
            return None
        except Exception as exc:
            self._unavailable(f"{type(exc).__name__}: {exc}")
            return None
        self._absent = None
        if self._warned:  # the one warning said it was off: say it is back
            log.info("ltm: vector search available again (embedding model %s)", self.model)
        self._warned = False
        if self.model and self.model != self._announced:
            log.info("ltm: vector search on (embedding model %s)", self.model)
            self._announced = self.model
        vectors = normalise(vectors)
        if self.model and vectors.ndim == 2:
            if self.dims.get(self.model, vectors.shape[1]) != vectors.shape[1]:
                log.warning("ltm: embedding model %s now answers in %d dimensions (was %d); its vectors are "
                            "embedded again", self.model, vectors.shape[1], self.dims[self.model])
            self.dims[self.model] = int(vectors.shape[1])
        return vectors

    async def query(self, scopes: list[Scope], text: str, k: int,
                    corpora: tuple[Corpus, ...] = (Corpus.MEMORIES, Corpus.TURNS)) -> VectorHits:
        """Memories and turns near ``text``: one bounded embedding call, then each corpus's search."""
        vector = await self.embed([text], timeout=self.query_timeout)
        if vector is None and self._absent is not None:
            self._unavailable(self._absent)  # a person's turn goes without it: now it is true
        if vector is None or not self.model:
            return VectorHits()
        hits = await self.index.search_corpora(scopes, self.model, vector, k, corpora, wait=COLD_WAIT)
        return VectorHits(hits.get(Corpus.MEMORIES, {}), hits.get(Corpus.TURNS, {}))

    async def same_fact_cosine(self) -> float:
        """The model's same-fact cosine, measured once per model on FLOOR_PROBES;
        SEMANTIC_MATCH while the probe cannot be embedded."""
        model = self.model
        if model in self._thresholds:
            return self._thresholds[model]
        vectors = await self.embed(list(FLOOR_PROBES), timeout=self.query_timeout * 4)
        if vectors is None or not model:
            return SEMANTIC_MATCH
        floor = floor_of(vectors)
        self._thresholds[model] = threshold = same_threshold(floor)
        log.info("ltm: embedding model %s puts unrelated texts at cosine %.2f; facts merge above %.3f",
                 model, floor, threshold)
        return threshold

    async def find(self, scope: Scope, fact: str) -> int | None:
        """The writer's semantic match: a memory of ``scope`` above the model's same_fact_cosine()."""
        vector = self._primed.get(fact)
        if vector is None:
            found = await self.embed([fact], timeout=self.query_timeout)
            if found is None:
                return None
            vector = found[0]
        threshold = await self.same_fact_cosine()
        hits = await self.index.search([scope], self.model, vector[None, :], 1)
        best = max(hits.items(), key=lambda hit: hit[1], default=None)
        if best is None or best[1] <= threshold:
            return None
        return best[0]

    async def prime(self, facts: list[str]) -> None:
        """Embed facts before the write transaction opens, so a slow provider never holds the lock."""
        todo = [f for f in dict.fromkeys(facts) if f not in self._primed]
        vectors = await self.embed(todo, timeout=self.query_timeout * 4)
        if vectors is None:
            return
        for fact, vector in zip(todo, vectors, strict=True):
            self._primed[fact] = vector
        while len(self._primed) > PRIMED_FACTS:
            self._primed.popitem(last=False)
        await self.same_fact_cosine()  # measured here, outside the write transaction

    def primed(self, fact: str) -> np.ndarray | None:
        """The vector prime() made of ``fact``, if it is still kept."""
        return self._primed.get(fact)
