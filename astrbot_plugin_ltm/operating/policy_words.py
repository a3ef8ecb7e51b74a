"""How a policy change reads to a person: each setting by the name AstrBot's
config form gives it, its values in words, in the reader's language.

The names and labels are the form's own, so a setting reads the same
wherever an operator meets it.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..i18n import SEPARATORS, Lang, say

PLUGIN_ROOT = Path(__file__).resolve().parents[2]
LOCALES: dict[Lang, str] = {"en": "en-US", "zh": "zh-CN"}
MAX_LISTED = 8  # a list's values shown; more are counted


@lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    try:
        return dict(json.loads((PLUGIN_ROOT / "_conf_schema.json").read_text(encoding="utf-8-sig")))
    except (OSError, ValueError):
        return {}


@lru_cache(maxsize=2)
def _form(lang: Lang) -> dict[str, Any]:
    """The config form's texts in ``lang`` (its ``config`` part)."""
    path = PLUGIN_ROOT / ".astrbot-plugin" / "i18n" / f"{LOCALES[lang]}.json"
    try:
        return dict(json.loads(path.read_text(encoding="utf-8-sig")).get("config") or {})
    except (OSError, ValueError, AttributeError):
        return {}


def _entry(tree: dict[str, Any], path: str, schema: bool) -> dict[str, Any]:
    node: Any = tree
    for part in path.split("."):
        if not isinstance(node, dict):
            return {}
        if schema and "items" in node and part not in node:
            node = node["items"]
        node = node.get(part)
    return node if isinstance(node, dict) else {}


def setting_name(path: str, lang: Lang) -> str:
    """The setting's name in the config form, in ``lang``; else its path."""
    name = _entry(_form(lang), path, schema=False).get("description")
    return name.strip() if isinstance(name, str) and name.strip() else path


def _label(path: str, value: Any, lang: Lang) -> str | None:
    """The form's label of a choice (a mode, a memory type …), if it has one."""
    options = _entry(_schema(), path, schema=True).get("options")
    labels = _entry(_form(lang), path, schema=False).get("labels")
    if isinstance(options, list) and isinstance(labels, list) and value in options:
        at = options.index(value)
        if at < len(labels) and isinstance(labels[at], str):
            return labels[at]
    return None


def value_text(path: str, value: Any, lang: Lang) -> str:
    """A setting's value in words: on/off, a choice by its label, a list of
    them, none."""
    if value is None or value == [] or value == "":
        return say("cmd.none", lang)
    if isinstance(value, bool):
        return say("cmd.on" if value else "cmd.off", lang)
    if isinstance(value, list):
        shown = [_label(path, v, lang) or str(v) for v in value[:MAX_LISTED]]
        more = [say("cmd.list.more", lang, n=len(value) - MAX_LISTED)] if len(value) > MAX_LISTED else []
        return SEPARATORS[lang].join(shown + more)
    if isinstance(value, float):
        return f"{value:g}"
    return _label(path, value, lang) or str(value)


def described(change: dict[str, Any], lang: Lang) -> dict[str, Any]:
    """One diff entry (``{"path", "from", "to"}``) with its words added:
    ``setting``, ``from_text``, ``to_text`` and the whole ``text``."""
    path = str(change.get("path", ""))
    name = setting_name(path, lang)
    before, after = value_text(path, change.get("from"), lang), value_text(path, change.get("to"), lang)
    text = f"{name}{'：' if lang == 'zh' else ': '}{before} → {after}"
    return {**change, "setting": name, "from_text": before, "to_text": after, "text": text}


def change_lines(changes: list[dict[str, Any]], lang: Lang) -> list[str]:
    """Each change as a line a person reads."""
    return [described(c, lang)["text"] for c in changes if isinstance(c, dict)]


def in_words(data: Any, lang: Lang) -> Any:
    """``data`` with every policy diff also in words, in ``lang``; the raw values stay."""
    if isinstance(data, list):
        return [in_words(value, lang) for value in data]
    if not isinstance(data, dict):
        return data
    out = {key: in_words(value, lang) for key, value in data.items()}
    changes = data.get("diff")
    if isinstance(changes, list) and all(isinstance(c, dict) and "path" in c for c in changes):
        out["diff"] = [described(c, lang) for c in changes]
    return out
