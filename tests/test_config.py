"""Config validation: bad values become safe defaults with one clear message
each, never an exception; _conf_schema.json agrees with the dataclasses."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, fields, is_dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from astrbot_plugin_ltm.config import _CHOICES, _RANGES, LIST_CHOICES, LTMConfig, parse_config, policy_of, with_policy
from astrbot_plugin_ltm.enums import MEMORY_TYPES
from astrbot_plugin_ltm.removed_settings import REMOVED, carried_over

SCHEMA = Path(__file__).resolve().parent.parent / "_conf_schema.json"
DEFAULT = LTMConfig()


def get(cfg, path):
    value = cfg
    for part in path.split("."):
        value = value[part] if isinstance(value, dict) else getattr(value, part)
    return value


def nest(path, value):
    raw = value
    for part in reversed(path.split(".")):
        raw = {part: raw}
    return raw


def test_no_config_means_defaults_without_messages():
    for raw in (None, {}):
        cfg, errors = parse_config(raw)
        assert errors == [] and cfg == DEFAULT


INVALID = [
    ("write_policy.mode", "yolo"),
    ("write_policy.mode", None),
    ("write_policy.min_confidence", 1.7),
    ("write_policy.min_confidence", -0.1),
    ("write_policy.min_confidence", "high"),
    ("write_policy.min_evidence_count", 0),
    ("write_policy.min_evidence_count", 1.5),
    ("write_policy.max_writes_per_session", "ten"),
    ("write_policy.max_writes_per_hour", -1),
    ("write_policy.max_items_per_scope", 0),
    ("write_policy.allowed_types", ["profile", "hobby"]),
    ("write_policy.allowed_types", "profile, hobby"),
    ("write_policy.allowed_types", [1, 2]),
    ("write_policy.disabled_scopes", ["user:1", "everyone"]),
    ("tools.offered", ["search", "browse"]),
    ("write_policy.require_approval_types", ["everything"]),
    ("read_policy.max_tokens", -5),
    ("read_policy.max_tokens", "lots"),
    ("read_policy.max_tokens", True),
    ("read_policy.max_tokens", [800]),
    ("read_policy.max_items", 1000),
    ("read_policy.max_per_type", 0),
    ("read_policy.min_confidence", 2),
    ("read_policy.similarity_weight", -1),
    ("read_policy.injection_position", "footer"),
    ("identity.user_scope_strategy", "email"),
    ("identity.cross_platform_aliases", ["alice"]),
    ("identity.cross_platform_aliases", ["qq111=alice"]),
    ("identity.cross_platform_aliases", {"qq:1": "alice"}),
    ("identity.include_legacy_umo_on_read", "sometimes"),
    ("extraction.timeout_seconds", 0),
    ("extraction.batch_size", 0),
    ("extraction.backoff_seconds", -1),
    ("enable", "maybe"),
    ("emergency_read_only", 3),
    ("extraction_provider_id", 42),
    ("retention_days.preference", -2),
    ("retention_days.preference", "forever"),
    ("retention_days.episode", 1.5),
]


@pytest.mark.parametrize(("path", "value"), INVALID, ids=[f"{p}={v!r}" for p, v in INVALID])
def test_an_invalid_value_becomes_the_default_with_one_message(path, value):
    cfg, errors = parse_config(nest(path, value))
    assert get(cfg, path) == get(DEFAULT, path)
    assert len(errors) == 1, errors
    message = errors[0]
    assert message.startswith(path + ":"), message
    assert "default" in message
    # the rest of the config is untouched
    assert asdict(cfg) == asdict(DEFAULT)


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"write_policy": "auto"}, "write_policy"),
        ({"read_policy": [1, 2]}, "read_policy"),
        ({"retention_days": 30}, "retention_days"),
        ({"colour": "blue"}, "colour"),
        ({"write_policy": {"colour": "blue"}}, "write_policy.colour"),
        ({"identity": {"aliases": []}}, "identity.aliases"),
    ],
)
def test_malformed_sections_and_unknown_keys_give_one_message(raw, path):
    cfg, errors = parse_config(raw)
    assert asdict(cfg) == asdict(DEFAULT)
    assert len(errors) == 1 and errors[0].startswith(path + ":"), errors


def test_one_message_per_invalid_value():
    raw = {
        "write_policy": {"mode": "yolo", "min_confidence": 1.7, "allowed_types": ["hobby"], "max_items_per_scope": 50},
        "read_policy": {"max_tokens": -5, "max_items": "lots", "max_per_type": 3},
        "identity": {"cross_platform_aliases": ["nonsense"]},
        "unknown": 1,
    }
    cfg, errors = parse_config(raw)
    paths = ["write_policy.mode", "write_policy.min_confidence", "write_policy.allowed_types",
             "read_policy.max_tokens", "read_policy.max_items", "identity.cross_platform_aliases", "unknown"]
    assert len(errors) == len(paths), errors
    for path in paths:
        assert sum(e.startswith(path + ":") for e in errors) == 1, (path, errors)
    # the valid values next to them are kept
    assert cfg.write_policy.max_items_per_scope == 50 and cfg.read_policy.max_per_type == 3
    assert cfg.write_policy.mode == "shadow" and cfg.read_policy.max_tokens == 800


def test_valid_values_are_taken():
    raw = {
        "enable": True,
        "emergency_read_only": "true",
        "write_policy": {"mode": "manual", "min_confidence": 0.75, "min_evidence_count": 2,
                         "allowed_types": "profile, preference", "require_approval_types": ["profile"],
                         "max_writes_per_session": 3, "max_writes_per_hour": 7, "max_items_per_scope": 9},
        "read_policy": {"max_tokens": 300, "max_items": 4, "max_per_type": 2, "min_confidence": 0,
                        "injection_position": "system_prompt"},
        "identity": {"user_scope_strategy": "unified_msg_origin", "cross_platform_aliases": ["qq:1=a", "tg:2=a"]},
        "retention_days": {"episode": -1, "task_state": 0},
        "extraction": {"timeout_seconds": 1, "idle_seconds": 0.5},
        "extraction_provider_id": "  openai  ",
    }
    cfg, errors = parse_config(raw)
    assert errors == []
    assert cfg.emergency_read_only is True
    w = cfg.write_policy
    assert (w.mode, w.min_confidence, w.min_evidence_count) == ("manual", 0.75, 2)
    assert w.allowed_types == ["profile", "preference"] and w.require_approval_types == ["profile"]
    assert (w.max_writes_per_session, w.max_writes_per_hour, w.max_items_per_scope) == (3, 7, 9)
    r = cfg.read_policy
    assert (r.max_tokens, r.max_items, r.max_per_type, r.min_confidence) == (300, 4, 2, 0.0)
    assert isinstance(r.max_tokens, int)
    assert cfg.identity.alias_map() == {"qq:1": "a", "tg:2": "a"}
    assert cfg.ttl_days("episode") is None and cfg.ttl_days("task_state") == 0
    assert cfg.extraction.timeout_seconds == 1.0 and cfg.extraction_provider_id == "openai"


def test_approval_types_outside_allowed_types_are_pointed_out():
    cfg, errors = parse_config({"write_policy": {"allowed_types": ["profile"],
                                                 "require_approval_types": ["constraint"]}})
    assert len(errors) == 1 and "require_approval_types" in errors[0] and "allowed_types" in errors[0]


def test_non_finite_numbers_never_raise():
    # "inf"/"nan" typed into the JSON editor, or Infinity/NaN (Python's json reads them)
    problems = []
    for path in ("read_policy.max_tokens", "write_policy.max_items_per_scope",
                 "retention_days.preference", "read_policy.min_confidence"):
        for value in ("inf", "-inf", "nan", "Infinity", float("inf"), float("nan"), 1e400):
            try:
                cfg, errors = parse_config(nest(path, value))
            except Exception as exc:  # noqa: BLE001 - that is the point
                problems.append(f"{path}={value!r} raised {type(exc).__name__}: {exc}")
                continue
            if get(cfg, path) != get(DEFAULT, path) or len(errors) != 1 or not errors[0].startswith(path + ":"):
                problems.append(f"{path}={value!r} gave {get(cfg, path)!r} with {errors}")
    assert problems == []


def test_engine_apply_config_reports_messages(tmp_path):
    from sqlalchemy.ext.asyncio import create_async_engine

    from astrbot_plugin_ltm import LTMEngine

    engine = LTMEngine(create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/c.db"), {"write_policy": {"mode": "yolo"}})
    assert len(engine.config_errors) == 1 and engine.config.write_policy.mode == "shadow"
    errors = engine.apply_config({"write_policy": {"mode": "auto"}, "read_policy": {"max_tokens": -5}})
    assert errors == engine.config_errors and len(errors) == 1
    assert engine.config.write_policy.mode == "auto" and engine.config.read_policy.max_tokens == 800


# -- never an exception, always a valid config ----------------------------------

_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=12).filter(lambda s: not _non_finite_text(s)),
    st.sampled_from(["shadow", "auto", "manual", "0.5", "10", "true", "False", "profile", "qq:1=a", ""]),
)
_value = st.one_of(_scalar, st.lists(_scalar, max_size=4), st.dictionaries(st.text(max_size=6), _scalar, max_size=3))


def _non_finite_text(s: str) -> bool:
    try:
        return not math.isfinite(float(s))
    except (ValueError, OverflowError):
        return False


def _section_keys(cls):
    return [f.name for f in fields(cls)]


def _raw_strategy():
    section_names = ["write_policy", "read_policy", "identity", "extraction", "tools", "retention_days"]
    known = {
        "write_policy": _section_keys(type(DEFAULT.write_policy)),
        "read_policy": _section_keys(type(DEFAULT.read_policy)),
        "identity": _section_keys(type(DEFAULT.identity)),
        "extraction": _section_keys(type(DEFAULT.extraction)),
        "tools": _section_keys(type(DEFAULT.tools)),
        "retention_days": [*MEMORY_TYPES, "turns"],
    }
    section = st.one_of(
        st.sampled_from(section_names).flatmap(
            lambda name: st.tuples(
                st.just(name),
                st.one_of(
                    _value,
                    st.dictionaries(st.sampled_from(known[name] + ["bogus"]), _value, max_size=6),
                ),
            )
        ),
        st.tuples(st.sampled_from(["enable", "emergency_read_only", "extraction_provider_id", "bogus"]), _value),
    )
    return st.lists(section, max_size=8).map(dict)


def assert_valid(cfg: LTMConfig):
    for path, (lo, hi) in _RANGES.items():
        try:
            value = get(cfg, path)
        except AttributeError:
            continue
        assert lo <= value <= hi, (path, value)
        assert isinstance(value, type(get(DEFAULT, path))), (path, value)
    for path, choices in _CHOICES.items():
        assert get(cfg, path) in choices, path
    assert set(cfg.write_policy.allowed_types) <= set(MEMORY_TYPES)
    assert set(cfg.write_policy.require_approval_types) <= set(MEMORY_TYPES)
    assert set(cfg.tools.offered) <= set(LIST_CHOICES["tools.offered"])
    assert all(isinstance(v, int) and v >= -1 for v in cfg.retention_days.values())
    assert set(cfg.retention_days) == {*MEMORY_TYPES, "turns"} and cfg.retention_days["turns"] != 0
    for line in cfg.identity.cross_platform_aliases:
        assert "=" in line and ":" in line.partition("=")[0]
    assert isinstance(cfg.enable, bool) and isinstance(cfg.emergency_read_only, bool)


@settings(max_examples=300, deadline=None)
@given(raw=_raw_strategy())
def test_any_input_gives_a_valid_config_and_never_raises(raw):
    cfg, errors = parse_config(raw)
    assert_valid(cfg)
    assert all(isinstance(e, str) and e for e in errors)
    if not errors:
        # nothing was fixed, so everything given was taken as is
        for name, value in raw.items():
            if isinstance(value, dict) and is_dataclass(getattr(cfg, name)):
                for key in value:
                    assert hasattr(getattr(cfg, name), key)


# -- _conf_schema.json --------------------------------------------------------------

_PY_TYPES = {"bool": bool, "int": int, "float": float, "string": str, "text": str, "list": list}


def _schema_leaves(schema: dict, prefix=""):
    for key, entry in schema.items():
        if entry.get("type") == "object":
            yield from _schema_leaves(entry["items"], f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", entry


def test_schema_defaults_equal_the_dataclass_defaults():
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    leaves = dict(_schema_leaves(schema))
    assert leaves, "the schema has no settings"
    for path, entry in leaves.items():
        expected = get(DEFAULT, path)
        assert "default" in entry, path
        assert entry["default"] == expected, path
        assert type(entry["default"]) is type(expected) or (
            isinstance(expected, float) and type(entry["default"]) is int
        ), path
        assert isinstance(expected, _PY_TYPES[entry["type"]]), (path, entry["type"])
        if "options" in entry:  # a list's options are what its items may be
            choices = LIST_CHOICES[path] if entry["type"] == "list" else _CHOICES[path]
            assert tuple(entry["options"]) == tuple(choices), path
            assert len(entry.get("labels", entry["options"])) == len(entry["options"]), path


def test_schema_defaults_parse_without_messages():
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    raw: dict = {}
    for path, entry in _schema_leaves(schema):
        node = raw
        *parents, last = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = entry["default"]
    cfg, errors = parse_config(raw)
    assert errors == [] and asdict(cfg) == asdict(DEFAULT)


def test_every_setting_has_its_english_and_chinese_texts_in_the_form():
    """AstrBot's form shows the schema's Chinese, or .astrbot-plugin/i18n's
    texts in the dashboard's language: a setting without them shows its key."""
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    i18n = SCHEMA.parent / ".astrbot-plugin" / "i18n"
    english = json.loads((i18n / "en-US.json").read_text(encoding="utf-8"))["config"]
    chinese = json.loads((i18n / "zh-CN.json").read_text(encoding="utf-8"))["config"]
    missing = []

    def walk(entries: dict, en: dict, zh: dict, prefix: str = "") -> None:
        for key, entry in entries.items():
            en_entry, zh_entry = en.get(key) or {}, zh.get(key) or {}
            if not en_entry.get("description") or zh_entry.get("description") != entry.get("description"):
                missing.append(prefix + key)
            if entry.get("type") == "object":
                walk(entry["items"], en_entry, zh_entry, f"{prefix}{key}.")

    walk(schema, english, chinese)
    assert missing == []


def test_every_setting_is_in_the_schema():
    """Operators configure the plugin through AstrBot's form, built from the schema."""
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    leaves = set(dict(_schema_leaves(schema)))

    def config_leaves(obj, prefix=""):
        for f in fields(obj):
            value = getattr(obj, f.name)
            if is_dataclass(value):
                yield from config_leaves(value, f"{prefix}{f.name}.")
            elif isinstance(value, dict):
                yield from (f"{prefix}{f.name}.{k}" for k in value)
            else:
                yield f"{prefix}{f.name}"

    missing = sorted(set(config_leaves(DEFAULT)) - leaves)
    assert missing == []


# -- fewer settings, and the saved values of those that went ----------------------

# Every setting of 0.1 (AstrBot keeps them in the plugin's settings file).
SETTINGS_OF_0_1 = (
    "enable", "emergency_read_only", "write_policy.enable", "write_policy.mode", "write_policy.min_confidence",
    "write_policy.min_evidence_count", "write_policy.allowed_types", "write_policy.max_writes_per_session",
    "write_policy.max_writes_per_hour", "write_policy.max_items_per_scope", "write_policy.require_approval_types",
    "write_policy.disabled_scopes", "read_policy.enable", "read_policy.max_items", "read_policy.max_tokens",
    "read_policy.max_per_type", "read_policy.min_confidence", "read_policy.similarity_weight",
    "read_policy.importance_weight", "read_policy.recency_weight", "read_policy.max_events",
    "read_policy.event_importance", "read_policy.day_weight", "read_policy.injection_position",
    "identity.user_scope_strategy", "identity.cross_platform_aliases", "identity.include_legacy_umo_on_read",
    "identity.persona_scoped", "groups.learn_all_messages", "groups.profiles_follow_members",
    "extraction_provider_id", "embedding_provider_id", "reply_language", "retention_days.profile",
    "retention_days.preference", "retention_days.task_state", "retention_days.constraint", "retention_days.episode",
    "retention_days.summary", "retention_days.turns", "extraction.batch_size", "extraction.idle_seconds",
    "extraction.poll_seconds", "extraction.timeout_seconds", "extraction.max_attempts", "extraction.backoff_seconds",
    "extraction.max_fact_chars", "recording.record_tool_results", "recording.tool_result_max_chars",
    "recording.max_message_chars", "vectors.query_timeout_seconds", "vectors.max_loaded_namespaces",
    "vectors.max_memory_mb", "vectors.embed_turns", "rerank.provider_id", "rerank.timeout_seconds",
    "rerank.candidates", "tools.search", "tools.remember", "tools.expand", "tools.search_max_tokens",
    "drift.threshold", "drift.auto_rollback", "summaries.enable", "summaries.idle_minutes", "summaries.max_events",
    "summaries.min_events", "summaries.rollups", "summaries.keep_parts_days", "summaries.last_session_in_block",
    "summaries.max_chars",
)
GONE = sorted(set(SETTINGS_OF_0_1) - set(dict(_schema_leaves(json.loads(SCHEMA.read_text(encoding="utf-8"))))))


def _saved_0_1(**changed):
    """A settings file of 0.1 as AstrBot keeps it: every setting, at its default but those ``changed``."""
    raw: dict = {}
    for path in SETTINGS_OF_0_1:
        *parents, last = path.split(".")
        node = raw
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = changed.get(path, _old_default(path))
    return raw


def _other_than(value):
    return (not value) if isinstance(value, bool) else value + 1


def test_at_most_fifty_settings():
    assert len(list(_schema_leaves(json.loads(SCHEMA.read_text(encoding="utf-8"))))) <= 50
    assert sorted(REMOVED) == GONE and len(GONE) == 22


# Switches whose "off" went with them: what they turned on is always on now.
ALWAYS_ON = {"summaries.rollups", "summaries.last_session_in_block", "recording.record_tool_results"}


def _old_default(path):
    """What 0.1 had for ``path`` at its defaults."""
    return REMOVED[path] if path in ALWAYS_ON else get(DEFAULT, path)


def test_what_replaces_a_setting_that_went_is_its_default_then():
    """Behaviour at the defaults is unchanged: each constant is the default the
    setting had, and a switch that went was on."""
    for path, default in REMOVED.items():
        if path in ALWAYS_ON:
            section, _, name = path.rpartition(".")
            assert default is True and not hasattr(get(DEFAULT, section), name)
        else:
            assert get(DEFAULT, path) == default, path


@pytest.mark.parametrize("path", GONE)
def test_a_saved_value_of_a_setting_that_went_is_carried_over_or_dropped_aloud(path):
    """At start (main.py) the settings file as it was before AstrBot dropped the
    settings that left the schema is carried onto AstrBot's settings."""
    current = json.loads(json.dumps(_saved_0_1()))
    for gone in GONE:  # what AstrBot hands the plugin: the settings of the schema only
        section, _, name = gone.partition(".")
        current[section].pop(name)
    current["tools"]["offered"] = ["search", "remember", "expand"]
    current = {key: value for key, value in current.items() if value != {}}  # the recording section went whole
    value = _other_than(_old_default(path))
    raw, notes = carried_over(_saved_0_1(**{path: value}), current)
    assert set(raw) == set(current)
    assert len(notes) == 1 and str(notes[0]).startswith(f"{path} is no longer a setting: {value!r}")
    assert notes[0].render("zh").startswith(f"{path} 已不再是设置项")
    assert all(name not in raw.get(s, {}) for s, _, name in (g.partition(".") for g in GONE))
    cfg, errors = parse_config(raw)
    assert errors == []
    section, _, name = path.partition(".")
    if path == "write_policy.enable":  # no learning anywhere: "*" among the scopes whose writes are off
        assert cfg.write_policy.disabled_scopes == ["*"] and cfg.write_policy.writes_off("user:qq:1")
        assert not cfg.write_policy.enable
    elif section == "tools" and hasattr(type(cfg.tools), name) and name != "search_max_tokens":
        assert name not in cfg.tools.offered and getattr(cfg.tools, name) is False
        assert len(cfg.tools.offered) == 2
    elif path in ALWAYS_ON:  # on, whatever was saved
        assert value is False and asdict(cfg) == asdict(DEFAULT)
    else:  # a constant now, read where it was
        assert get(cfg, path) == get(DEFAULT, path) != value
        assert asdict(cfg) == asdict(DEFAULT)


def test_a_settings_file_at_the_defaults_carries_nothing_over():
    current = _saved_0_1()
    raw, notes = carried_over(_saved_0_1(), current)
    assert notes == [] and parse_config(raw) == (DEFAULT, [])
    assert carried_over(None, {"enable": True}) == ({"enable": True}, [])


def test_a_stored_policy_of_0_1_parses_and_saves_without_the_settings_that_went():
    """A policy version stored before (a rollback's target) holds write_policy.enable and the read weights that went."""
    old = {"enable": True, "write_policy": {"enable": False, "mode": "auto", "disabled_scopes": ["user:qq:1"]},
           "read_policy": {"day_weight": 0.2, "event_importance": 0.5, "max_items": 9}}
    cfg, errors = parse_config(old)
    assert errors == [] and cfg.write_policy.disabled_scopes == ["user:qq:1", "*"] and cfg.read_policy.max_items == 9
    saved = with_policy({"write_policy": {"mode": "shadow"}}, old, replace=True)
    assert saved["write_policy"] == {"mode": "auto", "disabled_scopes": ["user:qq:1", "*"]}
    assert saved["read_policy"] == {"max_items": 9}


def test_the_policy_s_write_switch_is_every_scope_in_disabled_scopes():
    """The review page's "Allow new memories" box reads and sends write_policy.enable."""
    off = with_policy({"write_policy": {"disabled_scopes": ["group:qq:7"]}}, {"write_policy": {"enable": False}})
    assert off["write_policy"] == {"disabled_scopes": ["group:qq:7", "*"]}
    assert policy_of(parse_config(off)[0])["write_policy"]["enable"] is False
    on = with_policy(off, {"write_policy": {"enable": True}})
    assert on["write_policy"] == {"disabled_scopes": ["group:qq:7"]}
    assert policy_of(parse_config(on)[0])["write_policy"]["enable"] is True
