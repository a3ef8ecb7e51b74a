"""LTMEngine: the plugin's core, composed from its parts (docs/architecture.md).
The AstrBot adapter (main.py) talks to this class only; tests and benchmarks
drive it directly with an SQLite file of their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from . import text as tokenizing
from .background import BackgroundTask, TaskSet
from .clock import Clock, SteadyClock, signed_span, steady, utcnow
from .config import parse_config
from .enums import CandidateSource, ExtractionStatus, Method, Role, ScopeKind, SourceType, WriteMode
from .errors import AdminError
from .extension_points import (
    Complete,
    Embedder,
    Extractor,
    ModelGateway,
    ProviderCheck,
    Reranker,
    Retriever,
    Summarizer,
    TokenCounter,
)
from .heap import cap_arenas, map_large_blocks
from .i18n import Message, msg
from .indexes.embeddings import Embeddings
from .indexes.keywords import KeywordIndex
from .indexes.namespaces import MemoryBudget
from .indexes.vector_fill import VectorFill
from .indexes.vectors import VectorIndex
from .learning.candidates import Candidate
from .learning.compaction import Compactor
from .learning.extractor import LLMExtractor
from .learning.known import KnownFacts, name_given
from .learning.summaries import SummarizerFor, SummaryWorker
from .learning.summary_prompt import LLMSummarizer
from .learning.worker import ExtractionWorker
from .learning.writer import MemoryWriter, WriteOutcome
from .logs import log
from .operating.admin import Admin
from .operating.contexts import adopt_contexts
from .operating.drift_monitor import DriftMonitor
from .operating.jobs import Jobs
from .operating.pauses import Pauses
from .operating.policy_versions import PolicyVersions
from .operating.reply_language import SenderLanguages
from .operating.storage import StorageMeter
from .recalling.block import MemoryBlock
from .recalling.dates import time_zone
from .recalling.followers import Follower
from .recalling.history import History
from .recalling.last_time import LastTime
from .recalling.read import Read
from .recalling.reader import MemoryReader
from .recalling.reranking import Reranking
from .recalling.retrieval import KeywordRetriever, VectorRetriever
from .recalling.tokens import EstimateCounter, default_counter
from .recalling.trace import Trace
from .recalling.usage import Usage
from .recording.explicit import attribute, explicit_fact, guess_type, unnamed
from .recording.recorder import EventRecorder
from .scope import Origin, Scope, ScopeResolver, display_name
from .secrecy import asks_secrecy
from .storing.database import Database
from .storing.keyword_rows import match_stemmer, match_turn_passages
from .storing.relayout import Relayout
from .storing.tables import MemoryEvent
from .withholding import speaker_of, withhold

EXPLICIT_IMPORTANCE = 0.8  # "remember that …": the user said it matters (docs/decisions.md#d29)
STORAGE_EVERY = 3600.0  # seconds between two measurements of what memory costs on disk (operating/storage.py)


class LTMEngine:
    def __init__(
        self,
        sql_engine: AsyncEngine,
        raw_config: dict[str, Any] | None = None,
        *,
        models: ModelGateway | None = None,
        extractor_for: Callable[[str | None], Awaitable[Extractor | None]] | None = None,
        summarizer_for: SummarizerFor | None = None,
        embedder: Embedder | None = None,
        rerankers: Callable[[str], Reranker] | None = None,
        data_dir: Path | None = None,
        retrievers: list[Retriever] | None = None,
        counter: TokenCounter | None = None,
        clock: Clock = utcnow,
        timezone: str | None = None,
    ) -> None:
        self.config, self.config_errors = parse_config(raw_config)
        clock = steady(clock)  # a jump of the system clock is not time elapsed (docs/decisions.md#d93)
        # For dates in questions; UTC when AstrBot's ``timezone`` is unset.
        self.tz = time_zone(timezone)
        self.resolver = ScopeResolver(self.config.identity)
        self.clock = clock
        self.models = models
        self.embedder = embedder
        self.reranking = Reranking(rerankers, lambda: self.config.rerank) if rerankers is not None else None
        # An extractor passed in (tests, benchmarks) learns without AstrBot's models.
        self._own_extractor = extractor_for is not None
        self.db = Database(sql_engine, read_only=lambda: self.config.emergency_read_only)
        # The derived indexes follow every committed write, in this order.
        self.index_budget = MemoryBudget(self.config.vectors.max_memory_mb * 2**20)
        self.keyword_index = KeywordIndex(self.db, budget=self.index_budget)
        self.vector_index = VectorIndex(self.db, Path(data_dir) / "vectors" if data_dir else None,
                                        self.config.vectors.max_loaded_namespaces, self.index_budget)
        self.vector_index.files.faults = self.db.faults  # a file that cannot be written is shown (faults.py)
        self.db.subscribe(self.keyword_index)
        self.db.subscribe(self.vector_index)
        self.embeddings = Embeddings(embedder, self.vector_index, self.config.vectors.query_timeout_seconds)
        self.vector_fill = VectorFill(self.db, self.embeddings, speaker_of,
                                       lambda: self.config.vectors.embed_turns, clock)
        with_vectors = embedder is not None
        # Users' own state, not the policy; checked without I/O.
        self.pauses = Pauses(self.db, clock)
        self.writer = MemoryWriter(lambda: self.config, clock, matcher=self.embeddings if with_vectors else None,
                                   paused=self.pauses.covers)
        self.admin = Admin(self.db, lambda: self.config, clock)
        self.policy_versions = PolicyVersions(self.db, lambda: self.config, self.apply_config, clock, raw_config)
        self.recorder = EventRecorder(
            self.db, lambda: self.config, lambda: self.resolver, clock, on_inserted=self._capture_explicit,
            journal_dir=Path(data_dir) / "journal" if data_dir else None, paused=self.pauses.covers)
        self.last_time = LastTime(self.db, clock, self.recorder.speaking)
        self.summaries = SummaryWorker(self.db, self.writer, summarizer_for or self._summarizer_for,
                                       lambda: self.config, clock)
        self.worker = ExtractionWorker(
            self.db, self.writer, extractor_for or self._extractor_for, lambda: self.config, clock,
            embeddings=self.embeddings if with_vectors else None, fill=self.vector_fill if with_vectors else None,
            known=KnownFacts(self.db, self.keyword_index, self.embeddings if with_vectors else None),
            paused=self.pauses.covers,
            then_drain=self.summaries.drain,  # a drain summarises what it leaves ended
            people=lambda platform_id, sender_id: self.resolver.person(platform_id, sender_id),
        )
        self._counter = counter
        if retrievers is None:
            retrievers = [KeywordRetriever(self.keyword_index)]
            if with_vectors:
                retrievers.append(VectorRetriever(self.embeddings))
        self._retrievers = retrievers
        self.reader: MemoryReader | None = None
        self.usage = Usage(self.db, clock)
        self.drift = DriftMonitor(self.db, lambda: self.config, clock)
        self.drift.attach(self.policy_versions)  # snapshots before and after every policy version
        self.jobs = Jobs(clock)  # operators' background jobs: policy replay, tuning
        self.compactor = Compactor(self.db, lambda: self.embeddings.model, clock,
                                   same_fact_cosine=self.embeddings.same_fact_cosine)
        self.languages = SenderLanguages()
        self.storage = StorageMeter(self.db, self.vector_index.files, Path(data_dir) / "journal" if data_dir else None,
                                    clock)
        self.storage_task = BackgroundTask("storage", self.storage.report, every=STORAGE_EVERY)
        # A store from before migration 0017 moves into the compact layout in the background.
        self.relayout = Relayout(self.db)
        self.relayout_task = BackgroundTask(
            "relayout", self._relayout_step, run_at_start=True,
            every=lambda: None if self.relayout.progress.done else self.relayout.pause())
        # Stopped in this order (as before D104): the learners first, then
        # the recorder's last flush, then the counts.
        self.tasks = TaskSet(self.relayout_task, self.worker.task, self.summaries.task, self.recorder.task,
                             self.usage.task, self.drift.task, self.compactor.task, self.storage_task)
        self.started = False

    # -- lifecycle ---------------------------------------------------------

    async def start(self, background: bool = True) -> None:
        """Migrate, write the turns a crashed process journaled, start the loops."""
        cap_arenas()  # before the plugin's threads exist (heap.py)
        map_large_blocks()
        await self.db.migrate()
        if not self.config.emergency_read_only:
            async with self.db.write() as session:
                await match_stemmer(session)  # before the backfill: a rebuild indexes every turn
                await match_turn_passages(session)  # likewise
        await self.relayout.needed()
        try:  # version 1, or the change made on AstrBot's plugin config page
            await self.policy_versions.record_start()
        except Exception:  # memory works on; the next change records the policy
            log.exception("ltm: could not record the policy version at start")
        await self.pauses.load()  # before any turn is recorded
        try:  # pauses made through the policy before they had their own state
            await self.pauses.adopt_policy_pauses(self.policy_versions, self.config)
        except Exception:  # they stay in disabled_scopes (still off); tried again at the next start
            log.exception("ltm: could not move users' old pauses out of the policy")
        try:  # memories of old kept where they belong, turns said while paused deleted (once)
            if not self.config.emergency_read_only:
                resolver = self.resolver
                await adopt_contexts(self.db, resolver.person, resolver.accounts, self.clock)
        except Exception:  # memory works on; tried again at the next start
            log.exception("ltm: could not place the memories of old by where they were said")
        # Before AstrBot calls a hook: from here on every turn is journaled.
        await self.recorder.open_journal()
        counter: TokenCounter = self._counter if self._counter is not None else await asyncio.to_thread(default_counter)
        self.reader = MemoryReader(
            self.db, self._retrievers, counter, self.clock,
            # Where facts go live without review, so may the turns no fact covers.
            unbacked_turns=lambda: self.config.write_policy.mode == WriteMode.AUTO, tz=self.tz,
            reranking=self.reranking, turn_ranker=self.keyword_index.turn_ranker,
        )
        if background:
            self.tasks.start()
        self.started = True

    async def _relayout_step(self) -> None:
        if not await self.relayout.step():
            # Moved: the vector files no namespace reads any more go too (flat ones, older layouts).
            await asyncio.to_thread(self.vector_index.files.remove_stale)

    async def loads_settled(self) -> None:
        """Wait for the namespace loads that reads left running."""
        await asyncio.gather(self.keyword_index.loads_settled(), self.vector_index.loads_settled())

    async def stop(self) -> None:
        await self.jobs.stop()  # one-off operator jobs, not loops (operating/jobs.py)
        await self.tasks.stop()
        await self.keyword_index.loads_settled()  # they read the database closed below
        await self.vector_index.flush()
        await self.db.close()
        self.started = False

    def apply_config(self, raw: dict[str, Any]) -> list[str]:
        self.config, self.config_errors = parse_config(raw)
        self.resolver = ScopeResolver(self.config.identity)
        self.embeddings.query_timeout = self.config.vectors.query_timeout_seconds
        self.index_budget.limit = self.config.vectors.max_memory_mb * 2**20  # enforced at the next load
        return self.config_errors

    def providers(self) -> dict[str, bool]:
        """Which models memory can use now; asked each time, as AstrBot's
        providers come and go at run time."""
        return {"chat": self._own_extractor or _has(self.models),
                "embedding": _has(self.embedder)}

    def notices(self) -> list[Message]:
        """What limits memory right now, for ``/ltm status`` and the page's stats."""
        found: list[Message] = []
        providers = self.providers()
        if not providers["chat"]:
            found.append(msg("notice.no_chat_provider"))
        if not providers["embedding"]:
            found.append(msg("notice.no_embedding_provider"))
        if tokenizing.KEYWORD_STEMMER == tokenizing.NO_STEMMER:
            found.append(msg("notice.package_missing", package="snowballstemmer",
                             effect=msg("notice.effect.no_stems")))
        if self._counter is None and self.reader is not None and isinstance(self.reader.counter, EstimateCounter):
            found.append(msg("notice.package_missing", package="bpe-openai",
                             effect=msg("notice.effect.estimated_tokens")))
        found += self.db.faults.notices()  # what goes wrong now: a full disk, a locked database … (faults.py)
        if self.storage.last is not None and (disk := self.storage.last.notice()) is not None:
            found.append(disk)  # the disk fills within 30 days at this rate
        if isinstance(self.clock, SteadyClock) and self.clock.jump:
            found.append(msg("fault.clock_jump", jump=signed_span(self.clock.jump)))
        return found

    # -- a user's own pause -----------------------------------------------

    def paused(self, origin: Origin) -> bool:
        """Whether the sender paused learning about themselves (in a group too)."""
        return self.pauses.covers(self.resolver.user_scope(origin))

    def pauses_since(self, origin: Origin) -> str:
        pause = self.pauses.get(self.resolver.user_scope(origin))
        return "" if pause is None else pause.since_text

    # -- hooks: the hot path ---------------------------------------------

    def record_turn(self, origin: Origin, user_text: str, assistant_text: str | None,
                    created_at: datetime | None = None) -> list[MemoryEvent]:
        self.languages.note(origin, user_text)  # in memory only: the language /ltm answers them in
        if not self.config.enable:
            return []
        events = self.recorder.record_turn(origin, user_text, assistant_text, created_at)
        if events:
            self.worker.task.wake()
        return events

    def record_heard(self, origin: Origin, text: str, created_at: datetime | None = None) -> list[MemoryEvent]:
        """A group message that did not wake the bot: recorded only where the
        group learns all its talk (groups.learn_all_messages)."""
        if not (self.config.enable and origin.is_group and self.config.groups.learns_all(
                self.resolver.group_scope(origin))):
            return []
        return self.record_turn(origin, text, None, created_at)

    def record_tool(self, origin: Origin, tool: str, args: Any, result: Any) -> MemoryEvent | None:
        if not self.config.enable:
            return None
        return self.recorder.record_tool(origin, tool, args, result)

    async def memory_block(self, origin: Origin, query: str, history: Sequence[str] = (), *,
                           trace: Trace | None = None) -> MemoryBlock:
        """What to inject before the model call. ``history``: the request's
        earlier messages, left out of the block. ``trace``: the operators'
        preview; then nothing is counted as used."""
        if not (self.config.enable and self.config.read_policy.enable) or self.reader is None:
            return MemoryBlock()
        scopes = self.resolver.read_scopes(origin)
        held = await History.read(history) if history else None
        # "Last time we talked" is a candidate the reader places first (docs/decisions.md#d107).
        pinned = await self.last_time.pinned(scopes, query, self.config, held)
        block = await self.reader.read(Read(query, scopes, self.config.read_policy, ids=self.config.tools.expand,
                                            history=held, trace=trace, pinned=pinned, follower=self.follower(origin)))
        if trace is None:
            self.usage.note(block, via="block")
        return block

    def follower(self, origin: Origin) -> Follower | None:
        """The speaker, when their profile facts follow them into this group (recalling/followers.py)."""
        follows = origin.is_group and not origin.scheduled and self.config.groups.profiles_follow(
            self.resolver.group_scope(origin))
        return Follower(self.resolver.user_scope(origin), origin.speaker) if follows else None

    # -- explicit memories -------------------------------------------------

    async def _explicit_candidate(self, session: AsyncSession, event: MemoryEvent, fact: str) -> Candidate:
        """What "remember that …" asks for, kept with whom said it (a group may recall it: audience.py)."""
        said = str((event.content or {}).get("text") or "")
        person = self.resolver.person(event.platform_id, event.sender_id)  # named as chat facts name them
        named = display_name(event.sender_id, event.sender_name) or await session.run_sync(name_given, person)
        fact = attribute(fact, named or unnamed(fact))
        subject = person if event.scope == ScopeKind.GROUP else None
        return Candidate(type=guess_type(fact), fact=fact, fact_key=fact, confidence=1.0,
                         importance=EXPLICIT_IMPORTANCE, event_ids=[event.event_id],
                         source=CandidateSource.USER_EXPLICIT, session_id=event.session_id,
                         secret=asks_secrecy(said) or asks_secrecy(fact), subject=subject)

    async def _capture_explicit(self, session: AsyncSession, events: list[MemoryEvent]) -> None:
        """'Remember that …' in a recorded message becomes a memory at once."""
        for event in events:
            if event.source_role != Role.USER or event.extraction_status == ExtractionStatus.SKIPPED:
                continue  # a skipped event was said while its scope's writes were off
            fact = explicit_fact(event.content.get("text", ""))
            if not fact:
                continue
            await self.writer.apply(session, Scope(event.scope, event.scope_id),
                                    [await self._explicit_candidate(session, event, fact)],
                                    method=Method.USER_EXPLICIT, actor=f"user:{event.sender_id}")
            # The user said exactly what to keep; extracting it again would
            # only produce a differently worded duplicate.
            await session.execute(update(MemoryEvent).where(MemoryEvent.id == event.id)
                                  .values(extraction_status=ExtractionStatus.DONE))

    async def remember(self, origin: Origin, fact: str) -> WriteOutcome:
        """`/ltm remember <fact>`. Raises ReadOnlyError while emergency_read_only
        is on, AdminError while the scope's writes are switched off."""
        fact = " ".join(fact.split())
        if not fact:
            raise ValueError("nothing to remember")
        scope = self.resolver.write_scope(origin)
        if self.paused(origin):
            raise AdminError(msg("pause.status", since=self.pauses_since(origin)))
        if self.config.write_policy.writes_off(scope):  # the operator's switch: /ltm resume does not turn it
            raise AdminError(msg("learn.writes_off", scope=scope))
        event = MemoryEvent(
            scope=scope.kind, scope_id=scope.id, source_type=SourceType.MESSAGE, source_role=Role.USER,
            content={"text": fact, "command": "ltm remember"}, platform_id=origin.platform_id,
            session_id=origin.unified_msg_origin, sender_id=origin.sender_id, sender_name=origin.display_name or None,
            created_at=self.clock(), extraction_status=ExtractionStatus.DONE,
        )
        withhold([event])  # one short text
        async with self.db.write() as session:
            session.add(event)
            await session.flush()
            (outcome,) = await self.writer.apply(session, scope, [await self._explicit_candidate(session, event, fact)],
                                                 method=Method.USER_EXPLICIT, actor=f"user:{origin.sender_id}")
        return outcome

    # -- extraction provider -------------------------------------------------

    async def _completer(self, session_id: str | None) -> tuple[Complete, str] | None:
        """The extraction provider's completion function and model name."""
        if self.models is None:
            return None
        return await self.models.completer(self.config.extraction_provider_id, session_id)

    async def _extractor_for(self, session_id: str | None) -> Extractor | None:
        found = await self._completer(session_id)
        return None if found is None else LLMExtractor(*found, self.config.extraction.max_fact_chars)

    async def _summarizer_for(self, session_id: str | None) -> Summarizer | None:
        found = await self._completer(session_id)
        return None if found is None else LLMSummarizer(*found, self.config.summaries.max_chars)


def _has(model: object) -> bool:
    """A model memory can use now: given, and (where it can tell) its provider exists."""
    return model is not None and (not isinstance(model, ProviderCheck) or model.provider_exists())
