"""The plugin's tables, on a metadata of their own: AstrBot's start-up
``create_all`` never sees them, so only ``migrations/`` create or change them.

Over 400 lines: every table in one place, as tests/test_migrations.py
compares them with the migrations column by column.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Dialect,
    Float,
    Index,
    MetaData,
    String,
    TypeDecorator,
    UniqueConstraint,
    literal_column,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, MappedAsDataclass, mapped_column
from sqlalchemy.orm.attributes import manager_of_class

from ..clock import as_utc, utcnow
from ..enums import ExtractionStatus, Status, Visibility

ID_LENGTH = 36  # a uuid4 as text


def new_id() -> str:
    """A random (version 4) UUID's text, as ``str(uuid.uuid4())`` writes it,
    without the UUID object: the hook makes one per event (docs/decisions.md#d129)."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


_VARIANT = "89ab"  # RFC 4122's variant: the clock_seq's top bits 10


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in, aware UTC datetimes out. SQLite stores them
    as text without an offset; a naive value is taken to be UTC."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else as_utc(value).astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else as_utc(value)


class UnicodeJSON(TypeDecorator[Any]):
    """JSON, written as UTF-8: a Han character takes its 3 bytes, not the
    6 of a ``\\uXXXX`` escape (SQLAlchemy's own JSON escapes everything).
    Read back by ``json.loads`` either way, so rows of both kinds coexist."""

    impl = JSON
    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], str | None]:
        return lambda value: None if value is None else json.dumps(value, ensure_ascii=False)

    def result_processor(self, dialect: Dialect, coltype: object) -> Callable[[Any], Any]:
        return lambda value: json.loads(value) if isinstance(value, (str, bytes)) else value


class LTMBase(MappedAsDataclass, DeclarativeBase, eq=False):
    metadata = MetaData()
    type_annotation_map = {datetime: UTCDateTime, float: Float}


metadata = LTMBase.metadata


# The statuses of a turn extraction has not finished with: SQLite reads a
# partial index of them for a query whose own conditions name one.
UNFINISHED = "(" + " OR ".join(f"extraction_status = '{s}'" for s in (ExtractionStatus.PENDING,
                                                                       ExtractionStatus.FAILED,
                                                                       ExtractionStatus.SKIPPED)) + ")"
# The memories awaiting approval, as operating.queries asks for them
# (``awaiting_approval IS 1``): the only ones its partial index holds.
AWAITING = "awaiting_approval IS 1"


class MemoryEvent(LTMBase, kw_only=True):
    """A recorded message, bot reply or tool result: the raw archive. Never
    deleted by the plugin; memories are evidenced by these rows."""

    __tablename__ = "ltm_events"
    __table_args__ = (
        Index("ix_ltm_events_scope_created", "scope", "scope_id", "created_at"),
        Index("ix_ltm_events_session", "session_id", "created_at"),
        Index("ix_ltm_events_created", "created_at"),
        # Only the turns not done are found by their status (migration 0018).
        Index("ix_ltm_events_unfinished", "extraction_status", "created_at", sqlite_where=text(UNFINISHED)),
        Index("ix_ltm_events_scope_unfinished", "scope", "scope_id", "extraction_status", "created_at",
              sqlite_where=text(UNFINISHED)),
    )

    id: Mapped[int | None] = mapped_column(primary_key=True, nullable=False, default=None)
    event_id: Mapped[str] = mapped_column(String(ID_LENGTH), unique=True, default_factory=new_id)
    scope: Mapped[str] = mapped_column(String(16))
    scope_id: Mapped[str] = mapped_column(String(255))
    source_type: Mapped[str] = mapped_column(String(16))  # enums.SourceType
    source_role: Mapped[str] = mapped_column(String(16))  # enums.Role
    content: Mapped[dict[str, Any]] = mapped_column(UnicodeJSON, default_factory=dict)
    platform_id: Mapped[str | None] = mapped_column(String(255), default=None)
    session_id: Mapped[str | None] = mapped_column(String(255), default=None)
    sender_id: Mapped[str | None] = mapped_column(String(255), default=None)
    sender_name: Mapped[str | None] = mapped_column(String(255), default=None)
    created_at: Mapped[datetime] = mapped_column(default_factory=utcnow)
    extraction_status: Mapped[str] = mapped_column(String(16), default=ExtractionStatus.PENDING)
    attempts: Mapped[int] = mapped_column(default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(default=None)
    last_error: Mapped[str | None] = mapped_column(default=None)
    # Never shown to the model as a raw turn: a memory it backed was deleted
    # or rejected, or its scope was forgotten. The event itself is kept.
    withheld: Mapped[bool] = mapped_column(default=False)


_EVENT_CLASS = manager_of_class(MemoryEvent)


def new_event(**values: Any) -> MemoryEvent:
    """``MemoryEvent(**values)`` without ``__init__``'s event per attribute
    (a third of the hook, docs/decisions.md#d95); the same row is written."""
    values.setdefault("event_id", new_id())
    values.setdefault("content", {})
    values.setdefault("created_at", utcnow())
    event: MemoryEvent = _EVENT_CLASS.new_instance()
    event.__dict__.update(values)
    return event


class MemoryItem(LTMBase, kw_only=True):
    """A memory: one compact fact about a scope (a person, or a group), with
    a status and scores. Which chats may recall it: audience.py."""

    __tablename__ = "ltm_items"
    __table_args__ = (
        # One current memory per key; the values it superseded keep the key.
        Index("uq_ltm_items_scope_key", "scope", "scope_id", "fact_key", unique=True,
              sqlite_where=text(f"status != '{Status.SUPERSEDED}'")),
        # Only a superseded memory names its successor (migration 0019).
        Index("ix_ltm_items_superseded_by", "superseded_by", sqlite_where=text("superseded_by IS NOT NULL")),
        Index("ix_ltm_items_scope_status", "scope", "scope_id", "status", "importance"),
        Index("ix_ltm_items_scope_updated", "scope", "scope_id", "updated_at"),
        Index("ix_ltm_items_status_updated", "status", "updated_at"),
        # The operators' lists (operating.queries.SORTS), whole store or one
        # scope. A whole-store list by confidence, importance or use sorts the
        # memories (one pass, 40-90 ms at 74k): migration 0019, decisions.md#d172.
        Index("ix_ltm_items_updated", "updated_at"),
        Index("ix_ltm_items_created", "created_at"),
        Index("ix_ltm_items_approval", "awaiting_approval", "updated_at", sqlite_where=text(AWAITING)),
        Index("ix_ltm_items_scope_confidence", "scope", "scope_id", "confidence"),
        Index("ix_ltm_items_scope_importance", "scope", "scope_id", "importance"),
        Index("ix_ltm_items_scope_created", "scope", "scope_id", "created_at"),
        Index("ix_ltm_items_status_confidence", "status", "confidence"),
        Index("ix_ltm_items_status_created", "status", "created_at"),
        Index("ix_ltm_items_scope_status_updated", "scope", "scope_id", "status", "updated_at"),
        Index("ix_ltm_items_type_updated", "type", "updated_at"),
        # sorted by use: never-used memories are candidates for clean-up
        Index("ix_ltm_items_scope_use", "scope", "scope_id", "use_count", "last_used_at"),
        Index("ix_ltm_items_status_use", "status", "use_count", "last_used_at"),
        # Row ids key the keyword and vector indexes: never reuse one.
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int | None] = mapped_column(primary_key=True, nullable=False, default=None)
    memory_id: Mapped[str] = mapped_column(String(ID_LENGTH), unique=True, default_factory=new_id)
    scope: Mapped[str] = mapped_column(String(16))
    scope_id: Mapped[str] = mapped_column(String(255))
    type: Mapped[str] = mapped_column(String(16))  # enums.MemoryType
    fact: Mapped[str] = mapped_column(String)
    fact_key: Mapped[str] = mapped_column(String(128))
    confidence: Mapped[float] = mapped_column(default=0.0)
    importance: Mapped[float] = mapped_column(default=0.5)
    evidence_count: Mapped[int] = mapped_column(default=1)
    ttl_days: Mapped[int | None] = mapped_column(default=None)
    status: Mapped[str] = mapped_column(String(16), default=Status.SHADOW)  # enums.Status
    # Manual mode and require_approval_types queue items here; status stays
    # shadow (never injected) until an operator approves.
    awaiting_approval: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(default_factory=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default_factory=utcnow)
    held_reason: Mapped[str | None] = mapped_column(String, default=None)  # why it awaits approval
    # When the value became true as far as we know (the statement's time),
    # and until when: a superseded memory is closed by its successor.
    valid_from: Mapped[datetime | None] = mapped_column(default=None)
    valid_to: Mapped[datetime | None] = mapped_column(default=None)
    supersedes: Mapped[str | None] = mapped_column(String(ID_LENGTH), default=None)  # the memory_id before
    superseded_by: Mapped[str | None] = mapped_column(String(ID_LENGTH), default=None)  # the memory_id after
    # How often it was used (recalling.usage), added in batches; not a change
    # of the memory, so updated_at does not move.
    injected_count: Mapped[int] = mapped_column(default=0, server_default="0")  # put into a memory block
    tool_count: Mapped[int] = mapped_column(default=0, server_default="0")  # returned by the memory search tool
    use_count: Mapped[int] = mapped_column(default=0, server_default="0")  # the two together, for sorting
    last_used_at: Mapped[datetime | None] = mapped_column(default=None)
    # enums.Visibility: shared where it was said (its scope, its contexts), or private to its person.
    visibility: Mapped[str] = mapped_column(String(16), default=Visibility.SHARED, server_default=Visibility.SHARED)


class MemoryContext(LTMBase, kw_only=True):
    """A group a memory kept elsewhere (a member's own scope) was said in:
    that group may recall it (audience.py)."""

    __tablename__ = "ltm_item_contexts"
    __table_args__ = (
        Index("ix_ltm_item_contexts_item", "item_id"),
        {"sqlite_with_rowid": False},
    )

    scope: Mapped[str] = mapped_column(String(16), primary_key=True)
    scope_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    item_id: Mapped[int] = mapped_column(primary_key=True)  # ltm_items.id


# Written out, not bound: SQLite uses the partial index uq_ltm_items_scope_key
# only for a literal WHERE; bound, a key lookup scanned the scope (docs/decisions.md#d94).
NOT_SUPERSEDED = MemoryItem.status != literal_column(f"'{Status.SUPERSEDED}'")


class MemoryEvidence(LTMBase, kw_only=True):
    """A link from a memory to an event that states it."""

    __tablename__ = "ltm_evidence"
    __table_args__ = (
        UniqueConstraint("memory_id", "event_id", name="uq_ltm_evidence_link"),
        Index("ix_ltm_evidence_event", "event_id"),
    )

    id: Mapped[int | None] = mapped_column(primary_key=True, nullable=False, default=None)
    memory_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    event_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    extraction_method: Mapped[str] = mapped_column(String(16))  # enums.Method
    extraction_meta: Mapped[dict[str, Any]] = mapped_column(UnicodeJSON, default_factory=dict)
    created_at: Mapped[datetime] = mapped_column(default_factory=utcnow)


class SummaryLink(LTMBase, kw_only=True):
    """A summary's link to a turn it covers: two row ids (storing.evidence,
    docs/decisions.md#d162). A fact's links are ``MemoryEvidence`` rows."""

    __tablename__ = "ltm_summary_links"
    __table_args__ = (Index("ix_ltm_summary_links_event", "event_rowid"), {"sqlite_with_rowid": False})

    item_id: Mapped[int] = mapped_column(primary_key=True)  # ltm_items.id of the summary
    event_rowid: Mapped[int] = mapped_column(primary_key=True)  # ltm_events.id of the turn


class MemoryAudit(LTMBase, kw_only=True):
    """Every change to memory and every policy decision, with cause and reason."""

    __tablename__ = "ltm_audit"
    __table_args__ = (
        # What each serves: bench/results/2026-12-07-storage.md#d172. A
        # filter by action or actor walks the newest rows (migration 0019).
        Index("ix_ltm_audit_created", "created_at"),
        Index("ix_ltm_audit_memory", "memory_id"),
        Index("ix_ltm_audit_scope_created", "scope", "scope_id", "created_at"),
        Index("ix_ltm_audit_session_created", "session_id", "created_at"),
    )

    id: Mapped[int | None] = mapped_column(primary_key=True, nullable=False, default=None)
    created_at: Mapped[datetime] = mapped_column(default_factory=utcnow)
    action: Mapped[str] = mapped_column(String(32))  # enums.AuditAction
    memory_id: Mapped[str | None] = mapped_column(String(ID_LENGTH), default=None)
    scope: Mapped[str | None] = mapped_column(String(16), default=None)
    scope_id: Mapped[str | None] = mapped_column(String(255), default=None)
    session_id: Mapped[str | None] = mapped_column(String(255), default=None)
    actor: Mapped[str] = mapped_column(String(255))  # system:extractor, operator:<name>, user:<id>
    reason: Mapped[str] = mapped_column(String, default="")
    detail: Mapped[dict[str, Any]] = mapped_column(UnicodeJSON, default_factory=dict)


class MemoryTombstone(LTMBase, kw_only=True):
    """A fact an operator deleted or rejected: extraction may not re-create it."""

    __tablename__ = "ltm_tombstones"

    scope: Mapped[str] = mapped_column(String(16), primary_key=True)
    scope_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    fact_key: Mapped[str] = mapped_column(String(128), primary_key=True)
    fact: Mapped[str] = mapped_column(String, default="")
    created_at: Mapped[datetime] = mapped_column(default_factory=utcnow)
    actor: Mapped[str] = mapped_column(String(255), default="")
    reason: Mapped[str] = mapped_column(String, default="")


class TurnTerms(LTMBase, kw_only=True):
    """A turn's keyword terms: a row of its own, as a blob on the event's row
    left a quarter of each ``ltm_events`` page unused (docs/decisions.md#d158)."""

    __tablename__ = "ltm_turn_terms"

    event_rowid: Mapped[int] = mapped_column(primary_key=True)  # ltm_events.id
    terms: Mapped[bytes]


class MemoryVector(LTMBase, kw_only=True):
    """A memory's embedding, int8 (storing.vector_rows.encode). FAISS
    namespaces are caches rebuilt from these."""

    __tablename__ = "ltm_item_vectors"
    __table_args__ = (Index("ix_ltm_item_vectors_scope", "scope", "scope_id", "model"),)

    item_id: Mapped[int] = mapped_column(primary_key=True)  # ltm_items.id
    scope: Mapped[str] = mapped_column(String(16))
    scope_id: Mapped[str] = mapped_column(String(255))
    model: Mapped[str] = mapped_column(String(255))
    dim: Mapped[int]
    vector: Mapped[bytes]  # int8 (float32 in a row written before migration 0017, until moved)
    updated_at: Mapped[datetime] = mapped_column(default_factory=utcnow)


class VectorSpace(LTMBase, kw_only=True):
    """An embedding model, its dimension and bits: a turn's vector row names
    its space by this number (docs/decisions.md#d159, #d165)."""

    __tablename__ = "ltm_vector_spaces"
    __table_args__ = (UniqueConstraint("model", "dim", "bits", name="uq_ltm_vector_spaces_model_dim_bits"),)

    id: Mapped[int | None] = mapped_column(primary_key=True, nullable=False, default=None)
    model: Mapped[str] = mapped_column(String(255))
    dim: Mapped[int]
    bits: Mapped[int]


class TurnVector(LTMBase, kw_only=True):
    """A raw turn's embeddings, one per passage (storing.turns.turn_passages),
    in one blob. Its scope is its event's: not stored twice."""

    __tablename__ = "ltm_turn_vectors"

    event_rowid: Mapped[int] = mapped_column(primary_key=True)  # ltm_events.id
    space: Mapped[int]  # ltm_vector_spaces.id
    vector: Mapped[bytes]


class PolicyVersion(LTMBase, kw_only=True):
    """One effective policy change: the whole policy after it (``id`` is
    the version number), who, from where, why, and the diff to the one before."""

    __tablename__ = "ltm_policy_versions"
    __table_args__ = (
        Index("ix_ltm_policy_versions_created", "created_at"),
        {"sqlite_autoincrement": True},  # a version number always means the same policy
    )

    id: Mapped[int | None] = mapped_column(primary_key=True, nullable=False, default=None)
    created_at: Mapped[datetime] = mapped_column(default_factory=utcnow)
    actor: Mapped[str] = mapped_column(String(255))
    source: Mapped[str] = mapped_column(String(32))  # enums.PolicySource
    reason: Mapped[str] = mapped_column(String, default="")
    policy: Mapped[dict[str, Any]] = mapped_column(UnicodeJSON, default_factory=dict)
    diff: Mapped[list[dict[str, Any]]] = mapped_column(UnicodeJSON, default_factory=list)
    rollback_of: Mapped[int | None] = mapped_column(default=None)


class UserPause(LTMBase, kw_only=True):
    """A user's own ``/ltm pause``: nothing new is learnt about them until
    they resume or an operator lifts it (operating/pauses.py). The user's
    state, not part of the policy: no rollback touches it."""

    __tablename__ = "ltm_user_pauses"

    scope: Mapped[str] = mapped_column(String(16), primary_key=True)
    scope_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    since: Mapped[datetime] = mapped_column(default_factory=utcnow)
    actor: Mapped[str] = mapped_column(String(255))  # user:<id> (or the operator who moved an old pause)
    reason: Mapped[str] = mapped_column(String, default="")


class DriftSnapshot(LTMBase, kw_only=True):
    """One scope kind's memory distribution at one moment (operating.drift_monitor)."""

    __tablename__ = "ltm_drift_snapshots"
    __table_args__ = (
        Index("ix_ltm_drift_snapshots_kind", "scope_kind", "id"),
        Index("ix_ltm_drift_snapshots_alarm", "alarm", "id"),
        Index("ix_ltm_drift_snapshots_trigger", "trigger", "created_at"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int | None] = mapped_column(primary_key=True, nullable=False, default=None)
    created_at: Mapped[datetime] = mapped_column(default_factory=utcnow)
    scope_kind: Mapped[str] = mapped_column(String(16))  # enums.ScopeKind
    trigger: Mapped[str] = mapped_column(String(16))  # enums.DriftTrigger
    policy_version: Mapped[int | None] = mapped_column(default=None)  # the version in force
    features: Mapped[dict[str, Any]] = mapped_column(UnicodeJSON, default_factory=dict)
    centroid: Mapped[bytes | None] = mapped_column(default=None)  # float32, unit length
    similarity: Mapped[float | None] = mapped_column(default=None)  # to the kind's previous snapshot
    previous_id: Mapped[int | None] = mapped_column(default=None)
    threshold: Mapped[float] = mapped_column(default=0.0)
    alarm: Mapped[bool] = mapped_column(default=False)


class GateLogEntry(LTMBase, kw_only=True):
    """A candidate as the write gate saw it, kept so a policy replay can ask
    the gate again without the model (operating/replay.py)."""

    __tablename__ = "ltm_gate_log"
    __table_args__ = (
        Index("ix_ltm_gate_log_session", "session_id", "created_at"),
        Index("ix_ltm_gate_log_scope", "scope", "scope_id", "created_at"),
        Index("ix_ltm_gate_log_created", "created_at"),
    )

    id: Mapped[int | None] = mapped_column(primary_key=True, nullable=False, default=None)
    created_at: Mapped[datetime] = mapped_column(default_factory=utcnow)
    scope: Mapped[str] = mapped_column(String(16))
    scope_id: Mapped[str] = mapped_column(String(255))
    session_id: Mapped[str | None] = mapped_column(String(255), default=None)
    memory_id: Mapped[str | None] = mapped_column(String(ID_LENGTH), default=None)  # None: refused
    fact_key: Mapped[str] = mapped_column(String(128))
    action: Mapped[str] = mapped_column(String(32))  # enums.AuditAction: create, confirm, merge, supersede
    type: Mapped[str] = mapped_column(String(32))
    fact: Mapped[str] = mapped_column(String)
    confidence: Mapped[float]
    evidence_count: Mapped[int]
    is_new: Mapped[bool]
    explicit: Mapped[bool]
    instruction: Mapped[str | None] = mapped_column(String, default=None)
    event_ids: Mapped[list[str]] = mapped_column(UnicodeJSON, default_factory=list)
    status: Mapped[str] = mapped_column(String(16))  # the gate's status, or "refused"
    awaiting_approval: Mapped[bool] = mapped_column(default=False)
    reason: Mapped[str] = mapped_column(String, default="")


class HoldoutSession(LTMBase, kw_only=True):
    """A session of the holdout replay set (operating/holdout.py)."""

    __tablename__ = "ltm_holdout"

    session_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    scope: Mapped[str] = mapped_column(String(16))
    scope_id: Mapped[str] = mapped_column(String(255))
    drawn_at: Mapped[datetime]
    rule: Mapped[dict[str, Any]] = mapped_column(UnicodeJSON, default_factory=dict)


class IndexBuild(LTMBase, kw_only=True):
    """What built a derived index whose rows depend on more than the
    database: ``keywords`` → the stemmer (text.KEYWORD_STEMMER) that made
    the keyword rows' tokens (storing.keyword_rows.match_stemmer)."""

    __tablename__ = "ltm_index_builds"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    built_with: Mapped[str] = mapped_column(String(128))
    built_at: Mapped[datetime] = mapped_column(default_factory=utcnow)
