"""Every closed set of values the parts of the plugin store or pass each
other, one enum per set. Each is a ``StrEnum``: a member is the very string
stored in SQLite, shown in the review page and sent over the API, so
``item.status == "active"`` and ``item.status == Status.ACTIVE`` agree."""

from __future__ import annotations

from enum import StrEnum


class MemoryType(StrEnum):
    PROFILE = "profile"  # who the person is: name, home, job
    PREFERENCE = "preference"  # likes and dislikes
    TASK_STATE = "task_state"  # where an ongoing task stands
    CONSTRAINT = "constraint"  # what to avoid or always do for them
    EPISODE = "episode"  # something that happened
    SUMMARY = "summary"  # a conversation, day, week or month in a few sentences (learning/summaries.py)


class SummaryLevel(StrEnum):
    """What period a summary covers, finest first."""

    SESSION = "session"  # one conversation, until it went idle or grew long
    DAY = "day"
    WEEK = "week"
    MONTH = "month"


class Status(StrEnum):
    """A memory's status; only ``active`` memories are ever injected."""

    ACTIVE = "active"
    SHADOW = "shadow"  # stored for review, never injected
    DISABLED = "disabled"  # switched off by an operator
    EXPIRED = "expired"  # past its retention
    SUPERSEDED = "superseded"  # a newer statement changed its value; kept as history


class WriteMode(StrEnum):
    SHADOW = "shadow"  # every memory is stored as shadow
    AUTO = "auto"  # active when the thresholds are met
    MANUAL = "manual"  # every memory waits for approval


class InjectionPosition(StrEnum):
    CONTEXT_MESSAGE = "context_message"  # a temporary part before the user's text
    SYSTEM_PROMPT = "system_prompt"  # prepended to the system prompt


class ExtractionStatus(StrEnum):
    """How far a recorded event has got through extraction."""

    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"  # max attempts reached; kept, retryable by an operator
    SKIPPED = "skipped"  # nothing to extract (the bot's own lines, a forgotten scope)


class SourceType(StrEnum):
    """What a recorded event is."""

    MESSAGE = "message"
    TOOL_RESULT = "tool_result"
    SYSTEM = "system"


class Role(StrEnum):
    """Who produced a recorded event."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SYSTEM = "system"


class Method(StrEnum):
    """How an evidence link was made (``ltm_evidence.extraction_method``)."""

    LLM_EXTRACT = "llm_extract"
    RULE = "rule"
    USER_EXPLICIT = "user_explicit"
    SUMMARY = "summary"  # the events a summary covers


class CandidateSource(StrEnum):
    """Where a candidate fact comes from: it sets the confidence weight."""

    USER_EXPLICIT = "user_explicit"
    LLM_EXTRACT = "llm_extract"
    RULE = "rule"
    TOOL_RESULT = "tool_result"
    BOT_SIDE = "bot_side"  # what the bot itself recommended or promised (learning/bot_side.py)


class AuditAction(StrEnum):
    """The ``action`` of an audit row."""

    CREATE = "create"
    CONFIRM = "confirm"  # new evidence for a memory with the same key
    MERGE = "merge"  # new evidence for a memory that says the same (embedding)
    SUPERSEDE = "supersede"  # a newer value became a new memory; the old one is history
    RESTORE = "restore"  # the update that superseded a memory was rejected: it is current again
    POLICY = "policy"  # a candidate dropped or refused by the policy
    STATUS = "status"  # the write policy moved a memory's status
    REVIVE = "revive"  # the user restated a deleted fact explicitly
    EVICT = "evict"  # pushed out by max_items_per_scope
    COMPACT = "compact"  # background compaction merged a near-duplicate into another memory
    APPROVE = "approve"
    REJECT = "reject"
    DELETE = "delete"
    EDIT = "edit"
    EXPIRE = "expire"
    IMPORT = "import"
    CONFIG = "config"  # the policy changed (a new policy version; operating/policy_versions.py)
    DRIFT_ROLLBACK = "drift_rollback"  # a drift alarm rolled the policy back (drift.auto_rollback)
    PAUSE = "pause"  # a user paused learning about themselves (operating/pauses.py)
    RESUME = "resume"  # the user resumed it
    LIFT = "lift"  # an operator lifted a user's pause
    MOVE = "move"  # kept with the person it is about, from the group it was said in (operating/contexts.py)
    DELETE_TURNS = "delete_turns"  # old turns no memory cites, deleted (retention_days.turns, compact): a row a batch


class PolicySource(StrEnum):
    """Where a policy version came from (``ltm_policy_versions.source``)."""

    API = "api"  # PUT policy
    PAGE = "page"  # the review page
    COMMAND = "command"  # /ltm writes, /ltm pause, /ltm resume
    WEBUI_CONFIG = "webui-config"  # AstrBot's plugin config page (seen when the plugin reloads)
    ROLLBACK = "rollback"
    STARTUP = "startup"  # version 1: the policy in force at the first start
    PAUSES_MOVED = "pauses-moved"  # users' old pauses taken out of disabled_scopes (operating/pauses.py)


# Actions that count as a new memory for the rate limits: an item created,
# or a new value that supersedes one.
WRITE_ACTIONS = (AuditAction.CREATE, AuditAction.SUPERSEDE)


class Outcome(StrEnum):
    """What the writer did with one candidate."""

    CREATED = "created"
    CONFIRMED = "confirmed"
    MERGED = "merged"
    SUPERSEDED = "superseded"
    DROPPED = "dropped"


class DriftTrigger(StrEnum):
    """Why a drift snapshot was taken (operating.drift_monitor)."""

    DAILY = "daily"
    BEFORE = "before"  # right before a policy version
    AFTER = "after"  # right after it
    MANUAL = "manual"  # asked for (tests, an operator)


class ScopeKind(StrEnum):
    """Whose memory a scope is: one person's, or one group chat's."""

    USER = "user"
    GROUP = "group"


class Visibility(StrEnum):
    """Which chats may recall a memory (audience.py; docs/privacy.md)."""

    SHARED = "shared"  # where it was said: its person's private chat and the groups it was said in
    PRIVATE = "private"  # only its person's private chat (a memory of old whose group could not be told)
    SECRET = "secret"  # the speaker asked to keep it secret: only their private chat, never shown in a group


class Corpus(StrEnum):
    """What a derived index holds of a scope: its memories or its raw turns."""

    MEMORIES = "memories"
    TURNS = "turns"


MEMORY_TYPES: tuple[str, ...] = tuple(MemoryType)
# What extraction may propose: a summary is only ever made by learning/summaries.py.
FACT_TYPES: tuple[str, ...] = tuple(t for t in MemoryType if t != MemoryType.SUMMARY)
SCOPE_KINDS: tuple[str, ...] = tuple(ScopeKind)
# What people and tools said: what extraction learns facts from.
SHOWN_ROLES: tuple[str, ...] = (Role.USER, Role.TOOL)
# The raw turns the reader may show and the indexes keep: those, and the
# bot's own replies, labelled as the bot's (docs/decisions.md#d57).
RECALLED_ROLES: tuple[str, ...] = (Role.USER, Role.TOOL, Role.ASSISTANT)
