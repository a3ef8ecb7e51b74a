"""One validator per field, shared by every entry point (the API, imports, the
commands, the settings): each returns the value to use or raises :class:`AdminError`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

from .enums import MEMORY_TYPES, SCOPE_KINDS, Status
from .errors import AdminError
from .i18n import msg, parse

MAX_TTL_DAYS = 36_500  # a hundred years; further is "permanent" (null)
MAX_EVIDENCE_COUNT = 1_000_000_000
MAX_ID_CHARS = 64
MIN_PREFIX_CHARS = 4
MAX_SCOPE_ID_CHARS = 255
MAX_TEXT_CHARS = 1000  # reasons, filters, search text
MAX_CONTENT_CHARS = 256 * 1024  # an event's content; the recorder keeps at most 200,000 characters
MAX_JSON_DEPTH = 64  # an export nests 8 deep; a tool result's payload may add some

TRUE_WORDS = ("true", "1", "yes", "on")
FALSE_WORDS = ("false", "0", "no", "off")


def flag(value: Any, name: str) -> bool:
    """A yes/no: JSON true/false, or one of the words above (any case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in TRUE_WORDS + FALSE_WORDS:
        return value.strip().lower() in TRUE_WORDS
    raise AdminError(msg("api.flag", name=name, words=", ".join(TRUE_WORDS + FALSE_WORDS), value=shown(value)))


def optional_flag(value: Any, name: str) -> bool:
    """A flag that may be left out (None or an empty query value)."""
    return False if value is None or value == "" else flag(value, name)


def unit(value: Any, name: str) -> float:
    """A number from 0 to 1 (confidence, importance)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= 1:
        raise AdminError(msg("api.unit", name=name, value=shown(value)))
    return float(value)


def whole(value: Any, name: str, lo: int, hi: int) -> int:
    """A whole number in [lo, hi]; 30.0 is 30 (JSON does not tell them apart)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or (isinstance(value, float) and not (math.isfinite(value) and value.is_integer())) \
            or not lo <= value <= hi:
        raise AdminError(msg("api.whole_range", name=name, lo=lo, hi=hi, value=shown(value)))
    return int(value)


def days_kept(value: Any) -> int:
    """A number of days to keep (the compact action's): 1 to 36,500."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    return whole(value, "days", 1, 36_500)


def ttl_days(value: Any) -> int | None:
    """Days a memory lives after its last update; null is permanent."""
    if value is None:
        return None
    try:
        return whole(value, "ttl_days", 0, MAX_TTL_DAYS)
    except AdminError:
        raise AdminError(msg("api.ttl_days", max=MAX_TTL_DAYS, value=shown(value))) from None


def evidence_count(value: Any) -> int:
    return whole(value, "evidence_count", 1, MAX_EVIDENCE_COUNT)


def choice(value: Any, name: str, choices: Iterable[str]) -> str:
    options = tuple(choices)
    if not isinstance(value, str) or value not in options:
        raise AdminError(msg("api.choice", name=name, options=", ".join(options)))
    return value


def memory_type(value: Any) -> str:
    return choice(value, "type", MEMORY_TYPES)


def status(value: Any) -> str:
    return choice(value, "status", tuple(Status))


def scope_kind(value: Any) -> str:
    return choice(value, "scope", SCOPE_KINDS)


def text(value: Any, name: str, max_chars: int = MAX_TEXT_CHARS, *, required: bool = False) -> str:
    """Plain text of at most ``max_chars``, no control characters but tabs and line breaks."""
    if not isinstance(value, str):
        raise AdminError(msg("api.not_text", name=name, value=shown(value)))
    if required and not value.strip():
        raise AdminError(msg("api.empty", name=name))
    if len(value) > max_chars:
        raise AdminError(msg("api.too_long", name=name, max=max_chars, length=len(value)))
    bad = _CONTROL.search(value)
    if bad is not None:
        raise AdminError(msg("api.control_char", name=name, point=f"{ord(bad.group()):04X}"))
    return value


def stored_as_given(value: Any, name: str, max_chars: int) -> str | None:
    """Null or a platform's text: the type, the column's width, no half surrogate pairs."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > max_chars:
        raise AdminError(msg("api.null_or_text", name=name, max=max_chars))
    if _SURROGATE.search(value):
        raise AdminError(msg("api.surrogate", name=name))
    return value


def json_object(value: Any, name: str) -> dict[str, Any]:
    """A JSON object kept as given: bounded in size, no half surrogate pairs anywhere."""
    if not isinstance(value, dict):
        raise AdminError(msg("api.not_object", name=name, value=shown(value)))
    serialised = json.dumps(value, ensure_ascii=False)
    if len(serialised) > MAX_CONTENT_CHARS:
        raise AdminError(msg("api.json_too_large", name=name, max=MAX_CONTENT_CHARS))
    if _SURROGATE.search(serialised):
        raise AdminError(msg("api.surrogate", name=name))
    return value


def optional_text(value: Any, name: str, max_chars: int = MAX_TEXT_CHARS) -> str | None:
    """A filter or search text that may be left out (None or empty)."""
    if value is None or value == "":
        return None
    return text(value, name, max_chars)


def fact(value: Any, max_chars: int) -> str:
    """A fact as stored, for extraction, edits, /ltm remember and imports alike."""
    if not isinstance(value, str):
        raise AdminError(msg("api.not_text", name="fact", value=shown(value)))
    collapsed = " ".join(value.split())
    if not collapsed:
        raise AdminError(msg("api.empty", name="fact"))
    if len(collapsed) > max_chars:
        raise AdminError(msg("api.fact_too_long", max=max_chars, length=len(collapsed)))
    return text(collapsed, "fact", max_chars)


def scope_problem(entry: str) -> str | None:
    """Why ``entry`` is not a ``user:<id>`` or ``group:<id>`` scope, or None
    (the settings' disabled_scopes, the write switch, a replay's scopes)."""
    kind, colon, scope_id = entry.partition(":")
    if not colon or kind not in ("user", "group"):
        return str(msg("config.scope_kind"))
    if not scope_id.strip() or scope_id != scope_id.strip():
        return str(msg("config.scope_no_id"))
    if len(scope_id) > MAX_SCOPE_ID_CHARS:
        return str(msg("config.scope_long", max=MAX_SCOPE_ID_CHARS))
    return None


def scope_entry(entry: str, refusal: str, shown_as: str | None = None) -> str:
    """``entry`` when it is a ``user:<id>`` / ``group:<id>`` scope; else AdminError(``refusal``)."""
    why = scope_problem(entry)
    if why is not None:
        raise AdminError(msg(refusal, scope=repr((entry if shown_as is None else shown_as)[:80]),
                             why=parse(why) or why))
    return entry


def scope_id(value: Any, name: str = "scope_id") -> str:
    return text(value, name, MAX_SCOPE_ID_CHARS, required=True).strip()


def memory_id(value: Any, name: str = "memory id") -> str:
    """A memory id or a prefix of 4+ characters, taken literally (``%`` and ``_`` no wildcards)."""
    if not isinstance(value, str):
        raise AdminError(msg("api.not_text", name=name, value=shown(value)))
    value = value.strip()
    if len(value) < MIN_PREFIX_CHARS:
        raise AdminError(msg("api.id_too_short", min=MIN_PREFIX_CHARS, name=name))
    return text(value, name, MAX_ID_CHARS)


def json_depth(value: Any) -> None:
    """Refuse JSON nested deeper than MAX_JSON_DEPTH, without recursion (a hostile file)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Iterable[Any] = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > MAX_JSON_DEPTH:
            raise AdminError(msg("api.json_depth", limit=MAX_JSON_DEPTH))
        stack.extend((child, depth + 1) for child in children)


# Control characters but tab and line breaks, and half surrogate pairs (not storable as UTF-8).
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def shown(value: Any) -> str:
    """A value in a message, cut short (a message never echoes a megabyte)."""
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"  # could be nested past repr's depth
    text = repr(value[:60] if isinstance(value, str) else value)
    return text if len(text) <= 60 else text[:57] + "..."
