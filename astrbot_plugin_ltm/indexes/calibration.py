"""How close an embedding model puts texts that have nothing in common,
and the cosine two facts need to "say the same" under that model.

Models differ: all-MiniLM-L6-v2 puts unrelated sentences near cosine 0,
multilingual-e5 near 0.8, where two different facts about one person
(0.85–0.92) already pass a fixed 0.85 and would be merged into one memory.
So the threshold is a share of the distance from the model's floor to 1
(docs/decisions.md#d68).
"""

from __future__ import annotations

import numpy as np

# Sentences with nothing in common, English and Chinese: their mean pairwise
# cosine is the model's floor.
FLOOR_PROBES: tuple[str, ...] = (
    "The train to the airport leaves at seven in the morning.",
    "Photosynthesis turns sunlight, water and carbon dioxide into sugar.",
    "She plays the cello in a string quartet on Sundays.",
    "Interest rates rose again in the third quarter.",
    "我家的猫喜欢睡在窗台上晒太阳。",
    "这道菜需要用小火慢炖两个小时。",
    "明天的足球比赛改到下午三点开始。",
    "这台旧电脑的屏幕昨天突然坏了。",
)

# Two facts say the same when their cosine is this share of the way from
# the model's floor to 1 (0.85 was the fixed threshold for a floor of 0).
SAME_SHARE = 0.85
# A floor above this is not a model that tells texts apart; it is capped so
# the threshold stays below 1 (nothing would ever merge).
MAX_FLOOR = 0.9


def floor_of(vectors: np.ndarray) -> float:
    """The mean cosine of every pair of distinct rows of ``vectors``
    (normalised here), at least 0."""
    v = np.asarray(vectors, dtype=np.float32)
    v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    n = len(v)
    if n < 2:
        return 0.0
    cosines = v @ v.T
    mean = (float(cosines.sum()) - float(np.trace(cosines))) / (n * (n - 1))
    return min(max(mean, 0.0), MAX_FLOOR)


def same_threshold(floor: float) -> float:
    """The cosine above which two facts say the same, for a model whose
    unrelated texts sit at ``floor``."""
    return floor + (1.0 - floor) * SAME_SHARE
