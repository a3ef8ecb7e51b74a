"""Drift: how far one snapshot of a scope kind's memory distribution is from
the one before, as the cosine similarity of two vectors built the same way
(pure functions; the snapshots themselves: :mod:`.drift_monitor`).

The vector is five blocks, each made unit length, concatenated
(docs/operating.md "Drift", docs/decisions.md#d55):

1. the share of each memory type (``MEMORY_TYPES`` order);
2. the share of each status (``Status`` order, superseded left out: history);
3. the mean confidence x ∈ [0, 1] as the unit 2-vector (cos πx/2, sin πx/2);
4. the writes per hour w as the same 2-vector of x = min(1, log10(1 + w) / 3)
   (1000 writes an hour and more are x = 1);
5. the unit centroid of the memories' embeddings, only when both snapshots
   have one of the same model and dimension (else the block is left out of
   both).

As every block has length 1, the cosine of two such vectors is the mean of
the blocks' own cosines: a block that turns by 60° (cosine 0.5) while the
four others stay costs 0.1. A block with nothing in it (no memories) is
zero, and then counts as a full turn against a non-empty one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..enums import MEMORY_TYPES, Status

STATUSES: tuple[str, ...] = tuple(s for s in Status if s != Status.SUPERSEDED)
WRITES_DECADES = 3.0  # log10(1 + writes per hour) reaching this is the top of the scale (1000/h)


@dataclass(frozen=True)
class Features:
    """What a snapshot measures of one scope kind's current memories (every
    status but superseded)."""

    items: int = 0
    by_type: dict[str, int] = field(default_factory=dict)
    by_status: dict[str, int] = field(default_factory=dict)
    writes_per_hour: float = 0.0  # new memories in the 24 h before, / 24
    mean_confidence: float = 0.0  # 0 without memories
    vectors: int = 0  # memories with an embedding in the centroid
    model: str | None = None  # the embedding model of the centroid

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Features:
        known = {k: raw[k] for k in cls.__dataclass_fields__ if k in raw}
        return cls(**known)


def _unit(values: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(values))
    return values / norm if norm > 0 else values


def _shares(counts: dict[str, int], keys: tuple[str, ...]) -> np.ndarray:
    return _unit(np.array([float(counts.get(k, 0)) for k in keys], dtype=np.float64))


def _angle(x: float) -> np.ndarray:
    """x ∈ [0, 1] as a unit 2-vector: two values' cosine is cos(π/2 · |x − y|)."""
    theta = math.pi / 2 * min(1.0, max(0.0, x))
    return np.array([math.cos(theta), math.sin(theta)])


def writes_scale(writes_per_hour: float) -> float:
    return min(1.0, math.log10(1.0 + max(0.0, writes_per_hour)) / WRITES_DECADES)


def drift_vector(features: Features, centroid: np.ndarray | None = None) -> np.ndarray:
    """The snapshot's vector; ``centroid`` only when the other side has one too."""
    blocks = [
        _shares(features.by_type, MEMORY_TYPES),
        _shares(features.by_status, STATUSES),
        _angle(features.mean_confidence),
        _angle(writes_scale(features.writes_per_hour)),
    ]
    if centroid is not None:
        blocks.append(_unit(np.asarray(centroid, dtype=np.float64)))
    return np.concatenate(blocks)


def comparable_centroids(a: Features, ca: np.ndarray | None, b: Features,
                         cb: np.ndarray | None) -> bool:
    return ca is not None and cb is not None and a.model == b.model and ca.shape == cb.shape


def similarity(a: Features, ca: np.ndarray | None, b: Features, cb: np.ndarray | None) -> float:
    """Cosine similarity of the two snapshots' vectors, in [0, 1] (every
    component is non-negative but the centroid's, so it is clipped at 0)."""
    with_centroid = comparable_centroids(a, ca, b, cb)
    va = drift_vector(a, ca if with_centroid else None)
    vb = drift_vector(b, cb if with_centroid else None)
    na, nb = float(np.linalg.norm(va)), float(np.linalg.norm(vb))
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return max(0.0, min(1.0, float(va @ vb) / (na * nb)))


def centroid_bytes(centroid: np.ndarray | None) -> bytes | None:
    return None if centroid is None else np.asarray(centroid, dtype=np.float32).tobytes()


def centroid_of(raw: bytes | None) -> np.ndarray | None:
    return None if not raw else np.frombuffer(raw, dtype=np.float32).astype(np.float64)
