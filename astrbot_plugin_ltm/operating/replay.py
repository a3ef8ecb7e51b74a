"""Policy replay: the recorded history through the write gate and the
reader under the current policy and a candidate, side by side, without
the model and without writing anything.

- *Writes*: the gate log's candidates through ``learning.replay_gate``.
- *Reads*: the users' recorded messages as queries, through the reader.
- *Self-recall*: a memory's latest evidence as the query: is it in the block?
- A combined score (docs/decisions.md#d54) and a verdict.

Over 400 lines: writes, reads and self-recall are replayed over one pair of policies
and scored together; the pure gate and the read overlay already live apart.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from ..clock import Clock, parse_stored_time
from ..config import LTMConfig, ReadPolicy
from ..enums import Role, SourceType, WriteMode
from ..i18n import msg
from ..learning.replay_gate import (
    ACTIVE,
    AWAITING,
    REFUSED,
    SHADOW,
    GateReplay,
    LoggedCandidate,
    Switches,
    count_outcomes,
    replay_gate,
)
from ..recalling.block import MemoryBlock
from ..recalling.overlay import OverlayReader
from ..recalling.read import Read
from ..recalling.reader import MemoryReader
from ..scope import Origin, Scope, ScopeResolver
from ..storing.database import Database
from .holdout import stored_time

# The combined score (docs/decisions.md#d54): self-recall counts fully; a
# thousand injected tokens per turn cost a quarter of it, a second of p95
# latency a twentieth; each unsafe candidate that would go live costs its
# share of the candidates, and any budget violation costs the whole score.
W_RECALL = 1.0
W_TOKENS_PER_1000 = 0.25
W_LATENCY_PER_SECOND = 0.05
W_UNSAFE = 1.0
W_BUDGET = 1.0
MARGIN = 0.02  # a score difference below this is no difference
MAX_READS = 300  # recorded messages replayed as reads, evenly spread over the set
MAX_PROBES = 300  # memories probed for self-recall
EXAMPLES = 20


@dataclass(frozen=True)
class Selection:
    """Which recorded history a replay runs over: a set of sessions
    (holdout, fitting = the rest, or all), narrowed by scopes and a start."""

    set: str = "holdout"
    sessions: tuple[str, ...] = ()  # the holdout's sessions (holdout: only these; fitting: all but these)
    scopes: tuple[Scope, ...] = ()
    since: datetime | None = None

    def where(self, alias: str) -> tuple[str, dict[str, object]]:
        parts: list[str] = ["1 = 1"]
        params: dict[str, object] = {}
        if self.set == "holdout":
            parts.append(f"{alias}.session_id IN (SELECT value FROM json_each(:sessions))")
        elif self.set == "fitting":
            parts.append(f"({alias}.session_id IS NULL OR {alias}.session_id NOT IN "
                         "(SELECT value FROM json_each(:sessions)))")
        params["sessions"] = json.dumps(list(self.sessions))
        if self.scopes:
            parts.append(f"({alias}.scope || ':' || {alias}.scope_id) IN (SELECT value FROM json_each(:scopes))")
            params["scopes"] = json.dumps([str(s) for s in self.scopes])
        if self.since is not None:
            parts.append(f"{alias}.created_at >= :since")
            params["since"] = stored_time(self.since)
        return " AND ".join(parts), params

    def as_dict(self) -> dict[str, Any]:
        return {"set": self.set, "scopes": [str(s) for s in self.scopes],
                "since": self.since.isoformat() if self.since else None,
                "sessions": len(self.sessions) if self.set != "all" else None}


@dataclass(frozen=True)
class Probe:
    scopes: tuple[Scope, ...]  # what a live read for the recorded message reads
    query: str
    memory_id: str = ""  # self-recall: the memory the query should bring


@dataclass
class ReplayData:
    candidates: list[LoggedCandidate] = field(default_factory=list)
    reads: list[Probe] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)
    live: dict[str, tuple[str, bool]] = field(default_factory=dict)  # memory_id → (status, awaiting approval)
    messages: int = 0  # recorded user messages in the set (reads replay up to MAX_READS of them)


# -- loading (one read thread) ------------------------------------------------------


async def load(db: Database, selection: Selection, max_reads: int = MAX_READS, max_probes: int = MAX_PROBES,
               resolver: ScopeResolver | None = None) -> ReplayData:
    """``resolver``: a read replays the scopes a live read would; without
    one, the message's own scope."""
    return await db.run(lambda conn: _load(conn, selection, max_reads, max_probes, resolver))


def read_scopes(resolver: ScopeResolver | None, kind: str, scope_id: str, platform: str | None,
                session_id: str | None, sender: str | None) -> tuple[Scope, ...]:
    own = Scope(kind, scope_id)
    if resolver is None or not platform or not sender:
        return (own,)
    group = scope_id.split(":", 1)[1] if kind == "group" and ":" in scope_id else None
    scopes = resolver.read_scopes(Origin(platform, session_id or "", sender, "", group))
    return tuple(scopes) if own in scopes else (own, *scopes)  # recorded under another scope strategy


def _load(conn: Connection, selection: Selection, max_reads: int, max_probes: int,
          resolver: ScopeResolver | None) -> ReplayData:
    data = ReplayData()
    where, params = selection.where("g")
    rows = conn.execute(text(
        "SELECT id, created_at, scope, scope_id, session_id, memory_id, fact_key, type, fact, confidence, explicit, "
        f"instruction, event_ids FROM ltm_gate_log g WHERE {where} ORDER BY created_at, id"), params).all()
    cited = {e for r in rows for e in _ids(r[12])}
    scopes_of = dict(_pairs(conn, "SELECT event_id, scope || ':' || scope_id FROM ltm_events "
                                  "WHERE event_id IN (SELECT value FROM json_each(:ids))", sorted(cited)))
    for r in rows:
        events = _ids(r[12])
        own = f"{r[2]}:{r[3]}"
        data.candidates.append(LoggedCandidate(
            id=r[0], created_at=parse_stored_time(r[1]), scope=r[2], scope_id=r[3], session_id=r[4],
            memory_id=r[5], fact_key=r[6], type=r[7], fact=r[8], confidence=float(r[9]), explicit=bool(r[10]),
            instruction=r[11], event_ids=tuple(events),
            cross_scope=any(scopes_of.get(e, own) != own for e in events)))
    memory_ids = sorted({c.memory_id for c in data.candidates if c.memory_id})
    for memory_id, status, awaiting in conn.execute(text(
            "SELECT memory_id, status, awaiting_approval FROM ltm_items "
            "WHERE memory_id IN (SELECT value FROM json_each(:ids))"), {"ids": json.dumps(memory_ids)}):
        data.live[memory_id] = (status, bool(awaiting))

    where, params = selection.where("e")
    messages = conn.execute(text(
        f"SELECT scope, scope_id, content, platform_id, session_id, sender_id FROM ltm_events e WHERE {where} "
        "AND source_type = :message AND source_role = :user ORDER BY created_at, id"),
        {**params, "message": SourceType.MESSAGE, "user": Role.USER}).all()
    data.messages = len(messages)
    for scope, scope_id, content, platform, session_id, sender in _spread(messages, max_reads):
        query = _text(content)
        if query:
            data.reads.append(Probe(read_scopes(resolver, scope, scope_id, platform, session_id, sender), query))

    # Memories with two or more evidence events that a policy could put in a block (not disabled,
    # expired or superseded); the latest of their events in the set is the probe.
    latest: dict[str, Probe] = {}
    for memory_id, scope, scope_id, content, kind, event_scope, platform, session_id, sender, *_ in conn.execute(text(
            f"SELECT {_PROBE_COLUMNS} FROM ltm_items i JOIN ltm_evidence v ON v.memory_id = i.memory_id "
            f"JOIN ltm_events e ON e.event_id = v.event_id WHERE {_PROBED} AND {where} "
            f"UNION ALL SELECT {_PROBE_COLUMNS} FROM ltm_items i JOIN ltm_summary_links sl ON sl.item_id = i.id "
            f"JOIN ltm_events e ON e.id = sl.event_rowid WHERE {_PROBED} AND {where} ORDER BY 10, 11"), params):
        query = _text(content)
        if query:
            scopes = read_scopes(resolver, kind, event_scope, platform, session_id, sender)
            if Scope(scope, scope_id) not in scopes:
                scopes = (Scope(scope, scope_id), *scopes)
            latest[memory_id] = Probe(scopes, query, memory_id)
    data.probes = _spread(sorted(latest.values(), key=lambda p: p.memory_id), max_probes)
    return data


# A memory probed (above): one a policy could put in a block, with two or
# more evidence events, a fact's or a summary's (storing.evidence).
_PROBE_COLUMNS = ("i.memory_id, i.scope, i.scope_id, e.content, e.scope, e.scope_id, e.platform_id, e.session_id, "
                  "e.sender_id, e.created_at, e.id")
_PROBED = ("i.status IN ('active', 'shadow') AND (SELECT COUNT(*) FROM ltm_evidence w WHERE w.memory_id = i.memory_id) "
           "+ (SELECT COUNT(*) FROM ltm_summary_links w WHERE w.item_id = i.id) >= 2")


def _ids(raw: Any) -> list[str]:
    value = json.loads(raw) if isinstance(raw, str) else raw
    return [str(v) for v in value] if isinstance(value, list) else []


def _pairs(conn: Connection, sql: str, ids: list[str]) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in conn.execute(text(sql), {"ids": json.dumps(ids)})] if ids else []


def _text(content: Any) -> str:
    value = json.loads(content) if isinstance(content, str) else content
    return str(value.get("text") or "").strip() if isinstance(value, dict) else ""


def _spread[T](rows: Sequence[T], limit: int) -> list[T]:
    """At most ``limit`` of ``rows``, evenly spread (all when fewer)."""
    if len(rows) <= limit:
        return list(rows)
    step = len(rows) / limit
    return [rows[int(i * step)] for i in range(limit)]


# -- the gate ---------------------------------------------------------------------------


def switches(cfg: LTMConfig) -> Switches:
    return Switches(cfg.write_policy, cfg.enable, cfg.emergency_read_only)


def _live_outcome(status: str, awaiting: bool) -> str | None:
    """A stored memory's status in the gate's terms; None: set by someone
    or something else than the gate (disabled, expired, superseded)."""
    if status == "active":
        return ACTIVE
    if status == "shadow":
        return AWAITING if awaiting else SHADOW
    return None


def overlay(data: ReplayData, current: GateReplay, other: GateReplay) -> dict[str, str]:
    """memory_id → the status ``other``'s writes would have left it in, for
    the memories whose live status is the current policy's own doing (an
    operator's approval or deletion stands under either policy)."""
    out: dict[str, str] = {}
    for memory_id, (status, awaiting) in data.live.items():
        live = _live_outcome(status, awaiting)
        if live is None or current.final.get(memory_id) != live:
            continue
        then = other.final.get(memory_id, live)
        if then != live:
            out[memory_id] = "active" if then == ACTIVE else ("shadow" if then in (SHADOW, AWAITING) else REFUSED)
    return out


# -- reads ------------------------------------------------------------------------------


@dataclass
class ReadFigures:
    turns: int = 0
    tokens_mean: float = 0.0
    tokens_p95: float = 0.0
    memories_per_block: float = 0.0
    turns_per_block: float = 0.0
    budget_violations: int = 0
    latency_p95_ms: float = 0.0
    probes: int = 0
    recalled: int = 0

    @property
    def self_recall(self) -> float:
        return self.recalled / self.probes if self.probes else 0.0


def p95(values: Sequence[float]) -> float:
    """The nearest-rank 95th percentile (0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[max(0, -(-95 * len(ordered) // 100) - 1)])


Step = Callable[[], None]  # called after each read: progress, and the job's cancel point


async def reads(live: MemoryReader, clock: Clock, data: ReplayData, cfg: LTMConfig, statuses: dict[str, str],
                step: Step) -> ReadFigures:
    """The reads and self-recall probes under ``cfg``'s read policy, the
    memories' statuses overlaid with ``statuses``."""
    reader = OverlayReader(live, clock, statuses, unbacked=cfg.write_policy.mode == WriteMode.AUTO)
    policy = cfg.read_policy
    out = ReadFigures(turns=len(data.reads), probes=len(data.probes))
    tokens: list[float] = []
    latencies: list[float] = []
    memories = turns = 0
    for probe in data.reads:
        block, took = await _read(reader, cfg, probe, policy)
        latencies.append(took)
        tokens.append(block.tokens)
        memories += len(block.items)
        turns += len(block.events)
        if block.tokens > policy.max_tokens:
            out.budget_violations += 1
        step()
    for probe in data.probes:
        block, took = await _read(reader, cfg, probe, policy)
        latencies.append(took)
        out.recalled += any(s.memory_id == probe.memory_id for s in block.items)
        step()
    if tokens:
        out.tokens_mean = round(sum(tokens) / len(tokens), 2)
        out.tokens_p95 = p95(tokens)
        out.memories_per_block = round(memories / len(tokens), 3)
        out.turns_per_block = round(turns / len(tokens), 3)
    out.latency_p95_ms = round(p95(latencies) * 1000, 2)
    return out


async def _read(reader: OverlayReader, cfg: LTMConfig, probe: Probe, policy: ReadPolicy) -> tuple[MemoryBlock, float]:
    started = time.perf_counter()
    block = await reader.read(Read(probe.query, list(probe.scopes), policy)) if cfg.enable else MemoryBlock()
    return block, time.perf_counter() - started


# -- one side of the report -------------------------------------------------------------


@dataclass
class Side:
    gate: GateReplay
    figures: ReadFigures
    writes: dict[str, dict[str, int]]
    instruction_live: int
    cross_scope_live: int
    candidates: int

    @property
    def unsafe_live(self) -> int:
        return self.instruction_live + self.cross_scope_live

    @property
    def score(self) -> float:
        f = self.figures
        value = (W_RECALL * f.self_recall
                 - W_TOKENS_PER_1000 * min(1.0, f.tokens_mean / 1000)
                 - W_LATENCY_PER_SECOND * min(1.0, f.latency_p95_ms / 1000)
                 - W_UNSAFE * self.unsafe_live / max(1, self.candidates)
                 - (W_BUDGET if f.budget_violations else 0.0))
        return round(value, 4)

    def as_dict(self) -> dict[str, Any]:
        f = self.figures
        totals = {o: sum(by_type.values()) for o, by_type in self.writes.items()}
        return {
            "writes": {"by_outcome": totals, "by_outcome_and_type": self.writes},
            "reads": {"turns": f.turns, "tokens_per_turn_mean": f.tokens_mean, "tokens_per_turn_p95": f.tokens_p95,
                      "memories_per_block": f.memories_per_block, "turns_per_block": f.turns_per_block,
                      "budget_violations": f.budget_violations, "latency_p95_ms": f.latency_p95_ms},
            "safety": {"instruction_like_live": self.instruction_live, "cross_scope_live": self.cross_scope_live},
            "self_recall": {"memories": f.probes, "recalled": f.recalled, "share": round(f.self_recall, 4)},
            "score": self.score,
        }


def side(data: ReplayData, gate: GateReplay, figures: ReadFigures) -> Side:
    live = [c for c in data.candidates if gate.outcomes.get(c.id) == ACTIVE]
    return Side(gate, figures, count_outcomes(data.candidates, gate),
                sum(1 for c in live if c.instruction), sum(1 for c in live if c.cross_scope),
                len(data.candidates))


def differing(data: ReplayData, current: GateReplay, candidate: GateReplay) -> dict[str, Any]:
    """The memories (chains of candidates) whose status would differ."""
    last: dict[str, LoggedCandidate] = {}
    for c in data.candidates:
        last[c.chain] = c
    rows = [{"memory_id": c.memory_id, "scope": f"{c.scope}:{c.scope_id}", "type": c.type, "fact": c.fact[:160],
             "current": current.final.get(chain, REFUSED), "candidate": candidate.final.get(chain, REFUSED)}
            for chain, c in last.items() if current.final.get(chain) != candidate.final.get(chain)]
    return {"count": len(rows), "examples": rows[:EXAMPLES]}


def verdict(current: Side, candidate: Side) -> str:
    if candidate.figures.budget_violations:
        return str(msg("replay.budget", count=candidate.figures.budget_violations))
    if candidate.unsafe_live > current.unsafe_live:
        return str(msg("replay.unsafe", count=candidate.unsafe_live, current=current.unsafe_live))
    delta = round(candidate.score - current.score, 4)
    if delta > MARGIN:
        return str(msg("replay.better", candidate=candidate.score, current=current.score, delta=delta))
    if delta < -MARGIN:
        return str(msg("replay.worse", candidate=candidate.score, current=current.score, delta=delta))
    return str(msg("replay.same", candidate=candidate.score, current=current.score, margin=MARGIN))


def weights() -> dict[str, float]:
    return {"self_recall": W_RECALL, "tokens_per_1000": -W_TOKENS_PER_1000,
            "latency_p95_per_second": -W_LATENCY_PER_SECOND, "unsafe_live_share": -W_UNSAFE,
            "any_budget_violation": -W_BUDGET, "margin": MARGIN}


def ticker(step: Callable[[int, int], None], total: int) -> Callable[[], None]:
    """Each call one more of ``total`` done, told to ``step`` (told 0 now)."""
    done = itertools.count(1)
    step(0, total)
    return lambda: step(n := next(done), max(total, n))


async def compare(db_reader: MemoryReader, clock: Clock, data: ReplayData, current: LTMConfig,
                  candidate: LTMConfig, step: Callable[[int, int], None]) -> dict[str, Any]:
    """The replay report: ``current`` and ``candidate`` on the same history."""
    started = time.perf_counter()
    tick = ticker(step, 2 * (len(data.reads) + len(data.probes)))
    # Pure Python over every logged candidate: off the event loop.
    gate_now, gate_new = await asyncio.gather(asyncio.to_thread(replay_gate, data.candidates, switches(current)),
                                              asyncio.to_thread(replay_gate, data.candidates, switches(candidate)))
    now_side = side(data, gate_now, await reads(db_reader, clock, data, current, {}, tick))
    new_side = side(data, gate_new, await reads(db_reader, clock, data, candidate,
                                                overlay(data, gate_now, gate_new), tick))
    elapsed = time.perf_counter() - started
    replayed = len(data.candidates) + len(data.reads) + len(data.probes)
    return {
        "current": now_side.as_dict(),
        "candidate": new_side.as_dict(),
        "status_differs": differing(data, gate_now, gate_new),
        "verdict": verdict(now_side, new_side),
        "weights": weights(),
        "events": {"candidates": len(data.candidates), "reads": len(data.reads), "messages": data.messages,
                   "self_recall_memories": len(data.probes)},
        "speed": {"seconds": round(elapsed, 3),
                  "events_per_second": round(replayed / elapsed, 1) if elapsed > 0 else None},
    }
