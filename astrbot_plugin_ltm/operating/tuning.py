"""Tuning on the replay set: a bounded grid over the write and read
thresholds, fitted on every session not in the holdout, the best checked on
the holdout. Never the safety settings; nothing is applied
(docs/decisions.md#d54). A best that scores worse on the holdout is
reported as overfitted, not proposed.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from ..clock import Clock
from ..config import LTMConfig
from ..i18n import msg
from ..learning.replay_gate import GateReplay, replay_gate
from ..recalling.reader import MemoryReader
from .replay import MARGIN, ReadFigures, ReplayData, overlay, reads, side, switches, ticker

# The grid: 4 × 2 × 3 = 24 candidates (and the current policy).
GRID: dict[str, tuple[float | int, ...]] = {
    "write_policy.min_confidence": (0.5, 0.6, 0.7, 0.8),
    "write_policy.min_evidence_count": (1, 2),
    "read_policy.min_confidence": (0.4, 0.5, 0.6),
}
TUNE_READS = 60  # reads and self-recall probes per set, each (a grid point costs up to twice this many reads)


def with_values(cfg: LTMConfig, values: Mapping[str, float | int]) -> LTMConfig:
    out = copy.deepcopy(cfg)
    for path, value in values.items():
        section, name = path.split(".")
        setattr(getattr(out, section), name, value)
    return out


def grid_points(grid: Mapping[str, Sequence[float | int]]) -> list[dict[str, float | int]]:
    names = list(grid)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*(grid[n] for n in names))]


class _Scorer:
    """Scores policies on one data set; reads that would repeat (the same
    read policy and the same statuses) are done once."""

    def __init__(self, live: MemoryReader, clock: Clock, data: ReplayData, current: LTMConfig,
                 tick: Callable[[], None]) -> None:
        self.live, self.clock, self.data, self.tick = live, clock, data, tick
        self.current = current
        self.current_gate: GateReplay | None = None
        self._reads: dict[str, ReadFigures] = {}

    async def score(self, cfg: LTMConfig) -> tuple[float, dict[str, Any]]:
        # Pure Python over every logged candidate: off the event loop.
        if self.current_gate is None:
            self.current_gate = await asyncio.to_thread(replay_gate, self.data.candidates, switches(self.current))
        gate = await asyncio.to_thread(replay_gate, self.data.candidates, switches(cfg))
        statuses = overlay(self.data, self.current_gate, gate)
        key = json.dumps([asdict(cfg.read_policy), cfg.write_policy.mode, cfg.enable, sorted(statuses.items())])
        if key not in self._reads:
            self._reads[key] = await reads(self.live, self.clock, self.data, cfg, statuses, self.tick)
        s = side(self.data, gate, self._reads[key])
        return s.score, s.as_dict()


async def tune(live: MemoryReader, clock: Clock, fitting: ReplayData, holdout: ReplayData, current: LTMConfig,
               step: Callable[[int, int], None],
               grid: Mapping[str, Sequence[float | int]] = GRID) -> dict[str, Any]:
    points = grid_points(grid)
    per_set = len(fitting.reads) + len(fitting.probes)
    total = per_set * (len(points) + 1) + 2 * (len(holdout.reads) + len(holdout.probes))
    tick = ticker(step, total)
    fit = _Scorer(live, clock, fitting, current, tick)
    current_fit, _ = await fit.score(current)
    scored = []
    for values in points:
        score, _ = await fit.score(with_values(current, values))
        scored.append((score, values))
    # Ties go to the current policy: a change must earn its place.
    best_fit, best = current_fit, {path: _get(current, path) for path in grid}
    for score, values in scored:
        if score > best_fit:
            best_fit, best = score, values
    hold = _Scorer(live, clock, holdout, current, tick)
    current_hold, current_report = await hold.score(current)
    best_hold, best_report = await hold.score(with_values(current, best))
    diff = {path: [_get(current, path), value] for path, value in best.items() if _get(current, path) != value}
    step(total, total)  # reads done once for several points were counted once

    if not diff or best_fit <= current_fit + MARGIN:
        outcome, message = "keep", str(msg("tune.keep", margin=MARGIN))
    elif best_hold < current_hold - MARGIN:
        outcome, message = "overfitted", str(msg("tune.overfitted", fit=best_fit, current_fit=current_fit,
                                                 hold=best_hold, current_hold=current_hold))
    else:
        outcome, message = "proposed", str(msg("tune.proposed", fit=best_fit, current_fit=current_fit,
                                               hold=best_hold, current_hold=current_hold))
    return {
        "outcome": outcome,
        "message": message,
        "candidate": {path: value for path, value in best.items()},
        "diff": diff,
        "proposal": _proposal(current, best) if outcome == "proposed" else None,
        "scores": {"fitting": {"current": current_fit, "candidate": best_fit},
                   "holdout": {"current": current_hold, "candidate": best_hold}},
        "holdout_report": {"current": current_report, "candidate": best_report},
        "grid": {path: list(values) for path, values in grid.items()},
        "grid_scores": [{"values": values, "fitting_score": score} for score, values in scored],
        "events": {"fitting": {"candidates": len(fitting.candidates), "reads": len(fitting.reads),
                               "self_recall_memories": len(fitting.probes)},
                   "holdout": {"candidates": len(holdout.candidates), "reads": len(holdout.reads),
                               "self_recall_memories": len(holdout.probes)}},
    }


def _get(cfg: LTMConfig, path: str) -> Any:
    section, name = path.split(".")
    return getattr(getattr(cfg, section), name)


def _proposal(current: LTMConfig, values: Mapping[str, float | int]) -> dict[str, dict[str, Any]]:
    """The body a ``PUT policy`` would take to apply it."""
    out: dict[str, dict[str, Any]] = {}
    for path, value in values.items():
        section, name = path.split(".")
        if _get(current, path) != value:
            out.setdefault(section, {})[name] = value
    return out
