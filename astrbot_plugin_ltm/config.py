"""The plugin's configuration, parsed and validated at load or change. Operators can
type anything into AstrBot's JSON editor, so nothing here raises: an invalid value
is replaced by its default, with a message the operator can act on.

Over 400 lines: one dataclass per section and the tables they share; a setting that went
(removed_settings.py) is read where it was, a ``ClassVar`` of its section.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any, ClassVar

from .enums import MEMORY_TYPES, InjectionPosition, WriteMode
from .errors import AdminError
from .i18n import Lang, Message, msg, translate
from .removed_settings import EVERY_SCOPE, TOOLS, merged, upgraded
from .validators import flag, scope_problem, shown

SCOPE_STRATEGIES = ("sender_id", "unified_msg_origin")
MODES: tuple[str, ...] = tuple(WriteMode)
INJECTION_POSITIONS: tuple[str, ...] = tuple(InjectionPosition)
# The chat commands' reply language when a command does not show one
# (operating/reply_language.py); auto: the chat client's, else English.
REPLY_LANGUAGES = ("auto", "zh", "en")
# What parts a persona's scope id from its person's (identity.persona_scoped,
# persona.py); here, below scope.py and persona.py, which both read it.
PERSONA_MARK = "#persona:"


@dataclass
class WritePolicy:
    """Which candidates are stored, and whether they go live (learning.policy.gate)."""

    mode: str = WriteMode.SHADOW.value
    min_confidence: float = 0.6
    min_evidence_count: int = 1
    allowed_types: list[str] = field(default_factory=lambda: list(MEMORY_TYPES))
    max_writes_per_session: int = 10
    max_writes_per_hour: int = 50
    max_items_per_scope: int = 200
    require_approval_types: list[str] = field(default_factory=list)
    # "user:<id>" / "group:<id>", or "*" for all: scopes whose writes are off
    # while reads go on (operating/policy_versions.py; docs/decisions.md#d52).
    disabled_scopes: list[str] = field(default_factory=list)

    @property
    def enable(self) -> bool:
        """Whether learning is on for everyone (no ``*`` in disabled_scopes)."""
        return EVERY_SCOPE not in self.disabled_scopes

    def writes_off(self, scope: object) -> bool:
        """Whether a scope's writes are off; a persona's scope follows its person's."""
        return bool(self.disabled_scopes) and (
            EVERY_SCOPE in self.disabled_scopes or str(scope).partition(PERSONA_MARK)[0] in self.disabled_scopes)


# A hook waits this long for the block (main.py); past it the turn goes
# without memory. A reranker's call gets what is left of it (recalling/reranking.py).
READ_SECONDS = 3.0


@dataclass
class ReadPolicy:
    """What a read may inject, and how candidates are ranked (recalling)."""

    enable: bool = True
    max_items: int = 15
    max_tokens: int = 800
    max_per_type: int = 5
    min_confidence: float = 0.5
    # Similarity leads; importance and recency break ties and surface the
    # essentials when the message says little ("hi") (docs/decisions.md#d01).
    recency_weight: float = 0.1
    importance_weight: float = 0.2
    similarity_weight: float = 0.7
    # Raw turns compete with memories for the budget, ranked alike; at
    # most this many, none behind an injected memory; 0 = memories only
    # (docs/decisions.md#d03). Which turns may be shown: storing.turns.
    max_events: int = 20
    # Constants, fitted on the benchmarks (docs/decisions.md#d169): a turn's importance in the
    # score (a memory has its own; #d04); a candidate gains day_weight × the best similarity
    # of its UTC day, so what surrounds the best match is read with it (#d05).
    event_importance: ClassVar[float] = 0.5
    day_weight: ClassVar[float] = 0.5
    injection_position: str = InjectionPosition.CONTEXT_MESSAGE.value


@dataclass
class IdentityConfig:
    # sender_id: a person's scope is platform + sender id, the same in every
    # conversation; unified_msg_origin: one scope per conversation (the
    # way AstrBot itself keys conversations, for operators who want it).
    user_scope_strategy: str = "sender_id"
    # "platform:sender_id=alias" lines: every listed account shares the
    # alias's scope, so one person on QQ and Telegram has one memory.
    cross_platform_aliases: list[str] = field(default_factory=list)
    include_legacy_umo_on_read: bool = True
    # What the bot learns under one AstrBot persona stays with it; the
    # person's profile, preferences and constraints are shared (persona.py).
    persona_scoped: bool = False

    def alias_map(self) -> dict[str, str]:
        pairs = (line.partition("=") for line in self.cross_platform_aliases)
        return {account.strip(): alias.strip() for account, _, alias in pairs}


@dataclass
class ExtractionConfig:
    batch_size: int = 8  # events per LLM call
    idle_seconds: float = 15.0  # wait this long after a scope's last event
    timeout_seconds: float = 60.0
    backoff_seconds: float = 30.0  # doubled after each failed attempt
    # Then the events are marked failed (kept, retryable): 6 spans ~15 min of outage at the default backoff.
    max_attempts: ClassVar[int] = 6
    max_fact_chars: ClassVar[int] = 300  # a fact is a sentence; the extraction prompt asks for short ones

    @property
    def poll_seconds(self) -> float:
        """A third of the idle wait (5 s at most), so a quiet scope waits at most a third longer."""
        return min(5.0, max(0.05, self.idle_seconds / 3))


@dataclass
class RecordingConfig:
    """Constants (docs/decisions.md#d169): a tool's result is recorded like a message (the
    design's after-tool hook); an event keeps so many characters, the rest cut and marked."""

    tool_result_max_chars: ClassVar[int] = 2000
    max_message_chars: ClassVar[int] = 8000


@dataclass
class VectorConfig:
    query_timeout_seconds: float = 2.0  # the read path's one embedding call
    # Bytes the keyword and vector namespaces hold together (LRU out past it): a year-long
    # group's newest 50,000 turns take ~59 MB (docs/decisions.md#d41, #d166).
    max_memory_mb: int = 64
    # A count cap besides: max_memory_mb is the one setting for the job (docs/decisions.md#d169).
    max_loaded_namespaces: ClassVar[int] = 256
    # Raw turns get vectors too (in the background, batched), so the reader
    # finds them by meaning; off: turns are found by keywords only.
    embed_turns: bool = True


@dataclass
class RerankConfig:
    """A rerank provider reorders a read's best candidates (docs/decisions.md#d151)."""

    provider_id: str = ""  # empty: no reranking
    # Past it the read keeps the retrievers' order; never more than what is
    # left of READ_SECONDS, which bounds the read whatever this is.
    timeout_seconds: ClassVar[float] = 1.0
    candidates: ClassVar[int] = 60  # the best this many (memories and turns) are reranked: a block's worth and more


@dataclass
class ToolsConfig:
    """LLM tools the model may call; each reaches only the current speaker's scopes."""

    # search (memory_search): memories and turns for a query, a period, a type;
    # remember (memory_remember): a fact, through the write policy;
    # expand (memory_expand): the turns behind a memory; block lines carry ids.
    offered: list[str] = field(default_factory=lambda: list(TOOLS))
    search_max_tokens: ClassVar[int] = 600  # memory_search's own budget, under a block's 800

    @property
    def search(self) -> bool:
        return "search" in self.offered

    @property
    def remember(self) -> bool:
        return "remember" in self.offered

    @property
    def expand(self) -> bool:
        return "expand" in self.offered


@dataclass
class DriftConfig:
    """The drift detector (operating.drift_monitor, docs/decisions.md#d55)."""

    # Consecutive snapshots less similar than this raise an alarm (measured, docs/decisions.md#d55).
    threshold: ClassVar[float] = 0.9
    # On an alarm, roll the policy back to the last version without one.
    auto_rollback: bool = False


@dataclass
class SummariesConfig:
    """Session summaries and their roll-ups (learning/summaries.py)."""

    # Off: on, they raise no answer words in the block and cost LongMemEval turns (docs/decisions.md#d140).
    enable: bool = False
    idle_minutes: float = 30.0  # a conversation ends after this long without a turn
    # Short conversations are joined until they hold this many events, then
    # summarised in one call: at most 1/40 = 0.025 calls per turn, which
    # beside extraction's 1/8 (batch_size 8) keeps under 0.15 (docs/decisions.md#d113).
    min_events: int = 40
    # Constants (docs/decisions.md#d169): how summaries are built, not whether.
    max_events: ClassVar[int] = 60  # a longer conversation is summarised every this many events
    # A summary rolled into a coarser one is closed (superseded by it) once its
    # period ended this long ago: the number of summaries stays bounded.
    keep_parts_days: ClassVar[int] = 30
    max_chars: ClassVar[int] = 1200  # a summary longer than this is cut


@dataclass
class GroupsConfig:
    """Each entry names a group as ``<platform>:<group id>``, the bare group id, or ``*`` (docs/privacy.md)."""

    # Record every message of these groups, not only those that wake the bot.
    learn_all_messages: list[str] = field(default_factory=list)
    # In these groups a member's profile facts (name, how to address them)
    # follow them from wherever they said them, marked as theirs; never a secret.
    profiles_follow_members: list[str] = field(default_factory=list)

    def learns_all(self, group: object) -> bool:
        """Whether ``group`` (a group scope, or its id) records every message."""
        return _names_group(self.learn_all_messages, group)

    def profiles_follow(self, group: object) -> bool:
        return _names_group(self.profiles_follow_members, group)


def _names_group(entries: list[str], group: object) -> bool:
    if not entries:
        return False
    scope_id = str(group).removeprefix("group:").partition(PERSONA_MARK)[0]
    return "*" in entries or scope_id in entries or scope_id.partition(":")[2] in entries
# retention_days.turns: the raw archive's bound, beside the memory types'
# (storing.archive; -1 keeps every turn, as the design does).
TURNS = "turns"


def _default_retention() -> dict[str, int]:
    return {"profile": -1, "preference": 90, "task_state": 7, "constraint": -1, "episode": 30,
            "summary": -1, TURNS: -1}


@dataclass
class LTMConfig:
    enable: bool = True
    write_policy: WritePolicy = field(default_factory=WritePolicy)
    read_policy: ReadPolicy = field(default_factory=ReadPolicy)
    identity: IdentityConfig = field(default_factory=IdentityConfig)
    extraction_provider_id: str = ""
    embedding_provider_id: str = ""
    retention_days: dict[str, int] = field(default_factory=_default_retention)
    emergency_read_only: bool = False
    extraction: ExtractionConfig = field(default_factory=ExtractionConfig)
    recording: RecordingConfig = field(default_factory=RecordingConfig)
    vectors: VectorConfig = field(default_factory=VectorConfig)
    rerank: RerankConfig = field(default_factory=RerankConfig)
    tools: ToolsConfig = field(default_factory=ToolsConfig)
    drift: DriftConfig = field(default_factory=DriftConfig)
    summaries: SummariesConfig = field(default_factory=SummariesConfig)
    groups: GroupsConfig = field(default_factory=GroupsConfig)
    reply_language: str = "auto"

    def ttl_days(self, memory_type: str) -> int | None:
        days = self.retention_days.get(memory_type, -1)
        return None if days < 0 else days

    @property
    def turns_retention_days(self) -> int | None:
        """How many days a turn no memory cites is kept; None: for ever."""
        days = self.retention_days.get(TURNS, -1)
        return None if days < 1 else days


# Allowed ranges and choices, by dotted path. Anything not listed only has
# to have the right type.
_RANGES: dict[str, tuple[float, float]] = {
    "write_policy.min_confidence": (0.0, 1.0),
    "write_policy.min_evidence_count": (1, 1000),
    "write_policy.max_writes_per_session": (0, 100000),
    "write_policy.max_writes_per_hour": (0, 1000000),
    "write_policy.max_items_per_scope": (1, 10000000),
    "read_policy.max_items": (0, 200),
    "read_policy.max_tokens": (0, 32000),
    "read_policy.max_per_type": (1, 200),
    "read_policy.min_confidence": (0.0, 1.0),
    "read_policy.recency_weight": (0.0, 10.0),
    "read_policy.importance_weight": (0.0, 10.0),
    "read_policy.similarity_weight": (0.0, 10.0),
    "read_policy.max_events": (0, 100),
    "extraction.batch_size": (1, 100),
    "extraction.idle_seconds": (0.0, 86400.0),
    "extraction.timeout_seconds": (1.0, 600.0),
    "extraction.backoff_seconds": (0.0, 86400.0),
    "vectors.query_timeout_seconds": (0.05, 60.0),
    "vectors.max_memory_mb": (16, 1000000),
    "summaries.idle_minutes": (0.05, 10080.0),
    "summaries.min_events": (1, 1000),
}
_CHOICES: dict[str, tuple[str, ...]] = {
    "write_policy.mode": MODES,
    "read_policy.injection_position": INJECTION_POSITIONS,
    "identity.user_scope_strategy": SCOPE_STRATEGIES,
    "reply_language": REPLY_LANGUAGES,
}
# What a list's items may be (the form's options).
LIST_CHOICES: dict[str, tuple[str, ...]] = {
    "write_policy.allowed_types": MEMORY_TYPES,
    "write_policy.require_approval_types": MEMORY_TYPES,
    "tools.offered": TOOLS,
}
_GROUP_LISTS = ("groups.learn_all_messages", "groups.profiles_follow_members")
MAX_DISABLED_SCOPES = 100000


def _coerce(path: str, value: Any, default: Any, errors: list[str]) -> Any:
    def bad(why: Message) -> Any:
        errors.append(str(msg("config.default", problem=f"{path}: {why}", default=repr(default))))
        return default

    if isinstance(default, bool):
        try:  # the one reading of a yes/no, as the API and imports have it
            return flag(value, path)
        except AdminError:
            return bad(msg("config.not_flag", value=shown(value)))
    if isinstance(default, (int, float)):
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            return bad(msg("config.not_number", value=shown(value)))
        try:
            number = float(value)
        except (ValueError, OverflowError):
            return bad(msg("config.not_number_in_range", value=shown(value)))
        if not math.isfinite(number):
            return bad(msg("config.not_finite", value=shown(value)))
        if isinstance(default, int):
            if number != int(number):
                return bad(msg("config.not_whole", value=shown(value)))
            number = int(number)
        lo, hi = _RANGES.get(path, (float("-inf"), float("inf")))
        if not lo <= number <= hi:
            return bad(msg("config.out_of_range", value=shown(value), lo=f"{lo:g}", hi=f"{hi:g}"))
        return number
    if isinstance(default, str):
        if not isinstance(value, str):
            return bad(msg("config.not_text", value=shown(value)))
        value = value.strip()
        choices = _CHOICES.get(path)
        if choices and value not in choices:
            return bad(msg("config.not_choice", value=shown(value), choices=", ".join(choices)))
        return value
    if isinstance(default, list):
        if isinstance(value, str):  # a comma-separated list typed by hand
            value = [v for v in (s.strip() for s in value.split(",")) if v]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return bad(msg("config.not_text_list", value=shown(value)))
        known = LIST_CHOICES.get(path)
        if known is not None:
            unknown = [v for v in value if v not in known]
            if unknown:
                code = "config.unknown_types" if known == MEMORY_TYPES else "config.unknown_choices"
                return bad(msg(code, unknown=unknown, known=", ".join(known)))
        if path == "identity.cross_platform_aliases":
            malformed = [v for v in value if "=" not in v or ":" not in v.partition("=")[0]]
            if malformed:
                return bad(msg("config.alias_form", malformed=malformed))
        if path == "write_policy.disabled_scopes":
            bad_scopes = [f"{shown(v)} {why}" for v in value
                          if v.strip() != EVERY_SCOPE and (why := scope_problem(v.strip()))]
            if bad_scopes:
                return bad(msg("config.bad_scopes", scopes="; ".join(bad_scopes[:3])))
            if len(value) > MAX_DISABLED_SCOPES:
                return bad(msg("config.too_many_scopes", max=MAX_DISABLED_SCOPES))
            return list(dict.fromkeys(v.strip() for v in value))
        if path in _GROUP_LISTS:
            value = [v.strip().removeprefix("group:") for v in value if v.strip()]
            malformed = [v for v in value if any(c.isspace() for c in v) or v.startswith(":") or v.endswith(":")]
            if malformed:
                return bad(msg("config.group_form", malformed=malformed))
            return list(dict.fromkeys(value))
        return list(value)
    raise TypeError(f"no coercion for {path}")  # a programming error, not input


def _parse_section(cls: type[Any], raw: Any, prefix: str, errors: list[str]) -> Any:
    obj = cls()
    if raw is None:
        return obj
    if not isinstance(raw, dict):
        errors.append(str(msg("config.defaults", problem=msg("config.not_object", name=prefix, value=shown(raw)))))
        return obj
    known = {f.name for f in fields(cls)}
    for name in sorted(set(raw) - known):
        errors.append(str(msg("config.unknown_setting", name=f"{prefix}.{name}")))
    for f in fields(cls):
        if f.name in raw:
            setattr(obj, f.name, _coerce(f"{prefix}.{f.name}", raw[f.name], getattr(obj, f.name), errors))
    return obj


def parse_config(raw: dict[str, Any] | None) -> tuple[LTMConfig, list[str]]:
    """A validated config and one message per value replaced by its default."""
    errors: list[str] = []
    cfg = LTMConfig()
    raw, _ = upgraded(raw or {})
    for f in fields(LTMConfig):
        default = getattr(cfg, f.name)
        if is_dataclass(default):  # a section
            setattr(cfg, f.name, _parse_section(type(default), raw.get(f.name), f.name, errors))
        elif f.name in raw and not isinstance(default, dict):
            setattr(cfg, f.name, _coerce(f.name, raw[f.name], default, errors))
    retention = raw.get("retention_days")
    if retention is not None:
        if not isinstance(retention, dict):
            errors.append(str(msg("config.defaults",
                                  problem=msg("config.not_object", name="retention_days", value=shown(retention)))))
        else:
            for memory_type in (*MEMORY_TYPES, TURNS):
                if memory_type in retention:
                    value = _coerce(f"retention_days.{memory_type}", retention[memory_type],
                                    cfg.retention_days[memory_type], errors)
                    if value < -1:
                        errors.append(str(msg("config.default_plain", problem=msg(
                            "config.retention_days", setting=f"retention_days.{memory_type}", value=value))))
                    elif memory_type == TURNS and value == 0:  # every turn no memory cites, as soon as recorded
                        errors.append(str(msg("config.default_plain", problem=msg(
                            "config.retention_turns_zero", setting=f"retention_days.{TURNS}"))))
                    else:
                        cfg.retention_days[memory_type] = value
    ignored = set(raw) - {f.name for f in fields(LTMConfig)}
    errors.extend(str(msg("config.unknown_setting", name=name)) for name in sorted(ignored))
    wp = cfg.write_policy
    stray = [t for t in wp.require_approval_types if t not in wp.allowed_types]
    if stray:
        errors.append(str(msg("config.stray_approval", stray=stray)))
    return cfg, errors


# -- the policy: what PUT policy, a rollback and a replay's candidate change ----------

POLICY_KEYS = ("enable", "emergency_read_only", "write_policy", "read_policy")


def policy_of(cfg: LTMConfig) -> dict[str, Any]:
    """The policy part of a configuration (as GET policy shows it and a version
    stores it); ``write_policy.enable`` shows ``*`` in disabled_scopes (the review
    page's "Allow new memories" box; a change of it sets or clears ``*``)."""
    write = {**asdict(cfg.write_policy), "enable": cfg.write_policy.enable}
    return {"enable": cfg.enable, "emergency_read_only": cfg.emergency_read_only,
            "write_policy": write, "read_policy": asdict(cfg.read_policy)}


def policy_schema() -> dict[str, Any]:
    """The policy's bounds and choices, so the review page never re-types them (docs/decisions.md#d111)."""
    policy = ("write_policy.", "read_policy.")
    bounds: dict[str, dict[str, Any]] = {
        path: {"min": low, "max": high, "kind": "float" if isinstance(low, float) else "int"}
        for path, (low, high) in _RANGES.items() if path.startswith(policy)
    }
    for path, choices in _CHOICES.items():
        if path.startswith(policy):
            bounds[path] = {"choices": list(choices)}
    return {"memory_types": list(MEMORY_TYPES), "fields": bounds}


def with_policy(raw: dict[str, Any], changes: dict[str, Any], *, replace: bool = False) -> dict[str, Any]:
    """The settings ``raw`` with ``changes`` merged in (``replace``: a section as given), upgraded."""
    return upgraded(merged(raw, changes, replace=replace))[0]


@dataclass(frozen=True)
class Problems(Message):
    """``parse_config``'s problems as one value of a refusal, each shown in the reader's language."""

    items: tuple[str, ...] = ()

    def render(self, lang: Lang = "en") -> str:
        return "; ".join(translate(p, lang) for p in self.items)


def refusal_message(problems: list[str]) -> Message:
    """``parse_config``'s messages as reasons to refuse a change: through a change, nothing is defaulted."""
    return Problems("config.problems", items=tuple(p.split("; using the default")[0] for p in problems))
