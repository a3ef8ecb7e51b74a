"""SQLModel tables of the plugin, on the plugin's own metadata.

AstrBot creates its tables with ``SQLModel.metadata.create_all`` at start-up;
declaring ours on a separate registry keeps them out of that call, so only
our numbered migrations (``migrations/``) ever create or change them.
``tests/test_migrations.py`` checks the two agree column by column.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Column, Index, UniqueConstraint
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """Aware UTC. SQLModel before 0.0.50 loads SQLite datetimes as naive UTC."""
    return value.replace(tzinfo=UTC) if value.utcoffset() is None else value


def new_id() -> str:
    return str(uuid.uuid4())


class LTMBase(SQLModel, registry=registry()):
    pass


metadata = LTMBase.metadata


class ExtractionStatus:
    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"  # max attempts reached; kept, and retryable by an operator
    SKIPPED = "skipped"  # nothing to extract (assistant-only batch, empty text)


class MemoryEvent(LTMBase, table=True):
    __tablename__ = "ltm_events"
    __table_args__ = (
        Index("ix_ltm_events_scope_created", "scope", "scope_id", "created_at"),
        Index("ix_ltm_events_extraction", "extraction_status", "next_attempt_at"),
        Index("ix_ltm_events_session", "session_id", "created_at"),
        Index("ix_ltm_events_created", "created_at"),
        Index("ix_ltm_events_status_created", "extraction_status", "created_at"),
        Index("ix_ltm_events_scope_status_created", "scope", "scope_id", "extraction_status", "created_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    event_id: str = Field(default_factory=new_id, unique=True, max_length=36)
    scope: str = Field(max_length=16)
    scope_id: str = Field(max_length=255)
    source_type: str = Field(max_length=16)  # message | tool_result | system
    source_role: str = Field(max_length=16)  # user | assistant | tool | system
    content: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    platform_id: str | None = Field(default=None, max_length=255)
    session_id: str | None = Field(default=None, max_length=255)
    sender_id: str | None = Field(default=None, max_length=255)
    sender_name: str | None = Field(default=None, max_length=255)
    created_at: datetime = Field(default_factory=utcnow)
    extraction_status: str = Field(default=ExtractionStatus.PENDING, max_length=16)
    attempts: int = 0
    next_attempt_at: datetime | None = None
    last_error: str | None = None
    # Never shown to the model as a raw turn: a memory it backed was deleted
    # or rejected, or its scope was forgotten. The event itself is kept.
    withheld: bool = False


class MemoryItem(LTMBase, table=True):
    __tablename__ = "ltm_items"
    __table_args__ = (
        UniqueConstraint("scope", "scope_id", "fact_key", name="uq_ltm_items_scope_key"),
        Index("ix_ltm_items_scope_status", "scope", "scope_id", "status", "importance"),
        Index("ix_ltm_items_scope_updated", "scope", "scope_id", "updated_at"),
        Index("ix_ltm_items_fact_key", "fact_key"),
        Index("ix_ltm_items_status_updated", "status", "updated_at"),
        # the operators' lists (admin.SORTS), whole store or one scope
        Index("ix_ltm_items_updated", "updated_at"),
        Index("ix_ltm_items_created", "created_at"),
        Index("ix_ltm_items_confidence", "confidence"),
        Index("ix_ltm_items_importance", "importance"),
        Index("ix_ltm_items_approval", "awaiting_approval", "updated_at"),
        Index("ix_ltm_items_scope_confidence", "scope", "scope_id", "confidence"),
        Index("ix_ltm_items_scope_importance", "scope", "scope_id", "importance"),
        Index("ix_ltm_items_scope_created", "scope", "scope_id", "created_at"),
        Index("ix_ltm_items_status_confidence", "status", "confidence"),
        Index("ix_ltm_items_status_importance", "status", "importance"),
        Index("ix_ltm_items_status_created", "status", "created_at"),
        Index("ix_ltm_items_scope_status_updated", "scope", "scope_id", "status", "updated_at"),
        Index("ix_ltm_items_type_updated", "type", "updated_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    memory_id: str = Field(default_factory=new_id, unique=True, max_length=36)
    scope: str = Field(max_length=16)
    scope_id: str = Field(max_length=255)
    type: str = Field(max_length=16)
    fact: str
    fact_key: str = Field(max_length=128)
    confidence: float = 0.0
    importance: float = 0.5
    evidence_count: int = 1
    ttl_days: int | None = None
    status: str = Field(default="shadow", max_length=16)
    # Manual mode and require_approval_types queue items here; status stays
    # shadow (never injected) until an operator approves.
    awaiting_approval: bool = False
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class MemoryEvidence(LTMBase, table=True):
    __tablename__ = "ltm_evidence"
    __table_args__ = (
        UniqueConstraint("memory_id", "event_id", name="uq_ltm_evidence_link"),
        Index("ix_ltm_evidence_event", "event_id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    memory_id: str = Field(max_length=36)
    event_id: str = Field(max_length=36)
    extraction_method: str = Field(max_length=16)  # llm_extract | rule | user_explicit
    extraction_meta: dict[str, Any] = Field(
        default_factory=dict, sa_column=Column(JSON, nullable=False)
    )
    created_at: datetime = Field(default_factory=utcnow)


class MemoryAudit(LTMBase, table=True):
    """Every change to memory and every policy decision, with cause and reason."""

    __tablename__ = "ltm_audit"
    __table_args__ = (
        Index("ix_ltm_audit_created", "created_at"),
        Index("ix_ltm_audit_memory", "memory_id", "created_at"),
        Index("ix_ltm_audit_scope_action", "scope", "scope_id", "action", "created_at"),
        Index("ix_ltm_audit_session_action", "session_id", "action"),
        Index("ix_ltm_audit_action", "action", "created_at"),
        Index("ix_ltm_audit_scope_created", "scope", "scope_id", "created_at"),
        Index("ix_ltm_audit_session_created", "session_id", "created_at"),
        Index("ix_ltm_audit_actor", "actor", "created_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    created_at: datetime = Field(default_factory=utcnow)
    action: str = Field(max_length=32)
    memory_id: str | None = Field(default=None, max_length=36)
    scope: str | None = Field(default=None, max_length=16)
    scope_id: str | None = Field(default=None, max_length=255)
    session_id: str | None = Field(default=None, max_length=255)
    actor: str = Field(max_length=255)  # system:extractor, operator:<name>, user:<id>
    reason: str = ""
    detail: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class MemoryTombstone(LTMBase, table=True):
    """A fact an operator deleted or rejected: extraction may not re-create it."""

    __tablename__ = "ltm_tombstones"

    scope: str = Field(primary_key=True, max_length=16)
    scope_id: str = Field(primary_key=True, max_length=255)
    fact_key: str = Field(primary_key=True, max_length=128)
    fact: str = ""
    created_at: datetime = Field(default_factory=utcnow)
    actor: str = Field(default="", max_length=255)
    reason: str = ""


class _Vector(LTMBase):
    """The columns every vector table has (not a table itself)."""

    scope: str = Field(max_length=16)
    scope_id: str = Field(max_length=255)
    model: str = Field(max_length=255)
    dim: int
    vector: bytes
    updated_at: datetime = Field(default_factory=utcnow)


class MemoryVector(_Vector, table=True):
    """An item's embedding. FAISS namespaces are caches rebuilt from these."""

    __tablename__ = "ltm_item_vectors"
    __table_args__ = (Index("ix_ltm_item_vectors_scope", "scope", "scope_id", "model"),)

    item_id: int = Field(primary_key=True)  # ltm_items.id


class EventVector(_Vector, table=True):
    """A raw turn's embedding, for the reader's vector search over turns."""

    __tablename__ = "ltm_event_vectors"
    __table_args__ = (Index("ix_ltm_event_vectors_scope", "scope", "scope_id", "model"),)

    event_rowid: int = Field(primary_key=True)  # ltm_events.id
