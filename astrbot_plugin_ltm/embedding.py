"""Embedders: text → L2-normalised vectors, behind one small interface.

The plugin's embedder wraps an AstrBot embedding provider (adapter.py);
tests and benchmarks use a local model or a deterministic fake.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class Embedder(Protocol):
    # Identifies the vector space: vectors made by another model (or another
    # dimension) are never compared with these, they are re-embedded.
    model_id: str

    async def embed(self, texts: list[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dim), rows L2-normalised."""
        ...


def normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms
